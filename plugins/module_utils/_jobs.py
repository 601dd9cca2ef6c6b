# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Reading Slurm jobs: parsers for ``squeue -O`` and ``sacct --parsable2`` text, and one reader.

Private to the collection (the leading underscore): no API promise outside it.

Both commands are asked for delimited fields (:data:`SEP`, the ASCII unit separator, which Slurm
never prints in an id, state, node list or time), never fixed-width columns, and times as Unix
seconds (``SLURM_TIME_FORMAT=%s``). A job is returned as a plain dict (the ``jobs`` element of
``slurm_job_info``'s RETURN):

``job_id`` (str, as Slurm writes it: ``123``, ``123_4``, ``123_[5-100%2]``, ``1234+1``),
``job_id_raw`` (int, the unique id: squeue ``JobID``, sacct ``JobIDRaw``), ``array_job_id``,
``array_task_id`` (int or None; None for the one line that stands for an array's pending tasks),
``array_tasks`` (str, those pending tasks, e.g. ``5-100``, or None), ``array_max_running`` (int
or None, the ``%N`` throttle), ``het_job_id``, ``het_job_offset`` (int or None), ``name``,
``user``, ``partition``, ``cluster``, ``comment`` (squeue only, else None), ``state`` (base state
or None), ``flags`` (sorted list), ``state_raw`` (Slurm's words), ``state_known`` (bool: False
when a word of the state is one this collection does not know, e.g. a later release's; such a
job is neither active nor ended, and callers leave it to a human), ``active`` (bool), ``held``
(bool: it waits for ``scontrol release``) and ``held_by`` (``user``, ``admin``, ``slurm`` or None;
see ``_job_state.hold_kind``), ``cancelled_by`` (int uid or None), ``reason`` (str, ``""`` when
none; squeue prints the text slurmctld wrote, e.g. ``launch failed requeued held``), ``exit_code`` and
``signal`` (int or None, from sacct's ``0:9`` or squeue's raw wait status), ``node_list`` (hostlist str, ``""`` when none),
``nodes`` (expanded list), ``submit_time``, ``start_time``, ``end_time`` (Unix seconds or None;
None while the job has not started / ended), ``restart_count`` (int from squeue ``RestartCnt``,
None when only accounting knows the job), ``requeued`` (bool), ``history`` (earlier runs of the
same job that Slurm requeued, oldest first), ``steps`` (``.batch``, ``.extern``, ``.0`` ...)
and ``source`` (``squeue`` when the controller knows the job, else ``sacct``).

Text, not ``--json``, on every release (22.05-26.05): the ``-O``/``--format`` fields above are
the same on each, carry every field used here, and stay small at scale, while the JSON changed
shape with each data parser (22.05's exit codes and ``restart_cnt`` were wrong or missing; see
tests/unit/plugins/module_utils/test_jobs_recorded.py). Text is decoded by the command layer
with invalid bytes as U+FFFD, so a Latin-1 job name or comment is kept, not fatal.

Nothing that is not a complete answer reads as "no jobs": a non-zero rc, an error on stderr
with rc 0 (``sacct: error: Problem talking to the database``), an output cut short (a squeue
record without its record separator, a sacct line without its newline) all raise.
"""

from __future__ import annotations

import re
import time

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import (
    HostlistError,
    expand_hostlist,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import (
    JobState,
    JobStateError,
    hold_kind,
    parse_job_state,
    state_matches,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    NO_ACCOUNTING,
    SlurmAnswerError,
    check_answer,
    split_fields,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import (
    REC_END,
    SACCT_FIELDS,
    SEP,
    SQUEUE_FIELDS,
    TIME_ENVIRON,
    accounting,
    queue,
)

try:
    from typing import Any, Dict, List, Optional, Sequence, Tuple  # noqa: F401

    Names = Sequence[str]
except ImportError:  # pragma: no cover
    pass


#: How far apart (seconds) the end of a run and the submit time of the next record of the same
#: job id may be for the next record to count as Slurm's requeue of that run. Slurm resets the
#: submit time when the requeued job is PENDING again: on the dev cluster 0 s after the
#: NODE_FAIL for a 1-node job, 3 s for a 2-node job whose step on the healthy node had to be
#: killed first (COMPLETING); KillWait and UnkillableStepTimeout (60 s) bound that wait.
REQUEUE_GAP = 120

# Words Slurm prints for "no value".
_NONE_WORDS = frozenset(("", "unknown", "none", "n/a", "(null)", "none assigned", "invalid"))
_JOB_ID = re.compile(r"^(?P<id>\d+)(?:_(?:(?P<task>\d+)|\[(?P<tasks>[^\]]*)\])|\+(?P<offset>\d+))?$")
_STEP_ID = re.compile(r"^(?P<job>\d+)\.(?P<step>[A-Za-z0-9_+-]+)$")
_THROTTLE = re.compile(r"^(?P<tasks>.*?)(?:%(?P<max>\d+))?$")
# Flags of a job that Slurm requeues or requeued (EXPEDITING: an expedited requeue, 25.11+).
_REQUEUE_FLAGS = frozenset(("REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "EXPEDITING"))
# What squeue says when a single job id given with --jobs is not known (any more): the
# slurm_strerror() text of ESLURM_INVALID_JOB_ID, the same in 22.05, 24.11 and 26.05 (recorded on
# 22.05 and 24.11: "slurm_load_jobs error: Invalid job id specified", rc 1).
_INVALID_JOB_ID = re.compile(r"Invalid job id specified", re.IGNORECASE)


class JobParseError(SlurmAnswerError):
    """Slurm output that cannot be read as jobs."""


def _none(value: Optional[str]) -> bool:
    return value is None or value.strip().lower() in _NONE_WORDS


def _int(value: Optional[str]) -> Optional[int]:
    """An int, or None for Slurm's no-value words (``N/A``, ``(null)``, ``Unknown``...)."""
    if _none(value):
        return None
    try:
        return int(value.strip())  # type: ignore[union-attr]
    except ValueError:
        return None


def parse_time(value: Optional[str]) -> Optional[int]:
    """Unix seconds from a Slurm time field: digits (``SLURM_TIME_FORMAT=%s``) or
    ``YYYY-MM-DDTHH:MM:SS`` (Slurm's standard format, local time); None for ``Unknown``,
    ``None``, ``N/A`` and 0."""
    if _none(value):
        return None
    text = value.strip()  # type: ignore[union-attr]
    if text.isdigit():
        return int(text) or None
    try:
        return int(time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def parse_exit_code(value: Optional[str]) -> Tuple[Optional[int], Optional[int]]:
    """``(exit_code, signal)`` from Slurm's ``exit:signal`` (``0:9`` -> ``(0, 9)``); a lone
    number is the exit code; ``(None, None)`` when empty."""
    if _none(value):
        return None, None
    text = value.strip()  # type: ignore[union-attr]
    code, dummy, sig = text.partition(":")
    return _int(code), (_int(sig) if sig else None)


def parse_wait_status(value: Optional[str]) -> Tuple[Optional[int], Optional[int]]:
    """``(exit_code, signal)`` from squeue's ``exit_code`` field, which in 22.05 is the raw
    wait(2) status (``768`` for ``exit 3``, ``9`` for SIGKILL), not sacct's ``3:0``; an
    ``exit:signal`` pair is read as :func:`parse_exit_code` does."""
    if _none(value):
        return None, None
    text = value.strip()  # type: ignore[union-attr]
    if ":" in text:
        return parse_exit_code(text)
    status = _int(text)
    if status is None:
        return None, None
    return (status >> 8) & 0xff, status & 0x7f


def parse_job_id(text: str) -> Dict[str, Any]:
    """The parts of a job id as Slurm writes it (squeue ``%i``/``JobArrayID``, sacct ``JobID``).

    ``123`` plain; ``123_4`` array task 4 of array job 123; ``123_[5-100]`` or ``123_[1-5%2]``
    the pending tasks of array 123 (``%2``: at most 2 run at once); ``1234+1`` component 1 of
    heterogeneous job 1234.

    Returns:
        ``{"id": int, "array_task_id", "array_tasks", "array_max_running", "het_job_offset"}``.

    Raises:
        JobParseError: anything else (a step id like ``123.batch`` included).
    """
    match = _JOB_ID.match(text.strip())
    if not match:
        raise JobParseError("not a Slurm job id: %r" % text)
    parts: Dict[str, Any] = {"id": int(match.group("id")), "array_task_id": None, "array_tasks": None,
                             "array_max_running": None, "het_job_offset": None}
    if match.group("task") is not None:
        parts["array_task_id"] = int(match.group("task"))
    elif match.group("tasks") is not None:
        throttle = _THROTTLE.match(match.group("tasks"))
        parts["array_tasks"] = throttle.group("tasks")  # type: ignore[union-attr]
        if throttle.group("max"):  # type: ignore[union-attr]
            parts["array_max_running"] = int(throttle.group("max"))  # type: ignore[union-attr]
    elif match.group("offset") is not None:
        parts["het_job_offset"] = int(match.group("offset"))
    return parts


def _nodes(node_list: str) -> Tuple[str, List[str]]:
    if _none(node_list):
        return "", []
    text = node_list.strip()
    try:
        return text, expand_hostlist(text)
    except HostlistError:
        return text, []


def _state(text: str, where: str) -> JobState:
    try:
        return parse_job_state(text)
    except JobStateError as exc:
        raise JobParseError("%s: %s" % (where, exc))


def _job(job_id: str, raw_id: int, job_state: JobState, **fields: Any) -> Dict[str, Any]:
    state = job_state
    held_by = hold_kind(state, fields.get("reason"))
    job: Dict[str, Any] = {
        "job_id": job_id,
        "job_id_raw": raw_id,
        "array_job_id": None,
        "array_task_id": None,
        "array_tasks": None,
        "array_max_running": None,
        "het_job_id": None,
        "het_job_offset": None,
        "name": "",
        "user": None,
        "partition": None,
        "cluster": None,
        "comment": None,
        "state": state.base,
        "flags": sorted(state.flags),
        "state_raw": state.raw,
        "state_known": state.known,
        "active": state.active,
        "held": held_by is not None,
        "held_by": held_by,
        "cancelled_by": state.cancelled_by,
        "reason": "",
        "exit_code": None,
        "signal": None,
        "node_list": "",
        "nodes": [],
        "submit_time": None,
        "start_time": None,
        "end_time": None,
        "restart_count": None,
        "requeued": False,
        "history": [],
        "steps": [],
        "source": None,
    }
    job.update(fields)
    return job


def _split_records(text: str) -> List[str]:
    records = []
    for chunk in text.split(REC_END):
        chunk = chunk.lstrip("\r\n")
        if chunk.strip():
            records.append(chunk)
    return records


def _str(value: str) -> Optional[str]:
    return None if _none(value) else value.strip()


def parse_squeue(text: str) -> List[Dict[str, Any]]:
    """Jobs from ``squeue --noheader --states=all -O SQUEUE_FORMAT``, in squeue's order.

    One dict per line: a running array task (``123_4``) is one job; the pending tasks of an
    array that squeue folds into one line (``123_[5-100]``) are one job with ``array_tasks``.
    squeue knows no steps here. Times of a pending job (expected start) and of a job still
    active (expected end) are not reported: ``start_time``/``end_time`` are None then.

    Raises:
        JobParseError: a record with a wrong field count, an unreadable id or state, or an output
        that ends inside a record (cut short: the last record lacks its record separator).
    """
    if text.strip() and not text.rstrip("\r\n").endswith(REC_END):
        raise JobParseError("squeue output ends inside a record (cut short?): %r"
                            % text.rstrip("\r\n")[-200:])
    jobs = []
    for number, fields in split_fields(_split_records(text), SEP, SQUEUE_FIELDS, "squeue record", JobParseError):
        row = dict(zip(SQUEUE_FIELDS, fields))
        ids = parse_job_id(row["JobArrayID"])
        raw_id = _int(row["JobID"])
        if raw_id is None:
            raw_id = ids["id"]
        state = _state(row["State"], "job %s" % row["JobArrayID"].strip())
        exit_code, signal = parse_wait_status(row["exit_code"])
        node_list, nodes = _nodes(row["NodeList"])
        is_array = ids["array_task_id"] is not None or ids["array_tasks"] is not None
        is_het = ids["het_job_offset"] is not None
        reason = row["Reason"].strip()
        restart = _int(row["RestartCnt"])
        jobs.append(_job(
            row["JobArrayID"].strip(), raw_id, state,
            array_job_id=ids["id"] if is_array else None,
            array_task_id=ids["array_task_id"],
            array_tasks=ids["array_tasks"],
            array_max_running=ids["array_max_running"],
            het_job_id=ids["id"] if is_het else None,
            het_job_offset=ids["het_job_offset"],
            name=row["Name"].strip(),
            user=_str(row["UserName"]),
            partition=_str(row["Partition"]),
            cluster=_str(row["Cluster"]),
            comment=row["Comment"].rstrip("\r\n") if not _none(row["Comment"]) else "",
            reason="" if reason.lower() == "none" else reason,
            exit_code=exit_code,
            signal=signal,
            node_list=node_list,
            nodes=nodes,
            submit_time=parse_time(row["SubmitTime"]),
            start_time=None if state.base == "PENDING" else parse_time(row["StartTime"]),
            end_time=None if state.active else parse_time(row["EndTime"]),
            restart_count=restart,
            requeued=bool(restart) or bool(state.flags & _REQUEUE_FLAGS),
            source="squeue",
        ))
    return jobs


def _record(row: Dict[str, str], state: JobState) -> Dict[str, Any]:
    """The fields one sacct line gives a job, a history entry or a step."""
    exit_code, signal = parse_exit_code(row["ExitCode"])
    node_list, nodes = _nodes(row["NodeList"])
    reason = row["Reason"].strip()
    return {
        "state": state.base,
        "flags": sorted(state.flags),
        "state_raw": state.raw,
        "state_known": state.known,
        "cancelled_by": state.cancelled_by,
        "reason": "" if reason.lower() == "none" else reason,
        "exit_code": exit_code,
        "signal": signal,
        "node_list": node_list,
        "nodes": nodes,
        "submit_time": parse_time(row["Submit"]),
        "start_time": parse_time(row["Start"]),
        "end_time": parse_time(row["End"]),
    }


def parse_sacct(text: str) -> List[Dict[str, Any]]:
    """Job records from ``sacct --noheader --parsable2 --delimiter=SEP --format=SACCT_FIELDS``.

    Each job line is one record; step lines (``778010.batch``, ``778010.extern``,
    ``778010.interactive``, ``1043074_91.0``, ``1234+0.batch``) are attached to the record
    above them with the same raw id, under ``steps``, and are never records themselves. With
    ``--duplicates`` the same job id may have several records (a requeued job has one per run;
    a job id the controller reused has one per job): they are all returned here, in sacct's
    order; :func:`merge_jobs` sorts them out.

    Raises:
        JobParseError: a line with too few fields, an unreadable id or state, or an output whose
        last line has no newline (cut short).
    """
    if text.strip() and not text.endswith("\n"):
        raise JobParseError("sacct output ends inside a line (cut short?): %r" % text[-200:])
    records: List[Dict[str, Any]] = []
    last_by_raw: Dict[int, Dict[str, Any]] = {}
    for number, fields in split_fields(text.splitlines(), SEP, SACCT_FIELDS, "sacct line", JobParseError):
        row = dict(zip(SACCT_FIELDS, fields))
        job_id = row["JobID"].strip()
        raw_text = row["JobIDRaw"].strip()
        step = _STEP_ID.match(raw_text) or _STEP_ID.match(job_id)
        if step:
            parent = last_by_raw.get(int(step.group("job")))
            state = _state(row["State"], "step %s" % job_id)
            entry = _record(row, state)
            del entry["submit_time"]
            entry.update(step_id=job_id.rsplit(".", 1)[1], job_step=job_id,
                         name=row["JobName"].rstrip("\r\n"))
            if parent is not None:
                parent["steps"].append(entry)
            # a step whose job line is not in the output (only asked for by step id) is
            # never listed as a job
            continue
        ids = parse_job_id(job_id)
        raw_id = _int(raw_text)
        if raw_id is None:
            raw_id = ids["id"]
        state = _state(row["State"], "job %s" % job_id)
        fields_ = _record(row, state)
        if state.word == "REQUEUED":
            # The record of a run that `scontrol requeue` ended (its next run is another record
            # with the same id): Slurm stores the REQUEUE flag on a PENDING base; this run is
            # over, so its state is reported as how it ended.
            fields_["state"] = "REQUEUED"
        is_array = ids["array_task_id"] is not None or ids["array_tasks"] is not None
        het_job_id = ids["id"] if ids["het_job_offset"] is not None else None
        fields_.update(
            array_job_id=ids["id"] if is_array else None,
            array_task_id=ids["array_task_id"],
            array_tasks=ids["array_tasks"],
            array_max_running=ids["array_max_running"],
            het_job_id=het_job_id,
            het_job_offset=ids["het_job_offset"],
            name=row["JobName"].rstrip("\r\n"),
            user=_str(row["User"]),
            partition=_str(row["Partition"]),
            cluster=_str(row["Cluster"]),
            source="sacct",
        )
        job = _job(job_id, raw_id, state, **fields_)
        # accounting alone never makes a job active (see merge_jobs), nor held
        job.update(active=False, held=False, held_by=None)
        records.append(job)
        last_by_raw[raw_id] = job
    return records


_HISTORY_KEYS = ("state", "flags", "state_raw", "state_known", "cancelled_by", "reason", "exit_code", "signal",
                 "node_list", "nodes", "submit_time", "start_time", "end_time")


def _history_entry(record: Dict[str, Any]) -> Dict[str, Any]:
    entry = dict((k, record[k]) for k in _HISTORY_KEYS)
    entry["steps"] = record["steps"]
    return entry


def _same_run(queued: Dict[str, Any], record: Dict[str, Any]) -> bool:
    a, b = queued["submit_time"], record["submit_time"]
    return a is not None and b is not None and abs(a - b) <= 1


def _requeue_chain(current: Dict[str, Any], older: List[Dict[str, Any]], limit: Optional[int]) -> List[Dict[str, Any]]:
    """Earlier records of ``current``'s job id that are runs Slurm requeued into it, oldest
    first: each ended (end time known) at most :data:`REQUEUE_GAP` seconds before the next
    record was submitted (Slurm resets the submit time when it requeues), with the same user and
    name. ``limit``: the restart count when squeue knows it (0: no history at all)."""
    chain: List[Dict[str, Any]] = []
    following = current
    for record in sorted(older, key=lambda r: r["submit_time"] or 0, reverse=True):
        if limit is not None and len(chain) >= limit:
            break
        submit, ended = following["submit_time"], record["end_time"]
        if submit is None or ended is None or not (0 <= submit - ended <= REQUEUE_GAP):
            break
        if (record["user"], record["name"]) != (current["user"], current["name"]):
            break
        chain.append(record)
        following = record
    chain.reverse()
    return chain


def merge_jobs(queued: List[Dict[str, Any]], accounted: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One entry per job from squeue's jobs and sacct's records, oldest submit first (the parts of
    an array or heterogeneous job next to each other).

    - A job squeue lists is reported as squeue says (the controller's view is current; sacct
      lags 1-2.5 s); the sacct record of the same run (same id and submit time) adds what
      squeue lacks: the base state when squeue printed only COMPLETING, who cancelled it
      (squeue says CANCELLED, sacct ``CANCELLED by <uid>``), exit code, steps.
    - Earlier sacct records of the same id that Slurm requeued into this job (NODE_FAIL,
      PREEMPTED, REQUEUED... ended right when the next record was submitted) become its
      ``history``, and ``requeued`` is true. Other earlier records of a reused id are dropped,
      as sacct without ``--duplicates`` would.
    - A job only sacct knows is reported from its newest record, never as active: the
      controller, asked after sacct, would have listed an active job.
    """
    by_raw: Dict[int, List[Dict[str, Any]]] = {}
    for record in accounted:
        by_raw.setdefault(record["job_id_raw"], []).append(record)
    result = []
    seen = set()
    for job in queued:
        raw = job["job_id_raw"]
        seen.add(raw)
        records = by_raw.get(raw, [])
        same = [r for r in records if _same_run(job, r)]
        if same:
            run = same[-1]
            if job["state"] is None and run["state"] is not None:
                job["state"] = run["state"]
            for key in ("cancelled_by", "exit_code", "signal", "cluster", "partition", "user"):
                if job[key] is None:
                    job[key] = run[key]
            if not job["nodes"] and run["nodes"]:
                job["node_list"], job["nodes"] = run["node_list"], run["nodes"]
            job["steps"] = run["steps"]
        older = [r for r in records if r not in same and (
            r["submit_time"] or 0) < (job["submit_time"] or 0)]
        history = _requeue_chain(job, older, job["restart_count"])
        job["history"] = [_history_entry(r) for r in history]
        job["requeued"] = job["requeued"] or bool(history)
        result.append(job)
    for raw, records in by_raw.items():
        if raw in seen:
            continue
        ordered = sorted(records, key=lambda r: r["submit_time"] or 0)
        current = ordered[-1]
        history = _requeue_chain(current, ordered[:-1], None)
        current["history"] = [_history_entry(r) for r in history]
        current["requeued"] = bool(history) or "REQUEUED" in current["flags"]
        result.append(current)
    # by submit time; an array's or het job's parts together, in id order
    result.sort(key=lambda j: (j["submit_time"] or 0, j["array_job_id"] or j["het_job_id"] or j["job_id_raw"],
                               j["job_id_raw"]))
    return result


def job_matches_states(job: Dict[str, Any], names: Sequence[str]) -> bool:
    """True when the job's base state (also one sacct supplied for a job squeue shows only as
    COMPLETING), a flag or the word Slurm printed is one of ``names`` (long or compact, whole).

    Raises:
        JobStateError: a name that is no job state.
    """
    state = parse_job_state(job["state_raw"])
    merged = JobState(job["state"] or state.base, set(job["flags"]) | state.flags, state.word,
                      state.raw, state.cancelled_by)
    return state_matches(merged, names)


def read_queue(cli: Any,
               job_ids: Optional[Sequence[str]] = None,
               names: Optional[Sequence[str]] = None,
               users: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """The jobs the controller knows (squeue), one call. An unknown single ``--jobs`` id (a job
    finished more than MinJobAge ago) gives an empty list, not an error.

    Raises:
        SlurmCommandError: squeue failed: rc not 0, or an error on stderr with rc 0.
        JobParseError: its output could not be read, or was cut short.
    """
    rc, out, err = cli.run(*queue(job_ids, names, users), check=False, what="read jobs",
                           environ=TIME_ENVIRON)
    if rc != 0 and job_ids and _INVALID_JOB_ID.search(err or out or ""):
        return []
    check_answer(cli, "squeue", rc, out, err, "read jobs")
    return parse_squeue(out)


def read_accounting(cli: Any,
                    job_ids: Optional[Names] = None,
                    names: Optional[Names] = None,
                    users: Optional[Names] = None,
                    start: Optional[int] = None,
                    end: Optional[int] = None) -> Optional[List[Dict[str, Any]]]:
    """Job records from slurmdbd (sacct), one call; None when the cluster keeps no accounting
    (``Slurm accounting storage is disabled``: AccountingStorageType is none).

    slurmdbd down or unreachable is a failure, never "no records": sacct then says e.g.
    ``sacct: error: Sending PersistInit msg: Connection refused`` and ``sacct: error: Problem
    talking to the database: Connection refused`` (src/sacct/options.c: rc 1).

    Raises:
        SlurmCommandError: sacct failed for another reason, or printed an error with rc 0.
        JobParseError: its output could not be read, or was cut short.
    """
    rc, out, err = cli.run(*accounting(job_ids, names, users, start, end), check=False,
                           what="read job accounting", environ=TIME_ENVIRON)
    if rc != 0 and NO_ACCOUNTING.search(err or out or ""):
        return None
    check_answer(cli, "sacct", rc, out, err, "read job accounting")
    return parse_sacct(out)


def in_window(job: Dict[str, Any], start: Optional[int] = None, end: Optional[int] = None) -> bool:
    """True when the job existed in ``[start, end]`` (Unix seconds, either open): submitted
    before ``end`` and not ended before ``start``."""
    if end is not None and job["submit_time"] is not None and job["submit_time"] > end:
        return False
    if start is not None and job["end_time"] is not None and job["end_time"] < start:
        return False
    return True


def read_jobs(cli: Any,
              job_ids: Optional[Names] = None,
              names: Optional[Names] = None,
              users: Optional[Names] = None,
              start: Optional[int] = None,
              end: Optional[int] = None,
              accounting: bool = True) -> Tuple[List[Dict[str, Any]], bool]:
    """Every matching job, active or finished; ``(jobs, accounting_used)``.

    sacct runs FIRST and squeue second, so a job still active cannot be missed by squeue and
    then be mistaken for a finished or stale one. Jobs only squeue lists (accounting not yet
    written) are kept when they fall in the time window.

    Raises:
        SlurmCommandError, JobParseError.
    """
    accounted: Optional[List[Dict[str, Any]]] = None
    if accounting:
        accounted = read_accounting(cli, job_ids, names, users, start, end)
    queued = read_queue(cli, job_ids, names, users)
    queued = [j for j in queued if in_window(j, start, end)]
    return merge_jobs(queued, accounted or []), accounted is not None

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Submitting and changing Slurm jobs: sbatch arguments and output, identity, actions.

Private to the collection (the leading underscore): no API promise outside it.

A job's identity is its name, its user and, optionally, a key kept in its comment
(``clusterops-key=<key>``). :func:`submit` submits a batch script at most once per identity,
also when sbatch times out after slurmctld may have accepted the job. :func:`plan_action` picks
the jobs that ``scancel`` / ``scontrol requeue|hold|release`` must act on, so that a second run
acts on none.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import (
    is_held,
    parse_job_state,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import JobParseError, read_queue
from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    TIMEOUT_RC,
    SlurmCommandError,
    failure_words,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import JOB_ACTION_FORMS, Command


#: Prefix of the identity key in a job's comment.
KEY_PREFIX = "clusterops-key="
KEY_RE = re.compile(r"^[A-Za-z0-9._:@/+=-]+$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: The options of a submission's retries (read by :func:`submit`), which every module that
#: submits takes; documented in the ``clusterops.slurm.submit_retries`` doc fragment.
SUBMIT_RETRY_OPTIONS = ArgumentSpec(dict(
    submit_retries=dict(type="int", default=2),
    retry_delay=dict(type="float", default=10),
))

#: Desired states of the slurm_job module besides ``present`` (each one Slurm call, see
#: ``_slurm_commands.JOB_ACTION_FORMS``).
JOB_ACTIONS = tuple(JOB_ACTION_FORMS)

# Failures after which slurmctld may or may not have created the job: the request may have
# reached it and only the answer got lost. "Unable to contact slurm controller" is included
# because sbatch prints it for a lost answer too. These are slurm_strerror() texts of
# src/common/slurm_errno.c, the same in 22.05, 24.11 and 26.05 (checked at the release tags).
_UNCERTAIN = re.compile(
    r"Socket timed out on send/recv operation|Unable to contact slurm controller"
    r"|Zero Bytes were transmitted or received|Communication connection failure"
    r"|Transport endpoint is not connected|Connection reset by peer",
    re.IGNORECASE)

_SUBMITTED = re.compile(r"(?:^|\s)Submitted batch job (\d+)(?: on cluster ([^\s;]+))?\s*$")
_PARSABLE = re.compile(r"^\s*(\d+)(?:;([^\s;]+))?\s*$")


class SbatchOutputError(ValueError):
    """sbatch's output names no job id, or more than one."""


def parse_sbatch_output(stdout: str, stderr: str = "") -> Tuple[int, Optional[str]]:
    """``(job_id, cluster or None)`` from what sbatch printed.

    Reads every form sbatch prints: ``Submitted batch job 60060368``, ``Submitted batch job
    60060368 on cluster clusterA`` (``-M``), ``--parsable``'s ``75168975;clusterA`` or a bare
    ``15786755``, with any other lines around them (site wrappers, warnings). A line is taken
    whole, never its last word. "Submitted batch job" lines win over bare numbers; stderr is
    read only when stdout has no id.

    Raises:
        SbatchOutputError: no id, or different ids (never guessed).
    """
    tiers = (
        (_SUBMITTED, stdout or ""),
        (_PARSABLE, stdout or ""),
        (_SUBMITTED, stderr or ""),
    )
    for pattern, text in tiers:
        found: List[Tuple[int, Optional[str]]] = []
        for line in text.splitlines():
            match = pattern.search(line)
            if match:
                item = (int(match.group(1)), match.group(2) or None)
                if item not in found:
                    found.append(item)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise SbatchOutputError(
                "sbatch printed more than one job id (%s); not guessing which one is the job"
                % ", ".join(str(i) for i, dummy in found))
    raise SbatchOutputError("sbatch printed no job id: %r" % ((stdout or "") + (stderr or "")))


def uncertain_failure(exc: SlurmCommandError) -> bool:
    """True when a failed sbatch may nevertheless have created the job (timeouts, lost answers,
    the command_timeout rc 124)."""
    if exc.rc == TIMEOUT_RC:
        return True
    return bool(_UNCERTAIN.search("%s\n%s" % (exc.stderr or "", exc.stdout or "")))


def key_comment(key: Optional[str], comment: Optional[str] = None) -> Optional[str]:
    """The job comment: ``clusterops-key=<key>``, then the user's comment after a space."""
    if not key:
        return comment
    return KEY_PREFIX + key + ((" " + comment) if comment else "")


def has_key(job: Dict[str, Any], key: Optional[str]) -> bool:
    """True when no key is asked for, or the job's comment holds ``clusterops-key=<key>`` as a
    whole word."""
    if not key:
        return True
    return (KEY_PREFIX + key) in (job.get("comment") or "").split()


def matches_identity(job: Dict[str, Any], name: Optional[str], user: Optional[str], key: Optional[str] = None) -> bool:
    if name is not None and job["name"] != name:
        return False
    if user is not None and job["user"] != user:
        return False
    return has_key(job, key)


def sbatch_environ(environment: Optional[Dict[str, Any]]) -> Dict[str, str]:
    """Environment for the sbatch call. ``LC_ALL`` is set back to the task's own value (empty
    when it had none): the command layer sets ``LC_ALL=C`` for reading Slurm's words, and the
    job would inherit it through ``--export=ALL``."""
    env = {"LC_ALL": os.environ.get("LC_ALL", "")}
    for name, value in (environment or {}).items():
        env[name] = "" if value is None else str(value)
    return env


class SubmitError(Exception):
    """Submission failed; ``accepted`` says whether Slurm may have the job anyway."""

    def __init__(self, msg: str, exc: Optional[SlurmCommandError] = None, maybe_accepted: bool = False, errors: Optional[List[str]] = None) -> None:
        super(SubmitError, self).__init__(msg)
        self.msg = msg
        self.exc = exc
        self.maybe_accepted = maybe_accepted
        self.errors = errors or []


def submission_id(job: Dict[str, Any]) -> int:
    """The id sbatch prints for a job: the array job id, the het job leader, else its id."""
    return job["array_job_id"] or job["het_job_id"] or job["job_id_raw"]


def submit(cli: Any, command: Command, identity: Dict[str, Any], known_ids: Sequence[int], data: Optional[str] = None,
           environ: Optional[Dict[str, str]] = None, retries: int = 2, delay: float = 10.0,
           sleep: Callable[[float], Any] = time.sleep) -> Dict[str, Any]:
    """Run sbatch once (``command``, an sbatch form of ``_slurm_commands``), and again only when
    Slurm certainly did not take the job.

    After a failure that leaves it open whether slurmctld created the job (timeout, lost
    answer), wait ``delay`` seconds and look the identity up with squeue (every state, so a job
    that already ended is seen too): a job of that identity whose id is not in ``known_ids``
    (the ids squeue listed for it before sbatch ran) is the one sbatch submitted, and it is
    returned instead of submitting a copy. Only when squeue answers and shows no such job is
    sbatch run again, at most ``retries`` more times. When squeue cannot answer either, nothing
    is resubmitted.

    Args:
        identity: ``{"name", "user", "key"}``.

    Returns:
        ``{"job_id": int, "cluster": str|None, "recovered": bool, "attempts": int,
        "errors": [str, ...], "job": dict|None}``; ``job`` is the squeue entry when recovered.

    Raises:
        SubmitError: sbatch failed for good (``maybe_accepted`` false), or it is unknown
        whether the job was created (``maybe_accepted`` true: do not resubmit blindly), or sbatch
        succeeded but printed no readable id and squeue shows no single new job either (or
        gives no complete answer: ``maybe_accepted`` true). A squeue answer that is not complete
        (an error, an output cut short) never counts as "no such job"."""
    known = set(known_ids)
    errors: List[str] = []
    attempts = 0
    last: Any = None
    while True:
        attempts += 1
        try:
            rc, out, err = cli.run(*command, data=data, environ=environ, what="submit the job")
        except SlurmCommandError as exc:
            if not uncertain_failure(exc):
                raise SubmitError(exc.msg, exc=exc, errors=errors)
            errors.append("sbatch attempt %d: %s" % (attempts, failure_words(exc)))
            last = exc
        else:
            try:
                job_id, cluster = parse_sbatch_output(out, err)
            except SbatchOutputError as exc:
                # rc 0: the job exists. Find it by identity rather than guess from the text.
                return _recover_unreadable(cli, identity, known, exc, errors, attempts)
            return {"job_id": job_id, "cluster": cluster, "recovered": False,
                    "attempts": attempts, "errors": errors, "job": None}
        # Did slurmctld take it? Ask before any retry; never resubmit without an answer.
        found = _queue_after_failure(cli, identity, last, errors, attempts, retries, delay, sleep)
        new = _new_jobs(found, known, identity)
        if new:
            job = sorted(new, key=lambda j: j["job_id_raw"])[0]
            return {"job_id": submission_id(job), "cluster": job["cluster"], "recovered": True,
                    "attempts": attempts, "errors": errors, "job": job}
        known.update(j["job_id_raw"] for j in found)
        if attempts > retries:
            raise SubmitError(
                "sbatch failed %d times (%s); squeue shows that Slurm did not accept the job"
                % (attempts, failure_words(last)), exc=last, errors=errors)


def _new_jobs(listed: List[Dict[str, Any]], known: Set[int], identity: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The jobs of ``listed`` (squeue entries) of ``identity`` whose ids are not in ``known``."""
    return [j for j in listed if j["job_id_raw"] not in known and matches_identity(
        j, identity["name"], identity["user"], identity.get("key"))]


def _recover_unreadable(cli: Any, identity: Dict[str, Any], known: Set[int], exc: Exception,
                        errors: List[str], attempts: int) -> Dict[str, Any]:
    """sbatch succeeded but printed no readable id (``exc``): the one new job of ``identity``
    squeue lists, as :func:`submit` returns it.

    Raises:
        SubmitError: ``maybe_accepted`` true: squeue gave no complete answer, or not exactly one new job.
    """
    try:
        listed = read_queue(cli, names=[identity["name"]], users=[identity["user"]])
    except (SlurmCommandError, JobParseError) as lookup:
        raise SubmitError("sbatch succeeded but %s, and squeue could not list the jobs "
                          "of this identity: %s" % (exc, failure_words(lookup)),
                          maybe_accepted=True, errors=errors)
    new = _new_jobs(listed, known, identity)
    if len(new) != 1:
        raise SubmitError("sbatch succeeded but %s, and squeue shows %d new job(s) of "
                          "this identity" % (exc, len(new)), maybe_accepted=True,
                          errors=errors)
    errors.append(str(exc))
    return {"job_id": submission_id(new[0]), "cluster": new[0]["cluster"],
            "recovered": True, "attempts": attempts, "errors": errors, "job": new[0]}


def _queue_after_failure(cli: Any, identity: Dict[str, Any], last: Any, errors: List[str], attempts: int,
                         retries: int, delay: float, sleep: Callable[[float], Any]) -> List[Dict[str, Any]]:
    """The jobs of ``identity`` squeue lists (every state) after sbatch attempt ``attempts``
    failed with ``last``, asked after ``delay`` seconds, up to ``retries`` + 1 times.

    Raises:
        SubmitError: ``maybe_accepted`` true: no complete answer (an error, or an output cut
            short, is no answer) within the tries; the job is not submitted again.
    """
    lookups = 0
    while True:
        lookups += 1
        sleep(delay)
        try:
            return read_queue(cli, names=[identity["name"]], users=[identity["user"]])
        except (SlurmCommandError, JobParseError) as exc:
            errors.append("squeue after sbatch attempt %d: %s" % (attempts, failure_words(exc)))
            if lookups > retries:
                raise SubmitError(
                    "sbatch failed (%s) and squeue could not tell whether Slurm accepted "
                    "the job; it was NOT submitted again. Check with squeue -n %s -u %s "
                    "before running this task again" % (
                        failure_words(last), identity["name"], identity["user"]),
                    exc=last, maybe_accepted=True, errors=errors)


def job_target(job: Dict[str, Any], job_id: Optional[str] = None) -> str:
    """The id to pass to scancel/scontrol for a job: the id the user gave, else the array job
    id for any part of an array (all its tasks), the het job leader for a component, else the
    job id."""
    if job_id:
        return job_id
    for key in ("array_job_id", "het_job_id"):
        if job.get(key):
            return str(job[key])
    return str(job["job_id_raw"])


def _dedup(items: List[str]) -> List[str]:
    seen = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _state(job):
    return parse_job_state(job["state_raw"])


_RUNNING_LIKE = frozenset(("RUNNING", "SUSPENDED", "CONFIGURING", "RESIZING", "STOPPED", "SIGNALING"))


def plan_action(jobs: List[Dict[str, Any]], action: str, job_id: Optional[str] = None) -> Dict[str, Any]:
    """Which of ``jobs`` (squeue entries of one identity, or of one job id) ``action`` must
    change. Pure: no Slurm call.

    - ``absent``: every active job except those already COMPLETING (they are ending).
    - ``requeued``: running jobs (RUNNING, SUSPENDED, CONFIGURING...) are requeued; a job that is
      PENDING already is left alone. With no active job, the newest finished one the controller
      still lists (MinJobAge) is requeued: Slurm requeues finished batch jobs too.
    - ``held``: active jobs not held yet (:func:`_job_state.is_held`). Slurm holds a RUNNING
      job too: it keeps running, and does not start again if it is requeued.
    - ``released``: held jobs, whoever held them: a user or admin (``JobHeldUser`` /
      ``JobHeldAdmin``) or Slurm itself (``launch failed requeued held`` after a launch or prolog
      failure, ``job requeued in held state``, ``JobHoldMaxRequeue``, REQUEUE_HOLD,
      SPECIAL_EXIT, RESV_DEL_HOLD): ``scontrol release`` is what frees each of them.
    - A job whose state this collection does not know (``state_known`` false: a later release's
      word) is never acted on and never counted as unchanged: it is refused, so the task fails
      and a human looks at it.

    Returns:
        ``{"targets": [id, ...] (deduplicated, to pass to the command), "changed": [job, ...],
        "unchanged": [job, ...], "refused": {job_id: why}}``.
    """
    changed: List[Dict[str, Any]] = []
    unchanged: List[Dict[str, Any]] = []
    refused: Dict[str, str] = {}
    active = [j for j in jobs if j["active"]]
    for job in jobs:
        state = _state(job)
        if not state.known:
            refused[job["job_id"]] = (
                "is in state %s, which this collection does not know (a later Slurm release?); "
                "nothing is done to it: look at it with squeue -j %s" % (
                    state.raw, job["job_id"]))
            continue
        if action == "absent":
            (changed if job["active"] and state.word not in ("COMPLETING", "STAGE_OUT") else unchanged).append(job)
        elif action == "requeued":
            if state.word in _RUNNING_LIKE:
                changed.append(job)
            elif state.word in ("COMPLETING", "STAGE_OUT"):
                refused[job["job_id"]] = ("is %s: Slurm requeues it only once it has completed; "
                                          "run again in a few seconds" % state.word)
            else:
                unchanged.append(job)
        elif action == "held":
            holdable = job["active"] and state.word not in ("COMPLETING", "STAGE_OUT")
            (changed if holdable and not is_held(state, job["reason"]) else unchanged).append(job)
        elif action == "released":
            (changed if job["active"] and is_held(state, job["reason"]) else unchanged).append(job)
        else:
            raise ValueError("unknown action %r" % action)
    if action == "requeued" and not active and not changed and not refused:
        finished = [j for j in jobs if not j["active"]]
        if finished:
            newest = sorted(finished, key=lambda j: (j["submit_time"] or 0, j["job_id_raw"]))[-1]
            changed.append(newest)
            unchanged = [j for j in unchanged if j is not newest]
    targets = _dedup([job_target(j, job_id) for j in changed])
    return {"targets": targets, "changed": changed, "unchanged": unchanged, "refused": refused}

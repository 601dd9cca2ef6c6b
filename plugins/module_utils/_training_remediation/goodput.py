# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Goodput of a training run, pure: what its failures cost, from what the readers return.

Private to the collection (the leading underscore of the package): no API promise outside it.

Nothing here reads a file or runs a command. In: the run's jobs (``_jobs.read_jobs``, the dict
shape at the top of ``_jobs.py``, each with its ``history`` of runs Slurm requeued), its
checkpoints (``[{"step", "time"}]``: the step and Unix time each was written), its progress
(``runner.read_progress``: ``{"source", "time", "step"}``), the trainer's event log when it has
one (``[{"event", "step", "time"}]``, the reference trainer's ``--events`` JSONL), its
``state.json`` (:mod:`.registry`: ``resubmissions`` and ``hang_cancels``) and ``now``. Out: the
dict :func:`goodput` documents. Times are Unix seconds, durations seconds, steps the trainer's.

A figure that these inputs cannot give is None, and the result's ``unknown`` list says which and
why: nothing is guessed. See docs/goodput.md for the definitions.
"""

from __future__ import annotations

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.bounds import record_value_problem
from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import HostlistError, expand_hostlist

try:
    from typing import Any, Dict, List, Optional, Tuple  # noqa: F401 pylint: disable=unused-import
except ImportError:  # pragma: no cover
    pass

#: The cause of a restart, from the Slurm state the job before it ended in (``_job_state``'s
#: base states; sacct ``State``). A CANCELLED job remediation cancelled because it hung
#: (``state.json`` ``hang_cancels``) is a ``hang``; any other end (CANCELLED by a person,
#: REQUEUED by ``scontrol requeue``, COMPLETED without the FINISHED marker, DEADLINE) is ``other``.
CAUSES = {
    "NODE_FAIL": "node_failure",
    "BOOT_FAIL": "node_failure",
    "TIMEOUT": "time_limit",
    "PREEMPTED": "preemption",
    "FAILED": "program_error",
    "OUT_OF_MEMORY": "program_error",
}
#: Every cause :func:`goodput` counts, in the order ``restarts_by_cause`` lists them.
CAUSE_NAMES = ("node_failure", "hang", "time_limit", "preemption", "program_error", "other")

#: Causes whose failed node Slurm's node events tell (:func:`failed_nodes`).
NODE_CAUSES = ("node_failure",)
#: Seconds after a job's sacct ``End`` in which a node event of one of its nodes still names the
#: node that ended it: slurmctld ends the job NODE_FAIL when it sets the node DOWN (the same second
#: in the recordings); a slow slurmdbd may record the event a little later.
NODE_EVENT_SLACK = 60

#: Trainer events that carry the step reached at their ``time`` (the reference trainer's names).
STEP_EVENTS = ("start", "step", "save", "signal", "finished")

#: Figures of the result that are durations (seconds), summed over the run.
TOTALS = ("wall_time", "queued_time", "running_time", "between_jobs_time", "recompute_time",
          "lost_to_detection", "productive_time")


def attempts(jobs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Every run of every job, oldest submission first: a job's ``history`` (the runs Slurm
    requeued into it, ``_jobs.merge_jobs``) before the job itself.

    Each: ``{"job_id", "job_id_raw", "state", "submit_time", "start_time", "end_time",
    "node_list", "nodes", "active", "requeue_of": bool}`` (``requeue_of``: Slurm requeued the
    run before it into this one, the same job id). Source: sacct ``Submit``, ``Start``, ``End``,
    ``State``, ``NodeList`` (squeue's for a job the controller lists).
    """
    out = []
    for job in sorted(jobs, key=lambda j: (j.get("submit_time") or 0, j["job_id_raw"])):
        runs = list(job.get("history") or []) + [job]
        for index, entry in enumerate(runs):
            out.append({"job_id": str(job["job_id"]), "job_id_raw": job["job_id_raw"], "state": entry.get("state"),
                        "submit_time": entry.get("submit_time"), "start_time": entry.get("start_time"),
                        "end_time": entry.get("end_time"), "node_list": entry.get("node_list") or "",
                        "nodes": len(entry.get("nodes") or []),
                        "active": bool(job.get("active")) and entry is job, "requeue_of": index > 0})
    return out


def _span(begin: Optional[float], end: Optional[float], now: float) -> Optional[float]:
    """``end - begin`` (``now`` for an end not reached yet); None without a begin."""
    if begin is None:
        return None
    return float(max(0.0, (end if end is not None else now) - begin))


def _in(when: Optional[float], begin: Optional[float], end: Optional[float]) -> bool:
    return when is not None and begin is not None and when >= begin and (end is None or when <= end)


def _item(figure: str, why: str) -> Dict[str, str]:
    return {"figure": figure, "why": why}


def _unknown(out: Dict[str, Any], figure: str, why: str) -> None:
    item = _item(figure, why)
    if item not in out["unknown"]:
        out["unknown"].append(item)


def _steps(events: Optional[List[Dict[str, Any]]]) -> List[Tuple[float, int, str]]:
    """``(time, step, event)`` of every event that says a step, in time order."""
    found = []
    for event in events or []:
        step, when = event.get("step"), event.get("time")
        if event.get("event") in STEP_EVENTS and step is not None and when is not None \
                and record_value_problem(step, when) is None:
            found.append((float(when), step, str(event["event"])))
    return sorted(found)


def reached(attempt: Dict[str, Any], steps: List[Tuple[float, int, str]],
            progress: Optional[Dict[str, Any]]) -> Tuple[Optional[int], Optional[float], Optional[str]]:
    """``(step, time, source)`` of the last sign of progress during ``attempt`` (its start to its
    end): the highest step of the trainer's event log in that window (``events``), else the
    heartbeat's step when the heartbeat was written in that window (``heartbeat``: the file holds
    only the newest step, so it speaks for the last job only). The time is of the newest such
    record. ``(None, None, None)`` when neither says."""
    begin, end = attempt["start_time"], attempt["end_time"]
    inside = [(when, step) for when, step, dummy in steps if _in(when, begin, end)]
    if inside:
        return max(step for dummy, step in inside), max(when for when, dummy in inside), "events"
    progress = progress or {}
    if progress.get("source") == "heartbeat" and progress.get("step") is not None \
            and _in(progress.get("time"), begin, end):
        return progress["step"], progress["time"], "heartbeat"
    return None, None, None


def _resubmission(state: Dict[str, Any], before: Dict[str, Any], after: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The ``state.json`` resubmission that submitted ``after`` once ``before`` ended."""
    for entry in state.get("resubmissions") or []:
        if str(entry.get("job_id")) == str(after["job_id_raw"]) or (
                entry.get("job_id") is None and str(entry.get("after_job")) == str(before["job_id_raw"])):
            return entry
    return None


def _hang(state: Dict[str, Any], attempt: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    for entry in state.get("hang_cancels") or []:
        if str(entry.get("job_id")) == str(attempt["job_id_raw"]):
            return entry
    return None


def cause(before: Dict[str, Any], state: Dict[str, Any]) -> str:
    """What ended ``before`` (:data:`CAUSES`; ``hang`` when ``state.json``'s ``hang_cancels``
    names its job and it ended CANCELLED)."""
    if before["state"] == "CANCELLED" and _hang(state, before):
        return "hang"
    return CAUSES.get(before["state"] or "", "other")


def resumed(before: Dict[str, Any], after: Dict[str, Any], resub: Optional[Dict[str, Any]],
            steps: List[Tuple[float, int, str]],
            checkpoints: Optional[List[Dict[str, Any]]]) -> Tuple[Optional[int], Optional[str]]:
    """``(step, source)`` ``after`` resumed from: the trainer's ``start`` event in ``after``'s
    window (``events``), else the resubmission's recorded ``step`` (``state.json``: the newest
    valid checkpoint when remediation resubmitted; null there is a start from scratch, step 0),
    else the newest checkpoint written before ``after`` started (``checkpoints``: the launcher
    resumes from the newest valid one). ``(None, None)`` when none says."""
    for when, step, event in steps:
        if event == "start" and _in(when, after["start_time"], after["end_time"]):
            return step, "events"
    if resub is not None:
        return (resub.get("step") or 0), "state.json"
    if checkpoints is not None and after["start_time"] is not None:
        older = [c["step"] for c in checkpoints if c.get("time") is not None and c["time"] <= after["start_time"]]
        if older:
            return max(older), "checkpoints"
    return None, None


def _first_step_after(steps: List[Tuple[float, int, str]], attempt: Dict[str, Any],
                      above: Optional[int] = None) -> Optional[float]:
    """Time of the first ``step`` event in ``attempt``'s window (with a step above ``above``)."""
    for when, step, event in steps:
        if event == "step" and _in(when, attempt["start_time"], attempt["end_time"]) \
                and (above is None or step > above):
            return when
    return None


def _covers(steps: List[Tuple[float, int, str]], attempt: Dict[str, Any]) -> bool:
    """True when the event log has a record of ``attempt`` (its ``start`` at least)."""
    return any(_in(when, attempt["start_time"], attempt["end_time"]) for when, dummy, dummy2 in steps)


def _recompute(failure: Dict[str, Any], after: Dict[str, Any], steps: List[Tuple[float, int, str]],
               now: float) -> Tuple[Optional[float], Optional[str]]:
    """``(seconds, why unknown)`` from ``after``'s start until it passed the step reached before
    the failure: the first ``step`` event above it (events only); the whole of ``after`` (to its
    end, or to ``now`` while it runs) when the event log covers it and it never passed it; 0 while
    ``after`` has not started."""
    if after["start_time"] is None:
        return 0.0, None  # not started: nothing recomputed yet
    if failure["reached_step"] is None:
        return None, "the step reached before the failure is unknown"
    if not _covers(steps, after):
        return None, "the trainer's event log has no record of job %s (step times are needed)" % after["job_id"]
    passed = _first_step_after(steps, after, failure["reached_step"])
    if passed is not None:
        return passed - after["start_time"], None
    return _span(after["start_time"], after["end_time"], now), None


def _phases(failure: Dict[str, Any], before: Dict[str, Any], after: Dict[str, Any], resub: Optional[Dict[str, Any]],
            hang: Optional[Dict[str, Any]], steps: List[Tuple[float, int, str]], now: float) -> Dict[str, Any]:
    """Time from the failure to training again, split (each None when unknown, see :func:`failure`)."""
    end, submit, start = before["end_time"], after["submit_time"], after["start_time"]
    last = failure["last_progress_time"]
    noticed = end
    if hang is not None and hang.get("time") is not None:
        noticed = hang["time"]
        if hang.get("idle") is not None:
            last = hang["time"] - hang["idle"]
    out: Dict[str, Any] = {"detection": None, "waiting_for_remediation": None, "remediation": None,
                           "queue": _span(submit, start, now) if submit is not None else None,
                           "start_to_first_step": None, "end_to_start": None, "time_to_training": None}
    if last is not None and noticed is not None:
        out["detection"] = max(0.0, noticed - last)
    if hang is not None and noticed is not None and submit is not None:
        out.update(waiting_for_remediation=0.0, remediation=max(0.0, submit - noticed))
    elif after["requeue_of"] and end is not None and submit is not None:
        out.update(waiting_for_remediation=0.0, remediation=max(0.0, submit - end))
    elif resub is not None and end is not None and submit is not None:
        out["waiting_for_remediation"] = max(0.0, submit - end)
        if resub.get("time") is not None:
            out["remediation"] = max(0.0, resub["time"] - submit)
    if end is not None and start is not None:
        out["end_to_start"] = start - end
    first = _first_step_after(steps, after)
    if first is not None and start is not None:
        out["start_to_first_step"] = first - start
        if last is not None:
            out["time_to_training"] = first - last
    return out


def lost_to_detection(before: Dict[str, Any], item: Dict[str, Any], hang: Optional[Dict[str, Any]],
                      recomputed_until: Optional[float], now: float) -> Optional[float]:
    """Seconds of ``before``'s running time after its last progress: the detection (from the last
    progress, for a hang ``hang_cancels`` ``time - idle``, to when the failure was known) and, for a
    hang, the watchdog's cancel until Slurm ended the job (sacct ``End``; ``now`` while it runs).
    The job held its nodes and trained nothing: lost, not productive. What the restart before
    already counts as recompute (``recomputed_until``: ``before``'s start plus that restart's
    ``recompute_time``) is not counted twice. 0 for a job that never started; None when the last
    progress is unknown."""
    if before["start_time"] is None:
        return 0.0
    last = item["last_progress_time"]
    if hang is not None and hang.get("time") is not None and hang.get("idle") is not None:
        last = hang["time"] - hang["idle"]
    if last is None:
        return None
    begin = max([float(last), float(before["start_time"])] + ([recomputed_until] if recomputed_until is not None else []))
    return max(0.0, float(before["end_time"] if before["end_time"] is not None else now) - begin)


def failed_nodes(before: Dict[str, Any], node_events: Optional[List[Dict[str, Any]]]) -> Optional[List[str]]:
    """The nodes of ``before`` (sacct ``NodeList``) that failed: those with a node event of
    Slurm's accounting (``sacctmgr show event``, ``_node_events.parse_events``: ``{"node",
    "start", ...}``) that began while the job ran or up to :data:`NODE_EVENT_SLACK` seconds after
    its ``End`` (DOWN, not responding: slurmctld sets the node DOWN and ends the job NODE_FAIL at
    once). Sorted names; None when the events were not read or none of its nodes has one."""
    if node_events is None or before["start_time"] is None or before["end_time"] is None:
        return None
    try:
        mine = set(expand_hostlist(before["node_list"])) if before["node_list"] else set()
    except HostlistError:
        return None
    found = sorted(set(e["node"] for e in node_events if e.get("node") in mine and e.get("start") is not None
                       and before["start_time"] <= e["start"] <= before["end_time"] + NODE_EVENT_SLACK))
    return found or None


def failure(before: Dict[str, Any], after: Dict[str, Any], state: Dict[str, Any], steps: List[Tuple[float, int, str]],
            progress: Optional[Dict[str, Any]], checkpoints: Optional[List[Dict[str, Any]]],
            now: float, recomputed_until: Optional[float] = None,
            node_events: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
    """One restart: ``before`` ended, ``after`` is the next run of the training.

    Returns ``{"job_id", "job_id_raw", "state", "cause", "restarted_by", "next_job_id",
    "reached_step", "reached_source", "last_progress_time", "resumed_step", "resumed_source",
    "steps_lost", "recompute_time", "detection", "waiting_for_remediation", "remediation", "queue",
    "start_to_first_step", "end_to_start", "time_to_training", "lost_to_detection", "node_list",
    "failed_nodes", "unknown": [{"figure", "why"}]}``:

    - ``cause``: :func:`cause` (sacct ``State``; ``state.json`` ``hang_cancels``).
    - ``restarted_by``: ``slurm`` (Slurm requeued the same job: ``history``), ``remediation``
      (a ``state.json`` resubmission names it) or ``unknown`` (submitted by someone else).
    - ``reached_step``: :func:`reached`; ``resumed_step``: :func:`resumed`; ``steps_lost`` the
      one minus the other (None unless both are known).
    - ``recompute_time``: :func:`_recompute` (trainer events only).
    - ``detection``: from the last progress (events, heartbeat; for a hang ``hang_cancels``
      ``time - idle``) to when the failure was known (sacct ``End``; for a hang the watchdog's
      cancel, ``hang_cancels`` ``time``). ``waiting_for_remediation``: from the end to the next
      submission (sacct ``Submit``) when remediation resubmitted (its own reads count here: when
      its task began is not recorded); 0 for a Slurm requeue and a hang (the watchdog acts at
      once). ``remediation``: a hang's cancel decision to the next submission (evidence, scancel,
      the wait, sbatch); a Slurm requeue's end to its new submit time; a resubmission's submit
      time to its ``state.json`` ``time`` (sbatch answered and recorded). ``queue``: sacct
      ``Submit`` to ``Start`` of the next job (to ``now`` while pending). ``start_to_first_step``:
      its ``Start`` to its first ``step`` event. ``end_to_start``: ``End`` to the next ``Start``
      (sacct alone). ``time_to_training``: the last progress to the first new step.
    - ``lost_to_detection``: :func:`lost_to_detection` (``recomputed_until`` given by
      :func:`goodput`): the part of ``before``'s running time that is lost, not productive.
    - ``node_list``: ``before``'s sacct ``NodeList``; ``failed_nodes``: :func:`failed_nodes` for a
      cause of :data:`NODE_CAUSES` (``node_events`` read), else None.
    """
    resub = None if after["requeue_of"] else _resubmission(state, before, after)
    hang = _hang(state, before) if before["state"] == "CANCELLED" else None
    step, when, source = reached(before, steps, progress)
    item: Dict[str, Any] = {
        "job_id": before["job_id"], "job_id_raw": before["job_id_raw"], "state": before["state"],
        "cause": cause(before, state), "next_job_id": after["job_id"],
        "restarted_by": "slurm" if after["requeue_of"] else ("remediation" if resub else "unknown"),
        "reached_step": step, "reached_source": source, "last_progress_time": when,
        "node_list": before["node_list"], "failed_nodes": None, "unknown": []}
    if item["cause"] in NODE_CAUSES and node_events is not None:
        item["failed_nodes"] = failed_nodes(before, node_events)
        if item["failed_nodes"] is None:
            item["unknown"].append(_item("failed_nodes", "no node event of %s while job %s ran or at its end"
                                         % (before["node_list"] or "its nodes", before["job_id"])))
    item["resumed_step"], item["resumed_source"] = resumed(before, after, resub, steps, checkpoints)
    item["steps_lost"] = (max(0, step - item["resumed_step"])
                          if step is not None and item["resumed_step"] is not None else None)
    item["recompute_time"], why = _recompute(item, after, steps, now)
    item.update(_phases(item, before, after, resub, hang, steps, now))
    item["lost_to_detection"] = lost_to_detection(before, item, hang, recomputed_until, now)
    if step is None:
        item["unknown"].append(_item("reached_step", "no trainer event and no heartbeat written while job %s ran"
                                     % before["job_id"]))
    if item["resumed_step"] is None:
        item["unknown"].append(_item("resumed_step", "no start event, resubmission record or older checkpoint "
                                     "for job %s" % after["job_id"]))
    if why:
        item["unknown"].append(_item("recompute_time", why))
    for figure in ("detection", "waiting_for_remediation", "remediation", "start_to_first_step", "lost_to_detection"):
        if item[figure] is None:
            item["unknown"].append(_item(figure, _phase_why(figure, item, after)))
    return item


def _phase_why(figure: str, item: Dict[str, Any], after: Dict[str, Any]) -> str:
    if figure in ("detection", "lost_to_detection"):
        return "no progress record of job %s before it ended" % item["job_id"]
    if figure == "start_to_first_step":
        return ("job %s has not started" % after["job_id"] if after["start_time"] is None
                else "the trainer's event log has no step of job %s" % after["job_id"])
    if item["restarted_by"] == "unknown":
        return "job %s was not submitted by remediation (no state.json resubmission names it)" % after["job_id"]
    return "a time of job %s or %s is missing" % (item["job_id"], after["job_id"])


def _sum(values: List[Optional[float]]) -> Optional[float]:
    return None if any(v is None for v in values) else float(sum(values))  # type: ignore[arg-type]


def _why(item: Dict[str, Any], *figures: str) -> str:
    reasons = dict((u["figure"], u["why"]) for u in item["unknown"])
    return "; ".join(reasons[f] for f in figures if f in reasons) or "unknown"


def _node_seconds(runs: List[Dict[str, Any]]) -> Optional[float]:
    """Running time times the nodes of sacct ``NodeList``; None when a job that ran has none."""
    total = 0.0
    for run in runs:
        if run["running"]:
            if not run["nodes"]:
                return None
            total += run["running"] * run["nodes"]
    return total


def _totals(runs: List[Dict[str, Any]], failures: List[Dict[str, Any]], until: float, out: Dict[str, Any]) -> None:
    """The run's totals (:func:`goodput`'s ``wall_time`` ... ``effective_ratio``)."""
    first = min(r["submit_time"] for r in runs)
    gaps = [max(0.0, b["submit_time"] - a["end_time"]) for a, b in zip(runs, runs[1:]) if a["end_time"] is not None]
    out.update(first_submit=first, wall_time=float(max(0.0, until - first)), queued_time=_sum([r["queued"] for r in runs]),
               running_time=_sum([r["running"] for r in runs]), between_jobs_time=float(sum(gaps)),
               node_seconds=_node_seconds(runs))
    if out["node_seconds"] is None:
        _unknown(out, "node_seconds", "a job that ran has no node list in the accounting")
    out["recompute_time"] = recompute = _sum([f["recompute_time"] for f in failures])
    out["lost_to_detection"] = detected = _sum([f["lost_to_detection"] for f in failures])
    lost = _sum([f["steps_lost"] for f in failures])
    out["steps_lost"] = int(lost) if lost is not None else None
    for item in failures:
        if item["recompute_time"] is None:
            _unknown(out, "recompute_time", "restart after job %s: %s" % (item["job_id"], _why(item, "recompute_time")))
        if item["lost_to_detection"] is None:
            _unknown(out, "lost_to_detection", "restart after job %s: %s" % (
                item["job_id"], _why(item, "lost_to_detection")))
        if item["steps_lost"] is None:
            _unknown(out, "steps_lost", "restart after job %s: %s" % (
                item["job_id"], _why(item, "reached_step", "resumed_step")))
    if recompute is not None and detected is not None:
        out["productive_time"] = max(0.0, out["running_time"] - recompute - detected)
        if out["wall_time"]:
            out["effective_ratio"] = round(out["productive_time"] / out["wall_time"], 6)
        return
    _unknown(out, "productive_time", "the time spent recomputing lost steps is unknown" if recompute is None
             else "the running time lost to detection (after the last progress before a failure) is unknown")
    _unknown(out, "effective_ratio", "productive_time is unknown")
    known = sum(f[key] for f in failures for key in ("recompute_time", "lost_to_detection") if f[key] is not None)
    out["productive_time_at_most"] = max(0.0, out["running_time"] - known)


def _recomputed_until(failures: List[Dict[str, Any]], before: Dict[str, Any]) -> Optional[float]:
    """Until when ``before`` recomputed what the restart before it lost (its start plus that
    restart's ``recompute_time``); None when it is no restart or either is unknown."""
    if not failures or failures[-1]["recompute_time"] is None or before["start_time"] is None:
        return None
    return float(before["start_time"] + failures[-1]["recompute_time"])


def empty_result(now: float) -> Dict[str, Any]:
    """:func:`goodput`'s result before anything is known: every figure None, no restart."""
    return {"now": now, "accounting": True, "first_submit": None, "wall_time": None, "queued_time": None,
            "running_time": None, "between_jobs_time": None, "node_seconds": None, "recompute_time": None,
            "lost_to_detection": None, "productive_time": None, "productive_time_at_most": None, "effective_ratio": None,
            "steps_lost": None, "restarts": 0, "restarts_by_cause": dict((c, 0) for c in CAUSE_NAMES),
            "active": False, "jobs": [], "failures": [], "unknown": []}


def goodput(jobs: List[Dict[str, Any]],
            state: Dict[str, Any],
            now: float,
            checkpoints: Optional[List[Dict[str, Any]]] = None,
            progress: Optional[Dict[str, Any]] = None,
            events: Optional[List[Dict[str, Any]]] = None,
            accounting: bool = True,
            finished: bool = False,
            node_events: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
    """What one run's failures cost, from what the readers return (pure).

    Args:
        jobs: the run's jobs (``policy.run_jobs`` of ``_jobs.read_jobs``), each with its ``history``.
        state: its ``state.json`` (``registry.read_state``): ``resubmissions``, ``hang_cancels``.
        now: Unix seconds: the end of every span still open (a job pending or running).
        checkpoints: ``[{"step": int, "time": float}]`` (the time each was written); None: not read.
        progress: ``runner.read_progress`` (its ``step`` only from a heartbeat); None: not read.
        events: the trainer's event log (``[{"event", "step", "time"}]``); None: it has none.
        accounting: False when the cluster keeps no accounting (``read_jobs``' second value):
            only jobs the controller still lists are known.
        finished: the run's FINISHED marker exists: the wall time ends with its last job.
        node_events: Slurm's node events of the nodes of the run's failed jobs
            (``_node_events.read_node_events``), which name the failed node of a node failure
            (:func:`failed_nodes`); None: not read (``failed_nodes`` stays None).

    Returns:
        ``{"now", "accounting", "first_submit", "wall_time", "queued_time", "running_time",
        "between_jobs_time", "node_seconds", "recompute_time", "lost_to_detection", "productive_time",
        "productive_time_at_most", "effective_ratio", "steps_lost", "restarts",
        "restarts_by_cause": {cause: int}, "active", "jobs": [:func:`attempts`, with "queued",
        "running"], "failures": [:func:`failure`], "unknown": [{"figure", "why"}]}``.

        - ``wall_time``: the first job's sacct ``Submit`` to ``now`` (to the last job's ``End``
          once ``finished``). ``queued_time``: sum of ``Submit`` to ``Start`` (or ``now``);
          ``running_time``: sum of ``Start`` to ``End`` (or ``now``); ``between_jobs_time``: a
          job's ``End`` to the next one's ``Submit`` (no job of the run existed);
          ``node_seconds``: running time times the nodes of sacct ``NodeList``.
        - ``recompute_time``, ``lost_to_detection``: the sums of each restart's (:func:`failure`:
          recomputing lost steps; the failed job's running time after its last progress, the
          detection). ``productive_time``: ``running_time`` less both (detection is lost time,
          not productive); ``effective_ratio``: ``productive_time / wall_time``;
          ``productive_time_at_most``: when a restart's recompute or detection time is unknown,
          the running time less the known ones (an upper bound; ``productive_time`` stays None).
        - ``restarts``: runs after the first (a Slurm requeue or a new job); ``restarts_by_cause``
          by :data:`CAUSE_NAMES`; ``steps_lost``: the sum of each restart's.
        - ``active``: a job of the run is pending or running (spans end at ``now``).
    """
    out = empty_result(now)
    out["accounting"] = accounting
    if not accounting:
        _unknown(out, "jobs", "the cluster keeps no accounting (sacct): jobs that ended are not known, "
                 "so the wall, queued and running times and the restarts cover the controller's jobs only")
    runs = [r for r in attempts(jobs) if r["submit_time"] is not None]
    if not runs:
        _unknown(out, "wall_time", "no job of the run was found")
        return out
    steps = _steps(events)
    if events is None:
        _unknown(out, "events", "the run has no trainer event log: step times (recompute, first step) are unknown")
    for index, run in enumerate(runs):
        run["queued"] = _span(run["submit_time"], run["start_time"], now)
        run["running"] = _span(run["start_time"], run["end_time"], now) if run["start_time"] is not None else 0.0
        if index:
            item = failure(runs[index - 1], run, state, steps, progress, checkpoints, now,
                           _recomputed_until(out["failures"], runs[index - 1]), node_events)
            out["failures"].append(item)
            out["restarts_by_cause"][item["cause"]] += 1
    out["restarts"] = len(out["failures"])
    out["jobs"] = runs
    out["active"] = any(r["active"] for r in runs)
    until = runs[-1]["end_time"] if finished and runs[-1]["end_time"] is not None else now
    _totals(runs, out["failures"], until, out)
    seen = set(str(r["job_id_raw"]) for r in runs)
    for entry in state.get("resubmissions") or []:
        if entry.get("after_job") is not None and str(entry["after_job"]) not in seen:
            _unknown(out, "wall_time", "job %s (state.json) is not among the jobs read (older than the history "
                     "window?): the figures cover the jobs read only" % entry["after_job"])
    return out

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Decide, pure: what to do with each training run given its jobs, checkpoint, budgets, hangs and
suspect nodes (:func:`decide`, a frozen :class:`.records.Decision`); which suspect nodes to drain;
the bookkeeping after an action (the state's new entries). Its words for people are :mod:`.report`'s.

Private to the collection (the leading underscore of the package): no API promise outside it.

Nothing here reads or writes a file or runs a command, nor imports what does (``tests/code_limits.py``
checks): the jobs (``_jobs.read_jobs``), the checkpoint status and progress
(:func:`.observe.checkpoint_status`, :func:`.observe.read_progress`), the run spec and its state
(:mod:`.registry`) come in, read by :mod:`.observe`; a decision goes out, to :mod:`.act`.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.clusterops.slurm.plugins.module_utils._node_changes import plan_node_changes
# The drain reason of a suspect node: the node healing's class HOLD_CLASS maps it to ``human``, no
# healing rule resumes it.
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import SUSPECT_PREFIX
from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import node_state
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.records import (
    CheckpointStatus,
    Decision,
    Observation,
    Progress,
    Run,
    run_jobs,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry import STATE_FILE

#: Last-job states after which the run is resubmitted (within its budget).
RESUBMIT_STATES = ("NODE_FAIL", "FAILED", "TIMEOUT", "PREEMPTED", "BOOT_FAIL")
#: Last-job states reported for a human, never resubmitted; the value says why.
HUMAN_STATES = {
    "OUT_OF_MEMORY": "ran out of memory; the same job would fail again",
    "DEADLINE": "missed its deadline (--deadline)",
    "COMPLETED": "ended COMPLETED but the run has no FINISHED marker: the program stopped early "
                 "without saying why",
}

#: Actions of a decision.
NONE = "none"
RESUBMIT = "resubmit"
STOP = "stop"
#: The job is hung: collect evidence, cancel it (then resubmit it, decided anew).
CANCEL_HUNG = "cancel_hung"

#: Job states that count as "failed on its nodes" for suspect nodes (:func:`run_suspects`): the
#: program or a node failed. TIMEOUT, CANCELLED, PREEMPTED, OUT_OF_MEMORY... say nothing about a node.
SUSPECT_STATES = ("FAILED", "NODE_FAIL")
#: ``k``: when the last ``k`` failed jobs of a run share a node, the node is suspect. The one home
#: of this default: training_remediation's ``suspect_after`` and the role remediate_training's
#: defaults and argument spec repeat it (a unit test keeps them equal).
SUSPECT_AFTER = 2


# ---------------------------------------------------------------------------------------------
# The decision (pure)
# ---------------------------------------------------------------------------------------------

def job_brief(job: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """A decision's ``last_job``: the job's fields a report and the state's bookkeeping need."""
    if job is None:
        return None
    return {"job_id": job["job_id"], "job_id_raw": job["job_id_raw"], "state": job["state"],
            "flags": job.get("flags", []), "state_raw": job.get("state_raw"),
            "held": job.get("held", False), "held_by": job.get("held_by"),
            "exit_code": job.get("exit_code"),
            "signal": job.get("signal"), "cancelled_by": job.get("cancelled_by"),
            "requeued": job.get("requeued", False), "reason": job.get("reason"),
            "node_list": job.get("node_list"), "submit_time": job.get("submit_time"),
            "start_time": job.get("start_time"), "end_time": job.get("end_time")}


def hang_cancelled(state: Dict[str, Any], job_id_raw: Any) -> Optional[Dict[str, Any]]:
    """The ``hang_cancels`` entry of job ``job_id_raw``: remediation cancelled it because it hung."""
    for entry in state.get("hang_cancels") or []:
        if str(entry.get("job_id")) == str(job_id_raw):
            return entry
    return None


def hang_check(run: Run, job: Dict[str, Any], progress: Optional[Progress], now: float) -> Optional[Dict[str, Any]]:
    """Whether the RUNNING ``job`` of ``run`` is hung: None, or ``{"idle", "since", "step"}``.

    Hung: the run has a watchdog (``hang_timeout`` > 0), the job is RUNNING and neither its last
    progress (``progress["time"]``, see :func:`read_progress`) nor its start is newer than
    ``hang_timeout`` seconds. Progress older than the job's start (a heartbeat left by the job
    before) does not count: a job gets ``hang_timeout`` from its start to show progress. A job
    with no start time is never hung (nothing to count from).
    """
    timeout = run.get("hang_timeout") or 0
    if timeout <= 0 or job.get("state") != "RUNNING" or job.get("held"):
        return None
    start = job.get("start_time")
    if not start:
        return None
    last = progress.get("time") if progress else None
    since = max(start, last) if last is not None else start
    idle = now - since
    if idle <= timeout:
        return None
    step = progress.get("step") if progress and last is not None and last >= start else None
    return {"idle": int(idle), "since": since, "step": step}


def decide(run: Run,
           jobs: List[Dict[str, Any]],
           ckpt: CheckpointStatus,
           state: Dict[str, Any],
           progress: Optional[Progress] = None,
           now: Optional[float] = None) -> Decision:
    """What to do for one run: an immutable :class:`.records.Decision`.

    ``progress`` (:func:`read_progress`) and ``now`` (Unix seconds) feed the hang watchdog: a
    RUNNING job that is hung (:func:`hang_check`) gets the action ``cancel_hung`` (status
    ``hung``), unless remediation cancelled it already (then it waits for the job to end:
    nothing is cancelled twice). A job that remediation cancelled because it hung and that ended
    CANCELLED is resubmitted like a FAILED one, within the budgets; when it hung at the same
    step as the hangs before the last ``no_progress_limit`` resubmissions, that is no progress.

    Args:
        run: its registry spec (``registry.read_registry``).
        jobs: every job read (``_jobs.read_jobs``); those of other runs are ignored.
        ckpt: :func:`.observe.checkpoint_status` of its checkpoint folder.
        state: its bookkeeping (``registry.read_state``).

    Returns:
        ``name``, ``owner``, ``action`` (``none``, ``resubmit``, ``stop``, ``cancel_hung``), ``status``,
        ``needs_human``, ``reason``, ``last_job`` (:func:`job_brief`), ``step`` and ``checkpoint`` (the
        newest valid one's), ``resubmissions``, ``max_resubmissions``; ``hang`` for a job found hung now,
        ``hang_step`` for one remediation cancelled because it hung. ``status`` is one word: ``disabled``,
        ``finished``, ``active``, ``held``, ``unknown``, ``not_started``, ``stopped``,
        ``cancelled``, ``failed``, ``lost`` (our resubmission is not visible), ``ended``
        (another final state).

    Jobs that are neither running nor ended are never resubmitted and never waited on forever:

    - ``unknown``: a job of the run is in a state this collection does not know (``state_known``
      false, a later Slurm release's word): it may be active; needs a human.
    - ``held``: the run's active job waits for a release: Slurm held it itself (``launch failed
      requeued held`` after a launch or prolog failure, ``job requeued in held state``,
      ``JobHoldMaxRequeue``...) or a user or admin held it. Remediation does not release it (the
      cause, often a node or prolog fault, must be fixed first, and a hold by a person is
      deliberate) and does not submit a copy next to it; needs a human, who releases it
      (``slurm_job state=released`` or ``scontrol release <id>``) or cancels it.
    """
    resubmissions = state.get("resubmissions") or []
    mine = run_jobs(run, jobs)
    last = mine[-1] if mine else None
    out: Dict[str, Any] = {}    # hang, hang_step: what the verdicts found on the way
    verdict = (_verdict_before_jobs(run, mine, ckpt)
               or _verdict_active(run, mine, state, progress, time.time() if now is None else now, out)
               or _verdict_ended(run, last, ckpt, state, resubmissions, out))
    status, reason, action, human = verdict
    return Decision(name=run["name"], owner=run["owner"], action=action, status=status, needs_human=human,
                    reason=reason, last_job=job_brief(last), step=ckpt.get("step"),
                    checkpoint=ckpt.get("checkpoint"), resubmissions=len(resubmissions),
                    max_resubmissions=run["max_resubmissions"], **out)


def unusable(run: Run, jobs: List[Dict[str, Any]], reason: str) -> Decision:
    """The decision for a run that cannot be decided (its folders or state unreadable, or reading or
    deciding raised): nothing is done, a human looks."""
    decision = decide(run, jobs, {"status": "error"}, {"resubmissions": []})  # type: ignore[typeddict-item]
    return dataclasses.replace(decision, action=NONE, needs_human=True, status="ended", reason=reason)


def decide_observed(observation: Observation, jobs: List[Dict[str, Any]]) -> Decision:
    """:func:`decide` over what :mod:`.observe` read of one run, or :func:`unusable` when that could
    not be read."""
    if observation.problem is not None or observation.checkpoint is None or observation.state is None:
        return unusable(observation.run, jobs, observation.problem or "")
    return decide(observation.run, jobs, observation.checkpoint, observation.state, observation.progress,
                  observation.now)


#: What :func:`decide` says: ``(status, reason, action, needs_human)``.
Verdict = Tuple[str, str, str, bool]


def _verdict(status: str, reason: str, action: str = NONE, human: bool = False) -> Verdict:
    return status, reason, action, human


def _verdict_before_jobs(run: Run, mine: List[Dict[str, Any]], ckpt: CheckpointStatus) -> Optional[Verdict]:
    """Disabled, finished, or a job in a state this collection does not know; else None."""
    if not run["enabled"]:
        return _verdict("disabled", "disabled in the registry (enabled: false)")
    if ckpt.get("finished"):
        return _verdict("finished", "finished (FINISHED marker in %s)" % run["checkpoint_dir"])
    unknown = [j for j in mine if not j.get("state_known", True)]
    if unknown:
        return _verdict("unknown", "job %s is in state %s, which this collection does not know (a "
                        "later Slurm release?): it may still be active; not resubmitting" % (
                            unknown[-1]["job_id"], unknown[-1].get("state_raw")), human=True)
    return None


def _verdict_active(run: Run, mine: List[Dict[str, Any]], state: Dict[str, Any],
                    progress: Optional[Progress], now: float, out: Dict[str, Any]) -> Optional[Verdict]:
    """The run's active job: more than one, held, hung (``out["hang"]`` set) or running; None
    when no job of the run is active."""
    active = [j for j in mine if j.get("active")]
    if not active:
        return None
    job = active[-1]
    if len(active) > 1:
        return _verdict("active", "%d jobs of this run are active (%s): more than one needs a "
                        "human" % (len(active), ", ".join(j["job_id"] for j in active)), human=True)
    if job.get("held"):
        who = {"user": "its owner", "admin": "an administrator"}.get(job.get("held_by") or "", "Slurm itself")
        return _verdict("held", "job %s is held by %s (%s): it will not run until released; fix "
                        "the cause, then release it (clusterops.slurm.slurm_job state=released, "
                        "or scontrol release %s) or cancel it" % (
                            job["job_id"], who, job.get("reason") or job.get("state_raw"),
                            job["job_id"]), human=True)
    cancelled = hang_cancelled(state, job["job_id_raw"])
    if cancelled:
        return _verdict("hung", "job %s is %s: remediation cancelled it at %s because it hung; waiting "
                        "for it to end (it is not cancelled again)" % (
                            job["job_id"], job["state"], time.strftime(
                                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(cancelled.get("time") or 0))))
    hung = hang_check(run, job, progress, now)
    if hung:
        out["hang"] = hung
        return _verdict("hung", "job %s is RUNNING but its progress (%s) has not moved for %d s (hang_timeout "
                        "%d s)%s: hung" % (
                            job["job_id"], progress.get("source") if progress else None, hung["idle"], run["hang_timeout"],
                            ", last step %d" % hung["step"] if hung["step"] is not None else ""),
                        action=CANCEL_HUNG)
    why = "job %s is %s" % (job["job_id"], job["state"])
    if job.get("requeued"):
        why += " (Slurm requeued it itself after %s)" % (
            (job.get("history") or [{}])[-1].get("state") or "a failure")
    return _verdict("active", why + ": nothing to do")


def _verdict_ended(run: Run, last: Optional[Dict[str, Any]], ckpt: CheckpointStatus,
                   state: Dict[str, Any], resubmissions: List[Dict[str, Any]], out: Dict[str, Any]) -> Verdict:
    """No job of the run is active: stopped earlier, not started, lost, or ended in a state that
    is resubmitted (:func:`_verdict_budget`) or left for a human (``out["hang_step"]`` set for a
    job remediation cancelled because it hung)."""
    stopped = state.get("stopped")
    if stopped:
        return _verdict("stopped", "remediation stopped this run earlier: %s. Remove %s from the "
                        "run's registry folder to let remediation resubmit it again"
                        % (stopped.get("reason"), STATE_FILE), human=True)
    if last is None:
        if resubmissions:
            return _verdict("lost", "job %s, resubmitted by remediation, is not visible in squeue "
                            "or sacct" % resubmissions[-1].get("job_id"), human=True)
        return _verdict("not_started", "no job of this run found: submit its launcher (%s) first"
                        % run["launcher"])
    if resubmissions and resubmissions[-1].get("after_job") == last["job_id_raw"]:
        return _verdict("lost", "job %s was already resubmitted (as job %s) but that job is not "
                        "visible in squeue or sacct" % (last["job_id"], resubmissions[-1].get("job_id")),
                        human=True)
    state_name = last["state"]
    ended = "job %s ended %s" % (last["job_id"], state_name)
    hang = hang_cancelled(state, last["job_id_raw"]) if state_name == "CANCELLED" else None
    if hang:
        out["hang_step"] = hang.get("step")
        ended = "job %s hung%s and remediation cancelled it" % (
            last["job_id"], " at step %d" % hang["step"] if hang.get("step") is not None else "")
    elif state_name == "CANCELLED":
        uid = last.get("cancelled_by")
        return _verdict("cancelled", "%s%s: a cancelled run is never resubmitted" % (
            ended, " by uid %s" % uid if uid is not None else ""))
    if state_name in HUMAN_STATES:
        return _verdict("ended", "%s: %s" % (ended, HUMAN_STATES[state_name]), human=True)
    if state_name not in RESUBMIT_STATES and not hang:
        return _verdict("ended", "%s, not a state remediation resubmits after" % ended, human=True)
    if ckpt.get("status") in ("invalid", "error"):
        return _verdict("failed", "%s, but %s" % (ended, ckpt.get("detail")), human=True)
    return _verdict_budget(run, ended, ckpt, resubmissions, hang)


def _verdict_budget(run: Run, ended: str, ckpt: CheckpointStatus, resubmissions: List[Dict[str, Any]],
                    hang: Optional[Dict[str, Any]]) -> Verdict:
    """A job that ended in a state remediation resubmits after: resubmit, or stop when the budget
    is used up or the last ``no_progress_limit`` resubmissions made no progress (the same
    checkpoint step, or a hang at the same step)."""
    limit = run["max_resubmissions"]
    if len(resubmissions) >= limit:
        return _verdict("failed", "%s; the budget of %d resubmission(s) is used up" % (ended, limit),
                        action=STOP, human=True)
    window = run["no_progress_limit"]
    step = ckpt.get("step")
    recent = resubmissions[-window:] if window > 0 else []
    if hang and hang.get("step") is not None and window > 0 and len(recent) == window \
            and all(r.get("hang_step") == hang["step"] for r in recent):
        return _verdict("failed", "%s; no progress: it hung at step %d again, as before each of the last %d "
                        "resubmission(s)" % (ended, hang["step"], window), action=STOP, human=True)
    if window > 0 and len(recent) == window and all(r.get("step") == step for r in recent):
        return _verdict("failed", "%s; no progress: the newest valid checkpoint is still %s after "
                        "%d consecutive resubmission(s)" % (
                            ended, "step %d" % step if step is not None else "none", window),
                        action=STOP, human=True)
    start = "resume from step %d" % step if step is not None else "start from scratch (no checkpoint yet)"
    return _verdict("failed", "%s; resubmission %d of %d, %s" % (ended, len(resubmissions) + 1, limit, start),
                    action=RESUBMIT)


# ---------------------------------------------------------------------------------------------
# Suspect nodes (pure)
# ---------------------------------------------------------------------------------------------

def failed_attempts(run: Run, jobs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The run's job runs that ended FAILED or NODE_FAIL (:data:`SUSPECT_STATES`), oldest first:
    ``[{"job_id": str, "state": str, "nodes": [str, ...]}]``.

    A job Slurm requeued by itself counts once per run of it: its ``history`` entries (the
    earlier runs of the same id, ``_jobs.merge_jobs``) come before the job itself. ``nodes`` is
    the expanded allocation (sacct ``NodeList``, a compressed hostlist read by
    ``_hostlist.expand_hostlist``); a job whose node list could not be read has none.
    """
    out: List[Dict[str, Any]] = []
    for job in run_jobs(run, jobs):
        for entry in list(job.get("history") or []) + [job]:
            if entry.get("state") in SUSPECT_STATES:
                out.append({"job_id": str(job["job_id"]), "state": entry["state"],
                            "nodes": list(entry.get("nodes") or [])})
    return out


def run_suspects(run: Run, jobs: List[Dict[str, Any]], suspect_after: int = SUSPECT_AFTER) -> List[Dict[str, Any]]:
    """The nodes the run's last ``k`` failed jobs all ran on: ``[{"node", "jobs": [job id, ...]}]``
    by node name (empty when there is none).

    ``k`` is the run's ``suspect_after`` (``run.json``), or ``suspect_after`` when the run's is
    0. Failed means FAILED or NODE_FAIL (:func:`failed_attempts`); jobs that ended otherwise in
    between (TIMEOUT, CANCELLED, PREEMPTED, COMPLETED...) are passed over, neither counted nor
    breaking the sequence. A run with ``suspect_nodes`` false (opt-out), ``k`` 0, or fewer than
    ``k`` failed jobs has no suspect.

    When the jobs ran on the very same nodes each time and those are more than one, nothing
    tells which of them is bad (or whether the program is): none is suspect, rather than every
    node of the allocation being drained. One node that every failed job of a one-node run ran
    on is suspect.
    """
    k = run.get("suspect_after") or suspect_after
    if not run.get("suspect_nodes", True) or not k or k < 1:
        return []
    attempts = failed_attempts(run, jobs)
    if len(attempts) < k:
        return []
    last = attempts[-k:]
    common = set(last[0]["nodes"])
    for attempt in last[1:]:
        common &= set(attempt["nodes"])
    if len(common) > 1 and all(set(a["nodes"]) == common for a in last):
        return []
    job_ids: List[str] = []
    for attempt in last:
        if attempt["job_id"] not in job_ids:
            job_ids.append(attempt["job_id"])
    return [{"node": name, "jobs": list(job_ids)} for name in sorted(common)]


def suspects_by_run(observations: List[Observation], decisions: List[Decision], jobs: List[Dict[str, Any]],
                    suspect_after: int) -> Dict[str, List[Dict[str, Any]]]:
    """``{run name: run_suspects(...)}`` of the runs failing now (decided ``resubmit`` or ``stop``,
    their state read) that have suspect nodes: what :func:`plan_suspects` plans over."""
    by_run: Dict[str, List[Dict[str, Any]]] = {}
    for observation, decision in zip(observations, decisions):
        if observation.state is None or decision.action not in (RESUBMIT, STOP):
            continue
        found = run_suspects(observation.run, jobs, suspect_after)
        if found:
            by_run[observation.run["name"]] = found
    return by_run


def suspect_reason(runs: List[str], job_ids: List[str]) -> str:
    """``clusterops: suspect: runs A,B failed on it (jobs 12,15)`` (``run A`` for one run)."""
    return "%s%s %s failed on it (job%s %s)" % (
        SUSPECT_PREFIX, "runs" if len(runs) > 1 else "run", ",".join(runs),
        "s" if len(job_ids) > 1 else "", ",".join(job_ids))


def _job_order(job_id: str) -> Tuple[int, str]:
    digits = re.match(r"\d+", job_id)
    return (int(digits.group(0)) if digits else 0, job_id)


def plan_suspects(by_run: Dict[str, List[Dict[str, Any]]], nodes: List[Dict[str, Any]], limit: int) -> Dict[str, Any]:
    """Which suspect nodes to drain now, within ``limit``, grouped into scontrol calls.

    Args:
        by_run: ``{run name: run_suspects(...)}``.
        nodes: every node as read once (``_nodes.read_nodes``).
        limit: most nodes to drain now: what the node blast radius leaves (remediate_nodes'
            ``max_nodes``/``max_percent``, less the nodes in flight and acted on this run).

    Returns:
        ``{"suspects": [{"node", "runs", "jobs", "reason", "action", "state", "current_reason"}],
        "changes": [_node_actions.Change], "exclude": {run name: [node, ...]}, "limit": int}``.
        ``action``: ``drain`` (now), ``already`` (drained, down, failing or rebooting for
        whatever reason: left as it is, its reason kept), ``overflow`` (over ``limit``: not
        drained, reported), ``unknown`` (Slurm has no such node any more). Nodes to drain go
        most runs, then most jobs, then name first; one Change (one ``scontrol update`` on a
        hostlist) per distinct reason. ``exclude`` lists, per run, its suspect nodes Slurm knows
        (``sbatch --exclude`` refuses a name it does not know), drained or not.
    """
    merged: Dict[str, Dict[str, Any]] = {}
    for run_name in sorted(by_run):
        for entry in by_run[run_name]:
            item = merged.setdefault(entry["node"], {"node": entry["node"], "runs": [], "jobs": []})
            if run_name not in item["runs"]:
                item["runs"].append(run_name)
            for job_id in entry["jobs"]:
                if job_id not in item["jobs"]:
                    item["jobs"].append(job_id)
    by_name = dict((n["name"], n) for n in nodes)
    ordered = sorted(merged.values(), key=lambda i: (-len(i["runs"]), -len(i["jobs"]), i["node"]))
    room = max(0, int(limit))
    groups: Dict[str, List[str]] = {}
    for item in ordered:
        item["jobs"].sort(key=_job_order)
        item["reason"] = suspect_reason(item["runs"], item["jobs"])
        node = by_name.get(item["node"])
        if node is None:
            item.update(action="unknown", state=None, current_reason=None)
            continue
        state = node_state(node)
        item.update(state=state.compound(), current_reason=node.get("reason") or "")
        if state.drained or state.down or "FAIL" in state.flags \
                or state.flags & frozenset(("REBOOT_REQUESTED", "REBOOT_ISSUED")):
            item["action"] = "already"
        elif room > 0:
            item["action"] = "drain"
            room -= 1
            groups.setdefault(item["reason"], []).append(item["node"])
        else:
            item["action"] = "overflow"
    changes = []
    for reason in sorted(groups):
        changes += plan_node_changes(nodes, groups[reason], "drain", reason=reason,
                                     reason_policy="replace")["changes"]
    exclude: Dict[str, List[str]] = {}
    for run_name in sorted(by_run):
        known = sorted(set(e["node"] for e in by_run[run_name] if e["node"] in by_name))
        if known:
            exclude[run_name] = known
    suspects = sorted(ordered, key=lambda i: i["node"])
    return {"suspects": suspects, "changes": changes, "exclude": exclude, "limit": max(0, int(limit))}


def record_resubmission(state: Dict[str, Any], decision: Mapping[str, Any], job_id: Any, now: float) -> Dict[str, Any]:
    """The state after resubmitting ``decision``'s run as ``job_id`` (a new dict)."""
    new = dict(state)
    last = decision["last_job"] or {}
    entry = {"time": int(now), "job_id": job_id, "after_job": last.get("job_id_raw"),
             "after_state": last.get("state"), "step": decision["step"]}
    if "hang_step" in decision:
        entry["after_state"] = "HUNG"
        entry["hang_step"] = decision["hang_step"]
    new["resubmissions"] = list(state.get("resubmissions") or []) + [entry]
    return new


def record_hang_cancel(state: Dict[str, Any], decision: Mapping[str, Any], now: float, evidence: Optional[str]) -> Dict[str, Any]:
    """The state after deciding to cancel ``decision``'s hung job (a new dict; written before scancel)."""
    new = dict(state)
    last = decision["last_job"] or {}
    hang = decision.get("hang") or {}
    new["hang_cancels"] = list(state.get("hang_cancels") or []) + [{
        "time": int(now), "job_id": last.get("job_id_raw"), "step": hang.get("step"),
        "idle": hang.get("idle"), "evidence": evidence}]
    return new


def record_stop(state: Dict[str, Any], decision: Mapping[str, Any], now: float) -> Dict[str, Any]:
    """The state after remediation stopped ``decision``'s run (a new dict)."""
    new = dict(state)
    last = decision["last_job"] or {}
    new["stopped"] = {"time": int(now), "after_job": last.get("job_id_raw"), "reason": decision["reason"]}
    return new

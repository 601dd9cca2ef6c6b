# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Act: carry out the decisions of :mod:`.policy` - resubmit a run's launcher as its owner
(``sbatch``), cancel a hung job after saving its stacks (:mod:`.evidence`, ``scancel``), drain the
suspect nodes (one ``scontrol`` call per reason) - and write each run's ``state.json``. What was done
goes into the run's :class:`.records.Outcome`; nothing here decides, and in check mode nothing runs
but the commands are said.

Private to the collection (the leading underscore of the package): no API promise outside it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import set_aside_newer_invalid
from ansible_collections.clusterops.slurm.plugins.module_utils._job_actions import SubmitError, submit
from ansible_collections.clusterops.slurm.plugins.module_utils._node_actions import apply_node_changes
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import SUSPECT_PREFIX
from ansible_collections.clusterops.slurm.plugins.module_utils._privsep import PrivsepError
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SlurmCommandError
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import job_action, resubmission
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.evidence import (
    collect_evidence,
    evidence_commands,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.observe import job_ended, owner_call
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.policy import (
    CANCEL_HUNG,
    RESUBMIT,
    STOP,
    record_hang_cancel,
    record_resubmission,
    record_stop,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.records import (
    Decision,
    Outcome,
    Run,
    run_jobs,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry import write_state
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.report import brief


@dataclass(frozen=True)
class Actor:
    """Who acts: the task's ``module`` (its parameters, check mode, warnings), the command layer
    ``cli`` (``_slurm_cli.SlurmCLI``) and ``me``, the account the task runs as (a run's launcher is
    submitted as its owner: ``cli.as_user`` when that is not ``me``)."""

    module: Any
    cli: Any
    me: str


def act(actor: Actor, run: Run, decision: Decision, state: Optional[Dict[str, Any]],
        jobs: List[Dict[str, Any]], outcome: Outcome) -> None:
    """Carry out ``decision`` (nothing in check mode but the commands) into ``outcome``; ``state``
    None (its ``state.json`` unusable): nothing is done."""
    if state is not None and decision.action == CANCEL_HUNG:
        outcome.evidence_command = evidence_commands(actor.cli, run, decision)
        cancel_hung(actor, run, decision, state, outcome)
    elif state is not None and decision.action == RESUBMIT:
        resubmit(actor, run, decision, jobs, state, outcome)
    elif state is not None and decision.action == STOP and not actor.module.check_mode:
        write_state(run["folder"], record_stop(state, decision, time.time()))
        outcome.changed = True


def act_then(actor: Actor, run: Run, decision: Decision, state: Dict[str, Any],
             jobs: List[Dict[str, Any]], outcome: Outcome) -> None:
    """Carry out the decision taken once a cancelled hung job ended: resubmit, or record the stop."""
    if decision.action == RESUBMIT:
        resubmit(actor, run, decision, jobs, state, outcome)
    elif decision.action == STOP:
        write_state(run["folder"], record_stop(state, decision, time.time()))


def resubmit(actor: Actor, run: Run, decision: Decision, jobs: List[Dict[str, Any]], state: Dict[str, Any],
             outcome: Outcome) -> None:
    """Submit ``run``'s launcher as its owner (``sbatch``, excluding ``outcome.suspects`` when it has
    an ``exclude``) and record it in the run's state file; a refused or failed submission is the
    outcome's ``error``."""
    module, cli, me = actor.module, actor.cli, actor.me
    params = module.params
    owner = run["owner"]
    runner = cli if owner == me else cli.as_user(owner)
    sbatch = resubmission(run["launcher"], outcome.suspects if outcome.exclude else [])
    outcome.command = runner.prefix + cli.command(*sbatch)
    if module.check_mode:
        return
    if owner != me and os.geteuid() != 0:
        outcome.fail("cannot submit as %s: this task runs as %s; run it as root (become: true)" % (owner, me))
        return
    set_aside(module, run)
    identity = {"name": run["name"], "user": owner, "key": run["name"]}
    known = [j["job_id_raw"] for j in run_jobs(run, jobs)]
    try:
        done = submit(runner, sbatch, identity, known,
                      retries=max(params["submit_retries"], 0), delay=max(params["retry_delay"], 0))
    except SubmitError as exc:
        outcome.fail(exc.msg + (" (the job may have been submitted: check squeue before submitting it by hand)"
                                if exc.maybe_accepted else ""))
        return
    outcome.job_id = done["job_id"]
    outcome.changed = True
    write_state(run["folder"], record_resubmission(state, decision, done["job_id"], time.time()))


def set_aside(module: Any, run: Run) -> None:
    """Before the resubmission resumes from the newest valid checkpoint: every newer invalid one renamed aside as
    the run's owner (``_checkpoint.set_aside_newer_invalid``: ``tmp-0-invalid-<name>``, never deleted), so that a
    trainer that numbers its saves does not collide with it; each rename, or why none could be, a warning."""
    try:
        moved = owner_call(run, set_aside_newer_invalid, run["checkpoint_dir"], run["checkpoint_validate"],
                           run.get("checkpoint_name_template"))
    except PrivsepError as exc:
        module.warn("%s: newer invalid checkpoints not set aside before the resubmission: %s" % (run["name"], exc))
        return
    for old, new in moved:
        module.warn("%s: newer invalid checkpoint %s renamed %s before the resubmission" % (run["name"], old, new))


def cancel_hung(actor: Actor, run: Run, decision: Decision, state: Dict[str, Any], outcome: Outcome) -> None:
    """Save the hung job's stacks, record the cancel in the state file, ``scancel`` it and wait
    ``hang_cancel_wait`` seconds at most for it to end (``outcome.ended``; ``outcome.state`` the
    state written). What is decided once it ended is the runner's next step."""
    module, cli = actor.module, actor.cli
    last = decision.last_job or {}
    cancel = job_action("absent", [str(last["job_id_raw"])])
    outcome.command = cli.command(*cancel)
    if module.check_mode:
        return
    now = time.time()
    outcome.evidence = collect_evidence(module, cli, actor.me, run, decision, outcome.evidence_command or [], now)
    outcome.state = record_hang_cancel(state, decision, now, outcome.evidence)
    write_state(run["folder"], outcome.state)
    outcome.changed = True
    try:
        cli.run(*cancel, what="cancel the hung job %s" % last["job_id"])
    except SlurmCommandError as exc:
        outcome.fail(str(exc))
        return
    deadline = time.time() + max(module.params["hang_cancel_wait"], 0)
    while not job_ended(cli, last["job_id_raw"]):
        if time.time() >= deadline:
            return
        time.sleep(2)
    outcome.ended = True


def after(check_mode: bool, decision: Decision, outcome: Outcome) -> str:
    """The diff's ``after`` of one run: what was done (or would be), else its status in a few words."""
    action = decision.action
    if action == RESUBMIT:
        action = "resubmitted as job %s" % outcome.job_id if outcome.job_id else (
            "would resubmit" if check_mode else "resubmission failed")
    elif action == CANCEL_HUNG:
        action = "would collect stacks and cancel the hung job" if check_mode else (
            "cancelled the hung job; %s" % ((outcome.then or {}).get("action") or "not ended yet"))
    if outcome.exclude and decision.action == RESUBMIT:
        action += " excluding %s" % outcome.exclude
    return action if action != "none" else brief(decision)


def drain_suspects(module: Any, cli: Any, plan: Dict[str, Any]) -> Dict[str, Any]:
    """Drain the suspect nodes ``plan`` (``policy.plan_suspects``) says, one scontrol call per reason
    (``_node_actions.apply_node_changes``, none in check mode; a node a refused call did not reach is
    ``drain_failed``). Returns the result keys ``suspects``, ``suspect_commands``, ``suspect_report``
    and, when a node changed, ``changed_nodes``."""
    applied = apply_node_changes(cli, {"changes": plan["changes"], "refused": {}, "unchanged": []}, module.check_mode)
    out: Dict[str, Any] = {"suspects": [], "suspect_commands": [entry["command"] for entry in applied["changes"]],
                           "suspect_report": []}
    failed = applied["failed_nodes"]
    words = {"drain": "would drain it" if module.check_mode else "drained",
             "already": "already out of service, left as it is",
             "overflow": "over the suspect drain limit of %d node(s) now (suspect_drain_limit, within what the "
                         "node blast radius left), not drained" % plan["limit"],
             "unknown": "not a node of this cluster, neither drained nor excluded"}
    for item in plan["suspects"]:
        if item["node"] in failed:
            item.update(action="drain_failed", error=failed[item["node"]])
        what = words.get(item["action"]) or "drain FAILED: %s" % item.get("error")
        if item["action"] != "unknown":
            what += " (was %s%s)%s" % (item["state"], ", reason %r" % item["current_reason"] if item["current_reason"]
                                       else "", ", excluded" if item["action"] != "drain" else "")
        out["suspect_report"].append("suspect node %s: %s -> %s - next: test the node (run a job on it alone, or "
                                     "its health check), repair, then scontrol update NodeName=%s State=RESUME "
                                     "(docs/training-remediation.md#suspect-nodes) [needs a human]" % (
                                         item["node"], item["reason"][len(SUSPECT_PREFIX):], what, item["node"]))
    out["suspects"] = plan["suspects"]
    if applied["changed_nodes"] and not module.check_mode:
        out["changed_nodes"] = True
    return out

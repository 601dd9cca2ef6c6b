# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The training remediation's report, pure: a run's entry of the module's ``runs`` in a few words
(the diff), one line for people, what a person does next, and the result's lists
(:func:`summarise`: resubmitted, hung, needs_human, report, changed).

Private to the collection (the leading underscore of the package): no API promise outside it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.policy import (
    CANCEL_HUNG,
    RESUBMIT,
    STOP,
)


def brief(decision: Mapping[str, Any]) -> str:
    """The run's status and last job in a few words (the diff's ``before``): ``failed (job 41 NODE_FAIL)``."""
    last = decision["last_job"]
    return "%s%s" % (decision["status"], " (job %s %s)" % (last["job_id"], last["state"]) if last else "")


def report_line(decision: Mapping[str, Any]) -> str:
    """One line for the summary: name, status, newest valid step, action and why."""
    action = decision["action"]
    if action == RESUBMIT:
        action = "resubmit (job %s)" % decision["job_id"] if decision["job_id"] else (
            "resubmit (check mode)" if decision["error"] is None else "resubmit FAILED")
        if decision.get("exclude"):
            action += " excluding %s" % decision["exclude"]
    then = decision.get("then")
    if action == CANCEL_HUNG:
        action = "cancel_hung (evidence %s)" % decision.get("evidence") if decision.get("evidence") else (
            "cancel_hung (check mode)" if decision["error"] is None else "cancel_hung FAILED")
        if then and then["action"] == RESUBMIT:
            action += ", resubmit (job %s)" % then["job_id"] if then["job_id"] else ", resubmit FAILED"
        elif then:
            action += ", %s" % then["action"]
    line = "%s: %s, newest valid step %s -> %s: %s" % (
        decision["name"], decision["status"],
        decision["step"] if decision["step"] is not None else "none", action, decision["reason"])
    if then:
        line += "; then: %s" % then["reason"]
        if then.get("error"):
            line += " [error: %s]" % then["error"]
    if decision["error"]:
        line += " [error: %s]" % decision["error"]
    if decision["needs_human"]:
        line += " [needs a human]"
    return line


#: Where the runbook of a run that needs a human is (docs/training-remediation.md, its section).
RUNBOOK = "docs/training-remediation.md#runbook-needs-a-human"
_RESET = "then remove state.json from the run's registry folder (the next run resubmits it)"
#: What a person does next, by the decision's status (and, for ``ended``, the job's state).
_NEXT = {
    "registry": "fix the run's run.json in the registry folder, or remove the run's folder",
    "error": "fix what the error says; the next run tries again",
    "unknown": "decide by hand (squeue -j <job>); report the state word so that the collection learns it",
    "active": "cancel the extra job(s) (squeue -n <run> lists them)",
    "held": "release the job once its cause is fixed (scontrol release <job>), or cancel it",
    "stopped": "fix why it was stopped, " + _RESET,
    "lost": "look the job up (sacct -j <job>); the next run reports the run once the job shows up",
    "ended OUT_OF_MEMORY": "raise the job's memory request or lower the batch size, then submit the launcher",
    "ended COMPLETED": "the program must write the FINISHED marker at its end; submit it again if it was not done",
    "ended": "decide whether to submit the launcher again",
    "checkpoint": "clusterops_checkpoint list <checkpoint_dir> --validate sha256 says why each is invalid: "
                  "restore or move the broken ones aside; never start from scratch by accident",
    "stop": "read the per-node logs (<log_dir>/<run>-<job>-<node>.out) for the error each attempt ended on; fix it, "
            + _RESET,
}


def next_step(decision: Optional[Mapping[str, Any]]) -> str:
    """What a person does next about a run that needs a human: ``decision`` as :func:`decide` gives it
    (after acting: with its ``error``), or None for an unusable registry entry; one line that ends
    with the runbook's section (:data:`RUNBOOK`)."""
    key: Any
    if decision is None:
        key = "registry"
    elif decision.get("error"):
        key = "error"
    elif decision.get("status") == "ended":
        state = (decision.get("last_job") or {}).get("state")
        key = "ended %s" % state if "ended %s" % state in _NEXT else "ended"
    elif decision.get("status") == "failed":
        key = "stop" if decision.get("action") == STOP else "checkpoint"
    else:
        key = decision.get("status")
    return "next: %s (%s)" % (_NEXT.get(key, _NEXT["error"]), RUNBOOK)


def needs_human(decisions: List[Mapping[str, Any]], errors: List[Dict[str, str]]) -> List[Dict[str, str]]:
    """What a person has to look at, one item per run: ``[{"run": name, "why": str, "next": str}]``.

    ``errors`` (unusable registry entries, ``{"name", "error"}``) first, then every decision
    whose ``needs_human`` is set, in their order. ``why`` is the decision's ``reason``, then the
    decision after a cancelled hung job (``then``) when that one needs a human, then a failed
    action's ``error``; ``next`` what a person does about it (:func:`next_step`). Suspect nodes
    are not runs: they are the result's ``suspects``.
    """
    items = [{"run": e["name"], "why": "registry entry unusable: %s" % e["error"], "next": next_step(None)}
             for e in errors]
    for decision in decisions:
        if not decision["needs_human"]:
            continue
        why = decision["reason"]
        then = decision.get("then")
        if then and then.get("needs_human"):
            why += "; then: %s" % then["reason"]
            if then.get("error"):
                why += " (error: %s)" % then["error"]
        if decision.get("error"):
            why += " (error: %s)" % decision["error"]
        items.append({"run": decision["name"], "why": why,
                      "next": next_step(then if then and then.get("needs_human") else decision)})
    return items


def summarise(result: Dict[str, Any], changed: List[bool], check_mode: bool) -> None:
    """The result's lists from its ``runs`` (the entries built once), ``errors`` and suspect nodes:
    ``resubmitted`` (a run resubmitted, or that would be in check mode, or after its hung job was
    cancelled), ``hung``, ``needs_human``, ``report`` (one line per run, then the unusable registry
    entries and the suspect nodes) and ``changed`` (``changed``: each run's outcome; a node drained; in
    check mode, an action that would change something)."""
    for entry in result["runs"]:
        if entry["action"] == RESUBMIT and (entry["job_id"] or check_mode):
            result["resubmitted"].append(entry["name"])
        if (entry.get("then") or {}).get("job_id"):
            result["resubmitted"].append(entry["name"])
        if entry["action"] == CANCEL_HUNG and (check_mode or not entry["error"]):
            result["hung"].append(entry["name"])
    result["needs_human"] = needs_human(result["runs"], result["errors"])
    result["report"] = [report_line(d) for d in result["runs"]] + [
        "%s: registry entry unusable -> none: %s [needs a human]" % (e["name"], e["error"])
        for e in result["errors"]] + result["suspect_report"]
    changed_nodes = result.pop("changed_nodes", False) or (check_mode and bool(result["suspect_commands"]))
    result["changed"] = any(changed) or changed_nodes or (
        check_mode and any(d["action"] in (RESUBMIT, STOP, CANCEL_HUNG) for d in result["runs"]))

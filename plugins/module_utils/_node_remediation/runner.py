# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The task of ``slurm_node_remediation``: read every node once (and the events of the nodes a
class heals), plan (:func:`.policy.plan_from_options`), then act through Slurm from the state it
read: one reboot for every node to reboot, one resume for every node to resume, one drain per
distinct flapping reason. Run by ``_slurm_cli.run_module`` (one failure path with every module).
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.clusterops.slurm.plugins.module_utils import _causes as causes
from ansible_collections.clusterops.slurm.plugins.module_utils._causes import refused_cause
from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._node_actions import (
    apply_node_changes,
    plan_node_changes,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_events import read_node_events
from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import read_nodes
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.journal import (
    check_journal_access,
    journal_lock,
    read_journal_file,
    record_heals,
    record_trip,
    unseen_heals,
    write_journal,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.policy import (
    event_nodes,
    plan_from_options,
    reboot_outcomes,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import PolicySettings
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import effective_user
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import admin_level, configuration
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure
from ansible_collections.clusterops.slurm.plugins.module_utils._triggers import SLURM_USER


def heal_since(params: Dict[str, Any], now: float) -> int:
    """Unix seconds from which heals count: ``heal_window`` before ``now``, or ``heal_since``."""
    return max(int(now) - params["heal_window"], params["heal_since"])


def plan(module, cli, now: float, journal: Optional[List[Dict[str, Any]]] = None) -> Tuple[List[Dict[str, Any]], Dict[str, Any], List[Dict[str, Any]]]:
    """Read the nodes, then, with a healing budget, the events of ``heal_window`` before ``now`` of
    the nodes a class heals (:func:`.policy.event_nodes`), and plan with the module's options (the
    policy reads nothing); the heals of ``journal`` (the heal journal's) that those events do not
    show yet count too (:func:`.journal.unseen_heals`).

    Returns:
        ``(nodes, plan, events)``: every node as ``slurm_node_info`` gives it, the plan, and the
        node events read from accounting.

    Raises:
        TaskFailure: ``heal_window`` below 1. Whatever reading Slurm raises (a read that may be
            partial fails before anything acts).
    """
    params = module.params
    if params["heal_window"] < 1:
        raise TaskFailure("heal_window must be >= 1, not %d" % params["heal_window"])
    settings = PolicySettings.of(params)
    # Every setting is checked before Slurm is read: the policy over no nodes raises what a wrong one
    # (a limit, a class's regex or action, the scope or its library) would raise later, so a wrong
    # setting is never reported as Slurm's failure.
    plan_from_options([], settings, now=now)
    nodes, dummy = read_nodes(cli)
    events = None
    read: List[Dict[str, Any]] = []
    if params["heal_budget"] > 0:
        # Heals before heal_since never count: the events before it are not read, nor those of
        # nodes no class heals (the accounting of a cluster whose admins drain thousands of nodes
        # holds as many events).
        names = event_nodes(nodes, settings)
        events = []
        if names:
            start = heal_since(params, now)
            read = read_node_events(cli, start, compress_hostlist(names))
            wanted = set(names)
            events = read + [e for e in unseen_heals(journal or [], read, start, params["reboot_reason"])
                             if e["node"] in wanted]

    def deprecate(message: str) -> None:
        module.deprecate(message, version="2.0.0", collection_name="clusterops.slurm")
    return nodes, plan_from_options(nodes, settings, events=events, now=now, on_allowlist=deprecate), read


def act(cli, nodes: List[Dict[str, Any]], planned: Dict[str, Any], reboot_reason: str,
        check_mode: bool) -> Dict[str, Any]:
    """Carry out ``planned`` from the state ``nodes`` read (the three kinds of change touch
    disjoint nodes), each kind as one batched ``scontrol`` call (``_node_actions``).

    Returns:
        ``{done: {reboot, resume, drain: [names]}, changes, failed_nodes: {name: Slurm's
        words}, errors: ["<action> <hostlist>: <words>"], before, after}``; a change Slurm
        refuses is in ``failed_nodes`` and ``errors``, and the other changes still happen.
    """
    steps: List[Tuple[str, List[str], Dict[str, Any]]] = [
        ("reboot", planned["reboot"], dict(reason=reboot_reason, asap=True, nextstate="resume")),
        ("resume", planned["resume"], {})]
    steps += [("drain", group["nodes"], dict(reason=group["reason"], reason_policy="replace"))
              for group in planned["flapping_groups"]]
    done: Dict[str, List[str]] = {"reboot": [], "resume": [], "drain": []}
    outcome: Dict[str, Any] = {"done": done, "changes": [], "failed_nodes": {}, "errors": [],
                               "before": {}, "after": {}}
    for action, names, options in steps:
        if not names:
            continue
        node_plan = plan_node_changes(nodes, names, action, **options)
        applied = apply_node_changes(cli, node_plan, check_mode)
        outcome["changes"] += applied["changes"]
        outcome["failed_nodes"].update(applied["failed_nodes"])
        done[action] += applied["changed_nodes"]
        outcome["errors"] += ["%s %s: %s" % (c["action"], c["hostlist"], c["error"])
                              for c in applied["changes"] if "error" in c]
        outcome["errors"] += ["%s %s: %s" % (action, name, why) for name, why in sorted(node_plan["refused"].items())]
        outcome["before"].update(node_plan["before"])
        outcome["after"].update(node_plan["after"])
    return outcome


def node_change_rights(cli) -> Optional[str]:
    """Why the account this task runs as may not change nodes (``scontrol update``/``reboot``), or None:
    root and SlurmUser may, and a user whose accounting AdminLevel is Operator or Administrator. What check
    mode asks, so that a green ``--check`` is not followed by a run that Slurm refuses.

    Raises:
        SlurmCommandError: scontrol show config failed (the controller did not answer).
    """
    if os.geteuid() == 0:
        return None
    user = effective_user()
    slurm_user = SLURM_USER.search(cli.run(*configuration(), what="read SlurmUser")[1])
    if slurm_user and slurm_user.group("name") == user:
        return None
    rc, out, err = cli.run(*admin_level(user), check=False, what="read %s's AdminLevel" % user)
    level = out.strip().splitlines()[0].strip() if rc == 0 and out.strip() else ""
    if level in ("Operator", "Administrator"):
        return None
    return ("%s is neither root, SlurmUser (%s) nor a Slurm operator (AdminLevel %s): scontrol would refuse the "
            "node changes (run as root, or sacctmgr modify user %s set AdminLevel=Operator)"
            % (user, slurm_user.group("name") if slurm_user else "unknown",
               (level or "none") if rc == 0 else "unread: %s" % (err.strip() or "rc %d" % rc), user))


def remediate(module, cli) -> Dict[str, Any]:
    """The task of ``slurm_node_remediation``, for ``_slurm_cli.run_module``: ``module`` holds its
    options (the module's DOCUMENTATION); returns the module's result (its RETURN, less
    ``commands``, which ``run_module`` adds)."""
    params = module.params
    path = params.get("journal")
    # check mode changes nothing, so it neither waits for nor blocks a run that acts; it checks that the
    # real run could take the lock and write the journal
    if path and module.check_mode:
        check_journal_access(path)
    lock = journal_lock(path, params["lock_timeout"]) if path and not module.check_mode else None
    try:
        recorded = read_journal_file(path) if path else {"heals": [], "trips": [], "trips_since": None, "rebooting": []}
        now = time.time()
        nodes, planned, events = plan(module, cli, now, recorded["heals"])
        returned, waiting = reboot_outcomes(recorded["rebooting"], nodes, params["reboot_reason"], heal_since(params, now))
        if module.check_mode and (planned["reboot"] or planned["resume"] or planned["flapping_groups"]):
            refused = node_change_rights(cli)
            if refused:
                raise TaskFailure("check mode: the real run would fail: %s" % refused, failed_cause=causes.PERMISSION)
        outcome = act(cli, nodes, planned, params["reboot_reason"], module.check_mode)
        # the reboots requested now are waited for too (check mode requested none)
        waited = set(entry["node"] for entry in waiting)
        waiting += [{"node": name, "time": int(time.time())} for name in outcome["done"]["reboot"]
                    if name not in waited and not module.check_mode]
        if lock is not None:
            reasons = dict((node["name"], node.get("reason") or "") for node in nodes)
            healed = outcome["done"] if params["heal_budget"] > 0 else {}   # no budget: nothing to count
            write_journal(path, record_heals(recorded["heals"], events, healed, reasons, int(time.time()),
                                             heal_since(params, now), params["reboot_reason"]),
                          trips=record_trip(recorded["trips"], planned["circuit"], int(now)),
                          trips_since=int(now) if recorded["trips_since"] is None else recorded["trips_since"],
                          rebooting=waiting)
    finally:
        if lock is not None:
            lock.release()
    done = outcome["done"]
    result = dict(
        changed=bool(done["reboot"] or done["resume"] or done["drain"]),
        plan=planned, rebooted=done["reboot"], resumed=done["resume"], drained=done["drain"],
        returned=returned, rebooting=[entry["node"] for entry in waiting],
        failed_nodes=outcome["failed_nodes"], errors=outcome["errors"], changes=outcome["changes"],
        errors_cause=refused_cause(outcome["errors"]) if outcome["errors"] else None,
    )
    if module._diff:
        result["diff"] = {"before": outcome["before"], "after": outcome["after"]}
    return result

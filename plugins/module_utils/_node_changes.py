# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Planning node changes, pure: which nodes need which scontrol call, batched by hostlist.

Private to the collection (the leading underscore): no API promise outside it.

:func:`plan_node_changes` takes the nodes as read once and returns the changes, one per distinct
``scontrol`` argument list, so that N nodes needing the same change cost one call, never N; it runs
nothing and imports nothing that does (a policy may use it). ``_node_actions.apply_node_changes``
runs them (``slurm_node``, ``slurm_node_remediation``, the suspect drains of ``training_remediation``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import node_state
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import Command, node_change


#: Desired states of the slurm_node module, named after scontrol's own words.
NODE_ACTIONS = ("drain", "resume", "down", "reboot", "cancel_reboot")


class Change(object):
    """One scontrol call for a group of nodes.

    Attributes:
        action: ``drain``, ``down``, ``resume``, ``reason``, ``reboot`` or ``cancel_reboot``.
        nodes: node names, in the order they were asked for.
        reason: the reason sent, or None.
    """

    __slots__ = ("action", "nodes", "reason", "asap", "nextstate")

    def __init__(self, action: str, reason: Optional[str] = None, asap: bool = False, nextstate: Optional[str] = None) -> None:
        self.action = action
        self.nodes: List[str] = []
        self.reason = reason
        self.asap = asap
        self.nextstate = nextstate

    @property
    def hostlist(self) -> str:
        return compress_hostlist(self.nodes)

    def command(self) -> Command:
        """The scontrol call (``_slurm_commands.node_change``)."""
        return node_change(self.action, self.hostlist, self.reason, self.asap, self.nextstate)

    def to_dict(self) -> Dict[str, Any]:
        return {"action": self.action, "nodes": list(self.nodes), "hostlist": self.hostlist,
                "reason": self.reason}


def _view(node: Dict[str, Any]) -> Dict[str, str]:
    return {"state": node_state(node).compound(), "reason": node.get("reason") or ""}


def _predict(node: Dict[str, Any], change: Change) -> Dict[str, str]:
    """What the node should look like once Slurm has applied ``change`` (for diff)."""
    state = node_state(node)
    base = state.base or "IDLE"
    flags = set(state.flags)
    reason = node.get("reason") or ""
    if change.action == "drain":
        flags.add("DRAIN")
        reason = change.reason
    elif change.action == "down":
        base = "DOWN"
        reason = change.reason
    elif change.action == "reason":
        reason = change.reason
    elif change.action == "resume":
        flags.difference_update(("DRAIN", "FAIL"))
        if base == "DOWN":
            base = "IDLE"
        reason = ""
    elif change.action == "reboot":
        flags.add("REBOOT_REQUESTED")
        if change.asap:
            flags.add("DRAIN")
        if change.reason:
            reason = change.reason
    elif change.action == "cancel_reboot":
        flags.discard("REBOOT_REQUESTED")
    return {"state": "+".join([base] + sorted(flags)), "reason": reason}


def plan_node_changes(nodes: List[Dict[str, Any]], names: List[str], action: str, reason: Optional[str] = None, reason_policy: str = "keep", asap: bool = True,
                      nextstate: str = "resume") -> Dict[str, Any]:
    """Decide which of ``names`` need ``action`` and group them into scontrol calls.

    Args:
        nodes: every node as read by ``_nodes.read_nodes`` (list of node dicts).
        names: the nodes asked for, expanded (duplicates are ignored).
        action: one of :data:`NODE_ACTIONS`.
        reason: reason to set (required by ``drain`` and ``down``, optional for ``reboot``).
        reason_policy: ``keep`` leaves a reason already on a node as it is (a node being
            drained that already has one keeps it); ``replace`` sets ``reason`` on every node
            (a drained node is drained again with it, so that Slurm's accounting records it).
        asap: ``reboot`` only: ``scontrol reboot ASAP`` (drain first, reboot once idle).
        nextstate: ``reboot`` only: ``resume`` or ``down`` after the reboot.

    Returns:
        ``{"changes": [Change, ...], "unchanged": [name, ...], "unknown": [name, ...],
        "refused": {name: why}, "before": {name: {state, reason}}, "after": {...}}``;
        ``before``/``after`` hold only the nodes that change.

    Raises:
        ValueError: unknown action or reason_policy, or a missing reason.
    """
    if action not in NODE_ACTIONS:
        raise ValueError("unknown node action %r (one of %s)" % (action, ", ".join(NODE_ACTIONS)))
    if reason_policy not in ("keep", "replace"):
        raise ValueError("reason_policy must be keep or replace, not %r" % reason_policy)
    if action in ("drain", "down") and not reason:
        raise ValueError("state=%s needs a reason" % action)
    by_name = dict((n["name"], n) for n in nodes)
    groups: Dict[Tuple[str, Optional[str]], Change] = {}
    order: List[Change] = []
    result: Dict[str, Any] = {"changes": order, "unchanged": [], "unknown": [], "refused": {},
                              "before": {}, "after": {}}
    seen = set()

    def add(name, change_action, change_reason):
        key = (change_action, change_reason)
        if key not in groups:
            groups[key] = Change(change_action, change_reason, asap=asap, nextstate=nextstate)
            order.append(groups[key])
        groups[key].nodes.append(name)
        node = by_name[name]
        result["before"][name] = _view(node)
        result["after"][name] = _predict(node, groups[key])

    for name in names:
        if name in seen:
            continue
        seen.add(name)
        node = by_name.get(name)
        if node is None:
            result["unknown"].append(name)
            continue
        outcome, detail, change_reason = _node_change(node, action, reason, reason_policy)
        if outcome == "change":
            add(name, detail, change_reason)
        elif outcome == "refused":
            result["refused"][name] = detail
        else:
            result["unchanged"].append(name)
    return result


def _node_change(node: Dict[str, Any], action: str, reason: Optional[str],
                 reason_policy: str) -> Tuple[str, Optional[str], Optional[str]]:
    """What ``action`` (of :func:`plan_node_changes`) means for one node as it is now:
    ``("change", scontrol action, reason)``, ``("unchanged", None, None)`` or ``("refused", why, None)``."""
    state = node_state(node)
    current_reason = node.get("reason") or ""
    if action in ("drain", "down"):
        already = state.drained if action == "drain" else state.down
        if not already:
            return "change", action, current_reason if reason_policy == "keep" and current_reason else reason
        if reason_policy == "replace" and current_reason != reason:
            # A drained node is drained again with the new reason, not only given it:
            # slurmctld records a new node event in the accounting for a drain, never for a
            # reason alone, and the healing budget reads when a hold began and ended there.
            return "change", "drain" if action == "drain" else "reason", reason
    elif action == "resume":
        if state.drained or state.down or "FAIL" in state.flags:
            return "change", "resume", None
    elif action == "reboot":
        if not state.flags & frozenset(("REBOOT_REQUESTED", "REBOOT_ISSUED")):
            return "change", "reboot", reason
    elif action == "cancel_reboot":
        if "REBOOT_REQUESTED" in state.flags:
            return "change", "cancel_reboot", None
        if "REBOOT_ISSUED" in state.flags:
            return "refused", ("the reboot was already issued to the node; "
                               "Slurm can only cancel a reboot still pending"), None
    return "unchanged", None, None


def reached(node: Optional[Dict[str, Any]], change: Change) -> bool:
    """True when a node read after ``change`` shows the change took effect."""
    if node is None:
        return False
    state = node_state(node)
    if change.action == "drain":
        return state.drained
    if change.action == "down":
        return state.down
    if change.action == "reason":
        return (node.get("reason") or "") == change.reason
    if change.action == "resume":
        return not (state.drained or state.down or "FAIL" in state.flags)
    if change.action == "reboot":
        return bool(state.flags & frozenset(("REBOOT_REQUESTED", "REBOOT_ISSUED"))) \
            or not (state.drained or state.down)
    if change.action == "cancel_reboot":
        return "REBOOT_REQUESTED" not in state.flags
    return False

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The healing budget: how often each node was healed, read from Slurm's node events, and the
reason of a node whose budget is spent (flapping)."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence

from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import FLAPPING_PREFIX, reason_classifier
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.report import duration
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import DEFAULT_REBOOT_REASON


#: An event of a node that starts within this many seconds of the end of the one before follows it
#: directly: the node did not return to service in between. Slurm closes an event and opens the
#: next one in the same second when a reason or the state changes (recorded on 22.05, 24.11 and
#: 26.05: always 0 s), while a node resumed and drained again is at least a second apart in
#: practice (and then it did come back, if only briefly).
EVENT_JOIN_SECONDS = 0


def count_heals(events: List[Dict[str, Any]],
                classes: Sequence[Dict[str, Any]],
                since: int,
                reboot_reason: str = DEFAULT_REBOOT_REASON) -> Dict[str, Dict[str, Any]]:
    """Count, per node, how often it was healed (rebooted by remediation, or returned to service
    from a failure that a class heals).

    Two kinds of heal, both read from Slurm's accounting:

    * a reboot by remediation: an event whose reason is ``reboot_reason`` (Slurm extends it with
      " : reboot issued"), started at or after ``since``, whether or not the node came back;
    * a return to service: a closed event (``end`` at or after ``since``) whose reason belongs to a
      ``reboot`` or ``resume`` class and after which no event of the node starts in the same second
      (resumed by this collection, an admin or Slurm itself).

    Not heals: a failure whose reason was replaced by another one in the same second (a crash's
    "Not responding" by "Node unexpectedly rebooted" at power-on), a failure recorded again when
    only the state changed, and a failure found again while the node boots from remediation's
    reboot (the event right after the reboot's): that reboot was counted already.

    A node's count starts afresh when an event of a ``human`` class (e.g. ``clusterops:
    flapping``) closes: a person repaired the node and returned it to service, so heals up to
    that moment no longer tell anything about the node as it is now.

    Args:
        events: ``slurm_node_event_info`` ``events``: ``{node, start, end, state, reason}``
            (Unix seconds, ``end`` None while the event is open), any order.
        classes: compiled classes (``compile_classes``).
        since: Unix seconds; older heals do not count.
        reboot_reason: the reason remediation gives the nodes it reboots.

    Returns:
        ``{node: {"heals": int, "last": the failure healed last}}`` for nodes healed at least once.
    """
    result: Dict[str, Dict[str, Any]] = {}
    for heal in _heals(events, classes, since, reboot_reason, restart_after_human=True):
        seen = result.setdefault(heal["node"], {"heals": 0, "last": "", "last_time": -1})
        seen["heals"] += 1
        if heal["time"] >= seen["last_time"]:
            seen["last"], seen["last_time"] = heal["failure"], heal["time"]
    for seen in result.values():
        del seen["last_time"]
    return result


def heal_events(events: List[Dict[str, Any]],
                classes: Sequence[Dict[str, Any]],
                since: int,
                reboot_reason: str = DEFAULT_REBOOT_REASON) -> List[Dict[str, Any]]:
    """Every heal :func:`count_heals` counts at or after ``since``, one entry each, by node then
    time: ``{node, time, kind, failure}``, ``kind`` ``reboot`` (remediation's reboot: ``time`` its
    event's start) or ``return_to_service`` (``time`` the failure's event's end), ``failure`` the
    reason healed. Unlike the budget, a node's heals do not start afresh when it leaves a
    ``human`` class: this is the history, not a count of what is left."""
    return list(_heals(events, classes, since, reboot_reason, restart_after_human=False))


def _heals(events: List[Dict[str, Any]], classes: Sequence[Dict[str, Any]], since: int, reboot_reason: str,
           restart_after_human: bool) -> Iterator[Dict[str, Any]]:
    """The heals of :func:`count_heals` (``restart_after_human``: a node's count starts afresh when an
    event of a ``human`` class closes) and :func:`heal_events`, by node then time."""
    def ours(event):
        return bool(reboot_reason) and (event.get("reason") or "").startswith(reboot_reason)

    def touching(first, second):
        return first["end"] is not None and abs(second["start"] - first["end"]) <= EVENT_JOIN_SECONDS

    classified = reason_classifier(classes)

    def action_of(event):
        entry = classified(event.get("reason") or "")
        return entry["action"] if entry is not None else None

    by_node: Dict[str, List[Dict[str, Any]]] = {}
    for event in events or ():
        by_node.setdefault(event["node"], []).append(event)
    for node in sorted(by_node):
        node_events = sorted(by_node[node], key=lambda e: (e["start"], e["end"] is None, e["end"] or 0))
        actions = [action_of(e) for e in node_events]  # each event classified once
        node_since = max([since] + [e["end"] + 1 for e, action in zip(node_events, actions)
                                    if restart_after_human and e["end"] is not None and action == "human"])
        for index, event in enumerate(node_events):
            before = node_events[index - 1] if index else None
            if ours(event):
                if event["start"] < node_since:
                    continue
                failure = before["reason"] if before is not None and touching(before, event) else event["reason"]
                yield {"node": node, "time": event["start"], "kind": "reboot", "failure": failure}
                continue
            if event["end"] is None or event["end"] < node_since:
                continue
            if actions[index] in (None, "human"):
                continue
            if any(touching(event, later) for later in node_events[index + 1:]):
                continue
            if before is not None and ours(before) and touching(before, event):
                continue
            yield {"node": node, "time": event["end"], "kind": "return_to_service", "failure": event["reason"]}


def flapping_reason(heals: int, window: int, last_reason: str) -> str:
    """The reason set on a node whose healing budget is spent (no acting class matches it).

    Double quotes are replaced (scontrol drops them from a reason) and the last reason is cut
    at 100 characters.
    """
    last = (last_reason or "").replace('"', "'")
    if len(last) > 100:
        last = last[:97] + "..."
    return "%shealed %d times in %s, last: %s" % (FLAPPING_PREFIX, heals, duration(int(window)), last)


def heal_candidates(nodes: List[Dict[str, Any]],
                    classes: Sequence[Dict[str, Any]],
                    in_scope: Optional[Sequence[str]] = None) -> List[str]:
    """The names of the nodes in scope whose reason falls in a class that acts (``reboot`` or
    ``resume``): the only nodes whose heals :func:`.policy.plan_remediation` counts, so the only ones whose
    events it needs. A superset of the nodes it may heal (the node's state is not looked at).

    Args:
        nodes: as for :func:`.policy.plan_remediation`.
        classes: compiled classes (:func:`.classes.compile_classes`).
        in_scope: names in scope; None means every node.
    """
    scope = None if in_scope is None else set(in_scope)
    classified = reason_classifier(classes)
    names = []
    for node in nodes:
        reason = node.get("reason") or ""
        if not reason or (scope is not None and node["name"] not in scope):
            continue
        entry = classified(reason)
        if entry is not None and entry["action"] != "human":
            names.append(node["name"])
    return names

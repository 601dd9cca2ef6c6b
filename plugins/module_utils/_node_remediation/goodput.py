# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What broken nodes cost a cluster over a window (pure): node-seconds lost by reason class and
by state, the heals, the holds and the circuit breaker's trips, from Slurm's node events
(``sacctmgr show event``, :mod:`.._node_events`) and the heal journal (:mod:`.journal`).
docs/goodput.md ("Per cluster") defines each figure; :func:`cluster_goodput` gives them.

Sources, figure by figure:

* node-seconds lost: every second of a node event (a span a node spent DOWN, DRAIN(ED), FAIL or
  rebooting with one reason: sacctmgr ``TimeStart``, ``TimeEnd``) inside the window, an event
  still open (``TimeEnd`` ``Unknown``) counted to the window's end; a second two events of a
  node share counts once. Its class: the remediation's own classifier
  (:func:`.classes.classify`, so ``Kill task failed (JobId=7 batch)`` is ``kill_task_failed``)
  on the event's ``Reason``; a reason whose tails say Slurm's recovery failed is
  ``resume_timeout`` (as the plan says); the time a node spends rebooting with remediation's
  own reason is the class of the failure the reboot heals (the event before it, touching);
  every other reason is :data:`UNCLASSIFIED` (an admin's maintenance, a Slurm reason no class
  knows, no reason). Its state: sacctmgr's ``State`` (:func:`state_kind`).
* ``cold-start`` events (``UNK``, opened for every node when slurmctld starts with a clean state,
  closed at the node's next event, which may be hours later while the node ran jobs: 26.05
  recordings) are no time lost: they are listed in ``not_counted``.
* heals: :func:`.heals.heal_events` (remediation's reboots, by their reason; returns to service
  from a class that heals, by whoever: accounting does not say who resumed a node), and the heal
  journal's heals accounting does not show yet (:func:`.journal.unseen_heals`).
* holds: events whose reason begins with :data:`.classes.FLAPPING_PREFIX` or
  :data:`.classes.SUSPECT_PREFIX` and that start in the window (one per hold: a hold recorded
  again when only the node's state changed is the same hold).
* circuit breaker trips: the heal journal's ``trips`` (:func:`.journal.record_trip`), the one
  place they are recorded.
"""

from __future__ import annotations

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import (
    DEFAULT_REASON_CLASSES,
    FLAPPING_PREFIX,
    RESUME_TIMEOUT_CLASS,
    SUSPECT_PREFIX,
    compile_classes,
    reason_classifier,
    reason_origin,
    recovery_failure,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.heals import EVENT_JOIN_SECONDS, heal_events
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.journal import unseen_heals
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import DEFAULT_REBOOT_REASON

try:
    from typing import Any, Callable, Dict, List, Optional, Sequence  # noqa: F401 pylint: disable=unused-import
except ImportError:  # pragma: no cover
    pass

#: The bucket of a reason no class matches (an admin's drain, a reason Slurm writes that no class
#: acts on, no reason at all).
UNCLASSIFIED = "unclassified"
#: The bucket of remediation's reboot when the failure it healed is not in the events read (it
#: ended before the window).
REMEDIATION_REBOOT = "remediation_reboot"
#: The reason of the event slurmctld opens for every node at a clean start (state ``UNK``).
COLD_START = "cold-start"
#: The kinds of state, in the order :func:`state_kind` tries them.
STATE_KINDS = ("not_responding", "reboot", "down", "drain", "other")
HOLDS = (("flapping", FLAPPING_PREFIX), ("suspect", SUSPECT_PREFIX))


def state_kind(state: str) -> str:
    """The kind of an event's state as sacctmgr prints it (``DRAIN``, ``DOWN*``, ``BOOT^``,
    ``IDLE+DRAIN``...): ``not_responding`` (``*``: the node did not answer), ``reboot`` (``BOOT``
    or ``^``/``@``: a reboot issued or requested), ``down`` (``DOWN``, ``FAIL``), ``drain``
    (``DRAIN``, ``DRAINED``, ``DRAINING``, ``DRNG``, ``FAILING``'s drain) or ``other`` (``UNK``...)."""
    text = (state or "").upper()
    words = set(text.rstrip("*~#!%$@^-+").replace("*", "+").split("+"))
    if "*" in text:
        return "not_responding"
    if "BOOT" in words or "REBOOT" in words or "^" in text or "@" in text:
        return "reboot"
    if words & {"DOWN", "FAIL", "FAILING"}:
        return "down"
    if words & {"DRAIN", "DRAINED", "DRAINING", "DRNG"}:
        return "drain"
    return "other"


def _hours(seconds: Optional[int]) -> Optional[float]:
    return None if seconds is None else round(seconds / 3600.0, 3)


class _Classes(object):
    """The class of each event of a node, as the module docstring says."""

    def __init__(self, classes: Sequence[Dict[str, Any]], reboot_reason: str) -> None:
        self.classified: Callable[[str], Optional[Dict[str, Any]]] = reason_classifier(compile_classes(classes))
        self.reboot_reason = reboot_reason

    def of(self, event: Dict[str, Any], before: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        """``{class, action}`` of ``event``; ``before`` the node's event before it."""
        reason = event.get("reason") or ""
        if recovery_failure(reason):
            return {"class": RESUME_TIMEOUT_CLASS, "action": "human"}
        if self.reboot_reason and reason_origin(reason)[0] == self.reboot_reason:
            touching = before is not None and before["end"] is not None and \
                abs(event["start"] - before["end"]) <= EVENT_JOIN_SECONDS
            if not touching:
                return {"class": REMEDIATION_REBOOT, "action": "reboot"}
            return self.of(before, None)  # type: ignore[arg-type]
        entry = self.classified(reason)
        if entry is None:
            return {"class": UNCLASSIFIED, "action": None}
        return {"class": entry["name"], "action": entry["action"]}


def _lost(events: Sequence[Dict[str, Any]], start: int, end: int, classes: _Classes) -> Dict[str, Any]:
    """Node-seconds lost in ``[start, end]`` by class and state, and what is not counted."""
    rows: Dict[str, Dict[str, Any]] = {}
    cold: Dict[str, Any] = {"why": COLD_START, "node_seconds": 0, "events": 0}
    by_node: Dict[str, List[Dict[str, Any]]] = {}
    for event in events:
        by_node.setdefault(event["node"], []).append(event)
    for node in sorted(by_node):
        counted_to = start  # a second two events of the node share counts once
        before = None
        for event in sorted(by_node[node], key=lambda e: (e["start"], e["end"] is None, e["end"] or 0)):
            last = end if event["end"] is None else min(event["end"], end)
            first = max(event["start"], counted_to)
            seconds = max(0, last - first)
            counted_to = max(counted_to, last)
            if event.get("state", "").upper() == "UNK" and event.get("reason") == COLD_START:
                cold["node_seconds"] += seconds
                cold["events"] += 1 if seconds else 0
                before = event
                continue
            entry = classes.of(event, before)
            before = event
            if not seconds and not (event["end"] is None and event["start"] <= end):
                continue
            row = rows.setdefault(entry["class"], dict(entry, node_seconds=0, events=0, open=0, nodes=set(),
                                                       by_state=dict((kind, 0) for kind in STATE_KINDS)))
            row["node_seconds"] += seconds
            row["by_state"][state_kind(event.get("state", ""))] += seconds
            row["events"] += 1
            row["open"] += 1 if event["end"] is None else 0
            row["nodes"].add(node)
    by_class = []
    for row in sorted(rows.values(), key=lambda r: (-r["node_seconds"], r["class"])):
        names = sorted(row.pop("nodes"))
        by_class.append(dict(row, node_hours=_hours(row["node_seconds"]), nodes=len(names),
                             hostlist=compress_hostlist(names)))
    by_state = dict((kind, sum(r["by_state"][kind] for r in by_class)) for kind in STATE_KINDS)
    total = sum(r["node_seconds"] for r in by_class)
    return {"node_seconds": total, "node_hours": _hours(total), "by_class": by_class, "by_state": by_state,
            "not_counted": [dict(cold, node_hours=_hours(cold["node_seconds"]))] if cold["events"] else []}


def _heals(events: Sequence[Dict[str, Any]], start: int, end: int, classes: Sequence[Dict[str, Any]],
           reboot_reason: str, journal: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The heals in the window: remediation's reboots, returns to service, the journal's."""
    found = [h for h in heal_events(list(events), compile_classes(classes), start, reboot_reason) if h["time"] <= end]
    pending = [e for e in unseen_heals((journal or {}).get("heals") or [], events, start, reboot_reason)
               if e["start"] <= end]
    rebooted = sum(1 for h in found if h["kind"] == "reboot")
    returned = len(found) - rebooted
    from_journal_reboots = sum(1 for e in pending if e["end"] is None)
    by_node = sorted(set([h["node"] for h in found] + [e["node"] for e in pending]))
    return {"total": len(found) + len(pending), "rebooted": rebooted + from_journal_reboots,
            "returned_to_service": returned + len(pending) - from_journal_reboots,
            "from_journal": len(pending), "resumed_by_remediation": None,
            "nodes": len(by_node), "hostlist": compress_hostlist(by_node)}


def _holds(events: Sequence[Dict[str, Any]], start: int, end: int) -> Dict[str, Any]:
    """The holds this collection set in the window (``{kind: {count, nodes, hostlist}}``)."""
    result = {}
    for kind, prefix in HOLDS:
        names = []
        previous: Dict[str, Dict[str, Any]] = {}
        for event in sorted(events, key=lambda e: (e["node"], e["start"])):
            before = previous.get(event["node"])
            previous[event["node"]] = event
            if not (event.get("reason") or "").startswith(prefix) or not start <= event["start"] <= end:
                continue
            again = before is not None and (before.get("reason") or "").startswith(prefix) and \
                before["end"] is not None and abs(event["start"] - before["end"]) <= EVENT_JOIN_SECONDS
            if not again:
                names.append(event["node"])
        result[kind] = {"count": len(names), "nodes": len(set(names)), "hostlist": compress_hostlist(sorted(set(names)))}
    return result


def _circuit(journal: Optional[Dict[str, Any]], start: int, end: int) -> Dict[str, Any]:
    """The circuit breaker's trips in the window from the heal journal, or why they are unknown."""
    unknown = {"trips": None, "open_seconds": None, "open_now": None, "list": None}
    if journal is None:
        return dict(unknown, why="no heal journal given (journal): the trips are recorded there only")
    if not journal.get("exists"):
        return dict(unknown, why="no heal journal at %s: no node remediation wrote one there (remediate_nodes_journal)"
                    % journal.get("path"))
    since = journal.get("trips_since")
    if since is None or since > start:
        return dict(unknown, why="the heal journal %s records trips since %s, after the window's start %d"
                    % (journal.get("path"), "never" if since is None else since, start))
    trips = [t for t in journal.get("trips") or () if t["start"] <= end and (t["end"] is None or t["end"] >= start)]
    open_seconds = sum(max(0, min(end if t["end"] is None else t["end"], end) - max(t["start"], start)) for t in trips)
    return {"trips": sum(1 for t in trips if t["start"] >= start), "open_seconds": open_seconds,
            "open_now": bool(trips) and trips[-1]["end"] is None, "list": trips, "why": None}


def cluster_goodput(events: Optional[Sequence[Dict[str, Any]]], start: int, end: int,
                    classes: Sequence[Dict[str, Any]] = DEFAULT_REASON_CLASSES,
                    reboot_reason: str = DEFAULT_REBOOT_REASON,
                    purge_after: Optional[int] = None,
                    journal: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """What broken nodes cost the cluster from ``start`` to ``end`` (Unix seconds).

    Args:
        events: every node's events open at any time in the window (``read_cluster_events``; an
            event that started before ``start`` is clipped to it); None: the cluster keeps no
            accounting.
        start, end: the window; events still open count to ``end`` (now).
        classes: the reason classes (uncompiled, as the remediation's ``classes``).
        reboot_reason: the reason remediation gives the nodes it reboots.
        purge_after: slurmdbd's ``PurgeEventAfter`` in seconds (None: never purged): events that
            ended more than that before ``end`` may be gone.
        journal: the heal journal (``read_journal_file``'s ``{exists, heals, trips, trips_since}``
            and its ``path``); None: none given.

    Returns:
        ``{start, end, window, accounting, node_seconds, node_hours, by_class: [{class, action,
        node_seconds, node_hours, by_state: {not_responding, reboot, down, drain, other}, events,
        open, nodes, hostlist}], by_state, not_counted: [{why, node_seconds, node_hours, events}],
        heals: {total, rebooted, returned_to_service, from_journal, resumed_by_remediation,
        nodes, hostlist}, holds: {flapping, suspect: {count, nodes, hostlist}}, circuit: {trips,
        open_seconds, open_now, list}, unknown: [{figure, why}]}``; a figure that cannot be
        known is None and ``unknown`` says why (``resumed_by_remediation`` always: accounting
        does not say who resumed a node).
    """
    start, end = int(start), int(end)
    result: Dict[str, Any] = {"start": start, "end": end, "window": max(0, end - start), "accounting": events is not None}
    unknown = [{"figure": "heals.resumed_by_remediation",
                "why": "Slurm's accounting does not record who resumed a node (an event's User is who set its "
                       "reason); the heal journal keeps a heal only until accounting shows it"}]
    why = None
    if events is None:
        why = "the cluster keeps no accounting (AccountingStorageType is not accounting_storage/slurmdbd)"
    elif purge_after is not None and start < end - purge_after:
        why = ("the window starts before slurmdbd's PurgeEventAfter (%d s): events that ended before %d may "
               "have been purged" % (purge_after, end - purge_after))
    if why is None:
        result.update(_lost(events or (), start, end, _Classes(classes, reboot_reason)))
        result["heals"] = _heals(events or (), start, end, classes, reboot_reason, journal)
        result["holds"] = _holds(events or (), start, end)
    else:
        result.update(node_seconds=None, node_hours=None, by_class=None, by_state=None, not_counted=None,
                      heals=None, holds=None)
        unknown = [{"figure": figure, "why": why}
                   for figure in ("node_seconds", "by_class", "by_state", "not_counted", "heals", "holds")]
    circuit = _circuit(journal, start, end)
    circuit_why = circuit.pop("why")
    if circuit_why:
        unknown.append({"figure": "circuit", "why": circuit_why})
    result["circuit"] = circuit
    result["unknown"] = unknown
    return result

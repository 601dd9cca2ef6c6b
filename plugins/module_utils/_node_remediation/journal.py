# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The heal journal: the heals remediation made itself, kept on the Slurm host until Slurm's
accounting shows them, and the lock that lets one node remediation of a cluster run at a time.

The healing budget is counted from Slurm's node events (:func:`.heals.count_heals`), but slurmctld
hands an event to slurmdbd asynchronously: a run that starts seconds after another can read an
accounting that does not yet hold the other run's reboot or resume, and heal a node once more than
its budget allows. So each run writes what it healed into a small JSON file (``journal``, one per
cluster), and the next run counts every journal heal that no node event of the same node matches
yet (:func:`unseen_heals`) as an event of its own. A heal is matched by the node and its time
(within :data:`MATCH_SECONDS`); once matched, or older than the healing window, it leaves the
journal.

The journal is also the one durable record of the circuit breaker's trips (:func:`record_trip`):
nothing else keeps them (the plan, ``set_stats`` and the textfile's gauge say only whether the
breaker is open now). Each run that takes the lock opens a trip when the breaker opened, and closes
it at the first run that finds the breaker closed again; ``cluster_goodput_info`` reads them.

It also holds the reboots remediation requested whose node it has not seen back in service yet
(``rebooting``): a reboot is "requested" until a later run finds the node in service, and "healed"
on that run (:func:`.policy.reboot_outcomes`).

The file: ``{"format": "clusterops.slurm/node-heals", "format_version": 3, "heals": [{node, time,
action, reason}], "trips": [{start, end, broken, threshold, window, classes}], "trips_since": T,
"rebooting": [{node, time}]}``
(``time`` Unix seconds after Slurm took the call, ``action`` ``reboot`` or ``resume``, ``reason``
the failure healed; a trip's ``start`` the first run that found the breaker open, ``end`` the first
that found it closed again, None while open, ``broken`` and ``threshold`` the most nodes broken
and the threshold then, ``classes`` the broken nodes' classes; ``trips_since`` the first run that
recorded trips: none before it is known), written atomically (mode 0600) in a folder made mode
0700; its lock is ``<journal>.lock`` (an exclusive ``flock``, dropped by the kernel if the holder
dies). Format 1 (heals only, before trips were recorded) is read as a journal without trips, formats
1 and 2 as one without reboots waited for.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

from ansible_collections.clusterops.slurm.plugins.module_utils import _causes as causes
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.atomic import atomic_write_json
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.fsutil import (
    FileLock,
    load_json_bounded,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import RemediationError
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import effective_user


JOURNAL_FORMAT = "clusterops.slurm/node-heals"
FORMAT_VERSION = 3
#: The formats this reader knows: 1 had no trips, 1 and 2 no reboots waited for.
FORMAT_VERSIONS = (1, 2, 3)
#: The circuit breaker trips a journal keeps, newest: one a day for more than a year.
MAX_TRIPS = 500
#: A journal heal and a node event of the same node are one heal when their times are at most this
#: many seconds apart: the journal's time is taken after ``scontrol`` returned, the event's when
#: slurmctld made the change, a second or two before (seen on the dev clusters: 0-1 s).
MATCH_SECONDS = 30
#: How Slurm words the reason of a node remediation rebooted (appended to ``reboot_reason``).
REBOOT_ISSUED = " : reboot issued"
ACTIONS = ("reboot", "resume")


def read_journal(path: str) -> List[Dict[str, Any]]:
    """The heals of the journal at ``path`` (none when the file does not exist).

    Raises:
        RemediationError: as :func:`read_journal_file`.
    """
    return read_journal_file(path)["heals"]


def _is_trip(trip: Any) -> bool:
    """Whether ``trip`` is ``{start, end, broken, threshold, window, classes}`` as :func:`record_trip` writes it."""
    return (isinstance(trip, dict) and isinstance(trip.get("start"), int)
            and (trip.get("end") is None or isinstance(trip.get("end"), int))
            and all(isinstance(trip.get(key), int) for key in ("broken", "threshold", "window"))
            and isinstance(trip.get("classes"), list))


def _is_reboot(entry: Any) -> bool:
    """Whether ``entry`` is ``{node, time}`` as :func:`write_journal` writes a reboot waited for."""
    return isinstance(entry, dict) and isinstance(entry.get("node"), str) and isinstance(entry.get("time"), int)


def read_journal_file(path: str) -> Dict[str, Any]:
    """The journal at ``path``: ``{exists, heals, trips, trips_since, rebooting}`` (``exists``
    False, nothing in it, ``trips_since`` None when the file does not exist; ``trips_since`` None
    for a journal of format 1, which recorded no trips; ``rebooting`` empty before format 3).

    Raises:
        RemediationError: the file exists but cannot be read, is not a journal, or holds a heal
        that is not ``{node, time, action, reason}`` or a trip that is not one. Never guessed: a
        lost heal would let a node be healed past its budget.
    """
    if not os.path.lexists(path):
        return {"exists": False, "heals": [], "trips": [], "trips_since": None, "rebooting": []}
    try:
        doc = load_json_bounded(path)
    except (OSError, ValueError) as exc:
        raise RemediationError("cannot read the heal journal %s: %s" % (path, exc))
    if (not isinstance(doc, dict) or doc.get("format") != JOURNAL_FORMAT or not isinstance(doc.get("heals"), list)
            or doc.get("format_version", 1) not in FORMAT_VERSIONS):
        raise RemediationError("%s is not a heal journal of this collection (format %s, version %s)"
                               % (path, JOURNAL_FORMAT, " or ".join(str(v) for v in FORMAT_VERSIONS)))
    for heal in doc["heals"]:
        if not (isinstance(heal, dict) and isinstance(heal.get("node"), str) and isinstance(heal.get("time"), int)
                and heal.get("action") in ACTIONS and isinstance(heal.get("reason"), str)):
            raise RemediationError("the heal journal %s holds a heal that is not {node, time, action, reason}: %r"
                                   % (path, heal))
    trips = doc.get("trips", [])
    since = doc.get("trips_since")
    if not isinstance(trips, list) or not all(_is_trip(trip) for trip in trips) or not (
            since is None or isinstance(since, int)):
        raise RemediationError("the heal journal %s holds trips that are not {start, end, broken, threshold, "
                               "window, classes} or a trips_since that is not Unix seconds" % path)
    rebooting = doc.get("rebooting", [])
    if not isinstance(rebooting, list) or not all(_is_reboot(entry) for entry in rebooting):
        raise RemediationError("the heal journal %s holds reboots waited for that are not {node, time}" % path)
    return {"exists": True, "heals": doc["heals"], "trips": trips, "trips_since": since, "rebooting": rebooting}


def record_trip(trips: Sequence[Dict[str, Any]], circuit: Dict[str, Any], now: int) -> List[Dict[str, Any]]:
    """The journal's trips after a run whose plan has the circuit breaker ``circuit`` (the plan's
    ``{open, broken, threshold, window, groups}``) at ``now``: a trip opens when the breaker is
    open and no trip is; the open trip takes the most nodes broken while it lasts and the classes;
    it closes (``end`` ``now``) at the first run with the breaker closed. The newest
    :data:`MAX_TRIPS` are kept."""
    kept = [dict(trip) for trip in trips]
    current = kept[-1] if kept and kept[-1]["end"] is None else None
    if circuit.get("open"):
        classes = sorted(set(group["class"] for group in circuit.get("groups", ())))
        if current is None:
            current = {"start": int(now), "end": None, "broken": 0, "threshold": int(circuit["threshold"]),
                       "window": int(circuit["window"]), "classes": []}
            kept.append(current)
        current["broken"] = max(current["broken"], int(circuit["broken"]))
        current["classes"] = sorted(set(current["classes"]) | set(classes))
    elif current is not None:
        current["end"] = int(now)
    return kept[-MAX_TRIPS:]


def _matches(heal: Dict[str, Any], event: Dict[str, Any], reboot_reason: str) -> bool:
    """True when the node event ``event`` is the accounting's record of the journal's ``heal``:
    a reboot's event starts with it and carries ``reboot_reason``; a resume's event ends with it."""
    if event["node"] != heal["node"]:
        return False
    if heal["action"] == "reboot":
        return (event.get("reason") or "").startswith(reboot_reason) and abs(event["start"] - heal["time"]) <= MATCH_SECONDS
    return event["end"] is not None and abs(event["end"] - heal["time"]) <= MATCH_SECONDS


def _unmatched(heals: Sequence[Dict[str, Any]], events: Sequence[Dict[str, Any]], since: int,
               reboot_reason: str) -> List[Dict[str, Any]]:
    """The heals at or after ``since`` that no node event matches; oldest first, each takes the
    closest event that matches it, and an event matches one heal at most (two heals of a node
    seconds apart are two heals)."""
    used = set()
    left = []
    for heal in sorted(heals, key=lambda h: h["time"]):
        if heal["time"] < since:
            continue
        matching = [(abs(_event_time(heal, event) - heal["time"]), index) for index, event in enumerate(events)
                    if index not in used and _matches(heal, event, reboot_reason)]
        if matching:
            used.add(min(matching)[1])
        else:
            left.append(heal)
    return left


def _event_time(heal: Dict[str, Any], event: Dict[str, Any]) -> int:
    """The time of ``event`` that a ``heal`` is compared with: a reboot's start, a resume's end."""
    return event["start"] if heal["action"] == "reboot" else event["end"]


def unseen_heals(heals: Sequence[Dict[str, Any]], events: Sequence[Dict[str, Any]], since: int,
                 reboot_reason: str) -> List[Dict[str, Any]]:
    """The journal's heals at or after ``since`` that no node event matches yet, as the node events
    :func:`.heals.count_heals` counts as heals: a reboot as an open event with remediation's
    reason, a resume as an event of the failure it healed that closed at the heal's time."""
    unseen = []
    for heal in _unmatched(heals, events, since, reboot_reason):
        if heal["action"] == "reboot":
            unseen.append({"node": heal["node"], "start": heal["time"], "end": None, "state": "DRAIN",
                           "user": "", "reason": reboot_reason + REBOOT_ISSUED})
        else:
            unseen.append({"node": heal["node"], "start": heal["time"], "end": heal["time"], "state": "DRAIN",
                           "user": "", "reason": heal["reason"]})
    return unseen


def record_heals(heals: Sequence[Dict[str, Any]], events: Sequence[Dict[str, Any]], done: Dict[str, List[str]],
                 reasons: Dict[str, str], now: int, since: int, reboot_reason: str) -> List[Dict[str, Any]]:
    """The journal after a run: the heals still unseen (none once accounting shows it, nor before
    ``since``) and this run's, ``done`` (``{"reboot": [names], "resume": [names]}``), each with
    the reason of the failure it healed (``reasons``) and ``now``."""
    kept = _unmatched(heals, events, since, reboot_reason)
    for action in ACTIONS:
        kept += [{"node": name, "time": int(now), "action": action, "reason": reasons.get(name, "")}
                 for name in done.get(action, ())]
    return kept


def write_journal(path: str, heals: Sequence[Dict[str, Any]], trips: Sequence[Dict[str, Any]] = (),
                  trips_since: Optional[int] = None, rebooting: Sequence[Dict[str, Any]] = ()) -> None:
    """Replace the journal at ``path`` atomically (mode 0600), making its folder (mode 0700) when
    missing: its ``heals``, circuit breaker ``trips`` (:func:`record_trip`), ``trips_since`` and
    the reboots waited for (``rebooting``, ``[{node, time}]``).

    Raises:
        RemediationError: it cannot be written (the heals it holds would be lost).
    """
    folder = os.path.dirname(path) or "."
    try:
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o700)
        atomic_write_json(path, {"format": JOURNAL_FORMAT, "format_version": FORMAT_VERSION, "heals": list(heals),
                                 "trips": list(trips), "trips_since": trips_since, "rebooting": list(rebooting)},
                          indent=1, mode=0o600)
    except OSError as exc:
        raise RemediationError("cannot write the heal journal %s: %s" % (path, exc))


def check_journal_access(path: str) -> None:
    """What check mode verifies instead of taking the lock: that the account running it could create,
    lock and replace the journal at ``path`` (its folder, or the nearest folder above that exists, writable
    and searchable; the journal and its lock, where they exist, writable), so that a green ``--check`` is
    not followed by a run that fails on the journal.

    Raises:
        RemediationError: cause ``permission``, naming the path and the account.
    """
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    blocked = [p for p in (path, path + ".lock") if os.path.exists(p) and not os.access(p, os.W_OK)]
    if not os.access(folder, os.W_OK | os.X_OK):
        blocked.insert(0, folder)
    if blocked:
        raise RemediationError(
            "the heal journal %s: %s cannot write %s (the real run would fail on it: run as root, or set "
            "remediate_nodes_journal to a folder of that account's)" % (path, effective_user(), ", ".join(blocked)),
            causes.PERMISSION)


def journal_lock(path: str, timeout: float) -> FileLock:
    """The lock of the journal at ``path`` (``<path>.lock``), held by one node remediation of the
    cluster at a time; its folder (mode 0700) is made when missing.

    Raises:
        RemediationError: another remediation held it past ``timeout`` seconds, or it cannot be taken.
    """
    lock = FileLock(path + ".lock", timeout=max(0.0, float(timeout)))
    try:
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o700)
        held = lock.acquire()
    except OSError as exc:
        cause = causes.of_os_error(exc)
        raise RemediationError("cannot lock the heal journal %s as %s: %s%s" % (
            lock.path, effective_user(), exc.strerror or exc,
            " (the account that runs remediation must be able to create and write it: run as root, or set "
            "remediate_nodes_journal to a folder of that account's)" if cause == causes.PERMISSION else ""), cause)
    if not held:
        raise RemediationError("another node remediation of this cluster holds %s (waited %s s): nothing was "
                               "read or changed; runs overlap for longer than lock_timeout (lengthen the schedule's "
                               "interval or lock_timeout)" % (lock.path, timeout))
    return lock

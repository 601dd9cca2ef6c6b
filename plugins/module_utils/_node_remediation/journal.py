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

The file: ``{"format": "clusterops.slurm/node-heals", "format_version": 1, "heals": [{node, time,
action, reason}]}`` (``time`` Unix seconds after Slurm took the call, ``action`` ``reboot`` or
``resume``, ``reason`` the failure healed), written atomically (mode 0600) in a folder made mode
0700; its lock is ``<journal>.lock`` (an exclusive ``flock``, dropped by the kernel if the holder
dies).
"""

from __future__ import annotations

import os

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.fsutil import (
    FileLock,
    atomic_write_json,
    load_json_bounded,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import RemediationError

try:
    from typing import Any, Dict, List, Sequence  # noqa: F401 pylint: disable=unused-import
except ImportError:  # pragma: no cover
    pass

JOURNAL_FORMAT = "clusterops.slurm/node-heals"
FORMAT_VERSION = 1
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
        RemediationError: the file exists but cannot be read, is not a journal, or holds a heal
        that is not ``{node, time, action, reason}``. Never guessed: a lost heal would let a
        node be healed past its budget.
    """
    if not os.path.lexists(path):
        return []
    try:
        doc = load_json_bounded(path)
    except (OSError, ValueError) as exc:
        raise RemediationError("cannot read the heal journal %s: %s" % (path, exc))
    if not isinstance(doc, dict) or doc.get("format") != JOURNAL_FORMAT or not isinstance(doc.get("heals"), list):
        raise RemediationError("%s is not a heal journal of this collection (format %s)" % (path, JOURNAL_FORMAT))
    for heal in doc["heals"]:
        if not (isinstance(heal, dict) and isinstance(heal.get("node"), str) and isinstance(heal.get("time"), int)
                and heal.get("action") in ACTIONS and isinstance(heal.get("reason"), str)):
            raise RemediationError("the heal journal %s holds a heal that is not {node, time, action, reason}: %r"
                                   % (path, heal))
    return doc["heals"]


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


def write_journal(path: str, heals: Sequence[Dict[str, Any]]) -> None:
    """Replace the journal at ``path`` atomically (mode 0600), making its folder (mode 0700) when missing.

    Raises:
        RemediationError: it cannot be written (the heals it holds would be lost).
    """
    folder = os.path.dirname(path) or "."
    try:
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o700)
        atomic_write_json(path, {"format": JOURNAL_FORMAT, "format_version": FORMAT_VERSION, "heals": list(heals)},
                          indent=1, mode=0o600)
    except OSError as exc:
        raise RemediationError("cannot write the heal journal %s: %s" % (path, exc))


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
        raise RemediationError("cannot lock the heal journal %s: %s" % (lock.path, exc))
    if not held:
        raise RemediationError("another node remediation of this cluster holds %s (waited %s s): nothing was "
                               "read or changed" % (lock.path, timeout))
    return lock

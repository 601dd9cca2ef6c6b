# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Reading the history of node state changes that Slurm keeps in its accounting
(``sacctmgr show event``), and folding it into failure episodes.

Private to the collection (the leading underscore): no API promise outside it.

slurmctld sends slurmdbd a node *event* each time a node becomes DOWN, DRAIN(ED), FAIL or
rebooting, and whenever the reason of such a node changes: the open event is closed and a new
one opened at the same second. An event ends when the node returns to service. Read with ONE
call, whatever the size of the cluster (the answer grows with the number of events in the
window, not with the number of nodes)::

    TZ=UTC SLURM_TIME_FORMAT=%s sacctmgr --noheader --parsable2 show event event=node \\
        start=<YYYY-MM-DDTHH:MM:SS, UTC> [nodes=<hostlist>] \\
        format=NodeName,TimeStart,TimeEnd,State,User,Reason

``event=node``, ``start=``, ``nodes=`` and the six format fields are in src/sacctmgr/event_functions.c
of 22.05, 24.11 and 26.05 (recorded on each, tests/unit/fixtures/slurm-*/node-events-*).
``SLURM_TIME_FORMAT=%s`` makes every time Unix seconds; an event still open has the end
``Unknown`` (seen on every release). ``TZ=UTC`` makes ``start=`` (parsed by Slurm as local time)
mean the UTC time this module formats, whatever the host's zone; it also makes a time printed
as ``YYYY-MM-DDTHH:MM:SS`` (a site that overrides the time format) UTC, so both forms are read.
The reason is the LAST field: a reason may hold ``|`` (free text), so each line is split into
at most six fields. ``--parsable2`` puts no ``|`` after the last field.

An event (:func:`read_node_events`, :func:`parse_events`) is a dict:

``node`` (str), ``start`` (int, Unix seconds), ``end`` (int, or None while the event is open),
``state`` (str, as sacctmgr prints it: ``DRAIN``, ``DOWN``, ``DOWN*``, ``BOOT^``, ``UNK``...),
``user`` (str, e.g. ``root(0)``: who set the reason) and ``reason`` (str; slurmctld appends
`` : reboot issued`` to the reason of a node it reboots).

Nothing that is not a complete answer reads as "no history": a non-zero rc (slurmdbd down:
``sacctmgr: error: ... Connection refused``, rc 1), an error on stderr with rc 0 and a line
that is not an event all raise.
"""

from __future__ import annotations

import calendar
import re
import time
from typing import Any, Dict, List, Optional, Sequence, Union

from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    NO_ACCOUNTING,
    SlurmAnswerError,
    check_answer,
    split_fields,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import (
    EVENT_ENVIRON,
    EVENT_FIELDS,
    accounting_configuration,
    node_events,
)


#: Two events of a node belong to one failure episode when the second starts at most this many
#: seconds after the first ended. Slurm closes an event and opens the next one at the same
#: second when a failed node's reason or state changes (0 s in every recording: drain -> reboot
#: issued, not responding -> unexpectedly rebooted); 2 s allows for a slow slurmctld. A node
#: returned to service and drained again even 3 s later is a new episode (the flapping node of
#: the recordings was back in service 3 s each time).
EPISODE_GAP = 2

# What sacctmgr prints for "no time" (an open event's end).
_NO_TIME = frozenset(("", "unknown", "none", "n/a", "0"))
_ISO = "%Y-%m-%dT%H:%M:%S"


#: slurmdbd.conf's ``PurgeEventAfter`` as ``sacctmgr show configuration`` prints it (``NONE``,
#: ``12 months``, ``30 days``, ``720 hours``: recorded on 26.05,
#: tests/unit/fixtures/slurm-26.05/sacctmgr-show-configuration), or as slurmdbd.conf(5) writes it
#: (``12months``, ``30days``; a bare number is months). Seconds of each unit; a month is counted as
#: 28 days, the shortest, so that a window is never taken for complete when it may not be.
PURGE_UNITS = {"hour": 3600, "day": 86400, "month": 28 * 86400}
_PURGE = re.compile(r"^(?P<count>[0-9]+)\s*(?P<unit>hour|day|month)?s?$", re.IGNORECASE)
_PURGE_LINE = re.compile(r"^\s*PurgeEventAfter\s*=\s*(?P<value>.*?)\s*$", re.MULTILINE)
_DBD_PART = "SlurmDBD configuration:"


class NodeEventParseError(SlurmAnswerError):
    """sacctmgr output that cannot be read as node events."""


def parse_event_time(value: str) -> Optional[int]:
    """Unix seconds from an event time: digits (``SLURM_TIME_FORMAT=%s``) or
    ``YYYY-MM-DDTHH:MM:SS`` read as UTC (the read runs with ``TZ=UTC``); None for ``Unknown``.

    Raises:
        NodeEventParseError: anything else.
    """
    text = (value or "").strip()
    if text.lower() in _NO_TIME:
        return None
    if text.isdigit():
        return int(text)
    try:
        return calendar.timegm(time.strptime(text, _ISO))
    except ValueError:
        raise NodeEventParseError("not an event time: %r" % value)


def parse_events(text: str) -> List[Dict[str, Any]]:
    """Events from ``sacctmgr --noheader --parsable2 show event ... format=<EVENT_FIELDS>``,
    in Slurm's order (by node, then start time).

    Raises:
        NodeEventParseError: a line with fewer than six fields, no node name, a start that is not
        a time, an end that is neither a time nor ``Unknown``, or an end before its start.
    """
    events = []
    for number, fields in split_fields((text or "").splitlines(), "|", EVENT_FIELDS, "sacctmgr event line",
                                       NodeEventParseError):
        node, start_text, end_text, state, user, reason = fields
        start = parse_event_time(start_text)
        end = parse_event_time(end_text)
        if not node.strip() or start is None:
            raise NodeEventParseError("sacctmgr event line %d has no node or no start: %r"
                                      % (number, "|".join(fields)))
        if end is not None and end < start:
            raise NodeEventParseError("sacctmgr event line %d ends before it starts: %r"
                                      % (number, "|".join(fields)))
        events.append({"node": node.strip(), "start": start, "end": end,
                       "state": state.strip(), "user": user.strip(), "reason": reason})
    return events


def read_node_events(cli: Any, start: Union[int, float], nodes: Optional[Union[str, Sequence[str]]] = None) -> List[Dict[str, Any]]:
    """The node events open at or after ``start`` (Unix seconds), of ``nodes`` (a hostlist or
    names; every node when None), from ONE ``sacctmgr show event`` call through ``cli`` (a
    :class:`~._slurm_cli.SlurmCLI`).

    Raises:
        SlurmCommandError: sacctmgr failed (slurmdbd down or unreachable: rc 1, ``sacctmgr:
        error: Sending PersistInit msg: Connection refused``), or printed an error with rc 0.
        NodeEventParseError: a line of its answer is not an event (cut short, garbage).
    """
    what = "read node events from accounting"
    rc, out, err = cli.run(*node_events(start, nodes), check=False, what=what, environ=EVENT_ENVIRON)
    check_answer(cli, "sacctmgr", rc, out, err, what)
    return parse_events(out)


def episodes(events: Sequence[Dict[str, Any]], gap: int = EPISODE_GAP) -> List[Dict[str, Any]]:
    """Failure episodes: each node's events that follow each other without the node being back
    in service in between (the next one starts at most ``gap`` seconds after the previous one
    ended, or while it is still open / overlaps it), merged. Sorted by node, then start.

    An episode is ``{node, start, end (None while its last event is open), reasons, states,
    users, events}``: ``reasons``, ``states`` and ``users`` in the order of the events, one entry
    per event (a reason repeated by two events is kept twice); ``events`` how many were merged.

    What the recordings of 22.05, 24.11 and 26.05 show (tests/unit/fixtures/slurm-*/node-events-*):
    a drained node rebooted with ``scontrol reboot ... reason=R`` is ONE episode, ``[<drain
    reason>, "R : reboot issued"]``; a drained-and-resumed node drained again is a second
    episode; a crashed node is one episode ``["Not responding", ...]``.
    """
    by_node: Dict[str, List[Dict[str, Any]]] = {}
    for event in events:
        by_node.setdefault(event["node"], []).append(event)
    result = []
    for node in sorted(by_node):
        current: Optional[Dict[str, Any]] = None
        for event in sorted(by_node[node], key=lambda e: (e["start"], e["end"] is None, e["end"] or 0)):
            joins = current is not None and (
                current["end"] is None or event["start"] <= current["end"] + gap)
            if joins:
                current["reasons"].append(event["reason"])  # type: ignore[index]
                current["states"].append(event["state"])  # type: ignore[index]
                current["users"].append(event["user"])  # type: ignore[index]
                current["events"] += 1  # type: ignore[index]
                if current["end"] is not None:  # type: ignore[index]
                    current["end"] = None if event["end"] is None else max(  # type: ignore[index]
                        current["end"], event["end"])  # type: ignore[index]
                continue
            current = {"node": node, "start": event["start"], "end": event["end"],
                       "reasons": [event["reason"]], "states": [event["state"]],
                       "users": [event["user"]], "events": 1}
            result.append(current)
    return result


def read_cluster_events(cli: Any, start: Union[int, float]) -> Optional[List[Dict[str, Any]]]:
    """Every node's events open at or after ``start`` (:func:`read_node_events` of every node, ONE
    call), or None when the cluster keeps no accounting (sacctmgr: ``You are not running a
    supported accounting_storage plugin``, rc 1; recorded on 26.05).

    Raises:
        SlurmCommandError, NodeEventParseError: as :func:`read_node_events` (slurmdbd down is a
        failure, never "no events").
    """
    what = "read node events from accounting"
    rc, out, err = cli.run(*node_events(start), check=False, what=what, environ=EVENT_ENVIRON)
    if rc != 0 and NO_ACCOUNTING.search(err or out or ""):
        return None
    check_answer(cli, "sacctmgr", rc, out, err, what)
    return parse_events(out)


def parse_purge(value: str) -> Optional[int]:
    """Seconds after which slurmdbd purges node events, from a ``PurgeEventAfter`` value
    (:data:`PURGE_UNITS`); None for ``NONE`` (never purged).

    Raises:
        NodeEventParseError: a value that is neither.
    """
    text = (value or "").strip()
    if text.upper() == "NONE":
        return None
    match = _PURGE.match(text)
    if not match:
        raise NodeEventParseError("not a PurgeEventAfter value: %r" % value)
    return int(match.group("count")) * PURGE_UNITS[(match.group("unit") or "month").lower()]


def parse_event_purge(text: str) -> Optional[int]:
    """:func:`parse_purge` of the ``PurgeEventAfter`` line of the ``SlurmDBD configuration:`` part
    of ``sacctmgr show configuration``.

    Raises:
        NodeEventParseError: no such part (slurmdbd did not answer: 26.05 then exits 0 with errors
        on stderr and leaves the part out) or no such line.
    """
    head, sep, part = (text or "").partition(_DBD_PART)
    match = _PURGE_LINE.search(part) if sep else None
    if match is None:
        raise NodeEventParseError("sacctmgr show configuration printed no PurgeEventAfter of slurmdbd")
    return parse_purge(match.group("value"))


def read_event_purge(cli: Any) -> Optional[int]:
    """slurmdbd's ``PurgeEventAfter`` in seconds (None: never purged), from ONE ``sacctmgr show
    configuration`` call (a constant-size answer).

    Raises:
        SlurmCommandError: sacctmgr failed, or printed an error with rc 0 (slurmdbd down).
        NodeEventParseError: its answer holds no PurgeEventAfter of slurmdbd.
    """
    what = "read slurmdbd's PurgeEventAfter"
    rc, out, err = cli.run(*accounting_configuration(), check=False, what=what)
    check_answer(cli, "sacctmgr", rc, out, err, what)
    return parse_event_purge(out)

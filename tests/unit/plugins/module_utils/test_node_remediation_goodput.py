# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""cluster_goodput from tables of cases: node events recorded from real Slurm
(tests/unit/fixtures/slurm-*/node-events-*, dev/cluster/record-node-events.sh) in, node-seconds
by class and state, heals, holds and trips out."""

from __future__ import annotations

import io
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._node_events import parse_event_purge, parse_events
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.goodput import (
    cluster_goodput,
    state_kind,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.heals import flapping_reason

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")
RELEASES = ("22.05", "24.11", "26.05")


def recorded(scenario, release="26.05"):
    path = os.path.join(FIXTURES, "slurm-" + release, "node-events-" + scenario, "sacctmgr-show-event.out")
    with io.open(path, encoding="utf-8", errors="replace") as handle:
        return parse_events(handle.read())


def seconds_by_class(result):
    return dict((row["class"], row["node_seconds"]) for row in result["by_class"])


# 26.05 recordings: reboot (n3 drained "Kill task failed" 1796075410-17, remediation's reboot
# 17-19), crash (n4 cold-start 1796070141-75339, "Not responding" DOWN* 75386-89, "Node
# unexpectedly rebooted" DOWN 89-93), flapping (n2 "Prolog error" 75397-400 and 75403-406),
# admin-open (n1 "maintenance: rack 7 | PSU swap" from 75425, open).
ALL = ("reboot", "crash", "flapping", "admin-open")


@pytest.mark.parametrize("scenarios, start, end, by_class, by_state", [
    # a kill-task drain healed by remediation's reboot: the reboot's 2 s count as kill_task_failed
    (("reboot",), 1796075400, 1796075422, {"kill_task_failed": 9}, {"drain": 7, "reboot": 2}),
    # clipped to the window on both sides
    (("reboot",), 1796075414, 1796075418, {"kill_task_failed": 4}, {"drain": 3, "reboot": 1}),
    # a crash: not responding (DOWN*), then DOWN unexpectedly rebooted; the cold-start is not lost
    (("crash",), 1796075300, 1796075400, {"not_responding": 3, "unexpected_reboot": 4},
     {"not_responding": 3, "down": 4}),
    (("flapping",), 1796075390, 1796075410, {"prolog_error": 6}, {"drain": 6}),
    # an admin's drain still open counts to the window's end, as unclassified
    (("admin-open",), 1796075400, 1796075425 + 3600, {"unclassified": 3600}, {"drain": 3600}),
    (ALL, 1796075339, 1796075429, {"kill_task_failed": 9, "prolog_error": 6, "unclassified": 4,
                                   "unexpected_reboot": 4, "not_responding": 3},
     {"drain": 17, "reboot": 2, "down": 4, "not_responding": 3}),
    # before everything: nothing lost
    (ALL, 1796000000, 1796000100, {}, {}),
])
def test_node_seconds_by_class_and_state(scenarios, start, end, by_class, by_state):
    events = [e for scenario in scenarios for e in recorded(scenario)]
    result = cluster_goodput(events, start, end)
    assert seconds_by_class(result) == by_class
    assert dict((k, v) for k, v in result["by_state"].items() if v) == by_state
    assert result["node_seconds"] == sum(by_class.values()) == sum(by_state.values())
    assert result["accounting"] is True and result["window"] == end - start


def test_the_cold_start_is_listed_not_counted():
    result = cluster_goodput(recorded("crash"), 1796075300, 1796075400)
    assert result["not_counted"] == [{"why": "cold-start", "node_seconds": 39, "node_hours": 0.011, "events": 1}]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("scenario, cls", [("reboot", "kill_task_failed"), ("flapping", "prolog_error"),
                                           ("admin-open", "unclassified")])
def test_every_release_counts_each_second_of_its_events_once(release, scenario, cls):
    events = recorded(scenario, release)
    end = max(e["end"] or e["start"] for e in events) + 10
    start = min(e["start"] for e in events)
    result = cluster_goodput(events, start, end)
    spans = sum((end if e["end"] is None else e["end"]) - e["start"] for e in events)
    assert seconds_by_class(result) == {cls: spans}


def test_a_kill_task_drain_of_25_05_and_later_is_its_class():
    # the reason as 26.05's slurmd writes it (slurm-26.05/kill-task-failed: "Kill task failed (JobId=7 batch)")
    events = [dict(e, reason="Kill task failed (JobId=7 batch)") if e["state"] == "DRAIN" else e
              for e in recorded("reboot")]
    assert seconds_by_class(cluster_goodput(events, 1796075400, 1796075422)) == {"kill_task_failed": 9}


def test_a_reboot_that_timed_out_is_resume_timeout_and_one_without_its_failure_is_remediation_reboot():
    reboot = recorded("reboot")[1]
    timed_out = dict(reboot, start=reboot["end"], end=reboot["end"] + 100, state="DOWN*",
                     reason="clusterops.slurm remediation: reboot : reboot issued : reboot timed out")
    result = cluster_goodput([reboot, timed_out], reboot["start"], reboot["end"] + 100)
    assert seconds_by_class(result) == {"remediation_reboot": 2, "resume_timeout": 100}


def test_overlapping_events_of_a_node_count_each_second_once():
    drain = recorded("reboot")[0]
    again = dict(drain, start=drain["start"] + 2, end=drain["end"] + 3)
    assert cluster_goodput([drain, again], 0, 1796075500)["node_seconds"] == 10


@pytest.mark.parametrize("state, kind", [
    ("DRAIN", "drain"), ("DOWN*", "not_responding"), ("DOWN", "down"), ("BOOT^", "reboot"), ("UNK", "other"),
    ("IDLE+DRAIN", "drain"), ("DRAIN*", "not_responding"), ("FAIL", "down"), ("MIXED+DRAIN", "drain"),
])
def test_state_kinds(state, kind):
    assert state_kind(state) == kind


def test_heals_remediation_reboots_and_returns_to_service():
    events = [e for scenario in ALL for e in recorded(scenario)]
    heals = cluster_goodput(events, 1796075339, 1796075429)["heals"]
    # the reboot of n3 (its drain then reboot is one heal), the crash of n4 resumed once, n2 twice
    assert (heals["rebooted"], heals["returned_to_service"], heals["total"]) == (1, 3, 4)
    assert heals["hostlist"] == "n[2-4]" and heals["resumed_by_remediation"] is None
    assert cluster_goodput(events, 1796075401, 1796075429)["heals"]["returned_to_service"] == 1  # n2 once


def test_heals_of_the_journal_that_accounting_does_not_show_yet():
    journal = {"path": "j.json", "exists": True, "trips": [], "trips_since": 1796075000, "heals": [
        {"node": "n3", "time": 1796075417, "action": "reboot", "reason": "Kill task failed"},   # in accounting
        {"node": "n1", "time": 1796075420, "action": "reboot", "reason": "Not responding"},     # not yet
        {"node": "n4", "time": 1796075421, "action": "resume", "reason": "Prolog error"}]}     # not yet
    heals = cluster_goodput(recorded("reboot"), 1796075400, 1796075429, journal=journal)["heals"]
    assert (heals["rebooted"], heals["returned_to_service"], heals["from_journal"]) == (2, 1, 2)


def test_flapping_holds_are_counted_once_each():
    flapping = recorded("flapping")
    hold = flapping_reason(2, 86400, "Prolog error")
    held = dict(flapping[-1], start=flapping[-1]["end"] + 5, end=None, reason=hold)
    down_again = dict(held, start=held["start"] + 60, state="DOWN*")  # only the state changed: the same hold
    held["end"] = down_again["start"]
    result = cluster_goodput(flapping + [held, down_again], 1796075390, held["start"] + 600)
    assert result["holds"]["flapping"] == {"count": 1, "nodes": 1, "hostlist": "n2"}
    assert result["holds"]["suspect"]["count"] == 0
    assert seconds_by_class(result)["clusterops_hold"] == 600


def journal(trips, since=1796070000, exists=True):
    return {"path": "/var/lib/clusterops/node-remediation/devcluster.json", "exists": exists, "heals": [],
            "trips": trips, "trips_since": since}


def trip(start, end):
    return {"start": start, "end": end, "broken": 5, "threshold": 3, "window": 1800, "classes": ["mount"]}


@pytest.mark.parametrize("given, figures, why", [
    (journal([trip(1796074000, 1796075000), trip(1796075200, 1796075300), trip(1796075400, None)]),
     {"trips": 2, "open_seconds": 100 + 29, "open_now": True}, None),
    (journal([]), {"trips": 0, "open_seconds": 0, "open_now": False}, None),
    (None, {"trips": None, "open_seconds": None}, "no heal journal given"),
    (journal([], exists=False), {"trips": None}, "no heal journal at /var/lib/clusterops"),
    (journal([], since=None), {"trips": None}, "records trips since never"),
    (journal([], since=1796075300), {"trips": None}, "records trips since 1796075300, after the window's start"),
])
def test_circuit_breaker_trips_come_from_the_journal(given, figures, why):
    result = cluster_goodput(recorded("reboot"), 1796075100, 1796075429, journal=given)
    assert dict((k, result["circuit"][k]) for k in figures) == figures
    whys = [u["why"] for u in result["unknown"] if u["figure"] == "circuit"]
    assert (whys[0].startswith(why) or why in whys[0]) if why else whys == []


def test_without_accounting_every_event_figure_is_unknown():
    result = cluster_goodput(None, 1796075100, 1796075429, journal=journal([]))
    assert result["accounting"] is False
    assert [result[k] for k in ("node_seconds", "by_class", "by_state", "heals", "holds")] == [None] * 5
    assert set(u["figure"] for u in result["unknown"]) >= {"node_seconds", "by_class", "heals", "holds"}
    assert result["circuit"]["trips"] == 0  # the journal still says


@pytest.mark.parametrize("recording, start, known", [
    ("purge-none", 0, True),
    ("purge-30days", 1796075429 - 30 * 86400, True),
    ("purge-30days", 1796075429 - 30 * 86400 - 1, False),
    ("purge-12months", 1796075429 - 12 * 28 * 86400 - 1, False),   # a month counts as 28 days
])
def test_a_window_older_than_slurmdbds_purge_is_unknown(recording, start, known):
    with io.open(os.path.join(FIXTURES, "slurm-26.05", "sacctmgr-show-configuration", recording + ".out")) as handle:
        purge = parse_event_purge(handle.read())
    result = cluster_goodput(recorded("reboot"), start, 1796075429, purge_after=purge)
    assert (result["node_seconds"] is not None) is known
    assert any("PurgeEventAfter" in u["why"] for u in result["unknown"]) is not known


def test_the_integration_tests_drain_healed_by_remediation():
    # slurm-26.05/node-events-goodput-kill-task: n3 drained "Kill task failed" 31 s, remediation's
    # reboot 3 s; the integration test measured 34.9 s from the drain to n3 back in service
    result = cluster_goodput(recorded("goodput-kill-task"), 1796421294, 1796421400)
    assert [(r["class"], r["node_seconds"], r["by_state"]["drain"], r["by_state"]["reboot"], r["open"])
            for r in result["by_class"]] == [("kill_task_failed", 34, 31, 3, 0)]
    assert (result["heals"]["rebooted"], result["heals"]["returned_to_service"]) == (1, 0)


def test_the_integration_tests_trip_resume_and_flapping_hold():
    # slurm-26.05/node-events-goodput-trip-flapping: n2 "Prolog error" 1796421650-60 (resumed by the
    # remediation after the breaker's trip, 1796421653-59, ended), again 64-67, then held as flapping
    # until 83; the trip as the journal recorded it, trips recorded from the window's start
    trips = [{"start": 1796421653, "end": 1796421659, "broken": 1, "threshold": 0, "window": 86400,
              "classes": ["prolog_error"]}]
    result = cluster_goodput(recorded("goodput-trip-flapping"), 1796421645, 1796421700,
                             journal=journal(trips, since=1796421645))
    assert seconds_by_class(result) == {"prolog_error": 13, "clusterops_hold": 16}
    assert result["holds"]["flapping"] == {"count": 1, "nodes": 1, "hostlist": "n2"}
    assert (result["heals"]["returned_to_service"], result["heals"]["rebooted"]) == (1, 0)
    assert (result["circuit"]["trips"], result["circuit"]["open_seconds"]) == (1, 6)

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""cluster_goodput_info as data: the one event read of every node and the one configuration read
it must make, answered with what real Slurm 26.05 printed (node-events-*, sacctmgr-show-configuration)."""

from __future__ import annotations

import io
import json
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.modules import cluster_goodput_info

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "slurm-26.05")
NOW = 1796075429
EVENTS = ["/usr/bin/sacctmgr", "--noheader", "--parsable2", "show", "event", "event=node",
          "start=2026-11-30T21:50:00", "format=NodeName,TimeStart,TimeEnd,State,User,Reason"]
CONFIGURATION = ["/usr/bin/sacctmgr", "show", "configuration"]


def answer(folder, name):
    base = os.path.join(FIXTURES, folder, name)
    parts = []
    for suffix in (".rc", ".out", ".err"):
        if suffix == ".err" and not os.path.exists(base + suffix):
            parts.append("")
            continue
        with io.open(base + suffix, encoding="utf-8", errors="replace") as handle:
            parts.append(handle.read())
    return int(parts[0].strip()), parts[1], parts[2]


def events(scenario):
    return (EVENTS,) + answer("node-events-" + scenario, "sacctmgr-show-event")


def configuration(name):
    return (CONFIGURATION,) + answer("sacctmgr-show-configuration", name)


@pytest.fixture(autouse=True)
def clock(monkeypatch):
    monkeypatch.setattr(cluster_goodput_info.time, "time", lambda: NOW)


def test_one_event_read_of_every_node_and_one_configuration_read(run_module):
    result = run_module(cluster_goodput_info, {"start": "1796075400"}, [events("reboot"), configuration("purge-none")])
    assert result["changed"] is False and not result.get("failed")
    assert result["commands"] == [EVENTS, CONFIGURATION]
    assert [(r["class"], r["node_seconds"]) for r in result["by_class"]] == [("kill_task_failed", 9)]
    assert result["heals"]["rebooted"] == 1 and (result["start"], result["end"]) == (1796075400, NOW)


def test_purge_event_after_given_makes_it_one_call(run_module):
    result = run_module(cluster_goodput_info, {"window": 29, "purge_event_after": "12months",
                                               "_ansible_check_mode": True}, [events("reboot")])
    assert result["commands"] == [EVENTS] and result["node_seconds"] == 9


def test_a_window_older_than_the_purge_is_unknown(run_module):
    result = run_module(cluster_goodput_info, {"window": 30 * 86400 + 1}, [
        (EVENTS[:6] + ["start=2026-10-31T21:50:28", EVENTS[-1]],) + events("reboot")[1:],
        configuration("purge-30days")])
    assert result["node_seconds"] is None and result["by_class"] is None
    assert any("PurgeEventAfter (2592000 s)" in u["why"] for u in result["unknown"])


def test_no_accounting_is_said_not_failed(run_module):
    result = run_module(cluster_goodput_info, {"window": 29}, [events("accounting-disabled")])
    assert result["accounting"] is False and result["node_seconds"] is None and not result.get("failed")
    assert result["commands"] == [EVENTS]


@pytest.mark.parametrize("calls, words", [
    ([events("slurmdbd-down")], "Connection refused"),
    ([events("reboot"), configuration("slurmdbd-down")], "reported an error"),
])
def test_slurmdbd_down_fails(run_module, calls, words):
    # the event recording of slurmdbd-down read n1 from another start: only its answer matters here
    result = run_module(cluster_goodput_info, {"window": 29}, calls)
    assert result["failed"] is True and words in json.dumps(result)


def test_a_bad_purge_value_fails(run_module):
    result = run_module(cluster_goodput_info, {"window": 29, "purge_event_after": "soon"}, [events("reboot")])
    assert result["failed"] is True and result["msg"].startswith("purge_event_after: ")


def test_trips_and_journal_heals_are_read_from_the_journal(run_module, tmp_path):
    path = tmp_path / "devcluster.json"
    path.write_text(json.dumps({"format": "clusterops.slurm/node-heals", "format_version": 2, "trips_since": 1796070000,
                                "heals": [{"node": "n1", "time": NOW - 5, "action": "reboot", "reason": "Not responding"}],
                                "trips": [{"start": NOW - 20, "end": NOW - 10, "broken": 4, "threshold": 3,
                                           "window": 1800, "classes": ["mount"]}]}))
    result = run_module(cluster_goodput_info, {"window": 29, "journal": str(path), "purge_event_after": "NONE"},
                        [events("reboot")])
    assert (result["circuit"]["trips"], result["circuit"]["open_seconds"]) == (1, 10)
    assert (result["heals"]["rebooted"], result["heals"]["from_journal"]) == (2, 1)
    assert [u["figure"] for u in result["unknown"]] == ["heals.resumed_by_remediation"]


def test_a_journal_that_cannot_be_read_fails(run_module, tmp_path):
    path = tmp_path / "devcluster.json"
    path.write_text("{")
    result = run_module(cluster_goodput_info, {"window": 29, "journal": str(path), "purge_event_after": "NONE"},
                        [events("reboot")])
    assert result["failed"] is True and "cannot read the heal journal" in result["msg"]

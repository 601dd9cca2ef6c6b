# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The heal journal: heals remediation made count against the budget until Slurm's accounting
shows them (slurmdbd records node events seconds late), never twice, and one run of a cluster acts
at a time."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation import journal
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import compile_classes
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.heals import count_heals
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import (
    DEFAULT_REBOOT_REASON,
    RemediationError,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import DEFAULT_REASON_CLASSES

T = 1796075206
CLASSES = compile_classes(DEFAULT_REASON_CLASSES)


def reboot_event(node, start, end=None):
    """A reboot by remediation as sacctmgr shows it (Slurm appends " : reboot issued")."""
    return {"node": node, "start": start, "end": end, "state": "DOWN*", "user": "root(0)",
            "reason": DEFAULT_REBOOT_REASON + " : reboot issued"}


def heal(node, time, action="reboot", reason="Not responding"):
    return {"node": node, "time": time, "action": action, "reason": reason}


def test_a_heal_accounting_does_not_show_yet_counts():
    # run 1 rebooted n2 at T; run 2, 5 s later, reads an accounting without that event yet
    counted = count_heals(journal.unseen_heals([heal("n2", T)], [], T - 3600, DEFAULT_REBOOT_REASON),
                          CLASSES, T - 3600)
    assert counted["n2"]["heals"] == 1


def test_a_heal_accounting_shows_counts_once():
    events = [reboot_event("n2", T - 1, T + 40)]
    assert journal.unseen_heals([heal("n2", T)], events, T - 3600, DEFAULT_REBOOT_REASON) == []
    assert count_heals(events, CLASSES, T - 3600)["n2"]["heals"] == 1


def test_one_event_matches_one_heal():
    # two reboots of n2 seconds apart, the accounting shows the first only: the second still counts
    left = journal.unseen_heals([heal("n2", T), heal("n2", T + 10)], [reboot_event("n2", T)], T - 3600,
                                DEFAULT_REBOOT_REASON)
    assert [e["start"] for e in left] == [T + 10]


@pytest.mark.parametrize("event, seen", [
    ({"node": "n3", "start": T - 600, "end": T + 1, "state": "DRAIN", "user": "root(0)",
      "reason": "Kill task failed"}, True),                      # its event closed by the resume
    ({"node": "n3", "start": T - 600, "end": T + 31, "state": "DRAIN", "user": "root(0)",
      "reason": "Kill task failed"}, False),                     # closed too late to be ours
    ({"node": "n4", "start": T - 600, "end": T, "state": "DRAIN", "user": "root(0)",
      "reason": "Kill task failed"}, False),                     # another node
    (reboot_event("n3", T), False),                              # not closed
])
def test_a_resume_is_matched_by_the_event_it_closed(event, seen):
    left = journal.unseen_heals([heal("n3", T, "resume", "Kill task failed")], [event], T - 3600,
                                DEFAULT_REBOOT_REASON)
    assert (left == []) is seen
    if not seen:
        assert left == [{"node": "n3", "start": T, "end": T, "state": "DRAIN", "user": "",
                         "reason": "Kill task failed"}]


def test_a_resume_from_the_journal_counts_as_a_heal_of_its_class():
    unseen = journal.unseen_heals([heal("n3", T, "resume", "Kill task failed")], [], T - 3600, DEFAULT_REBOOT_REASON)
    assert count_heals(unseen, CLASSES, T - 3600)["n3"] == {"heals": 1, "last": "Kill task failed"}


def test_record_keeps_the_unseen_adds_this_runs_and_forgets_the_old():
    heals = [heal("n1", T - 7200), heal("n2", T - 60), heal("n4", T - 30)]
    events = [reboot_event("n4", T - 30)]
    after = journal.record_heals(heals, events, {"reboot": ["n5"], "resume": ["n6"]},
                                 {"n5": "Not responding", "n6": "Prolog error"}, T, T - 3600, DEFAULT_REBOOT_REASON)
    assert after == [heal("n2", T - 60), heal("n5", T), heal("n6", T, "resume", "Prolog error")]


def test_write_then_read(tmp_path):
    path = str(tmp_path / "state" / "node-remediation" / "devcluster.json")
    journal.write_journal(path, [heal("n2", T)])
    assert journal.read_journal(path) == [heal("n2", T)]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert journal.read_journal(str(tmp_path / "none.json")) == []


@pytest.mark.parametrize("text, error", [
    ("{", "cannot read the heal journal"),
    ('{"format": "other", "heals": []}', "is not a heal journal"),
    ('{"format": "clusterops.slurm/node-heals", "heals": [{"node": "n1", "time": "soon", "action": "reboot", '
     '"reason": ""}]}', "holds a heal that is not"),
    ('{"format": "clusterops.slurm/node-heals", "heals": [{"node": "n1", "time": 5, "action": "drain", '
     '"reason": ""}]}', "holds a heal that is not"),
])
def test_a_journal_that_cannot_be_trusted_fails(tmp_path, text, error):
    path = tmp_path / "j.json"
    path.write_text(text)
    with pytest.raises(RemediationError, match=error):
        journal.read_journal(str(path))


def test_one_run_of_a_cluster_at_a_time(tmp_path):
    path = str(tmp_path / "nr" / "devcluster.json")
    held = journal.journal_lock(path, 0)
    try:
        with pytest.raises(RemediationError, match="another node remediation of this cluster holds"):
            journal.journal_lock(path, 0)
    finally:
        held.release()
    journal.journal_lock(path, 0).release()
    assert json.dumps(held.path).endswith('devcluster.json.lock"')


def test_each_heal_takes_the_closest_event():
    # resumes at T and T+25; events closing at T+25 (listed first) and T-20: the first heal takes
    # the closer T-20, so the second still finds its own
    events = [{"node": "n2", "start": T + 5, "end": T + 25, "state": "DRAIN", "user": "", "reason": "Prolog error"},
              {"node": "n2", "start": T - 60, "end": T - 20, "state": "DRAIN", "user": "", "reason": "Prolog error"}]
    heals = [heal("n2", T, "resume", "Prolog error"), heal("n2", T + 25, "resume", "Prolog error")]
    assert journal.unseen_heals(heals, events, T - 3600, DEFAULT_REBOOT_REASON) == []


def circuit(open_, broken=5, threshold=3, classes=("not_responding",)):
    return {"open": open_, "broken": broken, "threshold": threshold, "window": 1800,
            "groups": [{"class": name, "count": 1, "hostlist": "n1", "reason": ""} for name in classes]}


@pytest.mark.parametrize("runs, trips", [
    # (circuit open?, broken) per run, 60 s apart -> the trips (start, end, broken)
    ([(False, 0), (False, 0)], []),
    ([(True, 5)], [(T, None, 5)]),
    ([(True, 5), (True, 9), (True, 4)], [(T, None, 9)]),           # one trip while it stays open
    ([(True, 5), (False, 0)], [(T, T + 60, 5)]),                   # closed by the first closed run
    ([(True, 5), (False, 0), (False, 0), (True, 6)], [(T, T + 60, 5), (T + 180, None, 6)]),
])
def test_a_trip_opens_with_the_breaker_and_closes_with_it(runs, trips):
    recorded = []
    for index, (is_open, broken) in enumerate(runs):
        recorded = journal.record_trip(recorded, circuit(is_open, broken), T + 60 * index)
    assert [(t["start"], t["end"], t["broken"]) for t in recorded] == trips


def test_trips_are_kept_newest_and_written_and_read_back(tmp_path):
    recorded = []
    for index in range(journal.MAX_TRIPS + 2):
        recorded = journal.record_trip(recorded, circuit(True), T + 120 * index)
        recorded = journal.record_trip(recorded, circuit(False), T + 120 * index + 60)
    assert len(recorded) == journal.MAX_TRIPS and recorded[0]["start"] == T + 240
    path = str(tmp_path / "devcluster.json")
    journal.write_journal(path, [heal("n2", T)], recorded, T)
    doc = journal.read_journal_file(path)
    assert doc == {"exists": True, "heals": [heal("n2", T)], "trips": recorded, "trips_since": T, "rebooting": []}


def test_a_missing_journal_knows_no_trips(tmp_path):
    missing = journal.read_journal_file(str(tmp_path / "none.json"))
    assert missing == {"exists": False, "heals": [], "trips": [], "trips_since": None, "rebooting": []}


def test_format_1_reads_as_a_journal_without_trips(tmp_path):
    path = tmp_path / "v1.json"
    path.write_text(json.dumps({"format": journal.JOURNAL_FORMAT, "format_version": 1, "heals": [heal("n1", T)]}))
    assert journal.read_journal_file(str(path)) == {"exists": True, "heals": [heal("n1", T)], "trips": [],
                                                    "trips_since": None, "rebooting": []}


@pytest.mark.parametrize("extra", [
    {"trips": [{"start": "soon"}]},
    {"trips": {}},
    {"trips_since": "yesterday"},
    {"format_version": 4},
])
def test_trips_that_cannot_be_trusted_fail(tmp_path, extra):
    path = tmp_path / "j.json"
    path.write_text(json.dumps(dict({"format": journal.JOURNAL_FORMAT, "format_version": 2, "heals": []}, **extra)))
    with pytest.raises(RemediationError):
        journal.read_journal_file(str(path))


def test_reboots_waited_for_are_written_and_read_back(tmp_path):
    path = str(tmp_path / "devcluster.json")
    journal.write_journal(path, [], [], T, rebooting=[{"node": "n2", "time": T}])
    assert journal.read_journal_file(path)["rebooting"] == [{"node": "n2", "time": T}]


@pytest.mark.parametrize("version", [1, 2])
def test_formats_before_3_wait_for_no_reboot(tmp_path, version):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": journal.JOURNAL_FORMAT, "format_version": version, "heals": []}))
    assert journal.read_journal_file(str(path))["rebooting"] == []


@pytest.mark.parametrize("rebooting", [{}, [{"node": "n2"}], [{"node": 2, "time": T}], [{"node": "n2", "time": "now"}]])
def test_reboots_waited_for_that_cannot_be_trusted_fail(tmp_path, rebooting):
    path = tmp_path / "j.json"
    path.write_text(json.dumps({"format": journal.JOURNAL_FORMAT, "format_version": 3, "heals": [],
                                "rebooting": rebooting}))
    with pytest.raises(RemediationError, match="reboots waited for"):
        journal.read_journal_file(str(path))

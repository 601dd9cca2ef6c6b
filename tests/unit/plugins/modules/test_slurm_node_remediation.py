# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_node_remediation as data: every run_command call it must make (one node read, the event
read when a healing budget is set, one scontrol call per kind of change), answered with what the
real dev cluster printed; it returns the plan, never the node list."""

from __future__ import annotations

import io
import json
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation import runner
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.heals import flapping_reason
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.journal import journal_lock
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import node_change
from ansible_collections.clusterops.slurm.plugins.modules import slurm_node_remediation

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")
VERSION_2205 = (["/usr/bin/sinfo", "--version"], 0, "slurm-wlm 22.05.8\n", "")
SINFO = ["/usr/bin/sinfo", "--json"]
REBOOT_N2 = ["/usr/bin/scontrol", "reboot", "ASAP", "nextstate=RESUME",
             "reason=clusterops.slurm remediation: reboot", "n2"]
SACCTMGR = ["/usr/bin/sacctmgr", "--noheader", "--parsable2", "show", "event", "event=node",
            "start=2026-11-30T21:46:46", "nodes=n2", "format=NodeName,TimeStart,TimeEnd,State,User,Reason"]
NOW = 1796075206 + 86400
#: n2 crashed: DOWN+NOT_RESPONDING "Not responding" (a reboot); n1, n3, n4 idle.
NO_BUDGET = {"heal_budget": 0, "circuit": {"window": 0}}


def recorded(name):
    with io.open(os.path.join(FIXTURES, "devcluster", name), encoding="utf-8") as handle:
        return handle.read()


def recorded_run(release, scenario, command):
    base = os.path.join(FIXTURES, "slurm-" + release, scenario, command)
    with io.open(base + ".rc", encoding="ascii") as handle:
        rc = int(handle.read().strip())
    with io.open(base + ".out", encoding="utf-8") as handle:
        out = handle.read()
    err = ""
    if os.path.exists(base + ".err"):
        with io.open(base + ".err", encoding="utf-8") as handle:
            err = handle.read()
    return rc, out, err


def crashed_n2():
    return (SINFO, 0, recorded("sinfo_json_crashed_n2.json"), "")


def test_reads_once_plans_and_reboots_in_one_call(run_module):
    result = run_module(slurm_node_remediation, NO_BUDGET, [VERSION_2205, crashed_n2(), (REBOOT_N2, 0, "", "")])
    assert result["changed"] is True and not result.get("failed")
    assert result["rebooted"] == ["n2"] and result["resumed"] == [] and result["drained"] == []
    assert result["plan"]["reboot"] == ["n2"] and result["plan"]["total"] == 4
    assert result["commands"] == [VERSION_2205[0], SINFO, REBOOT_N2]
    assert "nodes" not in result and "nodes" not in result["plan"]  # the node list stays in the module
    assert result["failed_nodes"] == {} and result["errors"] == []


def test_check_mode_plans_and_changes_nothing(run_module):
    result = run_module(slurm_node_remediation, dict(NO_BUDGET, _ansible_check_mode=True, _ansible_diff=True),
                        [VERSION_2205, crashed_n2()])
    assert result["changed"] is True and result["rebooted"] == ["n2"]
    assert [c["command"] for c in result["changes"]] == [REBOOT_N2]
    assert result["diff"]["before"]["n2"]["state"].startswith("DOWN")
    assert "REBOOT_REQUESTED" in result["diff"]["after"]["n2"]["state"]


def test_nothing_to_heal_is_not_a_change(run_module):
    result = run_module(slurm_node_remediation, NO_BUDGET,
                        [VERSION_2205, (SINFO, 0, recorded("sinfo_json_all_idle.json"), "")])
    assert result["changed"] is False and result["changes"] == [] and result["plan"]["skipped"] == []


def test_slurm_refusing_a_change_is_reported_not_fatal(run_module):
    refused = "slurm_update error: Invalid node state specified\n"
    result = run_module(slurm_node_remediation, NO_BUDGET,
                        [VERSION_2205, crashed_n2(), (REBOOT_N2, 1, "", refused), crashed_n2()])
    assert not result.get("failed") and result["changed"] is False
    assert result["failed_nodes"] == {"n2": "slurm_update error: Invalid node state specified"}
    assert result["errors"] == ["reboot n2: slurm_update error: Invalid node state specified"]


def test_slurmdbd_down_fails_before_anything_acts(run_module, monkeypatch):
    monkeypatch.setattr(runner.time, "time", lambda: NOW)
    rc, out, err = recorded_run("22.05", "node-events-slurmdbd-down", "sacctmgr-show-event")
    result = run_module(slurm_node_remediation, {"circuit": {"window": 0}},
                        [VERSION_2205, crashed_n2(), (SACCTMGR, rc, out, err)])
    assert result["failed"] is True and "sacctmgr failed" in result["msg"]
    assert "plan" not in result and REBOOT_N2 not in result["commands"]


def test_skipped_nodes_are_summarised_and_reboots_in_flight_count(run_module):
    # n1 rebooting (REBOOT_REQUESTED), n3 drained by an admin: skipped; n2 crashed, but the one
    # node of the blast radius (4 nodes, 10 %) is n1's reboot in flight: overflow, no call.
    result = run_module(slurm_node_remediation, NO_BUDGET,
                        [VERSION_2205, (SINFO, 0, recorded("sinfo_json_mixed.json"), "")])
    assert result["changed"] is False and result["changes"] == []
    assert result["plan"]["in_flight"] == {"count": 1, "hostlist": "n1"}
    assert [(o["hostlist"], o["count"]) for o in result["plan"]["overflow"]] == [("n2", 1)]
    assert sorted((g["hostlist"], g["count"], g["why"]) for g in result["plan"]["skipped"]) == [
        ("n1", 1, "a reboot is already requested"), ("n3", 1, "reason matches no class (drained on purpose?)")]


def test_classes_and_the_deprecated_allowlist_exclude_each_other(run_module):
    result = run_module(slurm_node_remediation, {"classes": [], "allow_reasons": ["x"]}, [])
    assert result["failed"] is True and "mutually exclusive" in result["msg"]


def test_a_bad_scope_fails_before_slurm_is_read_as_a_configuration_error(run_module):
    """Issue 37: every setting is checked before the read, so a wrong one is never reported as Slurm's."""
    result = run_module(slurm_node_remediation, dict(NO_BUDGET, scope="[?"), [])
    assert result["failed"] is True and "not a valid JMESPath expression" in result["msg"]
    assert result["commands"] == [] and result["failed_cause"] == "configuration"


@pytest.mark.parametrize("settings, words", [
    (dict(max_percent=150), "max_percent between 0 and 100"),
    (dict(classes=[{"name": "x", "match": "(", "action": "resume"}]), "x"),
    (dict(classes=[{"name": "y", "match": "^y$", "action": "explode"}]), "explode"),
    (dict(max_nodes=-1), "max_nodes must be >= 0")])
def test_every_wrong_setting_fails_before_slurm_is_read(run_module, settings, words):
    result = run_module(slurm_node_remediation, dict(NO_BUDGET, **settings), [])
    assert result["failed"] is True and words in result["msg"], result["msg"]
    assert result["commands"] == [] and result["failed_cause"] == "configuration"


def test_events_before_heal_since_are_not_read(run_module, monkeypatch):
    monkeypatch.setattr(runner.time, "time", lambda: NOW)
    later = [a.replace("start=2026-11-30T21:46:46", "start=2026-11-30T22:46:46") for a in SACCTMGR]
    result = run_module(slurm_node_remediation, {"circuit": {"window": 0}, "heal_since": NOW - 86400 + 3600},
                        [VERSION_2205, crashed_n2(), (later, 0, "", ""), (REBOOT_N2, 0, "", "")])
    assert result["commands"][2] == later and result["rebooted"] == ["n2"]


def test_only_the_events_of_nodes_a_class_heals_are_read(run_module, monkeypatch):
    # n1 rebooting and n3 drained by an admin: no healing class matches their reasons, so their
    # events are not read; n2 (crashed, "Not responding") is the one node asked for.
    monkeypatch.setattr(runner.time, "time", lambda: NOW)
    result = run_module(slurm_node_remediation, {"circuit": {"window": 0}},
                        [VERSION_2205, (SINFO, 0, recorded("sinfo_json_mixed.json"), ""), (SACCTMGR, 0, "", "")])
    assert result["commands"] == [VERSION_2205[0], SINFO, SACCTMGR] and not result.get("failed")


def test_no_node_to_heal_reads_no_event(run_module):
    result = run_module(slurm_node_remediation, {"circuit": {"window": 0}},
                        [VERSION_2205, (SINFO, 0, recorded("sinfo_json_all_idle.json"), "")])
    assert result["commands"] == [VERSION_2205[0], SINFO] and result["changed"] is False


def test_back_to_back_runs_count_the_heal_accounting_does_not_show_yet(run_module, monkeypatch, tmp_path):
    """Run 1 reboots n2 and writes it into the journal; run 2, seconds later, reads an accounting
    that does not hold that reboot yet (slurmdbd writes node events late) and n2 crashed again:
    the journal's heal spends the budget of 1, so n2 is held as flapping, not rebooted twice."""
    monkeypatch.setattr(runner.time, "time", lambda: NOW)
    args = {"circuit": {"window": 0}, "heal_budget": 1, "journal": str(tmp_path / "nr" / "devcluster.json"),
            "lock_timeout": 0}
    first = run_module(slurm_node_remediation, args, [VERSION_2205, crashed_n2(), (SACCTMGR, 0, "", ""),
                                                      (REBOOT_N2, 0, "", "")])
    assert first["rebooted"] == ["n2"]
    with open(args["journal"]) as handle:
        assert json.load(handle)["heals"] == [{"node": "n2", "time": NOW, "action": "reboot",
                                               "reason": "Not responding"}]
    drain = list(node_change("drain", "n2", flapping_reason(1, 86400, "Not responding")))
    second = run_module(slurm_node_remediation, args, [VERSION_2205, crashed_n2(), (SACCTMGR, 0, "", ""),
                                                       (["/usr/bin/scontrol"] + drain[1], 0, "", "")])
    assert second["rebooted"] == [] and second["drained"] == ["n2"]
    assert [f["hostlist"] for f in second["plan"]["flapping"]] == ["n2"]


def test_check_mode_reads_the_journal_and_neither_locks_nor_writes_it(run_module, monkeypatch, tmp_path):
    monkeypatch.setattr(runner.time, "time", lambda: NOW)
    path = tmp_path / "devcluster.json"
    args = {"circuit": {"window": 0}, "heal_budget": 1, "journal": str(path), "_ansible_check_mode": True}
    result = run_module(slurm_node_remediation, args, [VERSION_2205, crashed_n2(), (SACCTMGR, 0, "", "")])
    assert result["rebooted"] == ["n2"] and not path.exists() and not (tmp_path / "devcluster.json.lock").exists()


def test_a_second_run_of_the_cluster_waits_then_fails_having_changed_nothing(run_module, tmp_path):
    path = str(tmp_path / "devcluster.json")
    held = journal_lock(path, 0)
    try:
        result = run_module(slurm_node_remediation, dict(NO_BUDGET, journal=path, lock_timeout=0), [])
    finally:
        held.release()
    assert result["failed"] is True and "another node remediation of this cluster holds" in result["msg"]
    assert result["commands"] == []


def test_without_a_budget_no_heal_is_written(run_module, tmp_path):
    path = tmp_path / "devcluster.json"
    result = run_module(slurm_node_remediation, dict(NO_BUDGET, journal=str(path)),
                        [VERSION_2205, crashed_n2(), (REBOOT_N2, 0, "", "")])
    assert result["rebooted"] == ["n2"]
    with open(str(path)) as handle:
        assert json.load(handle)["heals"] == []


def test_a_circuit_breaker_trip_is_recorded_in_the_journal_until_it_closes(run_module, monkeypatch, tmp_path):
    """The journal is the one durable record of the breaker's trips: run 1 finds n2 broken with a
    threshold of 0 (the breaker opens, nothing is healed) and opens a trip; run 2, the breaker off,
    reboots n2 and closes it; trips_since says from when trips are known."""
    path = tmp_path / "devcluster.json"
    monkeypatch.setattr(runner.time, "time", lambda: NOW)
    tripped = run_module(slurm_node_remediation, dict(NO_BUDGET, journal=str(path),
                                                      circuit={"window": 10 ** 9, "min_nodes": 0}),
                         [VERSION_2205, crashed_n2()])
    assert tripped["plan"]["circuit"]["open"] is True and tripped["rebooted"] == []
    with open(str(path)) as handle:
        doc = json.load(handle)
    assert doc["format_version"] == 3 and doc["trips_since"] == NOW
    assert doc["trips"] == [{"start": NOW, "end": None, "broken": 1, "threshold": 0, "window": 10 ** 9,
                             "classes": ["not_responding"]}]
    monkeypatch.setattr(runner.time, "time", lambda: NOW + 600)
    closed = run_module(slurm_node_remediation, dict(NO_BUDGET, journal=str(path)),
                        [VERSION_2205, crashed_n2(), (REBOOT_N2, 0, "", "")])
    assert closed["rebooted"] == ["n2"]
    with open(str(path)) as handle:
        doc = json.load(handle)
    assert [(t["start"], t["end"]) for t in doc["trips"]] == [(NOW, NOW + 600)] and doc["trips_since"] == NOW


CONFIG = (["/usr/bin/scontrol", "show", "config"], 0, "SlurmUser               = slurm(64030)\nClusterName = dev\n", "")


@pytest.mark.parametrize("level, refused", [("None", True), ("", True), ("Operator", False), ("Administrator", False)])
def test_check_mode_asks_whether_the_account_may_change_nodes(run_module, monkeypatch, level, refused):
    """Issue 37: --check of a run that would reboot n2, as a user that is neither root nor SlurmUser: only a
    Slurm operator passes; the others fail as the real run would, cause permission."""
    monkeypatch.setattr(runner.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(runner, "effective_user", lambda: "op")
    level_call = (["/usr/bin/sacctmgr", "-nP", "show", "user", "op", "format=AdminLevel"], 0,
                  level + "\n" if level else "", "")
    result = run_module(slurm_node_remediation, dict(NO_BUDGET, _ansible_check_mode=True),
                        [VERSION_2205, crashed_n2(), CONFIG, level_call])
    assert bool(result.get("failed")) == refused, result
    if refused:
        assert result["failed_cause"] == "permission" and "neither root, SlurmUser (slurm) nor a Slurm operator" in result["msg"]
    else:
        assert result["rebooted"] == ["n2"]  # what it would do


def test_check_mode_as_slurm_user_or_with_nothing_to_change_asks_nothing_more(run_module, monkeypatch):
    monkeypatch.setattr(runner.os, "geteuid", lambda: 64030)
    monkeypatch.setattr(runner, "effective_user", lambda: "slurm")
    result = run_module(slurm_node_remediation, dict(NO_BUDGET, _ansible_check_mode=True),
                        [VERSION_2205, crashed_n2(), CONFIG])
    assert not result.get("failed") and result["rebooted"] == ["n2"]


def sinfo(name):
    return (SINFO, 0, recorded(name), "")


def test_a_reboot_is_requested_until_a_later_run_sees_the_node_back(run_module, monkeypatch, tmp_path):
    """Run 1 reboots the crashed n2: requested, not healed; run 2 finds it rebooting (Slurm's
    REBOOT_REQUESTED, recorded): still requested; run 3 finds it idle: healed (returned), and the
    journal no longer waits for it; run 4 has nothing to say about it."""
    monkeypatch.setattr(runner.time, "time", lambda: NOW)
    path = tmp_path / "devcluster.json"
    args = dict(NO_BUDGET, journal=str(path), lock_timeout=0)
    first = run_module(slurm_node_remediation, args, [VERSION_2205, crashed_n2(), (REBOOT_N2, 0, "", "")])
    assert (first["rebooted"], first["rebooting"], first["returned"]) == (["n2"], ["n2"], [])
    with open(str(path)) as handle:
        assert json.load(handle)["rebooting"] == [{"node": "n2", "time": NOW}]
    second = run_module(slurm_node_remediation, args, [VERSION_2205, sinfo("sinfo_json_crashed_reboot_requested_n2.json")])
    assert (second["rebooted"], second["rebooting"], second["returned"]) == ([], ["n2"], [])
    third = run_module(slurm_node_remediation, args, [VERSION_2205, sinfo("sinfo_json_all_idle.json")])
    assert (third["rebooting"], third["returned"], third["changed"]) == ([], ["n2"], False)
    with open(str(path)) as handle:
        assert json.load(handle)["rebooting"] == []
    fourth = run_module(slurm_node_remediation, args, [VERSION_2205, sinfo("sinfo_json_all_idle.json")])
    assert (fourth["rebooting"], fourth["returned"]) == ([], [])


def test_a_reboot_that_timed_out_is_neither_waited_for_nor_healed(run_module, monkeypatch, tmp_path):
    monkeypatch.setattr(runner.time, "time", lambda: NOW)
    path = tmp_path / "devcluster.json"
    args = dict(NO_BUDGET, journal=str(path), lock_timeout=0)
    run_module(slurm_node_remediation, args, [VERSION_2205, crashed_n2(), (REBOOT_N2, 0, "", "")])
    later = run_module(slurm_node_remediation, args, [VERSION_2205, sinfo("sinfo_json_reboot_timed_out_n2.json")])
    assert (later["rebooting"], later["returned"]) == ([], [])
    assert later["plan"]["human"][0]["class"] == "resume_timeout"


def test_check_mode_requests_no_reboot_and_writes_no_wait(run_module, monkeypatch, tmp_path):
    monkeypatch.setattr(runner.time, "time", lambda: NOW)
    path = tmp_path / "devcluster.json"
    result = run_module(slurm_node_remediation, dict(NO_BUDGET, journal=str(path), _ansible_check_mode=True),
                        [VERSION_2205, crashed_n2()])
    assert (result["rebooted"], result["rebooting"], result["returned"]) == (["n2"], [], [])
    assert not path.exists()


def test_a_reboot_requested_before_heal_since_is_forgotten(run_module, monkeypatch, tmp_path):
    """heal_since (and heal_window) bound what remediation remembers of its heals: a reboot requested
    before it is neither waited for nor reported healed."""
    monkeypatch.setattr(runner.time, "time", lambda: NOW)
    path = tmp_path / "devcluster.json"
    args = dict(NO_BUDGET, journal=str(path), lock_timeout=0)
    run_module(slurm_node_remediation, args, [VERSION_2205, crashed_n2(), (REBOOT_N2, 0, "", "")])
    later = run_module(slurm_node_remediation, dict(args, heal_since=NOW + 1),
                       [VERSION_2205, sinfo("sinfo_json_all_idle.json")])
    assert (later["rebooting"], later["returned"]) == ([], [])

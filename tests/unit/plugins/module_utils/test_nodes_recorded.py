# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parsers fed with outputs recorded from the real dev cluster (tests/unit/fixtures/devcluster)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import expand_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import (
    NodeParseError,
    parse_nodes_json,
    parse_sinfo_text,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import SEP
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import reason_origin
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.policy import plan_remediation
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import PolicySettings


def skipped_by_name(plan):
    """{name: its group} from the plan's summarised ``skipped`` ({why, reason, count, hostlist})."""
    groups = {}
    for group in plan["skipped"]:
        names = expand_hostlist(group["hostlist"])
        assert len(names) == group["count"]
        groups.update((name, group) for name in names)
    return groups


def skipped_names(plan):
    return sorted(skipped_by_name(plan), key=lambda name: (len(name), name))


FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "devcluster")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def text_from_pipes(name):
    """The recorded ``sinfo -N -h -o '%N|%P|%T|%E'`` in the text source's own format."""
    lines = []
    for line in fixture(name).splitlines():
        node, partition, state, reason = line.split("|", 3)
        lines.append(SEP.join([node, partition, state, "2", "1024", "(null)", "(null)",
                               "Unknown", "Unknown", reason]))
    return "\n".join(lines)


# scenario -> {node: (base, flags, reason)} as the recorded JSON says
SCENARIOS = {
    "all_idle": {"n1": ("IDLE", [], ""), "n2": ("IDLE", [], "")},
    "crashed_n2": {"n2": ("DOWN", ["NOT_RESPONDING"], "Not responding"), "n1": ("IDLE", [], "")},
    "crashed_reboot_requested_n2": {
        "n2": ("DOWN", ["DRAIN", "NOT_RESPONDING", "REBOOT_ISSUED"], "clusterops: test : reboot issued")},
    "powered_on_down_n2": {"n2": ("DOWN", [], "Node unexpectedly rebooted")},
    "reboot_timed_out_n2": {
        "n2": ("DOWN", ["NOT_RESPONDING"], "clusterops: test : reboot issued : reboot timed out")},
    "drained_n3": {"n3": ("IDLE", ["DRAIN"], "Kill task failed")},
    # only slurmd died: DOWN+NOT_RESPONDING; back with the same boot time: DOWN, responding
    "slurmd_dead_n4": {"n4": ("DOWN", ["NOT_RESPONDING"], "Not responding")},
    "slurmd_back_down_n4": {"n4": ("DOWN", [], "Not responding")},
    "mixed": {"n1": ("MIXED", ["DRAIN", "REBOOT_REQUESTED"], "clusterops: Not responding"),
              "n3": ("IDLE", ["DRAIN"], "maintenance: swap DIMM"),
              "n2": ("DOWN", ["NOT_RESPONDING"], "Not responding")},
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_recorded_json(scenario):
    nodes = dict((n["name"], n) for n in parse_nodes_json(fixture("sinfo_json_%s.json" % scenario)))
    assert sorted(nodes) == ["n1", "n2", "n3", "n4"]
    for name, (base, flags, reason) in SCENARIOS[scenario].items():
        node = nodes[name]
        assert node["state"] == base, name
        assert node["flags"] == sorted(flags), name
        if reason is not None:
            assert node["reason"] == reason
        assert node["partitions"] == ["debug", "train"]
        assert isinstance(node["boot_time"], int)


WITH_TEXT = [s for s in sorted(SCENARIOS) if os.path.exists(os.path.join(FIXTURES, "sinfo_N_%s.txt" % s))]


def test_most_scenarios_have_a_text_recording():
    assert len(WITH_TEXT) >= 7


@pytest.mark.parametrize("scenario", WITH_TEXT)
def test_recorded_text_agrees_with_json(scenario):
    from_json = dict((n["name"], n) for n in parse_nodes_json(fixture("sinfo_json_%s.json" % scenario)))
    from_text = parse_sinfo_text(text_from_pipes("sinfo_N_%s.txt" % scenario))
    assert [n["name"] for n in from_text] == ["n1", "n2", "n3", "n4"]
    for node in from_text:
        other = from_json[node["name"]]
        assert sorted(node["partitions"]) == sorted(other["partitions"])
        assert node["reason"] == other["reason"]
        # sinfo's one word is lossy: "drained" hides the base, "reboot^" hides DRAIN and
        # NOT_RESPONDING. What the text does show must be true.
        assert set(node["flags"]) <= set(other["flags"])
        if node["state"] is not None:
            assert node["state"] == other["state"]
    # ... and the decisions taken from either source are the same.
    by_json = plan_remediation(list(from_json.values()), PolicySettings(max_nodes=100, max_percent=100))
    by_text = plan_remediation(from_text, PolicySettings(max_nodes=100, max_percent=100))
    for key in ("reboot", "resume"):
        assert by_text[key] == by_json[key]
    assert skipped_names(by_text) == skipped_names(by_json)


def test_recorded_policy_decisions():
    """The real states Slurm showed after each failure lead to the right action."""
    def plan(scenario):
        nodes = parse_nodes_json(fixture("sinfo_json_%s.json" % scenario))
        return plan_remediation(nodes, PolicySettings(max_nodes=100, max_percent=100))
    assert plan("crashed_n2")["reboot"] == ["n2"]
    assert plan("powered_on_down_n2")["resume"] == ["n2"]
    pending = plan("crashed_reboot_requested_n2")
    assert pending["reboot"] == [] and pending["skipped"][0]["why"] == "a reboot is already in progress"
    # a reboot that timed out is for a human
    timed_out = plan("reboot_timed_out_n2")
    assert timed_out["reboot"] == [] and timed_out["resume"] == []
    assert [h["class"] for h in timed_out["human"]] == ["resume_timeout"] and timed_out["in_flight"]["count"] == 0
    assert plan("drained_n3")["reboot"] == ["n3"]
    assert plan("slurmd_dead_n4")["reboot"] == ["n4"]
    # slurmd restarted, node responds again: it only needs returning to service
    assert plan("slurmd_back_down_n4")["resume"] == ["n4"]
    mixed = plan("mixed")
    assert mixed["reboot"] == ["n2"]
    assert skipped_names(mixed) == ["n1", "n3"]


# ---------------------------------------------------------------------------------------------
# Slurm 24.11.5 (Debian trixie), recorded in podman (tests/unit/fixtures/slurm-24.11/README.md).
# Each snapshot's `scontrol show nodes --json` is checked against the same moment's
# `scontrol show node -o` text, which Slurm writes from the same node records.
# ---------------------------------------------------------------------------------------------
RELEASE_FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")
SNAPSHOTS_2411 = sorted(
    d for d in os.listdir(os.path.join(RELEASE_FIXTURES, "slurm-24.11"))
    if os.path.isfile(os.path.join(RELEASE_FIXTURES, "slurm-24.11", d, "scontrol-show-node-json.out")))


def release_fixture(release, snapshot, name):
    with open(os.path.join(RELEASE_FIXTURES, "slurm-" + release, snapshot, name), "rb") as handle:
        return handle.read().decode("utf-8", "replace")


def scontrol_text_nodes(text):
    """{name: (NodeState, reason)} from ``scontrol show node -o`` (Reason=... is last but for
    the `` [user@time]`` Slurm appends)."""
    from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import parse_state
    import re
    result = {}
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        name = re.match(r"NodeName=(\S+)", line).group(1)
        state = parse_state(re.search(r" State=(\S+)", line).group(1))
        match = re.search(r" Reason=(.*?) \[[^\]]*\]\s*$", line)
        result[name] = (state, match.group(1) if match else "")
    return result


# 09 was taken while n3 went from ALLOCATED+NOT_RESPONDING to DOWN: its two reads differ.
@pytest.mark.parametrize("snapshot", [s for s in SNAPSHOTS_2411 if s != "09-during-node-fail"])
def test_2411_scontrol_json_matches_scontrol_text(snapshot):
    nodes = parse_nodes_json(release_fixture("24.11", snapshot, "scontrol-show-node-json.out"))
    text = scontrol_text_nodes(release_fixture("24.11", snapshot, "scontrol-show-node.out"))
    assert sorted(n["name"] for n in nodes) == sorted(text) == ["n1", "n2", "n3"]
    for node in nodes:
        state, reason = text[node["name"]]
        assert (node["state"], node["flags"]) == (state.base, sorted(state.flags)), node["name"]
        if node["reason"]:
            assert node["reason"] == reason, node["name"]


def test_2411_two_drained_nodes_keep_their_own_reasons():
    """sinfo --json groups n1 and n2 (same state) into one record with one reason;
    scontrol show nodes --json, which the reader uses from 23.02 on, keeps both."""
    nodes = dict((n["name"], n) for n in parse_nodes_json(
        release_fixture("24.11", "13-two-drained-different-reasons", "scontrol-show-node-json.out")))
    assert (nodes["n1"]["reason"], nodes["n2"]["reason"]) == ("reason A", "reason B")
    assert nodes["n1"]["drained"] and nodes["n2"]["drained"]
    assert nodes["n3"]["flags"] == ["NOT_RESPONDING"] and not nodes["n3"]["responding"]


@pytest.mark.parametrize("snapshot", SNAPSHOTS_2411)
def test_2411_sinfo_json_groups_are_refused_naming_the_release(snapshot):
    with pytest.raises(NodeParseError, match=r"Slurm 24\.11\.5\) lists node groups"):
        parse_nodes_json(release_fixture("24.11", snapshot, "sinfo-json.out"), "sinfo --json")


def test_2411_kill_task_failed_and_crash_are_planned():
    nodes = parse_nodes_json(
        release_fixture("24.11", "04-n1-down-n2-killtask", "scontrol-show-node-json.out"))
    plan = plan_remediation(nodes, PolicySettings(max_nodes=10, max_percent=100))
    assert plan["reboot"] == ["n1", "n2"]
    assert skipped_names(plan) == ["n3"]


def test_2411_the_tail_slurmctld_appends_is_taken_off_the_recorded_reason():
    """24.11 appended " : Not responding" to n3's reason when it stopped answering (23.02+
    set_node_reason); n3 answers again (DOWN, no NOT_RESPONDING), its reason is an admin's."""
    nodes = dict((n["name"], n) for n in parse_nodes_json(
        release_fixture("24.11", "04-n1-down-n2-killtask", "scontrol-show-node-json.out")))
    assert nodes["n3"]["reason"] == "clusterops test : Not responding"
    assert reason_origin(nodes["n3"]["reason"]) == ("clusterops test", ("Not responding",))
    line = [l for l in release_fixture("24.11", "04-n1-down-n2-killtask", "scontrol-show-node.out").splitlines()
            if l.startswith("NodeName=n3 ")][0]
    assert reason_origin(line.split(" Reason=", 1)[1].rstrip()) == ("clusterops test", ("Not responding",))
    plan = plan_remediation(list(nodes.values()), PolicySettings(max_nodes=10, max_percent=100))
    assert skipped_names(plan) == ["n3"] and plan["human"] == []


def test_2205_reboot_issued_tail_of_a_recorded_reboot():
    nodes = parse_nodes_json(release_fixture("22.05", "rebooting", "sinfo-json.out"))
    n3 = [n for n in nodes if n["name"] == "n3"][0]
    assert reason_origin(n3["reason"]) == ("clusterops: fixture", ("reboot issued",))


def test_2411_reboot_states_are_left_alone():
    nodes = parse_nodes_json(
        release_fixture("24.11", "06-right-after-remediation", "scontrol-show-node-json.out"))
    plan = plan_remediation(nodes, PolicySettings(max_nodes=10, max_percent=100))
    assert plan["reboot"] == [] and plan["resume"] == []
    assert skipped_names(plan) == ["n1", "n2"]


# ---------------------------------------------------------------------------------------------
# Every release, recorded by dev/cluster/record-fixtures.sh from the dev clusters (22.05 on the
# host, 24.11 and 26.05 in podman): the reader's source of each release against the same
# moment's `scontrol show node -o`, and the remediation plan of each scenario.
# ---------------------------------------------------------------------------------------------
RELEASES = ("22.05", "24.11", "26.05")
#: The one node source of each release (see _nodes.read_nodes).
NODE_SOURCE = {"22.05": "sinfo-json.out", "24.11": "scontrol-show-nodes-json.out",
               "26.05": "scontrol-show-nodes-json.out"}


def recorded_nodes(release, scenario):
    return dict((n["name"], n) for n in parse_nodes_json(
        release_fixture(release, scenario, NODE_SOURCE[release])))


def scenarios_of(release):
    folder = os.path.join(RELEASE_FIXTURES, "slurm-" + release)
    # controller-stopped: 22.05 exits 0 there with an errors list (see the test of its own)
    return sorted(d for d in os.listdir(folder)
                  if not d[:1].isdigit() and d != "controller-stopped"
                  and os.path.isfile(os.path.join(folder, d, NODE_SOURCE[release]))
                  and os.path.isfile(os.path.join(folder, d, "scontrol-show-node-oneliner.out"))
                  and open(os.path.join(folder, d, NODE_SOURCE[release].replace(".out", ".rc"))).read().strip() == "0")


@pytest.mark.parametrize("release, scenario",
                         [(r, s) for r in RELEASES for s in scenarios_of(r)])
def test_every_release_json_matches_scontrol_text(release, scenario):
    nodes = recorded_nodes(release, scenario)
    text = scontrol_text_nodes(release_fixture(release, scenario, "scontrol-show-node-oneliner.out"))
    assert sorted(nodes) == sorted(text) == ["n1", "n2", "n3", "n4"]
    for name, node in nodes.items():
        state, reason = text[name]
        assert (node["state"], node["flags"]) == (state.base, sorted(state.flags)), name
        if node["reason"]:
            assert node["reason"] == reason, name


def test_every_release_was_recorded():
    for release in RELEASES:
        assert {"kill-task-failed", "drained-admin", "completing"} <= set(scenarios_of(release)), release


@pytest.mark.parametrize("release", RELEASES)
def test_every_release_kill_task_failed_is_rebooted(release):
    """22.05 and 24.11 write "Kill task failed"; 26.05 "Kill task failed (JobId=7 batch)"."""
    nodes = recorded_nodes(release, "kill-task-failed")
    assert nodes["n3"]["reason"].startswith("Kill task failed")
    plan = plan_remediation(list(nodes.values()), PolicySettings(max_nodes=10, max_percent=100))
    assert plan["reboot"] == ["n3"] and plan["resume"] == [], plan["report"]


@pytest.mark.parametrize("release", RELEASES)
def test_every_release_admin_drains_keep_their_own_reasons_and_are_left_alone(release):
    nodes = recorded_nodes(release, "drained-admin")
    assert nodes["n1"]["reason"] == "maintenance: replace PSU (CHG-1234)"
    assert nodes["n2"]["reason"] == "health check: ECC errors on DIMM B2"
    plan = plan_remediation(list(nodes.values()), PolicySettings(max_nodes=10, max_percent=100))
    assert plan["reboot"] == [] and plan["resume"] == []
    assert skipped_names(plan) == ["n1", "n2"]


@pytest.mark.parametrize("release", RELEASES)
def test_every_release_completing_node_is_read(release):
    nodes = recorded_nodes(release, "completing")
    assert "COMPLETING" in nodes["n4"]["flags"] and not nodes["n4"]["drained"]


@pytest.mark.parametrize("release", [r for r in RELEASES if "down-not-responding" in scenarios_of(r)])
def test_every_release_node_down_not_responding_is_rebooted(release):
    nodes = recorded_nodes(release, "down-not-responding")
    plan = plan_remediation(list(nodes.values()), PolicySettings(max_nodes=10, max_percent=100))
    assert plan["reboot"] == ["n3"], plan["report"]


@pytest.mark.parametrize("release", [r for r in RELEASES if "rebooting" in scenarios_of(r)])
def test_every_release_rebooting_nodes_are_left_to_slurm(release):
    nodes = recorded_nodes(release, "rebooting")
    plan = plan_remediation(list(nodes.values()), PolicySettings(max_nodes=10, max_percent=100))
    assert plan["reboot"] == [] and plan["resume"] == []
    assert skipped_names(plan) == ["n1", "n3"]


@pytest.mark.parametrize("release", [r for r in RELEASES
                                     if os.path.isdir(os.path.join(RELEASE_FIXTURES, "slurm-" + r,
                                                                   "controller-stopped"))])
def test_every_release_stopped_controller_is_a_failed_read(release):
    """With slurmctld stopped the node source exits non-zero (24.11, 26.05) or answers with an
    errors list (22.05): never an empty cluster."""
    rc = release_fixture(release, "controller-stopped", NODE_SOURCE[release].replace(".out", ".rc"))
    if rc.strip() != "0":
        return  # SlurmCLI.run fails on the rc itself (module tests cover the message)
    with pytest.raises(NodeParseError):
        parse_nodes_json(release_fixture(release, "controller-stopped", NODE_SOURCE[release]))

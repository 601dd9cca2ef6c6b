# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node remediation policy."""

from __future__ import annotations

import sys

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import expand_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import parse_state
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import (
    DEFAULT_REASON_CLASSES,
    compile_classes,
    reason_origin,
    recovery_failure,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.heals import heal_candidates
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.policy import (
    blast_radius_limit,
    event_nodes,
    plan_from_options,
    plan_remediation,
    scope_names,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import PolicySettings, RemediationError


def by_name(groups):
    """{name: its group} from one of the plan's grouped lists ({..., count, hostlist} each)."""
    found = {}
    for group in groups:
        names = expand_hostlist(group["hostlist"])
        assert len(names) == group["count"]
        found.update((name, group) for name in names)
    return found


def skipped_by_name(plan):
    """{name: its group} from the plan's summarised ``skipped`` ({why, reason, count, hostlist})."""
    return by_name(plan["skipped"])


def skipped_names(plan):
    return sorted(skipped_by_name(plan), key=lambda name: (len(name), name))


def node(name, state, reason="", reason_time=None, partitions=("debug",)):
    parsed = parse_state(state)
    return {"name": name, "state": parsed.base, "flags": sorted(parsed.flags), "state_raw": state,
            "reason": reason, "reason_time": reason_time, "partitions": list(partitions)}


CLUSTER = [
    node("n1", "IDLE"),
    node("n2", "DOWN+NOT_RESPONDING", "Not responding", 100),
    node("n3", "IDLE+DRAIN", "Kill task failed", 200),
    node("n4", "IDLE+DRAIN", "maintenance CHG-1", 50),
    node("n5", "DOWN", "Node unexpectedly rebooted", 300),
    node("n6", "IDLE+DRAIN+REBOOT_REQUESTED", "clusterops.slurm remediation: reboot", 10),
    node("n7", "IDLE+DRAIN", "NHC: check_fs_mount: /scratch not mounted", 20),
    node("n8", "DOWN+DRAIN", "", 30),
    node("n9", "MIXED+DRAIN", "prolog instance=i-0123 job=42: fabricmanager down", 40),
    node("n10", "MIXED+DRAIN", "Prolog error", 400),
    node("n11", "IDLE+POWERED_DOWN", "", None),
    node("n12", "IDLE+NOT_RESPONDING"),
]


def test_policy_without_limits():
    plan = plan_remediation(CLUSTER, PolicySettings(max_nodes=100, max_percent=100))
    assert plan["reboot"] == ["n2", "n3"]
    assert plan["resume"] == ["n5", "n10"]
    skipped = skipped_by_name(plan)
    assert sorted(skipped) == ["n4", "n6", "n7", "n8", "n9"]
    assert "no class" in skipped["n4"]["why"]
    assert "reboot" in skipped["n6"]["why"]
    assert "no reason" in skipped["n8"]["why"]
    # reasons are reported whole
    assert skipped["n9"]["reason"] == "prolog instance=i-0123 job=42: fabricmanager down"
    assert plan["overflow"] == []
    assert plan["reboot_hostlist"] == "n[2-3]"


def test_admin_drained_nodes_are_never_planned():
    plan = plan_remediation(CLUSTER, PolicySettings(max_nodes=100, max_percent=100))
    acted = set(plan["reboot"]) | set(plan["resume"])
    assert not acted & {"n4", "n7", "n9", "n8"}


def test_blast_radius_oldest_first_and_reboots_in_flight_count():
    # n6 is rebooting (REBOOT_REQUESTED): it takes one of the three places.
    plan = plan_remediation(CLUSTER, PolicySettings(max_nodes=3, max_percent=100))
    assert plan["in_flight"] == {"count": 1, "hostlist": "n6"}
    assert sorted(by_name(plan["actions"])) == ["n2", "n3"]
    assert sorted(by_name(plan["overflow"])) == ["n10", "n5"]
    assert plan["limit"] == 3 and plan["room"] == 0
    assert plan["counts"]["acted"] == 2 and plan["counts"]["overflow"] == 2 and plan["counts"]["in_flight"] == 1


def test_blast_radius_percent():
    # 12 nodes, 10 % -> 1 node, and that one place is taken by n6's reboot in flight
    plan = plan_remediation(CLUSTER, PolicySettings(max_nodes=16, max_percent=10))
    assert plan["limit"] == 1
    assert plan["actions"] == [] and len(by_name(plan["overflow"])) == 4
    without_reboot = [n for n in CLUSTER if n["name"] != "n6"]
    plan = plan_remediation(without_reboot, PolicySettings(max_nodes=16, max_percent=10))
    assert len(by_name(plan["actions"])) == 1 and len(by_name(plan["overflow"])) == 3


def test_room_is_what_the_blast_radius_leaves():
    # 5 places: n6 in flight, four acted on -> none left; 16 places (12, the cluster) -> 7 left.
    assert plan_remediation(CLUSTER, PolicySettings(max_nodes=5, max_percent=100))["room"] == 0
    plan = plan_remediation(CLUSTER, PolicySettings(max_nodes=16, max_percent=100))
    assert plan["counts"]["acted"] == 4 and plan["counts"]["in_flight"] == 1 and plan["limit"] == 12 and plan["room"] == 12 - 1 - 4


@pytest.mark.parametrize("total, max_nodes, pct, expected", [
    (4, 16, 10, 1), (100, 16, 10, 10), (4096, 16, 10, 16), (4, 16, 50, 2), (4, 0, 50, 0), (4, 5, 0, 0),
    (0, 16, 10, 1),
])
def test_limit(total, max_nodes, pct, expected):
    assert blast_radius_limit(total, max_nodes, pct) == expected


@pytest.mark.parametrize("max_nodes, pct", [(-1, 10), (1, -5), (1, 101), ("x", 1)])
def test_bad_limits(max_nodes, pct):
    with pytest.raises(RemediationError):
        blast_radius_limit(10, max_nodes, pct)


def test_scope_without_jmespath_says_where_and_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "jmespath", None)  # import jmespath raises ImportError
    with pytest.raises(RemediationError, match=r"jmespath Python library on the host .*python3-jmespath"):
        scope_names([{"name": "n1"}], "[?name == 'n1']")


def test_scope():
    plan = plan_remediation(CLUSTER, PolicySettings(max_nodes=100, max_percent=100), in_scope=["n3", "n4"])
    assert plan["reboot"] == ["n3"] and plan["resume"] == []
    assert plan["considered"] == 2


def test_custom_classes():
    plan = plan_remediation(CLUSTER, PolicySettings(
        classes=[{"name": "nhc_fs", "match": "^NHC: check_fs_mount", "action": "reboot"}], max_nodes=100, max_percent=100))
    # Only the given classes count: "Not responding" (n2) now matches none and is not acted on, but
    # Slurm flags it NOT_RESPONDING: a human hears of it. n4 (responding, drained by an admin) is left alone.
    assert plan["reboot"] == ["n7"] and plan["resume"] == []
    assert by_name(plan["human"])["n2"]["class"] == "unclassified_failing"
    assert "no class" in skipped_by_name(plan)["n4"]["why"]


def test_report_has_one_line_per_group_and_every_listed_node():
    plan = plan_remediation(CLUSTER, PolicySettings(max_nodes=2, max_percent=100))
    lines = {}
    for line in plan["report"]:
        lines.update((name, line) for name in expand_hostlist(line.split(":", 1)[0]))
    assert sorted(lines) == sorted(["n2", "n3", "n5", "n10", "n4", "n6", "n7", "n8", "n9"])
    assert lines["n2"].startswith("n2: reboot (1 node, DOWN+NOT_RESPONDING")
    assert "over the blast radius" in lines["n3"] and "1 in flight" in lines["n3"]
    assert "skipped" in lines["n4"] and "maintenance CHG-1" in lines["n4"]


def test_nodes_that_say_the_same_share_one_entry():
    """What the plan returns does not grow with the cluster: 500 nodes drained for one reason are one
    action, one report line, whatever the blast radius lets through."""
    many = [node("k%d" % i, "IDLE+DRAIN", "Kill task failed", 100 + i) for i in range(500)]
    plan = plan_remediation(many, PolicySettings(max_nodes=1000, max_percent=100))
    assert len(plan["reboot"]) == 500 and plan["reboot_hostlist"] == "k[0-499]"
    assert plan["actions"] == [{"action": "reboot", "class": "kill_task_failed", "state": "IDLE+DRAIN",
                                "reason": "Kill task failed", "count": 500, "hostlist": "k[0-499]"}]
    assert plan["report"] == ["k[0-499]: reboot (500 nodes, IDLE+DRAIN, class kill_task_failed, reason 'Kill task failed')"]


@pytest.mark.parametrize("reason", [
    "Kill task failed by admin for testing",
    "maintenance: Kill task failed on n3",
    "NHC: Not responding",
    "Kill task failed (by admin)",
    "Kill task failed (JobId=abc)",
    "Node unexpectedly rebooted by the admin",
    # text after " : " that is not one of slurmctld's own tails belongs to the reason
    "Kill task failed : keep, bob",
    "Kill task failed : Not responding since Monday",
    "Epilog error : investigating",
    "Kill task failed [bob@yesterday]",
])
def test_only_slurms_exact_reasons_are_fixed(reason):
    plan = plan_remediation([node("n1", "IDLE+DRAIN", reason)], PolicySettings(max_nodes=10, max_percent=100))
    assert plan["reboot"] == [] and plan["resume"] == []
    assert "no class" in plan["skipped"][0]["why"]


@pytest.mark.parametrize("reason, base, tails", [
    ("Kill task failed", "Kill task failed", ()),
    ("Not responding", "Not responding", ()),
    # 23.02+: set_node_reason appends " : Not responding" to a DOWN node's reason
    ("Kill task failed (JobId=4242 StepId=0) : Not responding", "Kill task failed (JobId=4242 StepId=0)",
     ("Not responding",)),
    ("Prolog error : Not responding", "Prolog error", ("Not responding",)),
    # the reboot messages (22.05's set_node_reboot_reason too), recorded in tests/unit/fixtures
    ("clusterops: test : reboot issued : reboot timed out", "clusterops: test", ("reboot issued", "reboot timed out")),
    ("clusterops.slurm remediation: reboot : reboot issued", "clusterops.slurm remediation: reboot", ("reboot issued",)),
    ("maintenance : reboot issued : reboot complete", "maintenance", ("reboot issued", "reboot complete")),
    ("Epilog error : ResumeTimeout reached", "Epilog error", ("ResumeTimeout reached",)),
    # scontrol show node's "[user@time]"
    ("Kill task failed [root@2026-09-21T15:02:11]", "Kill task failed", ()),
    ("Kill task failed : Not responding [slurm@2026-09-21T15:02:11]", "Kill task failed", ("Not responding",)),
    # not Slurm's: kept whole
    ("Kill task failed : keep, bob", "Kill task failed : keep, bob", ()),
    ("maintenance : reboot issued by bob", "maintenance : reboot issued by bob", ()),
    (" : Not responding", " : Not responding", ()),
    ("", "", ()),
])
def test_reason_origin_takes_off_only_what_slurmctld_appends(reason, base, tails):
    assert reason_origin(reason) == (base, tails)


@pytest.mark.parametrize("state, reason, action", [
    ("DOWN+DRAIN+NOT_RESPONDING", "Kill task failed (JobId=4242 StepId=0) : Not responding", "reboot"),
    ("DOWN+DRAIN+NOT_RESPONDING", "Kill task failed : Not responding", "reboot"),
    ("DOWN+DRAIN+NOT_RESPONDING", "Prolog error : Not responding", "reboot"),  # not responding: reboot
    ("IDLE+DRAIN", "Epilog error : reboot issued : reboot complete", "resume"),
    ("IDLE+DRAIN", "Kill task failed [root@2026-09-21T15:02:11]", "reboot"),
])
def test_the_class_of_the_reason_slurm_started_with_decides(state, reason, action):
    plan = plan_remediation([node("n1", state, reason)], PolicySettings(max_nodes=10, max_percent=100))
    assert plan[action] == ["n1"], plan["report"]


@pytest.mark.parametrize("state, reason", [
    ("DOWN+NOT_RESPONDING", "clusterops.slurm remediation: reboot : reboot issued : reboot timed out"),
    ("DOWN+DRAIN+NOT_RESPONDING", "Kill task failed (JobId=7 batch) : reboot issued : reboot timed out"),
    ("DOWN+NOT_RESPONDING", "Kill task failed: reboot by clusterops : reboot issued : reboot timed out"),
    ("DOWN+DRAIN", "Epilog error : ResumeTimeout reached"),
])
def test_a_reboot_slurm_could_not_finish_is_for_a_human_and_not_in_flight(state, reason):
    plan = plan_remediation([node("n1", state, reason), node("n2", "IDLE+DRAIN", "Kill task failed")],
                            PolicySettings(max_nodes=1, max_percent=100))
    assert plan["reboot"] == ["n2"]  # n1 holds no room of the blast radius: its reboot is over
    assert plan["in_flight"]["count"] == 0
    assert by_name(plan["human"])["n1"]["class"] == "resume_timeout"
    assert recovery_failure(reason).split(" (")[0] in ("reboot timed out", "ResumeTimeout reached")


@pytest.mark.parametrize("state, reason, where", [
    ("DOWN+NOT_RESPONDING", "maintenance: swap DIMM : Not responding", "human"),
    ("DOWN+DRAIN+NOT_RESPONDING", "rack 12 power work", "human"),
    ("IDLE+DRAIN+FAIL", "bad DIMM", "human"),
    ("DOWN+NOT_RESPONDING", "", "human"),
    ("DOWN", "maintenance: swap DIMM", "skipped"),
    ("IDLE+DRAIN", "maintenance: swap DIMM", "skipped"),
])
def test_no_class_on_a_node_slurm_flags_as_failing_needs_a_human(state, reason, where):
    plan = plan_remediation([node("n1", state, reason)], PolicySettings(max_nodes=10, max_percent=100))
    assert plan["reboot"] == [] and plan["resume"] == []
    assert list(by_name(plan[where])) == ["n1"]
    if where == "human":
        assert by_name(plan["human"])["n1"]["class"] == "unclassified_failing"
        assert any("unclassified_failing" in h["why"] for h in plan["needs_human"])


@pytest.mark.parametrize("state, reason, action", [
    # 22.05 and 24.11 write the bare words; 25.05+ name the job step.
    ("IDLE+DRAIN", "Kill task failed", "reboot"),
    ("IDLE+DRAIN", "Kill task failed (JobId=7 batch)", "reboot"),
    ("MIXED+DRAIN", "Kill task failed (JobId=123456 StepId=0)", "reboot"),
    ("IDLE+DRAIN", "Kill task failed (JobId=42.0)", "reboot"),
    ("IDLE+DRAIN", "kill task failed (JobId=42 extern)", "reboot"),
    ("DOWN+NOT_RESPONDING", "Not responding", "reboot"),
    ("DOWN", "Node unexpectedly rebooted", "resume"),
    ("DOWN", "Node unexpectedly rebooted boot_time=1796060320 last response=1796060300", "resume"),
    ("MIXED+DRAIN", "Prolog error", "resume"),
    ("IDLE+DRAIN", "Epilog error", "resume"),
    ("IDLE+DRAIN", "batch job complete failure", "resume"),
])
def test_reasons_slurm_writes_on_every_release_are_healed(state, reason, action):
    plan = plan_remediation([node("n1", state, reason)], PolicySettings(max_nodes=10, max_percent=100))
    assert plan[action] == ["n1"], plan["report"]


def test_skipped_nodes_are_summarised_by_why_and_reason():
    """Thousands of admin drains are a few groups, not one entry (and report line) per node."""
    nodes = [node("n%d" % i, "IDLE+DRAIN", "rack 7 powered off") for i in range(1, 1001)]
    nodes += [node("n1001", "IDLE+DRAIN", "RMA 4711"), node("n1002", "IDLE+DRAIN+REBOOT_ISSUED", "rack 7 powered off")]
    plan = plan_remediation(nodes, PolicySettings(circuit={"window": 0}))
    assert plan["skipped"] == [
        {"why": "reason matches no class (drained on purpose?)", "reason": "rack 7 powered off", "count": 1000,
         "hostlist": "n[1-1000]"},
        {"why": "a reboot is already in progress", "reason": "rack 7 powered off", "count": 1, "hostlist": "n1002"},
        {"why": "reason matches no class (drained on purpose?)", "reason": "RMA 4711", "count": 1, "hostlist": "n1001"},
    ]
    assert [line for line in plan["report"] if "skipped" in line] == [
        "n[1-1000]: skipped, reason matches no class (drained on purpose?) (1000 nodes, reason 'rack 7 powered off')",
        "n1002: skipped, a reboot is already in progress (1 node, reason 'rack 7 powered off')",
        "n1001: skipped, reason matches no class (drained on purpose?) (1 node, reason 'RMA 4711')",
    ]


def test_heal_candidates_are_the_nodes_a_class_heals():
    # Not n4 (maintenance: no class), n6 (this collection's reboot in flight: no class), n7, n9
    # (human classes), n8, n11 (no reason), n1, n12.
    compiled = compile_classes(DEFAULT_REASON_CLASSES)
    assert heal_candidates(CLUSTER, compiled) == ["n2", "n3", "n5", "n10"]
    assert heal_candidates(CLUSTER, compiled, in_scope=["n1", "n3", "n4"]) == ["n3"]


def test_events_are_read_for_the_heal_candidates_only_and_only_when_there_are_some():
    # The runner reads the events of event_nodes (none when it gives none), then plans: the policy reads nothing.
    asked = []

    def events_of(names):
        asked.append(names)
        return [{"node": "n3", "start": 1000, "end": 1100, "state": "DRAIN", "user": "slurm",
                 "reason": "Kill task failed"}] * 3

    def runner_plan(nodes, settings):
        names = event_nodes(nodes, settings)
        return plan_from_options(nodes, settings, events=events_of(names) if names else [], now=2000)

    plan = runner_plan(CLUSTER, PolicySettings(heal_budget=1, heal_window=10 ** 6, circuit={"window": 0}))
    assert asked == [["n2", "n3", "n5", "n10"]]
    assert "n3" in by_name(plan["flapping"]) and "n3" not in plan["reboot"]  # the events were used
    runner_plan([node("n1", "IDLE")], PolicySettings(heal_budget=1))
    assert len(asked) == 1

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Planning slurm_node changes: only nodes that need it, one scontrol call per distinct change."""

from __future__ import annotations

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._node_actions import plan_node_changes
from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import parse_state


def node(name, state, reason=""):
    parsed = parse_state(state)
    return {"name": name, "state": parsed.base, "flags": sorted(parsed.flags), "state_raw": state,
            "reason": reason}


CLUSTER = [
    node("n1", "IDLE"),
    node("n2", "DOWN+NOT_RESPONDING", "Not responding"),
    node("n3", "IDLE+DRAIN", "Kill task failed"),
    node("n4", "IDLE+DRAIN", "maintenance CHG-1"),
    node("n5", "MIXED"),
    node("n6", "IDLE+REBOOT_REQUESTED+DRAIN", "reboot"),
    node("n7", "IDLE+REBOOT_ISSUED", "reboot"),
    node("n8", "IDLE+FAIL", "bad dimm"),
]


def calls(plan):
    return [(c.action, c.hostlist, c.reason) for c in plan["changes"]]


@pytest.mark.parametrize("names, action, kwargs, expected_calls, unchanged", [
    # drain: idle and mixed nodes need it, drained ones keep their reason
    (["n1", "n5", "n3", "n4"], "drain", {"reason": "rack work"},
     [("drain", "n[1,5]", "rack work")], ["n3", "n4"]),
    # drain of a DOWN node that has a reason: the reason is kept (keep policy)
    (["n2"], "drain", {"reason": "rack work"}, [("drain", "n2", "Not responding")], []),
    # replace: reason set everywhere; drained nodes are drained again (Slurm's accounting records
    # a drain, not a reason alone), in the same call
    (["n1", "n3", "n4"], "drain", {"reason": "RMA", "reason_policy": "replace"},
     [("drain", "n[1,3-4]", "RMA")], []),
    # replace on down nodes: the reason only
    (["n1", "n2"], "down", {"reason": "dead", "reason_policy": "replace"},
     [("down", "n1", "dead"), ("reason", "n2", "dead")], []),
    (["n1", "n2"], "down", {"reason": "dead"}, [("down", "n1", "dead")], ["n2"]),
    (["n1", "n2", "n3", "n4", "n8"], "resume", {}, [("resume", "n[2-4,8]", None)], ["n1"]),
    (["n1", "n3", "n6", "n7"], "reboot", {"reason": "fix"}, [("reboot", "n[1,3]", "fix")], ["n6", "n7"]),
    (["n1", "n6"], "cancel_reboot", {}, [("cancel_reboot", "n6", None)], ["n1"]),
    # nothing to do: no call at all
    (["n1", "n5"], "resume", {}, [], ["n1", "n5"]),
    # duplicates asked for are planned once
    (["n3", "n3", "n4"], "resume", {}, [("resume", "n[3-4]", None)], []),
])
def test_plan(names, action, kwargs, expected_calls, unchanged):
    plan = plan_node_changes(CLUSTER, names, action, **kwargs)
    assert calls(plan) == expected_calls
    assert plan["unchanged"] == unchanged
    assert plan["unknown"] == []


def test_one_call_for_many_nodes():
    cluster = [node("gpu%04d" % i, "IDLE+DRAIN", "Kill task failed") for i in range(1, 4097)]
    plan = plan_node_changes(cluster, [n["name"] for n in cluster], "reboot", reason="fix")
    assert len(plan["changes"]) == 1
    assert plan["changes"][0].command()[1] == [
        "reboot", "ASAP", "nextstate=RESUME", "reason=fix", "gpu[0001-4096]"]


def test_unknown_nodes_are_reported():
    plan = plan_node_changes(CLUSTER, ["n1", "n99", "x1"], "drain", reason="r")
    assert plan["unknown"] == ["n99", "x1"]


def test_cancel_of_issued_reboot_is_refused():
    plan = plan_node_changes(CLUSTER, ["n7"], "cancel_reboot")
    assert "n7" in plan["refused"]
    assert plan["changes"] == []


@pytest.mark.parametrize("action, kwargs, expected", [
    ("drain", {"reason": "a b: c=d [x]|y"},
     ["update", "NodeName=n1", "State=DRAIN", "Reason=a b: c=d [x]|y"]),
    ("resume", {}, ["update", "NodeName=n3", "State=RESUME"]),
    ("reboot", {"asap": False, "nextstate": "down"}, ["reboot", "nextstate=DOWN", "n1"]),
])
def test_scontrol_arguments(action, kwargs, expected):
    names = ["n3"] if action == "resume" else ["n1"]
    plan = plan_node_changes(CLUSTER, names, action, **kwargs)
    assert plan["changes"][0].command()[1] == expected


def test_diff_before_after():
    plan = plan_node_changes(CLUSTER, ["n2"], "reboot", reason="fix")
    assert plan["before"] == {"n2": {"state": "DOWN+NOT_RESPONDING", "reason": "Not responding"}}
    assert plan["after"] == {"n2": {"state": "DOWN+DRAIN+NOT_RESPONDING+REBOOT_REQUESTED", "reason": "fix"}}


@pytest.mark.parametrize("action, kwargs", [
    ("drain", {}), ("down", {"reason": ""}), ("explode", {}), ("drain", {"reason": "x", "reason_policy": "maybe"}),
])
def test_bad_arguments(action, kwargs):
    with pytest.raises(ValueError):
        plan_node_changes(CLUSTER, ["n1"], action, **kwargs)

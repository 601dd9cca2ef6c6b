# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The remediation_plan and slurm_state filters: JMESPath scope and errors."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterops.slurm.plugins.filter.remediation_plan import remediation_plan
from ansible_collections.clusterops.slurm.plugins.filter.slurm_state import slurm_state
from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import parse_state


def node(name, state, reason, partitions, features=()):
    parsed = parse_state(state)
    return {"name": name, "state": parsed.base, "flags": sorted(parsed.flags), "state_raw": state,
            "reason": reason, "reason_time": None, "partitions": list(partitions),
            "features": list(features)}


NODES = [
    node("gpu001", "IDLE+DRAIN", "Kill task failed", ["gpu"], ["h100"]),
    node("gpu002", "DOWN+NOT_RESPONDING", "Not responding", ["gpu"], ["a100"]),
    node("cpu001", "IDLE+DRAIN", "Prolog error", ["normal"]),
    node("cpu002", "IDLE", "", ["normal"]),
]


@pytest.mark.parametrize("scope, reboot, resume, considered", [
    ("", ["gpu001", "gpu002"], ["cpu001"], 4),
    ("[?contains(partitions, 'gpu')]", ["gpu001", "gpu002"], [], 2),
    ("[?contains(features, 'h100')]", ["gpu001"], [], 1),
    ("[?starts_with(name, 'cpu')].name", [], ["cpu001"], 2),
    ("[?name == 'nothing']", [], [], 0),
])
def test_scope(scope, reboot, resume, considered):
    plan = remediation_plan(NODES, scope=scope, max_nodes=10, max_percent=100)
    assert (plan["reboot"], plan["resume"], plan["considered"]) == (reboot, resume, considered)


@pytest.mark.parametrize("kwargs, message", [
    ({"scope": "[?"}, "not a valid JMESPath expression"),
    ({"scope": "length(@)"}, "must give a list"),
    ({"scope": "name"}, "must give a list of nodes or names, not null"),
    ({"scope": "[*].partitions"}, "neither a node nor a name"),
    ({"allow_reasons": ["("]}, "not a valid regular expression"),
    ({"max_percent": 200}, "max_percent between 0 and 100"),
])
def test_errors(kwargs, message):
    with pytest.raises(AnsibleFilterError, match=message):
        remediation_plan(NODES, **kwargs)


def test_input_must_be_nodes():
    with pytest.raises(AnsibleFilterError):
        remediation_plan([{"state": "idle"}])


def test_slurm_state_filter():
    assert slurm_state("drained*") == {"base": None, "flags": ["DRAIN", "NOT_RESPONDING"],
                                       "raw": "drained*", "drained": True, "responding": False}
    assert slurm_state("idle", flags=["DRAIN"])["flags"] == ["DRAIN"]
    assert slurm_state(["IDLE", "DRAIN"])["base"] == "IDLE"
    with pytest.raises(AnsibleFilterError, match="unknown Slurm node state"):
        slurm_state("sleepy")


def test_deprecated_allowlist_still_works_and_says_so(monkeypatch):
    warnings = []
    monkeypatch.setattr("ansible_collections.clusterops.slurm.plugins.filter.remediation_plan.display.deprecated",
                        lambda msg, **kw: warnings.append((msg, kw)))
    nodes = [node("n1", "IDLE+DRAIN", "Prolog error", ["normal"]), node("n2", "IDLE+DRAIN", "site: ib down", ["normal"])]
    plan = remediation_plan(nodes, allow_reasons=["^site: ib down$"], reboot_reasons=["^site: ib down$"],
                            circuit={"window": 0})
    # the allowlist replaces the classes: only its pattern acts, as a reboot
    assert plan["reboot"] == ["n2"] and plan["resume"] == []
    assert len(warnings) == 1 and "remediate_nodes_reason_classes" in warnings[0][0]
    assert warnings[0][1]["collection_name"] == "clusterops.slurm"
    # only the reboot list given: the allowed reasons are the default classes' acting ones
    plan = remediation_plan(nodes, reboot_reasons=["^Prolog error$"], circuit={"window": 0})
    assert plan["reboot"] == ["n1"]
    with pytest.raises(AnsibleFilterError, match="not both"):
        remediation_plan(nodes, classes=[], allow_reasons=["x"])
    assert not remediation_plan(nodes, circuit={"window": 0})["reboot"]  # no warning without them
    assert len(warnings) == 2

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Suspect nodes as data: the jobs come from sacct text in the format the module reads (parsed by
``_jobs.parse_sacct``, node lists in the compressed hostlist forms Slurm writes), the nodes from
``sinfo --json`` recorded on the dev cluster (tests/unit/fixtures/devcluster/README.md)."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.clusterops.slurm.plugins.module_utils import _jobs, _slurm_commands
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import policy
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry
from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import parse_nodes_json
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import (
    DEFAULT_REASON_CLASSES,
    classify,
    compile_classes,
)
from ansible_collections.clusterops.slurm.plugins.modules import training_remediation

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "devcluster")
ROLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles")
RUN = {"name": "llama", "owner": "alice", "suspect_nodes": True, "suspect_after": 0}


def recorded_nodes(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return parse_nodes_json(handle.read(), "sinfo --json")


def sacct(*rows):
    """sacct text of job lines ``(job id, state, node list)``, submitted one minute apart."""
    lines = []
    for i, (job_id, state, node_list) in enumerate(rows):
        submit = 1796040000 + 60 * i
        fields = [job_id, job_id, "devcluster", "alice", "debug", state, "1:0", "None", node_list,
                  str(submit), str(submit + 1), str(submit + 30), "llama"]
        lines.append(_slurm_commands.SEP.join(fields))
    return "".join(line + "\n" for line in lines)


def jobs(*rows):
    return _jobs.merge_jobs([], _jobs.parse_sacct(sacct(*rows)))


SUSPECT_CASES = [
    dict(id="two FAILED on the same node", rows=[("11", "FAILED", "n1"), ("12", "FAILED", "n1")],
         want={"n1": ["11", "12"]}),
    dict(id="NODE_FAIL counts like FAILED", rows=[("11", "NODE_FAIL", "n2"), ("12", "FAILED", "n2")],
         want={"n2": ["11", "12"]}),
    dict(id="one failed job is not enough (k=2)", rows=[("11", "COMPLETED", "n1"), ("12", "FAILED", "n1")],
         want={}),
    dict(id="TIMEOUT does not count", rows=[("11", "TIMEOUT", "n1"), ("12", "FAILED", "n1")], want={}),
    dict(id="CANCELLED does not count", rows=[("11", "CANCELLED by 1000", "n1"), ("12", "FAILED", "n1")],
         want={}),
    dict(id="a TIMEOUT in between neither counts nor breaks the sequence",
         rows=[("11", "FAILED", "n3"), ("12", "TIMEOUT", "n3"), ("13", "NODE_FAIL", "n3")],
         want={"n3": ["11", "13"]}),
    dict(id="only the last k failed jobs count: an older shared node is forgotten",
         rows=[("11", "FAILED", "n1"), ("12", "FAILED", "n1"), ("13", "FAILED", "n2")], want={}),
    dict(id="the same nodes each time: no single node to blame, none suspect",
         rows=[("11", "FAILED", "n[1-2]"), ("12", "NODE_FAIL", "n[1-2]")], want={}),
    dict(id="the same nodes each time, written differently", rows=[("11", "FAILED", "n[1-2]"), ("12", "FAILED", "n1,n2")],
         want={}),
    dict(id="one allocation larger: the shared nodes are suspect",
         rows=[("11", "FAILED", "n[1-2]"), ("12", "FAILED", "n[1-3]")], want={"n1": ["11", "12"], "n2": ["11", "12"]}),
    dict(id="different nodes: no suspect", rows=[("11", "FAILED", "n1"), ("12", "FAILED", "n2")], want={}),
    dict(id="ranges: only the node both allocations hold",
         rows=[("11", "FAILED", "n[1-2]"), ("12", "FAILED", "n[2-3]")], want={"n2": ["11", "12"]}),
    dict(id="a range and a list: two common nodes",
         rows=[("11", "FAILED", "gpu[01-04]"), ("12", "FAILED", "gpu[03-04,07]")],
         want={"gpu03": ["11", "12"], "gpu04": ["11", "12"]}),
    dict(id="several prefixes in one hostlist",
         rows=[("11", "FAILED", "a[1-2],b7"), ("12", "FAILED", "b[6-7],c1")], want={"b7": ["11", "12"]}),
    dict(id="k=3 needs three", rows=[("11", "FAILED", "n1"), ("12", "FAILED", "n1")], k=3, want={}),
    dict(id="k=3 with three", rows=[("11", "FAILED", "n1"), ("12", "FAILED", "n[1-2]"), ("13", "FAILED", "n1")],
         k=3, want={"n1": ["11", "12", "13"]}),
    dict(id="the run's own k wins", rows=[("11", "FAILED", "n1"), ("12", "FAILED", "n1")],
         run={"suspect_after": 3}, want={}),
    dict(id="per-run opt-out", rows=[("11", "FAILED", "n1"), ("12", "FAILED", "n1")],
         run={"suspect_nodes": False}, want={}),
    dict(id="a job without a node list shares nothing",
         rows=[("11", "FAILED", "None assigned"), ("12", "FAILED", "n1")], want={}),
]


@pytest.mark.parametrize("case", SUSPECT_CASES, ids=[c["id"] for c in SUSPECT_CASES])
def test_run_suspects(case):
    run = dict(RUN, **case.get("run", {}))
    found = policy.run_suspects(run, jobs(*case["rows"]), case.get("k", policy.SUSPECT_AFTER))
    assert dict((s["node"], s["jobs"]) for s in found) == case["want"]


def test_a_job_slurm_requeued_counts_once_per_run_of_it():
    # job 11 ran on n1, ended NODE_FAIL, and Slurm requeued it (same id, resubmitted at its end);
    # its second run failed on n1 too.
    sep = _slurm_commands.SEP
    text = (sep.join(["11", "11", "devcluster", "alice", "debug", "NODE_FAIL", "0:0", "None", "n1",
                      "1796040000", "1796040001", "1796040030", "llama"]) + "\n"
            + sep.join(["11", "11", "devcluster", "alice", "debug", "FAILED", "1:0", "None", "n1",
                        "1796040030", "1796040031", "1796040060", "llama"]) + "\n")
    merged = _jobs.merge_jobs([], _jobs.parse_sacct(text))
    assert len(merged) == 1 and merged[0]["history"]
    assert [a["state"] for a in policy.failed_attempts(RUN, merged)] == ["NODE_FAIL", "FAILED"]
    assert policy.run_suspects(RUN, merged) == [{"node": "n1", "jobs": ["11"]}]


def test_the_reason_is_held_for_a_human_by_the_default_classes():
    reason = policy.suspect_reason(["a", "b"], ["12", "15"])
    assert reason == "clusterops: suspect: runs a,b failed on it (jobs 12,15)"
    assert policy.suspect_reason(["a"], ["12"]) == "clusterops: suspect: run a failed on it (job 12)"
    entry = classify(reason, compile_classes(DEFAULT_REASON_CLASSES))
    assert (entry["name"], entry["action"]) == ("clusterops_hold", "human")


ALL_IDLE = "sinfo_json_all_idle.json"      # n1..n4 IDLE
DRAINED_N3 = "sinfo_json_drained_n3.json"  # n3 IDLE+DRAIN, an admin's reason

PLAN_CASES = [
    dict(id="two runs, one node: one reason naming both, one call",
         by_run={"b": [{"node": "n1", "jobs": ["15", "16"]}], "a": [{"node": "n1", "jobs": ["12", "15"]}]},
         nodes=ALL_IDLE, limit=2,
         actions={"n1": "drain"},
         calls=[["update", "NodeName=n1", "State=DRAIN",
                 "Reason=clusterops: suspect: runs a,b failed on it (jobs 12,15,16)"]]),
    dict(id="same reason, many nodes: one call on a hostlist",
         by_run={"a": [{"node": "n1", "jobs": ["12", "15"]}, {"node": "n2", "jobs": ["12", "15"]}]},
         nodes=ALL_IDLE, limit=4, actions={"n1": "drain", "n2": "drain"},
         calls=[["update", "NodeName=n[1-2]", "State=DRAIN",
                 "Reason=clusterops: suspect: run a failed on it (jobs 12,15)"]]),
    dict(id="blast radius cap: over it is reported, not drained, still excluded",
         by_run={"a": [{"node": "n1", "jobs": ["12", "15"]}, {"node": "n2", "jobs": ["12", "15"]}]},
         nodes=ALL_IDLE, limit=1, actions={"n1": "drain", "n2": "overflow"},
         calls=[["update", "NodeName=n1", "State=DRAIN",
                 "Reason=clusterops: suspect: run a failed on it (jobs 12,15)"]]),
    dict(id="no room left by the node healing: none drained",
         by_run={"a": [{"node": "n1", "jobs": ["12", "15"]}]}, nodes=ALL_IDLE, limit=0,
         actions={"n1": "overflow"}, calls=[]),
    dict(id="the node with most runs goes first under the cap",
         by_run={"a": [{"node": "n1", "jobs": ["12", "15"]}, {"node": "n2", "jobs": ["12", "15"]}],
                 "b": [{"node": "n2", "jobs": ["13", "14"]}]},
         nodes=ALL_IDLE, limit=1, actions={"n1": "overflow", "n2": "drain"},
         calls=[["update", "NodeName=n2", "State=DRAIN",
                 "Reason=clusterops: suspect: runs a,b failed on it (jobs 12,13,14,15)"]]),
    dict(id="already drained for another reason: kept, not counted, still excluded",
         by_run={"a": [{"node": "n3", "jobs": ["12", "15"]}, {"node": "n4", "jobs": ["12", "15"]}]},
         nodes=DRAINED_N3, limit=1, actions={"n3": "already", "n4": "drain"},
         calls=[["update", "NodeName=n4", "State=DRAIN",
                 "Reason=clusterops: suspect: run a failed on it (jobs 12,15)"]]),
    dict(id="a node Slurm does not know: neither drained nor excluded",
         by_run={"a": [{"node": "gone7", "jobs": ["12", "15"]}]}, nodes=ALL_IDLE, limit=2,
         actions={"gone7": "unknown"}, calls=[], exclude={}),
]


@pytest.mark.parametrize("case", PLAN_CASES, ids=[c["id"] for c in PLAN_CASES])
def test_plan_suspects(case):
    plan = policy.plan_suspects(case["by_run"], recorded_nodes(case["nodes"]), case["limit"])
    assert dict((s["node"], s["action"]) for s in plan["suspects"]) == case["actions"]
    assert [c.command()[1] for c in plan["changes"]] == case["calls"]
    want_exclude = case.get("exclude")
    if want_exclude is None:
        want_exclude = dict((run, sorted(e["node"] for e in entries)) for run, entries in case["by_run"].items())
    assert plan["exclude"] == want_exclude
    assert sum(1 for s in plan["suspects"] if s["action"] == "drain") <= case["limit"]


def test_an_already_drained_node_keeps_its_reason():
    nodes = recorded_nodes(DRAINED_N3)
    (item,) = policy.plan_suspects({"a": [{"node": "n3", "jobs": ["1", "2"]}]}, nodes, 5)["suspects"]
    n3 = [n for n in nodes if n["name"] == "n3"][0]
    assert item["action"] == "already" and item["current_reason"] == n3["reason"] and n3["reason"]


def test_suspect_defaults_have_one_home():
    with open(os.path.join(ROLES, "remediate_training", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    with open(os.path.join(ROLES, "remediate_training", "meta", "argument_specs.yml")) as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    doc = yaml.safe_load(training_remediation.DOCUMENTATION)["options"]
    assert defaults["remediate_training_suspect_after"] == policy.SUSPECT_AFTER
    assert spec["remediate_training_suspect_after"]["default"] == policy.SUSPECT_AFTER
    assert doc["suspect_after"]["default"] == policy.SUSPECT_AFTER
    assert defaults["remediate_training_suspect_nodes"] is True and doc["suspect_nodes"]["default"] is True
    assert training_registry.RUN_DEFAULTS["suspect_nodes"] is True and training_registry.RUN_DEFAULTS["suspect_after"] == 0

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_node_info as data: for each case, the module arguments and every run_command call expected,
with the rc/stdout/stderr recorded from the real dev cluster (22.05)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.clusterops.slurm.plugins.modules import slurm_node_info

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "devcluster")


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


VERSION_2205 = (["/usr/bin/sinfo", "--version"], 0, "slurm-wlm 22.05.8\n", "")
SINFO = ["/usr/bin/sinfo", "--json"]
CRASHED_N2 = (SINFO, 0, recorded("sinfo_json_crashed_n2.json"), "")
UNREACHABLE = "slurm_load_node error: Unable to contact slurm controller (connect failure)\n"

CASES = [
    dict(id="every node", args={}, calls=[VERSION_2205, CRASHED_N2],
         names=["n1", "n2", "n3", "n4"], hostlist="n[1-4]", missing=[]),
    dict(id="a hostlist with commas in one string, names the cluster does not know",
         args={"nodes": "n[1-2,9]"}, calls=[VERSION_2205, CRASHED_N2],
         names=["n1", "n2"], hostlist="n[1-2]", missing=["n9"]),
    dict(id="states compared whole: DOWN, and flags", args={"states": ["down", "NOT_RESPONDING"]},
         calls=[VERSION_2205, CRASHED_N2], names=["n2"], hostlist="n2", missing=[]),
    dict(id="a state name that is none fails before any call", args={"states": ["IDLE", "DRAINY"]},
         calls=[], msg="states: "),
    dict(id="a hostlist that is none fails before any call", args={"nodes": ["n[1-2"]},
         calls=[], msg="nodes: "),
    dict(id="22.05 rules once the release is known: no suffix after the brackets", args={"nodes": "n[1-2]x"},
         calls=[VERSION_2205, CRASHED_N2], msg="nodes: "),
    dict(id="sinfo fails: Slurm's words, cmd, rc and the commands", args={},
         calls=[VERSION_2205, (SINFO, 1, "", UNREACHABLE)],
         msg="sinfo failed (rc=1) while trying to read node states: slurm_load_node error: Unable to contact"),
    dict(id="no node at all is a partial read, never an empty answer", args={},
         calls=[VERSION_2205, (SINFO, 0, '{"meta": {}, "errors": [], "nodes": []}', "")],
         msg="listed no node at all"),
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_slurm_node_info(case, run_module):
    result = run_module(slurm_node_info, case["args"], case["calls"])
    assert result["commands"] == [c[0] for c in case["calls"]]
    assert not result.get("changed")
    if "msg" in case:
        assert result["failed"] is True and case["msg"] in result["msg"], result["msg"]
        if case["calls"] and case["calls"][-1][1] != 0:
            assert result["rc"] == case["calls"][-1][1] and result["cmd"] == case["calls"][-1][0]
        return
    assert "failed" not in result
    assert [n["name"] for n in result["nodes"]] == case["names"]
    assert result["hostlist"] == case["hostlist"] and result["missing"] == case["missing"]
    assert result["total"] == 4 and result["source"] == "json" and result["slurm_release"] == "22.05.8"

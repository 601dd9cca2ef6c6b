# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_node as data (community.general style): for each case, the module arguments and every
run_command call expected, with the rc/stdout/stderr recorded from the real dev cluster."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.modules import slurm_node

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "devcluster")


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def recorded_text(name):
    """A recorded ``sinfo -N -h -o '%N|%P|%T|%E'`` in the text source's format."""
    sep = "\x1f"
    return "\n".join(sep.join([n, p, t, "2", "1024", "(null)", "(null)", "Unknown", "Unknown", r])
                     for n, p, t, r in (line.split("|", 3) for line in recorded(name).splitlines()))


VERSION = ["/usr/bin/sinfo", "--version"]
#: What the dev cluster's sinfo --version printed (Debian 12): the release picks the node source.
VERSION_2205 = (VERSION, 0, "slurm-wlm 22.05.8\n", "")
SINFO = ["/usr/bin/sinfo", "--json"]
SINFO_TEXT = ["/usr/bin/sinfo", "-N", "-h", "-o", "%N\x1f%P\x1f%T\x1f%c\x1f%m\x1f%G\x1f%f\x1f%u\x1f%H\x1f%E"]
SCONTROL = "/usr/bin/scontrol"
INVALID_STATE = "slurm_update error: Invalid node state specified\n"

CASES = [
    dict(id="drain two idle nodes: one call",
         args={"nodes": "n[1-2]", "state": "drain", "reason": "rack work: PDU=3 [x]"},
         calls=[VERSION_2205, (SINFO, 0, recorded("sinfo_json_all_idle.json"), ""),
                ([SCONTROL, "update", "NodeName=n[1-2]", "State=DRAIN", "Reason=rack work: PDU=3 [x]"], 0, "", "")],
         changed=True, failed=False, changed_nodes=["n1", "n2"]),
    dict(id="resume the node that rebooted unexpectedly",
         args={"nodes": ["n1", "n2"], "state": "resume"},
         calls=[VERSION_2205, (SINFO, 0, recorded("sinfo_json_powered_on_down_n2.json"), ""),
                ([SCONTROL, "update", "NodeName=n2", "State=RESUME"], 0, "", "")],
         changed=True, failed=False, changed_nodes=["n2"]),
    dict(id="reboot already issued: nothing runs",
         args={"nodes": "n2", "state": "reboot", "reason": "x"},
         calls=[VERSION_2205, (SINFO, 0, recorded("sinfo_json_crashed_reboot_requested_n2.json"), "")],
         changed=False, failed=False, changed_nodes=[]),
    dict(id="reboot a crashed node, ASAP, nextstate resume",
         args={"nodes": "n2", "state": "reboot", "reason": "clusterops: test"},
         calls=[VERSION_2205, (SINFO, 0, recorded("sinfo_json_crashed_n2.json"), ""),
                ([SCONTROL, "reboot", "ASAP", "nextstate=RESUME", "reason=clusterops: test", "n2"], 0, "", "")],
         changed=True, failed=False, changed_nodes=["n2"]),
    dict(id="Slurm refuses: a per-node message, not a traceback",
         args={"nodes": "n2", "state": "resume"},
         calls=[VERSION_2205, (SINFO, 0, recorded("sinfo_json_powered_on_down_n2.json"), ""),
                ([SCONTROL, "update", "NodeName=n2", "State=RESUME"], 1, "", INVALID_STATE),
                (SINFO, 0, recorded("sinfo_json_powered_on_down_n2.json"), "")],
         changed=False, failed=True, changed_nodes=[],
         failed_nodes={"n2": "slurm_update error: Invalid node state specified"}),
    dict(id="unknown names fail before any change",
         args={"nodes": "n1,n99", "state": "drain", "reason": "x"},
         calls=[VERSION_2205, (SINFO, 0, recorded("sinfo_json_all_idle.json"), "")],
         changed=False, failed=True, msg_contains="unknown nodes, nothing was changed: n99"),
    dict(id="sinfo fails: cmd, rc, stdout, stderr and one line",
         args={"nodes": "n1", "state": "resume"},
         calls=[VERSION_2205, (SINFO, 1, "", "slurm_load_node error: Unable to contact slurm controller (connect failure)\n")],
         changed=False, failed=True,
         msg_contains="sinfo failed (rc=1) while trying to read node states: slurm_load_node error"),
    dict(id="Slurm before 21.08 has no --json: the text source, then one call",
         args={"nodes": "n[1-4]", "state": "resume"},
         calls=[(VERSION, 0, "slurm 20.11.9\n", ""),
                (SINFO_TEXT, 0, recorded_text("sinfo_N_powered_on_down_n2.txt"), ""),
                ([SCONTROL, "update", "NodeName=n2", "State=RESUME"], 0, "", "")],
         changed=True, failed=False, changed_nodes=["n2"]),
    dict(id="a hostlist with commas in one string (Ansible splits it; the module joins it back)",
         args={"nodes": "n[1,3]", "state": "drain", "reason": "r"},
         calls=[VERSION_2205, (SINFO, 0, recorded("sinfo_json_all_idle.json"), ""),
                ([SCONTROL, "update", "NodeName=n[1,3]", "State=DRAIN", "Reason=r"], 0, "", "")],
         changed=True, failed=False, changed_nodes=["n1", "n3"]),
    dict(id="double quotes in a reason are refused before any call",
         args={"nodes": "n1", "state": "drain", "reason": 'say "hi"'},
         calls=[], changed=False, failed=True, msg_contains="drops double quotes"),
    dict(id="a line feed in a reason is refused before any call",
         args={"nodes": "n1", "state": "drain", "reason": "gpu\nState=RESUME"},
         calls=[], changed=False, failed=True, msg_contains="control characters"),
    dict(id="a tab or an escape in a reason is refused before any call",
         args={"nodes": "n1", "state": "drain", "reason": "gpu\t\x1b[31m"},
         calls=[], changed=False, failed=True, msg_contains="control characters"),
    dict(id="a missing slurm_conf fails at once",
         args={"nodes": "n1", "state": "drain", "reason": "r", "slurm_conf": "/nonexistent/slurm.conf"},
         calls=[], changed=False, failed=True, msg_contains="slurm_conf /nonexistent/slurm.conf does not exist"),
    dict(id="command_timeout wraps the call in timeout(1)",
         args={"nodes": "n1", "state": "resume", "command_timeout": 5},
         calls=[(["/usr/bin/timeout", "--kill-after=10", "5"] + VERSION, 0, "slurm 24.11.5\n", ""),
                (["/usr/bin/timeout", "--kill-after=10", "5", "/usr/bin/scontrol", "show", "nodes",
                  "--json"], 124, "", "")],
         changed=False, failed=True, msg_contains="scontrol did not answer within 5 seconds"),
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_slurm_node(case, run_module):
    result = run_module(slurm_node, case["args"], case["calls"])
    assert bool(result.get("failed")) is case["failed"], result
    assert result.get("changed", False) is case["changed"]
    if "changed_nodes" in case:
        assert result["changed_nodes"] == case["changed_nodes"]
    if "failed_nodes" in case:
        assert result["failed_nodes"] == case["failed_nodes"]
    if "msg_contains" in case:
        assert case["msg_contains"] in result["msg"]
    assert result.get("commands", []) == [c[0][3:] if c[0][0].endswith("timeout") else c[0]
                                          for c in case["calls"]]


RELEASES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")


def recorded_release(release, snapshot, name):
    with open(os.path.join(RELEASES, "slurm-" + release, snapshot, name)) as handle:
        return handle.read()


SCONTROL_NODES = [SCONTROL, "show", "nodes", "--json"]
VERSION_2411 = (VERSION, 0, "slurm 24.11.5\n", "")
#: What 22.05's sinfo --json printed with slurmctld stopped: rc 0, an errors list, no nodes.
CONTROLLER_DOWN_2205 = json.dumps({
    "meta": {"Slurm": {"release": "22.05.8"}},
    "errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []})

PARTIAL_READS = [
    dict(id="22.05 sinfo exits 0 with an errors list and no nodes",
         calls=[VERSION_2205, (SINFO, 0, CONTROLLER_DOWN_2205, "")],
         msg_contains="answered with errors"),
    dict(id="rc 0 with an error on stderr",
         calls=[VERSION_2205, (SINFO, 0, recorded("sinfo_json_all_idle.json"),
                               "sinfo: error: slurm_receive_msg: Socket timed out on send/recv\n")],
         msg_contains="exited 0 but reported an error"),
    dict(id="a truncated document",
         calls=[VERSION_2411, (SCONTROL_NODES, 0, recorded_release(
             "24.11", "01-all-idle", "scontrol-show-node-json.out")[:5000], "")],
         msg_contains="no valid JSON (truncated or not JSON)"),
    dict(id="no node at all",
         calls=[VERSION_2411, (SCONTROL_NODES, 0, json.dumps(
             {"meta": {"slurm": {"release": "24.11.5"}}, "errors": [], "nodes": []}), "")],
         msg_contains="listed no node at all"),
    dict(id="a controller that does not answer",
         calls=[VERSION_2411, (SCONTROL_NODES, 1, "",
                               "slurm_load_node error: Unable to contact slurm controller (connect failure)\n")],
         msg_contains="Unable to contact slurm controller"),
]


@pytest.mark.parametrize("case", PARTIAL_READS, ids=[c["id"] for c in PARTIAL_READS])
def test_partial_read_changes_nothing(case, run_module):
    """A read that may be partial fails the task before any scontrol update runs."""
    result = run_module(slurm_node, {"nodes": "n[1-3]", "state": "resume"}, case["calls"])
    assert result["failed"] is True and result.get("changed", False) is False
    assert case["msg_contains"] in result["msg"]
    assert not [c for c in result.get("commands", []) if "update" in c or "reboot" in c]


def test_2411_reads_scontrol_json_and_drains_with_one_call(run_module):
    result = run_module(slurm_node, {"nodes": "n[1-3]", "state": "drain", "reason": "new reason"}, [
        VERSION_2411,
        (SCONTROL_NODES, 0, recorded_release("24.11", "01-all-idle", "scontrol-show-node-json.out"), ""),
        ([SCONTROL, "update", "NodeName=n[1-3]", "State=DRAIN", "Reason=new reason"], 0, "", "")])
    assert result["changed"] is True


def test_2411_stale_reason_of_a_resumed_node_is_not_kept():
    """24.11 keeps a node's reason after State=RESUME; reason_policy=keep must send the new one."""
    from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import parse_nodes_json
    from ansible_collections.clusterops.slurm.plugins.module_utils._node_actions import plan_node_changes
    doc = json.loads(recorded_release("24.11", "01-all-idle", "scontrol-show-node-json.out"))
    doc["nodes"][2]["reason"] = "old reason from before the resume"
    nodes = parse_nodes_json(json.dumps(doc))
    assert nodes[2]["reason"] == "" and nodes[2]["state"] == "IDLE"
    plan = plan_node_changes(nodes, ["n3"], "drain", reason="new reason", reason_policy="keep")
    assert [(c.action, c.reason) for c in plan["changes"]] == [("drain", "new reason")]


def test_hostlist_suffix_on_2205_is_refused_with_the_release_rule(run_module):
    """A suffix after the brackets is valid from 23.11: on a 22.05 cluster the task fails with
    our message before any change, not later with Slurm's."""
    result = run_module(slurm_node, {"nodes": "n[1-2]-int", "state": "drain", "reason": "r"},
                        [VERSION_2205, (SINFO, 0, recorded("sinfo_json_all_idle.json"), "")])
    assert result["failed"] is True and result["msg"].startswith("nodes: ")
    assert "23.11" in result["msg"]
    assert not [c for c in result["commands"] if "update" in c]

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""remediate.yml and the node modules against the real dev cluster, with real failures."""

from __future__ import annotations

import json
import re
import time

import pytest

from conftest import (
    SLURM_CONF,
    is_healthy,
    shared_tmpdir,
    make,
    module,
    nodes,
    playbook,
    run,
    scontrol,
    sdiag_rpc_counts,
    wait_for,
)

# Every test here runs on every Slurm release (make integration).
pytestmark = pytest.mark.every_release

REMEDIATE = "playbooks/remediate.yml"
ADMIN_REASON = "maintenance: replace PSU (CHG-1234)"
# The dev cluster has 4 nodes; let a run act on all of them unless a test says otherwise.
ALL = ["-e", json.dumps({"remediate_nodes_max_percent": 100})]


def drain(hostlist, reason):
    scontrol("update", "NodeName=%s" % hostlist, "State=DRAIN", "Reason=%s" % reason)


def test_node_info_reads_every_node_once(healthy):
    rc, result = module("clusterops.slurm.slurm_node_info", {})
    assert rc == 0
    names = [n["name"] for n in result["nodes"]]
    assert names == ["n1", "n2", "n3", "n4"]
    assert all(n["partitions"] == ["debug", "train"] for n in result["nodes"])
    assert all(isinstance(n["boot_time"], int) for n in result["nodes"])
    # the release once (sinfo --version, local), then ONE read: scontrol show nodes --json from
    # 23.02 on (one record per node), sinfo --json before
    assert result["source"] == "json"
    assert [c[1:] for c in result["commands"]] in ([["--version"], ["--json"]],
                                                   [["--version"], ["show", "nodes", "--json"]])


def test_node_info_keeps_reasons_whole_and_filters_states(healthy):
    reason = "prolog instance=i-0123 job=42: fabricmanager down [x|y]"
    drain("n2", reason)
    for source in ("json", "text"):
        rc, result = module("clusterops.slurm.slurm_node_info",
                            {"states": ["DRAIN"], "source": source})
        assert rc == 0
        assert [(n["name"], n["reason"], n["drained"]) for n in result["nodes"]] == [("n2", reason, True)]
        assert sorted(result["nodes"][0]["partitions"]) == ["debug", "train"]  # text: sinfo order varies


def test_drained_prolog_error_is_resumed_and_admin_drain_kept(healthy):
    drain("n1", "Prolog error")
    drain("n4", ADMIN_REASON)
    proc, recap = playbook(REMEDIATE, *ALL)
    assert recap["failed"] == 0
    after = wait_for(lambda ns: is_healthy(ns["n1"]), "n1 resumed")
    assert after["n4"]["flags"] >= {"DRAIN"} and after["n4"]["reason"] == ADMIN_REASON
    assert "n4: skipped, reason matches no class" in proc.stdout
    # a second run changes nothing
    proc, recap = playbook(REMEDIATE, *ALL)
    assert recap["changed"] == 0, proc.stdout
    assert nodes()["n4"]["reason"] == ADMIN_REASON


def test_kill_task_failed_is_rebooted_through_slurm(healthy):
    boot_before = healthy["n3"]["boot_time"]
    drain("n3", "Kill task failed")
    proc, recap = playbook(REMEDIATE, *ALL)
    assert recap["changed"] >= 1
    after = wait_for(lambda ns: is_healthy(ns["n3"]) and ns["n3"]["boot_time"] != boot_before,
                     "n3 rebooted and back in service", timeout=120)
    assert after["n3"]["boot_time"] > boot_before
    proc, recap = playbook(REMEDIATE, *ALL)
    assert recap["changed"] == 0, proc.stdout


def test_crashed_node_is_rebooted_when_power_returns(healthy):
    make("cluster-crash", NODE="n2")
    wait_for(lambda ns: ns["n2"]["base"] == "DOWN" and "NOT_RESPONDING" in ns["n2"]["flags"],
             "n2 DOWN+NOT_RESPONDING", timeout=90)
    drain("n4", ADMIN_REASON)
    proc, recap = playbook(REMEDIATE, *ALL)
    assert "n2: reboot (1 node, DOWN+NOT_RESPONDING" in proc.stdout
    state = nodes()["n2"]
    assert state["flags"] & {"REBOOT_REQUESTED", "REBOOT_ISSUED"}, state
    # while the reboot is pending, another run leaves n2 alone
    proc, recap = playbook(REMEDIATE, *ALL)
    assert recap["changed"] == 0, proc.stdout
    assert "n2: skipped, a reboot is already" in proc.stdout
    # Power returns once Slurm has issued the reboot (as a BMC would, minutes later on real
    # hardware); Slurm then completes the reboot on the new boot time by itself.
    wait_for(lambda ns: "REBOOT_ISSUED" in ns["n2"]["flags"], "n2 REBOOT_ISSUED", timeout=30)
    time.sleep(3)  # Slurm counts only a boot time after the reboot request (whole seconds)
    make("cluster-poweron", NODE="n2")
    after = wait_for(lambda ns: is_healthy(ns["n2"]), "n2 back in service", timeout=120)
    assert after["n4"]["reason"] == ADMIN_REASON and "DRAIN" in after["n4"]["flags"]
    proc, recap = playbook(REMEDIATE, *ALL)
    assert recap["changed"] == 0, proc.stdout


def test_node_that_rebooted_unexpectedly_is_resumed(healthy):
    make("cluster-crash", NODE="n1")
    wait_for(lambda ns: "NOT_RESPONDING" in ns["n1"]["flags"] and ns["n1"]["base"] == "DOWN",
             "n1 DOWN+NOT_RESPONDING", timeout=90)
    make("cluster-poweron", NODE="n1")
    wait_for(lambda ns: ns["n1"]["reason"].startswith("Node unexpectedly rebooted")
             and "NOT_RESPONDING" not in ns["n1"]["flags"], "n1 back but DOWN", timeout=90)
    proc, recap = playbook(REMEDIATE, *ALL)
    assert "n1: resume" in proc.stdout
    wait_for(lambda ns: is_healthy(ns["n1"]), "n1 resumed", timeout=60)


def test_check_mode_changes_nothing(healthy):
    drain("n1", "Kill task failed")
    drain("n2", "Epilog error")
    before = nodes()
    counts = sdiag_rpc_counts()
    proc, recap = playbook(REMEDIATE, "--check", "--diff", *ALL)
    assert "n1: reboot" in proc.stdout and "n2: resume" in proc.stdout
    assert "check mode: nothing changed" in proc.stdout
    after = nodes()
    assert [(n, after[n]["state"], after[n]["reason"]) for n in sorted(after)] == \
        [(n, before[n]["state"], before[n]["reason"]) for n in sorted(before)]
    changed = sdiag_rpc_counts()
    assert changed.get("REQUEST_UPDATE_NODE", 0) == counts.get("REQUEST_UPDATE_NODE", 0)
    assert changed.get("REQUEST_REBOOT_NODES", 0) == counts.get("REQUEST_REBOOT_NODES", 0)


def test_blast_radius_holds(healthy):
    drain("n[1-3]", "Prolog error")
    proc, recap = playbook(REMEDIATE, "-e", json.dumps({"remediate_nodes_max_nodes": 1,
                                                        "remediate_nodes_max_percent": 100}))
    # RESUME clears DRAIN at once (the node may show NOT_RESPONDING until its next ping)
    after = nodes()
    resumed = [n for n in ("n1", "n2", "n3") if "DRAIN" not in after[n]["flags"]]
    assert len(resumed) == 1, after
    # the two left over say the same: one line for both
    assert proc.stdout.count("over the blast radius") == 1 and "(resume, 2 nodes)" in proc.stdout
    # the default limit, 10 % of 4 nodes, still allows one node per run
    proc, recap = playbook(REMEDIATE)
    after = nodes()
    assert len([n for n in ("n1", "n2", "n3") if "DRAIN" not in after[n]["flags"]]) == 2


def test_slurm_node_one_scontrol_call_for_many_nodes(healthy):
    before = sdiag_rpc_counts().get("REQUEST_UPDATE_NODE", 0)
    rc, result = module("clusterops.slurm.slurm_node",
                        {"nodes": "n[1-4]", "state": "drain", "reason": "rack work"})
    assert rc == 0 and result["changed"]
    # scontrol show nodes --json is the node read on 23.02+: count the changes only
    updates = [c for c in result["commands"] if c[0].endswith("scontrol") and c[1] == "update"]
    assert [c[1:] for c in updates] == [["update", "NodeName=n[1-4]", "State=DRAIN", "Reason=rack work"]]
    assert sdiag_rpc_counts().get("REQUEST_UPDATE_NODE", 0) - before == 1
    assert all("DRAIN" in n["flags"] for n in nodes().values())
    # second run: nothing to do, no scontrol at all
    rc, result = module("clusterops.slurm.slurm_node",
                        {"nodes": "n[1-4]", "state": "drain", "reason": "rack work"})
    assert rc == 0 and not result["changed"]
    assert [c for c in result["commands"] if c[0].endswith("scontrol") and c[1] != "show"] == []
    # resume all four: one call again
    before = sdiag_rpc_counts().get("REQUEST_UPDATE_NODE", 0)
    rc, result = module("clusterops.slurm.slurm_node", {"nodes": ["n1", "n[2-4]"], "state": "resume"})
    assert rc == 0 and result["changed_nodes"] == ["n1", "n2", "n3", "n4"]
    assert sdiag_rpc_counts().get("REQUEST_UPDATE_NODE", 0) - before == 1


def test_slurm_node_reason_policy_and_diff(healthy):
    drain("n2", ADMIN_REASON)
    rc, result = module("clusterops.slurm.slurm_node",
                        {"nodes": "n[1-2]", "state": "drain", "reason": "ours"}, diff=True)
    assert rc == 0 and result["changed_nodes"] == ["n1"]
    assert nodes()["n2"]["reason"] == ADMIN_REASON
    rc, result = module("clusterops.slurm.slurm_node",
                        {"nodes": "n[1-2]", "state": "drain", "reason": "ours",
                         "reason_policy": "replace"}, diff=True)
    assert rc == 0 and result["changed_nodes"] == ["n2"]
    # the diff shows the node's reason before and after
    assert result["diff"]["before"]["n2"]["reason"] == ADMIN_REASON, result["diff"]
    assert result["diff"]["after"]["n2"]["reason"] == "ours", result["diff"]
    assert nodes()["n2"]["reason"] == "ours"


def test_slurm_node_check_mode(healthy):
    rc, result = module("clusterops.slurm.slurm_node",
                        {"nodes": "n[1-2]", "state": "reboot", "reason": "x"}, check_mode=True)
    assert rc == 0 and result["changed"]
    assert result["changes"][0]["command"][1:] == ["reboot", "ASAP", "nextstate=RESUME", "reason=x", "n[1-2]"]
    assert all(is_healthy(n) for n in nodes().values())


def test_slurm_node_unknown_names_fail_before_any_change(healthy):
    rc, result = module("clusterops.slurm.slurm_node",
                        {"nodes": "n1,n99", "state": "drain", "reason": "x"})
    assert rc != 0
    assert result["unknown_nodes"] == ["n99"]
    assert is_healthy(nodes()["n1"])


def test_slurm_node_cancel_reboot(healthy):
    # a busy node: the ASAP reboot stays requested until its job ends
    job = run(["sbatch", "--parsable", "-o", "/dev/null", "-w", "n1", "-N1", "--wrap", "sleep 300"]).stdout.strip()
    wait_for(lambda ns: ns["n1"]["base"] in ("ALLOCATED", "MIXED"), "job running on n1", timeout=60)
    rc, result = module("clusterops.slurm.slurm_node", {"nodes": "n1", "state": "reboot", "reason": "later"})
    assert rc == 0 and result["changed"]
    assert "REBOOT_REQUESTED" in nodes()["n1"]["flags"]
    rc, result = module("clusterops.slurm.slurm_node", {"nodes": "n1", "state": "cancel_reboot"})
    assert rc == 0 and result["changed_nodes"] == ["n1"]
    assert "REBOOT_REQUESTED" not in nodes()["n1"]["flags"]
    rc, result = module("clusterops.slurm.slurm_node", {"nodes": "n1", "state": "cancel_reboot"})
    assert rc == 0 and not result["changed"]
    run(["scancel", job.split(";")[0]])


def test_scope_limits_the_nodes_considered(healthy):
    drain("n[1-2]", "Epilog error")
    proc, recap = playbook(REMEDIATE, "-e", json.dumps({"remediate_nodes_scope": "[?name == 'n2']",
                                                        "remediate_nodes_max_percent": 100}))
    assert "4 nodes in the cluster, 1 in scope" in proc.stdout
    after = nodes()
    assert "DRAIN" in after["n1"]["flags"] and "DRAIN" not in after["n2"]["flags"]


def slurmctld_pids():
    """Host pids of this dev cluster's slurmctld (on the host or in its release's container):
    comm ``slurmctld`` and ``SLURM_CONF`` of this cluster in the environment."""
    import os
    want = ("SLURM_CONF=%s" % SLURM_CONF).encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % entry) as handle:
                if handle.read().strip() != "slurmctld":
                    continue
            with open("/proc/%s/environ" % entry, "rb") as handle:
                if want in handle.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def test_stopped_controller_fails_loudly_and_changes_nothing(healthy):
    """slurmctld stopped (SIGSTOP: the process is there, nothing answers): the read of nodes
    may be partial, so remediate.yml fails with a clear message, acts on nothing, and says so
    in its Prometheus textfile. 22.05's sinfo --json exits 0 with an errors list here."""
    import os
    import signal
    drain("n1", "Prolog error")
    pids = slurmctld_pids()
    assert len(pids) == 1, pids
    # the playbook runs where the cluster's commands run (in the container for 24.11/26.05)
    textfile = os.path.join(shared_tmpdir("clusterops-prom-"), "remediate.prom")
    os.kill(pids[0], signal.SIGSTOP)
    try:
        proc, recap = playbook(REMEDIATE, "-e", json.dumps({
            "remediate_nodes_max_percent": 100, "remediate_prometheus_textfile": textfile}),
            check=False)
    finally:
        os.kill(pids[0], signal.SIGCONT)
    assert proc.returncode != 0 and recap["failed"] == 1, proc.stdout
    assert "Slurm controller unreachable or answer incomplete" in proc.stdout, proc.stdout
    assert "0 nodes in the cluster" not in proc.stdout
    with open(textfile) as handle:
        prom = handle.read()
    assert re.search(r'^clusterops_remediate_slurm_readable\{cluster="[^"]+"\} 0$', prom, re.M), prom
    assert re.search(r'^clusterops_remediate_needs_human\{cluster="[^"]+"\} 1$', prom, re.M), prom
    # nothing acted on: n1 is still drained for its Prolog error once the controller answers
    after = wait_for(lambda ns: "n1" in ns, "the controller answers again", timeout=60)
    assert after["n1"]["flags"] >= {"DRAIN"} and after["n1"]["reason"] == "Prolog error"
    # and the next run, with the controller back, heals it
    proc, recap = playbook(REMEDIATE, *ALL)
    wait_for(lambda ns: is_healthy(ns["n1"]), "n1 resumed")


def test_reason_with_bytes_that_are_not_utf8_is_read_and_left_alone(healthy):
    """An admin typed the reason in Latin-1 ("für" as b"f\\xfcr"): Slurm stores the bytes as
    they are. Every node is still read (U+FFFD for the bad byte), the node is left alone as
    drained on purpose, and the play stays green."""
    import subprocess
    from conftest import slurm_env
    subprocess.check_call([b"scontrol", b"update", b"NodeName=n2", b"State=DRAIN",
                           b"Reason=Wartung f\xfcr GPU"], env=slurm_env())
    try:
        rc, result = module("clusterops.slurm.slurm_node_info", {"nodes": ["n2"]})
        assert rc == 0, result
        assert result["nodes"][0]["reason"] == u"Wartung f\ufffdr GPU"
        assert result["nodes"][0]["drained"]
        proc, recap = playbook(REMEDIATE, *ALL)
        assert recap["failed"] == 0 and recap["changed"] == 0, proc.stdout
        assert "n2: skipped, reason matches no class" in proc.stdout
    finally:
        # a reason in UTF-8 again (24.11 keeps the last one after a resume), then back to service
        drain("n2", "clusterops test cleanup")
        scontrol("update", "NodeName=n2", "State=RESUME")

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node_health program under the real slurmd of the dev cluster (HealthCheckProgram), with
emulated GPU faults (make cluster-gpu-fault), and the role in check mode and twice for real.

Run: make cluster-up && .venv/bin/python -m pytest tests/integration/test_node_health.py -v -s
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

import pytest

from conftest import INVENTORY, STATE_DIR, is_healthy, make, nodes, run, scontrol, wait_for

PREFIX = "clusterops-health: "
REASONS = {
    "fallen-off-bus": "clusterops-health: gpu_xid: Xid 79 (PCI:0000:44:00): GPU has fallen off the bus",
    "dbe-ecc": "clusterops-health: gpu_xid: Xid 48 (PCI:0000:07:00): An uncorrectable double bit error (DBE) "
               "has been detected on GPU in the framebuffer at physAddr 0x7fffa8860 partition 7, subpartition 1",
    "row-remap-failure": "clusterops-health: gpu_xid: Xid 64 (PCI:0000:07:00): Dynamic Page Retirement: "
                         "Blacklisting failed. Page should have been blacklisted on boot(0x00000000007fffa8)",
}
HEALTHCHECK = os.path.join(STATE_DIR, "etc", "healthcheck")


@pytest.fixture()
def gpu_faults(healthy):
    """Clears every fault afterwards and reboots the nodes that had one (their kernel log), then
    waits until they registered with the new boot time and puts them back in service."""
    touched = []
    yield touched
    touched = sorted(set(touched))
    before = nodes()
    for node in touched:
        make("cluster-gpu-fault", NODE=node, FAULT="none")
        make("cluster-reboot", NODE=node)
    if touched:
        wait_for(lambda ns: all((ns[n]["boot_time"] or 0) > (before[n]["boot_time"] or 0)
                                and "NOT_RESPONDING" not in ns[n]["flags"] for n in touched),
                 "faulted nodes registered after their reboot", 60, 0.2)
        time.sleep(1)
        broken = [n for n, v in nodes().items() if n in touched and not is_healthy(v)]
        if broken:
            scontrol("update", "nodename=" + ",".join(broken), "state=resume")
        wait_for(lambda ns: all(is_healthy(ns[n]) for n in touched), "faulted nodes back in service", 30, 0.2)


def health_check(node):
    """The dev cluster's HealthCheckProgram, run by hand as slurmd runs it (node in the environment)."""
    env_prefix = ["env", "SLURMD_NODENAME=" + node]
    return run(env_prefix + [HEALTHCHECK], check=False)


def reboot_and_wait_drained(node, reason):
    """scontrol reboot (as remediation does); wait until the node booted again and is drained with
    ``reason``; returns seconds from the reboot request and from the node's new boot time."""
    before = nodes()[node]["boot_time"]
    started = time.time()
    scontrol("reboot", "ASAP", "nextstate=resume", "reason=clusterops: test reboot", node)
    state = wait_for(lambda ns: ns[node]["boot_time"] and ns[node]["boot_time"] > before
                     and "DRAIN" in ns[node]["flags"] and ns[node]["reason"] == reason,
                     "%s drained %r after its reboot" % (node, reason), timeout=90, interval=0.2)
    drained = time.time()
    return drained - started, drained - state[node]["boot_time"]


@pytest.mark.parametrize("fault", sorted(REASONS))
def test_gpu_fault_drains_the_node_at_slurmd_start(gpu_faults, fault):
    gpu_faults.append("n2")
    make("cluster-gpu-fault", NODE="n2", FAULT=fault)
    from_request, from_boot = reboot_and_wait_drained("n2", REASONS[fault])
    print("\n%s: drained %.1f s after the reboot request, %.1f s after boot (boot time 1 s resolution)"
          % (fault, from_request, from_boot))
    assert from_boot < 15
    # A fault that persists shows again after the next boot.
    from_request, from_boot = reboot_and_wait_drained("n2", REASONS[fault])
    assert from_boot < 15
    # The other nodes are untouched.
    assert all(not v["reason"].startswith(PREFIX) for n, v in nodes().items() if n != "n2")


def test_a_users_text_in_the_kernels_own_lines_drains_nothing(gpu_faults):
    """A crashing program whose file and process names carry ``NVRM: Xid ... 79`` into the kernel's
    segfault and trap lines (docs/security.md): the health check passes, at once and after a reboot."""
    gpu_faults.append("n2")
    make("cluster-gpu-fault", NODE="n2", FAULT="spoofed-xid")
    proc = health_check("n2")
    assert proc.returncode == 0, proc.stdout
    before = nodes()["n2"]["boot_time"]
    scontrol("reboot", "ASAP", "nextstate=resume", "reason=clusterops: test reboot", "n2")
    wait_for(lambda ns: ns["n2"]["boot_time"] > before and ns["n2"]["base"] == "IDLE" and not ns["n2"]["flags"],
             "n2 back in service after its reboot", timeout=60, interval=0.2)
    time.sleep(2)   # slurmd ran the health check at its start
    assert not nodes()["n2"]["flags"] and not nodes()["n2"]["reason"].startswith(PREFIX)


def test_fault_at_power_on_drains_before_jobs(gpu_faults):
    gpu_faults.append("n3")
    make("cluster-crash", NODE="n3")
    make("cluster-gpu-fault", NODE="n3", FAULT="fallen-off-bus")
    started = time.time()
    make("cluster-poweron", NODE="n3")
    state = wait_for(lambda ns: ns["n3"]["reason"] == REASONS["fallen-off-bus"] and "DRAIN" in ns["n3"]["flags"],
                     "n3 drained at power-on", timeout=60, interval=0.2)
    elapsed = time.time() - started
    print("\npower-on with fallen-off-bus: drained %.1f s after power-on (%s)" % (elapsed, state["n3"]["state"]))


def test_cleared_fault_and_reboot_returns_to_service(gpu_faults):
    gpu_faults.append("n2")
    make("cluster-gpu-fault", NODE="n2", FAULT="fallen-off-bus")
    reboot_and_wait_drained("n2", REASONS["fallen-off-bus"])
    # Cleared, but the kernel log since boot still holds the Xid: no resume before a reboot.
    make("cluster-gpu-fault", NODE="n2", FAULT="none")
    assert health_check("n2").returncode == 1
    assert nodes()["n2"]["reason"] == REASONS["fallen-off-bus"]
    before = nodes()["n2"]["boot_time"]
    scontrol("reboot", "ASAP", "nextstate=resume", "reason=clusterops: test reboot", "n2")
    wait_for(lambda ns: ns["n2"]["boot_time"] > before and ns["n2"]["base"] == "IDLE" and not ns["n2"]["flags"]
             and not ns["n2"]["reason"], "n2 back in service", timeout=60, interval=0.2)
    assert health_check("n2").returncode == 0
    time.sleep(2)
    assert not nodes()["n2"]["flags"]


def test_own_drain_resumed_when_healthy_without_reboot(gpu_faults):
    """A gpu_state-only finding (nvidia-smi, no Xid): cleared, the next check resumes its own drain."""
    gpu_faults.append("n4")
    make("cluster-gpu-fault", NODE="n4", FAULT="gpu-lost")
    assert health_check("n4").returncode == 1
    assert nodes()["n4"]["reason"] == (
        "clusterops-health: gpu_state: GPU 2 (00000000:44:00.0): ecc.errors.uncorrected.volatile.total [GPU is lost]")
    assert health_check("n4").returncode == 1  # same reason: nothing done (no churn)
    make("cluster-gpu-fault", NODE="n4", FAULT="none")
    assert health_check("n4").returncode == 0
    wait_for(lambda ns: not ns["n4"]["flags"] and not ns["n4"]["reason"], "n4 resumed", timeout=15, interval=0.2)


@pytest.mark.parametrize("fault", ["none", "fallen-off-bus"])
def test_admin_drain_is_never_touched(gpu_faults, fault):
    gpu_faults.append("n4")
    scontrol("update", "nodename=n4", "state=drain", "reason=maintenance: swap PSU (ticket 42)")
    make("cluster-gpu-fault", NODE="n4", FAULT=fault)
    rc = health_check("n4").returncode
    assert rc == (0 if fault == "none" else 1)
    node = nodes()["n4"]
    assert "DRAIN" in node["flags"] and node["reason"] == "maintenance: swap PSU (ticket 42)"


def test_role_check_mode_then_idempotent(cluster):
    workdir = tempfile.mkdtemp(prefix="node-health-role-")
    try:
        slurm_conf = os.path.join(workdir, "slurm.conf")
        shutil.copy(os.path.join(STATE_DIR, "etc", "slurm.conf"), slurm_conf)
        with open(os.path.join(workdir, "play.yml"), "w") as handle:
            handle.write("- hosts: localhost\n  gather_facts: false\n  roles:\n"
                         "    - role: clusterops.slurm.node_health\n")
        extra = json.dumps({
            "node_health_install_dir": os.path.join(workdir, "bin"),
            "node_health_config_path": os.path.join(workdir, "etc", "healthcheck.json"),
            "node_health_log_file": os.path.join(workdir, "log", "healthcheck-{node}.log"),
            "node_health_edit_slurm_conf": True, "node_health_slurm_conf": slurm_conf,
            "node_health_interval": 60,
        })
        with open(slurm_conf) as handle:
            conf_before = handle.read()
        cmd = ["ansible-playbook", "-i", INVENTORY, os.path.join(workdir, "play.yml"), "-e", extra]

        def recap(proc):
            line = [ln for ln in proc.stdout.splitlines() if ln.startswith("localhost")][-1]
            return dict((k, int(v)) for k, v in (w.split("=") for w in line.split()[2:]))

        check = run(cmd + ["--check", "--diff"])
        assert recap(check)["changed"] > 0 and recap(check)["failed"] == 0
        assert not os.path.exists(os.path.join(workdir, "bin"))
        with open(slurm_conf) as handle:
            assert handle.read() == conf_before
        first = run(cmd)
        assert recap(first)["changed"] > 0
        second = run(cmd)
        assert recap(second)["changed"] == 0, second.stdout
        assert recap(run(cmd + ["--check"]))["changed"] == 0
        with open(slurm_conf) as handle:
            conf = handle.read()
        assert conf.count("HealthCheckProgram=") == 1
        assert "HealthCheckProgram=%s/bin/clusterops-healthcheck\n" % workdir in conf
        assert "HealthCheckInterval=60\n" in conf and "HealthCheckNodeState=ANY\n" in conf
        # Without the edit the lines are printed, slurm.conf untouched.
        printed = run(cmd[:-1] + [json.dumps(dict(json.loads(extra), node_health_edit_slurm_conf=False,
                                                  node_health_interval=90))])
        assert "HealthCheckInterval=90" in printed.stdout and recap(printed)["changed"] == 0
        with open(slurm_conf) as handle:
            assert handle.read() == conf
        # The installed program runs against the dev cluster (dry run: decides, changes nothing).
        installed = run(["env", "SLURMD_NODENAME=n1", os.path.join(workdir, "bin", "clusterops-healthcheck"),
                         "--dry-run"], check=False)
        assert installed.returncode in (0, 1, 3), installed.stdout
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

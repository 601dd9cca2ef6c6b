# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node_health program (roles/node_health/files/clusterops-healthcheck): parsers and decisions
from tables of cases, fed with the dev cluster's real-format samples (dev/cluster/gpu-samples/);
one end-to-end run with a fake scontrol; the role's defaults equal its argument spec."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import stat
import sys
import time

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(REPO, "roles", "node_health")
PROGRAM = os.path.join(ROLE, "files", "clusterops-healthcheck")
SAMPLES = os.path.join(REPO, "dev", "cluster", "gpu-samples")


def _load():
    loader = importlib.machinery.SourceFileLoader("clusterops_healthcheck", PROGRAM)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


hc = _load()


def sample(name):
    with open(os.path.join(SAMPLES, name)) as handle:
        return handle.read()


def gpus(name):
    """A sample as nvidia-smi --format=csv,noheader prints it (header line dropped)."""
    return hc.parse_gpu_csv("\n".join(sample(name).splitlines()[1:]))


# ---- parsers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, count, first", [
    ("nvidia-smi-8gpu.csv", 8, {"index": "0", "pci.bus_id": "00000000:07:00.0",
                                "name": "NVIDIA H100 80GB HBM3", "ecc.errors.uncorrected.volatile.total": "0"}),
    ("nvidia-smi-fallen-off-bus.csv", 7, None),
    ("nvidia-smi-dbe-ecc.csv", 8, None),
    ("nvidia-smi-gpu-lost.csv", 8, None),
])
def test_parse_gpu_csv(name, count, first):
    rows = gpus(name)
    assert len(rows) == count
    if first:
        assert rows[0] == first


def test_parse_gpu_csv_refuses_a_short_line():
    with pytest.raises(ValueError):
        hc.parse_gpu_csv("0, 00000000:07:00.0\n")


@pytest.mark.parametrize("name, expected", [
    ("xid-79.log", [(79, "PCI:0000:44:00", "GPU has fallen off the bus")]),
    ("xid-48.log", [(48, "PCI:0000:07:00", "An uncorrectable double bit error (DBE) has been detected on GPU in "
                                           "the framebuffer at physAddr 0x7fffa8860 partition 7, subpartition 1")]),
    ("xid-64.log", [(64, "PCI:0000:07:00", "Dynamic Page Retirement: Blacklisting failed.  Page should have been "
                                           "blacklisted on boot(0x00000000007fffa8)")]),
    ("gpu-operator-1146.log", [(48, "PCI:0000:07:00", None), (64, "PCI:0000:07:00", None)]),
    ("xid-13.log", [(13, "PCI:0000:cb:00", "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal "
                                           "Instruction Parameter"),
                    (109, "PCI:0000:cb:00", "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005")]),
    ("fallen-off-bus-no-xid.log", []),
])
def test_parse_xids(name, expected):
    got = hc.parse_xids(sample(name))
    assert [(x["xid"], x["pci"]) for x in got] == [(e[0], e[1]) for e in expected]
    for x, e in zip(got, expected):
        if e[2] is not None:
            assert x["message"] == e[2]


@pytest.mark.parametrize("xids, ignore, detail", [
    ("xid-79.log", (), "Xid 79 (PCI:0000:44:00): GPU has fallen off the bus"),
    ("xid-13.log", (13, 31, 43, 45), "Xid 109 (PCI:0000:cb:00): Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005"),
    ("xid-13.log", (13, 109), None),
    ("gpu-operator-1146.log", (), "Xid 48 (PCI:0000:07:00): An uncorrectable double bit error (DBE) has been detected "
                                  "on GPU in the framebuffer at physAddr 0x7fffa8860 partition 7, subpartition 1"),
    ("fallen-off-bus-no-xid.log", (), None),
])
def test_xid_problem(xids, ignore, detail):
    assert hc.xid_problem(hc.parse_xids(sample(xids)), set(ignore)) == detail


@pytest.mark.parametrize("name, problems", [
    ("nvidia-smi-8gpu.csv", []),
    ("nvidia-smi-fallen-off-bus.csv", []),
    ("nvidia-smi-dbe-ecc.csv", ["GPU 0 (00000000:07:00.0): uncorrectable ECC errors 2"]),
    ("nvidia-smi-gpu-lost.csv", ["GPU 2 (00000000:44:00.0): ecc.errors.uncorrected.volatile.total [GPU is lost]"]),
])
def test_gpu_state_problems(name, problems):
    assert hc.gpu_state_problems(gpus(name)) == problems


def test_gpu_state_na_is_not_a_failure():
    rows = hc.parse_gpu_csv("0, 00000000:07:00.0, NVIDIA H100 80GB HBM3, [N/A]\n")
    assert hc.gpu_state_problems(rows) == []


SHOW_NODE = """NodeName=n2 Arch=x86_64 CoresPerSocket=1
   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.25
   AvailableFeatures=h100,ib
   ActiveFeatures=h100,ib
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug,train
   Reason=clusterops-health: gpu_xid: Xid 79 (PCI:0000:44:00): GPU has fallen off the bus [root@2026-11-30T21:49:34]
"""


@pytest.mark.parametrize("text, state, reason, features", [
    (SHOW_NODE, "IDLE+DRAIN", "clusterops-health: gpu_xid: Xid 79 (PCI:0000:44:00): GPU has fallen off the bus",
     "h100,ib"),
    ("NodeName=n1 Arch=x86_64 State=IDLE ThreadsPerCore=1 Reason=maintenance: swap PSU [admin@2026-11-30T10:00:00]",
     "IDLE", "maintenance: swap PSU", None),
    ("NodeName=n1 State=DOWN+DRAIN+REBOOT_ISSUED\n   NextState=RESUME\n"
     "   Reason=clusterops: Kill task failed : reboot issued [root@2026-11-30T21:48:18]\n",
     "DOWN+DRAIN+REBOOT_ISSUED", "clusterops: Kill task failed : reboot issued", None),
    ("NodeName=n1 State=IDLE ThreadsPerCore=1\n", "IDLE", None, None),
])
def test_parse_show_node(text, state, reason, features):
    fields = hc.parse_show_node(text)
    assert fields["State"] == state
    assert fields.get("Reason") == reason
    assert fields.get("AvailableFeatures") == features


@pytest.mark.parametrize("check, node, features, want", [
    ({"expected": 8}, "n1", (), 8),
    ({"expected": 8, "per_node": {"n1": 4}}, "n1", (), 4),
    ({"expected": 8, "per_feature": {"a40": 4}}, "n2", ("a40", "ib"), 4),
    ({"expected": 8, "per_node": {"n2": 2}, "per_feature": {"a40": 4}}, "n2", ("a40",), 2),
    ({}, "n3", (), 0),
])
def test_expected_gpus(check, node, features, want):
    assert hc.expected_gpus(check, node, set(features)) == want


def test_mountpoints_and_sizes():
    text = ("36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
            "37 35 0:5 / /mnt/with\\040space rw - tmpfs tmpfs rw\n")
    assert hc.mountpoints(text) == {"/mnt/parent", "/mnt/with space"}
    assert hc.parse_size("1.5TiB") == int(1.5 * 1024 ** 4)
    assert hc.parse_size("500G") == 500 * 1024 ** 3
    assert hc.parse_size("4096") == 4096
    with pytest.raises(hc.ConfigError):
        hc.parse_size("lots")


# ---- decisions -----------------------------------------------------------------------------------
XID79 = ("gpu_xid", "Xid 79 (PCI:0000:44:00): GPU has fallen off the bus")
R79 = "clusterops-health: gpu_xid: Xid 79 (PCI:0000:44:00): GPU has fallen off the bus"


@pytest.mark.parametrize("failures, state, reason, resume_own, action, new", [
    # a failure on a node in service: drain with the first failure's reason
    ([XID79, ("gpu_count", "expected 8 found 7")], "IDLE", "", True, "drain", R79),
    ([("gpu_count", "expected 8 found 7")], "MIXED", "", True, "drain",
     "clusterops-health: gpu_count: expected 8 found 7"),
    # the same reason already set: nothing (no reason churn)
    ([XID79], "IDLE+DRAIN", R79, True, "none", R79),
    # our own drain with another finding: update the reason
    ([("gpu_count", "expected 8 found 7")], "IDLE+DRAIN", R79, True, "drain",
     "clusterops-health: gpu_count: expected 8 found 7"),
    # an admin's drain: never touched, failing or not
    ([XID79], "IDLE+DRAIN", "maintenance: swap PSU", True, "none", "drained by someone else: maintenance: swap PSU"),
    ([], "IDLE+DRAIN", "maintenance: swap PSU", True, "none", "maintenance: swap PSU"),
    ([], "DOWN+DRAIN", "clusterops: flapping: healed 3 times in 24h", True, "none",
     "clusterops: flapping: healed 3 times in 24h"),
    # a reboot in flight: its DRAIN is the reboot's (nextstate=resume clears it), so drain
    ([XID79], "DOWN+DRAIN+REBOOT_ISSUED", "clusterops: Kill task failed : reboot issued", True, "drain", R79),
    # all checks pass: resume only our own drain, only when asked
    ([], "IDLE+DRAIN", R79, True, "resume", R79),
    ([], "IDLE+DRAIN", R79, False, "none", R79),
    ([], "IDLE", "", True, "none", ""),
    # a DOWN node (not drained) that fails: drained with our reason
    ([XID79], "DOWN", "Node unexpectedly rebooted", True, "drain", R79),
])
def test_decide(failures, state, reason, resume_own, action, new):
    assert hc.decide(failures, state, reason, resume_own) == (action, new)


def test_reason_form_is_one_line_and_bounded():
    reason = hc.make_reason("command", "line one\nline two " + "x" * 400)
    assert reason.startswith("clusterops-health: command: line one line two x")
    assert "\n" not in reason and len(reason) == hc.MAX_REASON


# ---- end to end with fake commands ---------------------------------------------------------------
def _script(path, body):
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body)
    os.chmod(path, stat.S_IRWXU)
    return path


@pytest.fixture()
def fake(tmp_path):
    """A fake scontrol that records its arguments and prints a node; fake nvidia-smi and kernel log."""
    calls = tmp_path / "calls"
    node = tmp_path / "node.txt"
    node.write_text("NodeName=n2 State=IDLE ThreadsPerCore=1\n")
    scontrol = _script(str(tmp_path / "scontrol"),
                       'printf "%%s\\n" "$*" >> %s\n[ "$1" = show ] && cat %s\nexit 0\n' % (calls, node))
    smi = _script(str(tmp_path / "nvidia-smi"), "tail -n +2 %s\n" % os.path.join(SAMPLES, "nvidia-smi-fallen-off-bus.csv"))
    klog = _script(str(tmp_path / "klog"), "cat %s\n" % os.path.join(SAMPLES, "xid-79.log"))
    config = {"scontrol": scontrol, "nvidia_smi": [smi], "kernel_log_commands": [[klog]],
              "checks": [{"type": "gpu_xid"}, {"type": "gpu_state"}, {"type": "gpu_count", "expected": 8}]}
    cfg = tmp_path / "hc.json"
    cfg.write_text(json.dumps(config))
    return {"calls": calls, "node": node, "config": cfg, "tmp": tmp_path, "data": config}


def _argvs(fake):
    return fake["calls"].read_text().splitlines() if fake["calls"].exists() else []


def test_end_to_end_drains_once_with_the_xid_reason(fake):
    assert hc.main(["--config", str(fake["config"]), "--node", "n2"]) == hc.EXIT_FAILED
    assert _argvs(fake) == ["show node n2", "update nodename=n2 state=drain reason=" + R79]
    fake["calls"].unlink()
    fake["node"].write_text("NodeName=n2 State=IDLE+DRAIN\n   Reason=%s [root@2026-11-30T21:49:34]\n" % R79)
    assert hc.main(["--config", str(fake["config"]), "--node", "n2"]) == hc.EXIT_FAILED
    assert _argvs(fake) == ["show node n2"]


def test_end_to_end_node_from_slurmd_environment(fake, monkeypatch):
    monkeypatch.setenv("SLURMD_NODENAME", "n7")
    assert hc.main(["--config", str(fake["config"])]) == hc.EXIT_FAILED
    assert _argvs(fake)[0] == "show node n7"


def test_end_to_end_admin_drain_untouched_and_own_drain_resumed(fake):
    fake["data"]["checks"] = [{"type": "command", "argv": ["true"]}]
    fake["config"].write_text(json.dumps(fake["data"]))
    fake["node"].write_text("NodeName=n2 State=IDLE+DRAIN\n   Reason=maintenance [admin@2026-11-30T10:00:00]\n")
    assert hc.main(["--config", str(fake["config"]), "--node", "n2"]) == hc.EXIT_OK
    assert _argvs(fake) == ["show node n2"]
    fake["calls"].unlink()
    fake["node"].write_text("NodeName=n2 State=IDLE+DRAIN\n   Reason=%s [root@2026-11-30T21:49:34]\n" % R79)
    assert hc.main(["--config", str(fake["config"]), "--node", "n2"]) == hc.EXIT_OK
    assert _argvs(fake) == ["show node n2", "update nodename=n2 state=resume"]


def test_command_timeout_kills_the_process_group(fake):
    fake["data"]["checks"] = [{"type": "command", "argv": ["sh", "-c", "sleep 30 & sleep 30"], "timeout": 0.5}]
    fake["config"].write_text(json.dumps(fake["data"]))
    started = time.monotonic()
    assert hc.main(["--config", str(fake["config"]), "--node", "n2"]) == hc.EXIT_FAILED
    assert time.monotonic() - started < 5
    assert _argvs(fake)[-1] == "update nodename=n2 state=drain reason=clusterops-health: command: sh timed out after 0.5s"


def test_scontrol_failure_and_bad_config(fake, tmp_path):
    fake["data"]["scontrol"] = _script(str(tmp_path / "bad-scontrol"), "echo 'slurm_load_node error' >&2; exit 1\n")
    fake["config"].write_text(json.dumps(fake["data"]))
    assert hc.main(["--config", str(fake["config"]), "--node", "n2"]) == hc.EXIT_SLURM
    fake["config"].write_text(json.dumps({"checks": [{"type": "nope"}]}))
    assert hc.main(["--config", str(fake["config"]), "--node", "n2"]) == hc.EXIT_CONFIG


# ---- the role ------------------------------------------------------------------------------------
def test_role_defaults_equal_argument_spec():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    with open(os.path.join(ROLE, "meta", "argument_specs.yml")) as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    assert set(defaults) == set(spec)
    for name, value in defaults.items():
        assert spec[name].get("default") == value, name
    assert spec["node_health_checks"]["options"]["type"]["choices"] == list(hc.CHECK_TYPES)
    assert sys.version_info >= (3, 6)


@pytest.mark.parametrize("reason, updates", [
    ("clusterops: Kill task failed : reboot issued", ["update nodename=n2 state=drain reason=" + R79]),
    (R79, []),  # already ours: no new drain, but the re-check after registration all the same
])
def test_rebooting_node_is_checked_again_after_registration(fake, monkeypatch, reason, updates):
    rechecks = []
    monkeypatch.setattr(hc, "recheck_after_reboot", lambda path, node: rechecks.append(node))
    fake["node"].write_text("NodeName=n2 State=DOWN+DRAIN+REBOOT_ISSUED\n   NextState=RESUME\n"
                            "   Reason=%s [root@2026-11-30T21:48:18]\n" % reason)
    assert hc.main(["--config", str(fake["config"]), "--node", "n2"]) == hc.EXIT_FAILED
    assert _argvs(fake) == ["show node n2"] + updates
    assert rechecks == ["n2"]

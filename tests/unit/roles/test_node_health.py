# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node_health program (roles/node_health/files/clusterops-healthcheck and its modules in
clusterops_healthcheck/ beside it): parsers and decisions from tables of cases, fed with the dev cluster's real-format samples (dev/cluster/gpu-samples/);
where an Xid may come from (the driver's lines in every kernel log format the check reads, and the
lines a cluster user can get into the kernel log or the journal, which must give none); end-to-end
runs with a fake scontrol, journalctl and dmesg; the program as the role installs it, which no folder
on sys.path before its own can shadow; the role's defaults equal its argument spec."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(REPO, "roles", "node_health")
FILES = os.path.join(ROLE, "files")
PROGRAM = os.path.join(FILES, "clusterops-healthcheck")
SAMPLES = os.path.join(REPO, "dev", "cluster", "gpu-samples")

# The program's modules, clusterops_healthcheck/ beside it, imported as the program imports them.
sys.path.insert(0, FILES)
try:
    from clusterops_healthcheck import base, checks, dcgm, gpu, host, loop, slurm, xid  # noqa: E402
finally:
    sys.path.remove(FILES)


def sample(name):
    with open(os.path.join(SAMPLES, name)) as handle:
        return handle.read()


def gpus(name):
    """A sample as nvidia-smi --format=csv,noheader prints it (header line dropped)."""
    return gpu.parse_gpu_csv("\n".join(sample(name).splitlines()[1:]))


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
        gpu.parse_gpu_csv("0, 00000000:07:00.0\n")


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
    got = xid.parse_xids(sample(name))
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
    assert xid.xid_problem(xid.parse_xids(sample(xids)), set(ignore)) == detail


# ---- where an Xid may come from (issue 22: cluster users are hostile) ------------------------------
# The driver's Xid messages, one per driver generation / attribution, and what the check reads from them.
DRIVER_LINES = [
    # 2024 drivers (gpu-operator issue #1146): pid and name, quoted '<unknown>' when none
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
     (79, "PCI:0000:3b:00", "GPU has fallen off the bus")),
    ("NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) "
     "has been detected on GPU in the framebuffer at physAddr 0x7fffa8860 partition 7, subpartition 1.",
     (48, "PCI:0000:07:00", "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer "
                            "at physAddr 0x7fffa8860 partition 7, subpartition 1")),
    # newer drivers without pid and name (NVSentinel issue #155)
    ("NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus", (79, "PCI:0000:44:00", "GPU has fallen off the bus")),
    # pid only (open-gpu-kernel-modules, its Error Containment comment)
    ("NVRM: Xid (PCI:0000:01:00): 95, pid=7062, Uncontained: LTC TAG (0x2, 0x1). RST: Yes, D-RST: No",
     (95, "PCI:0000:01:00", "Uncontained: LTC TAG (0x2, 0x1). RST: Yes, D-RST: No")),
    # MIG: GPU instance (NVIDIA's A100 memory error management guide), GPU and compute instance
    # (composed from the driver's format "NVRM: Xid (PCI:%04x:%02x:%02x GPU-I:%02u GPU-CI:%02u): %d, pid=%s, name=%s, %s")
    ("NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No",
     (94, "PCI:0000:01:00 GPU-I:05", "Contained: CE User Channel (0x9). RST: No, D-RST: No")),
    ("NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:00): 43, pid=4321, name=pt_main_thread, Ch 00000010",
     (43, "PCI:0000:3b:00 GPU-I:01 GPU-CI:00", "Ch 00000010")),
    # PCI domains beyond 0000: Grace Hopper puts each GPU in a domain of its own (0009:01:00.0);
    # Intel VMD domains start at 10000, which the driver's %04x prints with five digits
    ("NVRM: Xid (PCI:0009:01:00): 79, pid=2251, name=python3, GPU has fallen off the bus.",
     (79, "PCI:0009:01:00", "GPU has fallen off the bus")),
    ("NVRM: Xid (PCI:10000:e1:00 GPU-I:03 GPU-CI:00): 95, pid=88, name=torchrun, Uncontained: FBHUB. RST: Yes, "
     "D-RST: No", (95, "PCI:10000:e1:00 GPU-I:03 GPU-CI:00", "Uncontained: FBHUB. RST: Yes, D-RST: No")),
    # drivers of 2012 and before: no "PCI:" (a kern.log of the Ubuntu forums)
    ("NVRM: Xid (0000:03:00): 13, 0003 00000000 00008297 00001098 00000000 00000044",
     (13, "0000:03:00", "0003 00000000 00008297 00001098 00000000 00000044")),
]

# How a kernel record starts in each output the check reads as text (what precedes the driver's text).
RECORD_STARTS = [
    "[ 1843.308145] ",                                   # dmesg
    "[Fri Aug 30 11:43:09 2024] ",                       # dmesg -T
    "kern  :warn  : [ 1843.308145] ",                    # dmesg -x
    "<4>[ 1843.308145] ",                                # dmesg -r (kern, warning)
    "2024-08-30T11:43:09,123456+02:00 ",                 # dmesg --time-format iso
    "[    5.123456] [  T123] ",                         # dmesg, kernel with CONFIG_PRINTK_CALLER
    "[ 1843.308145] gpu-n1 kernel: ",                    # journalctl -k -o short-monotonic
    "Dec 02 11:38:47 gpu-n1 kernel: ",                   # journalctl -k -o short
    "Dec  2 11:38:47 worker4 kernel: [  219.470994] ",   # syslog's kern.log
]


def _journal(message, transport="kernel", facility="0", **fields):
    """One line of journalctl -o json (the fields the check asks for with --output-fields)."""
    entry = {"__CURSOR": "s=4f0c;i=1a2b", "__REALTIME_TIMESTAMP": "1733135927470994",
             "__MONOTONIC_TIMESTAMP": "219470994", "_BOOT_ID": "0c9d3e5f8a7b4c21b0e6d5f4a3b2c1d0",
             "_TRANSPORT": transport, "MESSAGE": message}
    if facility is not None:
        entry["SYSLOG_FACILITY"] = facility
    entry.update(fields)
    return json.dumps(entry)


def _expect(expected):
    return [{"xid": expected[0], "pci": expected[1], "message": expected[2]}]


@pytest.mark.parametrize("start", RECORD_STARTS)
@pytest.mark.parametrize("driver, expected", DRIVER_LINES)
def test_an_xid_is_read_from_a_driver_record_in_every_text_format(start, driver, expected):
    assert xid.parse_xids(start + driver + "\n") == _expect(expected)
    assert xid.xid_problem(xid.parse_xids(start + driver)) == "Xid %d (%s): %s" % expected


@pytest.mark.parametrize("driver, expected", DRIVER_LINES)
def test_an_xid_is_read_from_a_kernel_record_of_the_journal(driver, expected):
    assert xid.parse_xids(_journal(driver), facility_required=True) == _expect(expected)
    # A field that is not UTF-8 (a process name, say) makes journalctl print the bytes as numbers.
    raw = list(driver.encode()) + [0xff]
    assert xid.parse_xids(_journal(raw), facility_required=True)[0]["xid"] == expected[0]


X79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus"
# What a cluster user can put in the kernel log or the journal: each must give no Xid.
SPOOFED = [
    # the kernel prints a crashing program's comm and file name in its own (kern) records
    ("trap line", "[ 5423.102934] traps: python[1234] general protection fault ip:7f3a2c1d4e5f sp:7ffd3b2a1c80 "
                  "error:0 in " + X79 + "[7f3a2c1d0000+1000]"),
    ("segfault line", "[ 5423.102934] python[99]: segfault at 0 ip 00007f3a2c1d4e5f sp 00007ffd3b2a1c80 error 4 in "
                      "lib" + X79 + ".so[7f3a2c1d0000+1000]"),
    ("segfault, journal text", "[ 5423.102934] gpu-n1 kernel: python[99]: segfault at 0 ip 00007f3a2c1d4e5f sp "
                               "00007ffd3b2a1c80 error 4 in lib" + X79 + ".so[7f3a2c1d0000+1000]"),
    # a file name with a newline and a fake time (captured on Linux 6.18, util-linux 2.38.1: the comm
    # is the name's first 15 bytes; dmesg indents the record's continuation lines)
    ("file name with a newline, dmesg",
     "[  625.646692] libx\n               [ 1.000000[10366]: segfault at 0 ip 000056077147b139 sp 00007ffdb81a8bd0 "
     "error 4 in libx\n               [ 1.000000] " + X79 + "[1139,56077147b000+1000] likely on CPU 0 (core 0, socket 0)"),
    ("file name with a newline, dmesg -r",
     "<6>[  625.646692] libx\n                  [ 1.000000[10366]: segfault at 0 ip 000056077147b139 sp "
     "00007ffdb81a8bd0 error 4 in libx\n                  [ 1.000000] " + X79 + "[1139,56077147b000+1000]"),
    ("file name with a newline, journalctl -o short-monotonic",
     "[  625.646692] gpu-n1 kernel: libx\n                             [ 1.000000[10366]: segfault at 0 ip "
     "000056077147b139 sp 00007ffdb81a8bd0 error 4 in libx\n                             [ 1.000000] " + X79),
] + [
    # dmesg prints these raw, and Python's splitlines() (or text-mode pipes: \r) would break there
    ("file name with %r, dmesg" % sep,
     "[  625.652381] liby" + sep + "[ 2.000000[10370]: segfault at 0 ip 0000562bc02f9139 sp 00007ffc16b606d0 error 4 "
     "in liby" + sep + "[ 2.000000] " + X79 + "[1139,562bc02f9000+1000] likely on CPU 0 (core 0, socket 0)")
    for sep in ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
] + [
    # another facility: a write to /dev/kmsg is forced to user (1) unless it names another
    ("user facility, dmesg -r (util-linux 2.39+)", "<12>[ 1234.567890] " + X79),
    ("daemon facility, dmesg -r", "<28>[ 1234.567890] " + X79),
    ("user facility, dmesg -x", "user  :warn  : [ 1234.567890] " + X79),
    ("daemon facility, dmesg -x", "daemon:err   : [ 1234.567890] " + X79),
    # the prefix after other text, or with no record start before it
    ("prefix after other text", "[ 1234.567890] nvidia-modeset: " + X79),
    ("prefix after other text, journal text", "[ 1234.567890] gpu-n1 kernel: x " + X79),
    ("no time (dmesg -t, or a continuation line)", X79),
    ("indented", "               " + X79),
    ("tab indented", "\t" + X79),
    ("journal text, continuation", "                              " + X79),
    # the journal: only kernel-transport records of the kernel facility
    ("logger line", _journal(X79, transport="syslog", facility="1", SYSLOG_IDENTIFIER="kernel")),
    ("logger -p kern.crit (journald stores no facility 0 for syslog)",
     _journal(X79, transport="syslog", facility=None, SYSLOG_IDENTIFIER="kernel", PRIORITY="2")),
    ("systemd-cat", _journal(X79, transport="stdout", facility="3", SYSLOG_IDENTIFIER="kernel")),
    ("sd_journal_send", _journal(X79, transport="journal", facility="0", SYSLOG_IDENTIFIER="kernel")),
    ("root's write to /dev/kmsg", _journal(X79, facility="1", SYSLOG_IDENTIFIER="kernel")),
    ("kernel transport, no facility", _journal(X79, facility=None)),
    ("segfault record of the journal, a file name with a newline",
     _journal("libx\n[ 1.000000[10366]: segfault at 0 ip 000056077147b139 sp 00007ffdb81a8bd0 error 4 in libx\n"
              "[ 1.000000] " + X79 + "[1139,56077147b000+1000] likely on CPU 0 (core 0, socket 0)")),
    ("segfault record of the journal, prefix after other text",
     _journal("python[99]: segfault at 0 ip 00007f3a2c1d4e5f sp 00007ffd3b2a1c80 error 4 in lib" + X79 + ".so")),
    ("not an object", json.dumps([X79])),
    ("not JSON", "{" + X79),
]


@pytest.mark.parametrize("what, text", SPOOFED, ids=[s[0] for s in SPOOFED])
def test_a_spoofed_xid_is_no_xid(what, text):
    assert xid.parse_xids(text) == []
    assert xid.parse_xids(text, facility_required=True) == []


@pytest.mark.parametrize("start", [s for s in RECORD_STARTS if not s.startswith("kern ")])
def test_the_journal_counts_no_record_without_its_facility(start):
    """journalctl is run with -o json: a line that does not give its facility (as `logger -t kernel`
    looks in journalctl's text) never counts from it."""
    line = start + X79
    assert xid.parse_xids(line, facility_required=True) == []
    assert xid.parse_xids(line) != []


def test_spoofs_around_real_records_change_nothing():
    text = "\n".join([s[1] for s in SPOOFED] + ["[ 1843.308145] " + DRIVER_LINES[1][0], SPOOFED[3][1],
                                                _journal(DRIVER_LINES[3][0])])
    assert [x["xid"] for x in xid.parse_xids(text)] == [48, 95]


@pytest.mark.parametrize("argv, run, facility_required", [
    # the role's defaults: journalctl gets JSON whatever -o the config has (the last -o wins)
    (["journalctl", "-k", "-b", "-o", "short-monotonic", "--no-pager"],
     ["journalctl", "-k", "-b", "-o", "short-monotonic", "--no-pager", "--output=json",
      "--output-fields=MESSAGE,SYSLOG_FACILITY,_TRANSPORT"], True),
    (["/usr/bin/journalctl", "--dmesg"],
     ["/usr/bin/journalctl", "--dmesg", "--output=json", "--output-fields=MESSAGE,SYSLOG_FACILITY,_TRANSPORT"], True),
    (["dmesg"], ["dmesg", "--kernel"], False),
    (["/bin/dmesg", "-T", "-x", "-lerr,warn", "-s", "1048576", "--since", "-1h"],
     ["/bin/dmesg", "-T", "-x", "-lerr,warn", "-s", "1048576", "--since", "-1h", "--kernel"], False),
    (["dmesg", "-r", "--level", "notice", "--time-format=iso"],
     ["dmesg", "-r", "--level", "notice", "--time-format=iso", "--kernel"], False),
    (["dmesg", "-Lnotime"], ["dmesg", "-Lnotime", "--kernel"], False),
    # another program (the dev cluster's stand-in): as it is, read as text
    (["/usr/bin/python3", "gpu_standin.py", "--node", "n1", "kernel-log"],
     ["/usr/bin/python3", "gpu_standin.py", "--node", "n1", "kernel-log"], False),
])
def test_kernel_log_argv(argv, run, facility_required):
    assert xid.kernel_log_argv(argv) == (run, facility_required)


@pytest.mark.parametrize("args, refused", [
    (["-S"], "-S"), (["--syslog"], "--syslog"), (["--sys"], "--syslog"),
    (["-t"], "-t"), (["--notime"], "--notime"), (["-Tt"], "-t"),
    (["--time-format", "notime"], "--time-format notime"), (["--time-format=notime"], "--time-format notime"),
    (["-p"], "-p"), (["--force-prefix"], "--force-prefix"),
    (["-u"], "-u"), (["-xu"], "-u"), (["--userspace"], "--userspace"),
    (["-f", "kern,user"], "-f"), (["-fuser"], "-f"), (["--facility=user"], "--facility"),
    (["-J"], "-J"), (["--json"], "--json"),
    (["-T"], None), (["-lnotice"], None), (["-l", "notice"], None), (["-s", "-t"], None),
    (["--level", "-t"], None), (["--", "-S"], None), (["-k"], None), (["--kernel"], None),
])
def test_dmesg_options_that_could_pass_a_user_line_for_a_record_are_refused(args, refused):
    assert xid.dmesg_refused(args) == refused
    if refused:
        with pytest.raises(ValueError, match="option %s refused" % refused):
            xid.kernel_log_argv(["dmesg"] + args)


@pytest.mark.parametrize("name, problems", [
    ("nvidia-smi-8gpu.csv", []),
    ("nvidia-smi-fallen-off-bus.csv", []),
    ("nvidia-smi-dbe-ecc.csv", ["GPU 0 (00000000:07:00.0): uncorrectable ECC errors 2"]),
    ("nvidia-smi-gpu-lost.csv", ["GPU 2 (00000000:44:00.0): ecc.errors.uncorrected.volatile.total [GPU is lost]"]),
])
def test_gpu_state_problems(name, problems):
    assert gpu.gpu_state_problems(gpus(name)) == problems


def test_gpu_state_na_is_not_a_failure():
    rows = gpu.parse_gpu_csv("0, 00000000:07:00.0, NVIDIA H100 80GB HBM3, [N/A]\n")
    assert gpu.gpu_state_problems(rows) == []


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
    fields = slurm.parse_show_node(text)
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
    assert gpu.expected_gpus(check, node, set(features)) == want


def test_mountpoints_and_sizes():
    text = ("36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
            "37 35 0:5 / /mnt/with\\040space rw - tmpfs tmpfs rw\n")
    assert host.mountpoints(text) == {"/mnt/parent", "/mnt/with space"}
    assert host.parse_size("1.5TiB") == int(1.5 * 1024 ** 4)
    assert host.parse_size("500G") == 500 * 1024 ** 3
    assert host.parse_size("4096") == 4096
    with pytest.raises(base.ConfigError):
        host.parse_size("lots")


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
    assert slurm.decide(failures, state, reason, resume_own) == (action, new)


def test_reason_form_is_one_line_and_bounded():
    reason = slurm.make_reason("command", "line one\nline two " + "x" * 400)
    assert reason.startswith("clusterops-health: command: line one line two x")
    assert "\n" not in reason and len(reason) == slurm.MAX_REASON


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
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_FAILED
    assert _argvs(fake) == ["show node n2", "update nodename=n2 state=drain reason=" + R79]
    fake["calls"].unlink()
    fake["node"].write_text("NodeName=n2 State=IDLE+DRAIN\n   Reason=%s [root@2026-11-30T21:49:34]\n" % R79)
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_FAILED
    assert _argvs(fake) == ["show node n2"]


def test_end_to_end_node_from_slurmd_environment(fake, monkeypatch):
    monkeypatch.setenv("SLURMD_NODENAME", "n7")
    assert loop.main(["--config", str(fake["config"])]) == base.EXIT_FAILED
    assert _argvs(fake)[0] == "show node n7"


def test_end_to_end_admin_drain_untouched_and_own_drain_resumed(fake):
    fake["data"]["checks"] = [{"type": "command", "argv": ["true"]}]
    fake["config"].write_text(json.dumps(fake["data"]))
    fake["node"].write_text("NodeName=n2 State=IDLE+DRAIN\n   Reason=maintenance [admin@2026-11-30T10:00:00]\n")
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_OK
    assert _argvs(fake) == ["show node n2"]
    fake["calls"].unlink()
    fake["node"].write_text("NodeName=n2 State=IDLE+DRAIN\n   Reason=%s [root@2026-11-30T21:49:34]\n" % R79)
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_OK
    assert _argvs(fake) == ["show node n2", "update nodename=n2 state=resume"]


def test_command_timeout_kills_the_process_group(fake):
    fake["data"]["checks"] = [{"type": "command", "argv": ["sh", "-c", "sleep 30 & sleep 30"], "timeout": 0.5}]
    fake["config"].write_text(json.dumps(fake["data"]))
    started = time.monotonic()
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_FAILED
    assert time.monotonic() - started < 5
    assert _argvs(fake)[-1] == "update nodename=n2 state=drain reason=clusterops-health: command: sh timed out after 0.5s"


def test_scontrol_failure_and_bad_config(fake, tmp_path):
    fake["data"]["scontrol"] = _script(str(tmp_path / "bad-scontrol"), "echo 'slurm_load_node error' >&2; exit 1\n")
    fake["config"].write_text(json.dumps(fake["data"]))
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_SLURM
    fake["config"].write_text(json.dumps({"checks": [{"type": "nope"}]}))
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_CONFIG


def _kernel_log_program(tmp_path, name, output):
    """A fake journalctl or dmesg: records its arguments, prints ``output`` (bytes, as they are)."""
    (tmp_path / (name + ".out")).write_bytes(output)
    return _script(str(tmp_path / name), 'printf "%%s\\n" "$@" > %s\ncat %s\n'
                   % (tmp_path / (name + ".args"), tmp_path / (name + ".out")))


def test_end_to_end_journal_spoofs_do_not_drain_the_real_xid_does(fake):
    spoofs = [text for what, text in SPOOFED if text.startswith("{")]
    journal = "\n".join(spoofs + [_journal(DRIVER_LINES[1][0]), _journal(DRIVER_LINES[0][0])]) + "\n"
    journalctl = _kernel_log_program(fake["tmp"], "journalctl", journal.encode())
    fake["data"]["kernel_log_commands"] = [[journalctl, "-k", "-b", "-o", "short-monotonic", "--no-pager"]]
    fake["data"]["checks"] = [{"type": "gpu_xid"}]
    fake["config"].write_text(json.dumps(fake["data"]))
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_FAILED
    assert _argvs(fake)[-1] == ("update nodename=n2 state=drain reason=clusterops-health: gpu_xid: Xid 48 "
                                "(PCI:0000:07:00): An uncorrectable double bit error (DBE) has been detected on GPU "
                                "in the framebuffer at physAddr 0x7fffa8860 partition 7, subpartition 1")
    assert (fake["tmp"] / "journalctl.args").read_text().split("\n")[-3:] == [
        "--output=json", "--output-fields=MESSAGE,SYSLOG_FACILITY,_TRANSPORT", ""]


def test_end_to_end_journal_text_counts_nothing(fake):
    """A journalctl that printed text anyway (`logger -t kernel` looks like the kernel there)."""
    journalctl = _kernel_log_program(fake["tmp"], "journalctl", b"[ 1843.308145] gpu-n1 kernel: " + X79.encode())
    fake["data"]["kernel_log_commands"] = [[journalctl, "-k", "-b"]]
    fake["data"]["checks"] = [{"type": "gpu_xid"}]
    fake["config"].write_text(json.dumps(fake["data"]))
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_OK
    assert _argvs(fake) == ["show node n2"]


def test_end_to_end_dmesg_file_name_spoofs_do_not_drain(fake):
    text = "\n".join(text for what, text in SPOOFED if not text.startswith(("{", "<", "user", "daemon")))
    dmesg = _kernel_log_program(fake["tmp"], "dmesg", (text + "\n[ 1843.308145] " + DRIVER_LINES[2][0] + "\n").encode())
    fake["data"]["kernel_log_commands"] = [[dmesg, "-T"]]
    fake["data"]["checks"] = [{"type": "gpu_xid"}]
    fake["config"].write_text(json.dumps(fake["data"]))
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_FAILED
    assert _argvs(fake)[-1] == "update nodename=n2 state=drain reason=" + R79
    assert (fake["tmp"] / "dmesg.args").read_text() == "-T\n--kernel\n"


def test_end_to_end_refused_dmesg_is_not_run(fake):
    dmesg = _kernel_log_program(fake["tmp"], "dmesg", ("[ 1843.308145] " + DRIVER_LINES[2][0] + "\n").encode())
    fake["data"]["checks"] = [{"type": "gpu_xid"}]
    # the next command is used instead ...
    fake["data"]["kernel_log_commands"] = [[dmesg, "-S"], [dmesg, "-T"]]
    fake["config"].write_text(json.dumps(fake["data"]))
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_FAILED
    assert _argvs(fake)[-1] == "update nodename=n2 state=drain reason=" + R79
    assert (fake["tmp"] / "dmesg.args").read_text() == "-T\n--kernel\n"
    # ... and with none left, the kernel log is unreadable: drained, not passed
    fake["calls"].unlink()
    (fake["tmp"] / "dmesg.args").unlink()
    fake["data"]["kernel_log_commands"] = [[dmesg, "-S"], [dmesg, "--time-format", "notime"]]
    fake["config"].write_text(json.dumps(fake["data"]))
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_FAILED
    reason = _argvs(fake)[-1].split(" reason=", 1)[1]
    assert reason.startswith("clusterops-health: gpu_xid: kernel log unreadable: %s: option -S refused" % dmesg)
    assert not (fake["tmp"] / "dmesg.args").exists()


def _install(dest):
    """The program as the role installs it: clusterops-healthcheck.py and clusterops_healthcheck/*.py."""
    dest.mkdir()
    shutil.copy(PROGRAM, str(dest / "clusterops-healthcheck.py"))
    (dest / "clusterops_healthcheck").mkdir()
    for name in os.listdir(os.path.join(FILES, "clusterops_healthcheck")):
        if name.endswith(".py"):
            shutil.copy(os.path.join(FILES, "clusterops_healthcheck", name), str(dest / "clusterops_healthcheck"))
    return dest / "clusterops-healthcheck.py"


def test_installed_program_runs_its_own_modules_whatever_the_working_directory(tmp_path):
    """Run as root by slurmd: a clusterops_healthcheck/ in the working directory and on $PYTHONPATH
    (both a user's to write) is never imported, also when the program is reached through a link."""
    program = _install(tmp_path / "libexec")
    cwd = tmp_path / "cwd"
    (cwd / "clusterops_healthcheck").mkdir(parents=True)
    for name in ("__init__.py", "loop.py"):
        (cwd / "clusterops_healthcheck" / name).write_text("raise SystemExit('shadowed')\n")
    (tmp_path / "bin").mkdir()
    os.symlink(str(program), str(tmp_path / "bin" / "healthcheck.py"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(cwd), "."]))
    # -I: no $PYTHONPATH and not even the program's folder on sys.path but what the program puts there
    for argv in ([program], [tmp_path / "bin" / "healthcheck.py"], ["-I", program]):
        proc = subprocess.run([sys.executable] + [str(a) for a in argv] + ["--config", str(tmp_path / "missing.json")],
                              cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, check=False)
        assert (proc.returncode, proc.stdout) == (base.EXIT_CONFIG, ""), proc.stderr
        assert proc.stderr.startswith("clusterops-healthcheck: cannot read config %s: " % (tmp_path / "missing.json"))


def test_nhc_mode_without_nhc_is_a_configuration_error(tmp_path):
    """mode nhc naming an NHC that is not installed exits 2 (configuration), saying so, with no
    traceback: nothing is drained and slurmd logs the status."""
    config = tmp_path / "hc.json"
    config.write_text(json.dumps({"mode": "nhc", "nhc": str(tmp_path / "no-nhc"), "log_file": str(tmp_path / "hc.log")}))
    proc = subprocess.run([sys.executable, PROGRAM, "--config", str(config), "--node", "n1"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode == base.EXIT_CONFIG, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "mode nhc: %s is not installed" % (tmp_path / "no-nhc") in proc.stderr + (tmp_path / "hc.log").read_text()


def test_check_after_reboot_runs_the_program_again(monkeypatch):
    started = []
    monkeypatch.setattr(loop.subprocess, "Popen", lambda argv, **kwargs: started.append((argv, kwargs)))
    loop.recheck_after_reboot("/usr/local/libexec/clusterops/clusterops-healthcheck.py", "/etc/hc.json", "n2")
    assert started[0][0] == [sys.executable, "/usr/local/libexec/clusterops/clusterops-healthcheck.py", "--config",
                             "/etc/hc.json", "--node", "n2", "--after-reboot"]
    assert started[0][1]["start_new_session"] is True


# ---- the role ------------------------------------------------------------------------------------
def test_role_defaults_equal_argument_spec():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    with open(os.path.join(ROLE, "meta", "argument_specs.yml")) as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    assert set(defaults) == set(spec)
    for name, value in defaults.items():
        assert spec[name].get("default") == value, name
    assert spec["node_health_checks"]["options"]["type"]["choices"] == list(checks.CHECK_TYPES)
    assert sys.version_info >= (3, 6)


@pytest.mark.parametrize("reason, updates", [
    ("clusterops: Kill task failed : reboot issued", ["update nodename=n2 state=drain reason=" + R79]),
    (R79, []),  # already ours: no new drain, but the re-check after registration all the same
])
def test_rebooting_node_is_checked_again_after_registration(fake, monkeypatch, reason, updates):
    rechecks = []
    monkeypatch.setattr(loop, "recheck_after_reboot", lambda program, path, node: rechecks.append(node))
    fake["node"].write_text("NodeName=n2 State=DOWN+DRAIN+REBOOT_ISSUED\n   NextState=RESUME\n"
                            "   Reason=%s [root@2026-11-30T21:48:18]\n" % reason)
    assert loop.main(["--config", str(fake["config"]), "--node", "n2"]) == base.EXIT_FAILED
    assert _argvs(fake) == ["show node n2"] + updates
    assert rechecks == ["n2"]


def test_documented_default_xid_ignore_list_equals_role_default():
    """docs/node-health.md's ``(default 13, ...: application errors`` equals the role default."""
    with open(os.path.join(REPO, "docs", "node-health.md")) as f:
        m = re.search(r"\(default ([0-9, ]+): application errors", f.read())
    with open(os.path.join(ROLE, "defaults", "main.yml")) as f:
        checks = yaml.safe_load(f)["node_health_checks"]
    ignore = [c for c in checks if c["type"] == "gpu_xid"][0]["ignore"]
    assert m and [int(x) for x in m.group(1).split(",")] == ignore
    assert 94 in ignore


# nvidia-smi's exit status: (rc, stdout, stderr) -> (number of rows or None, detail or None).
SMI_TABLE = "0, 00000000:0B:00.0, Tesla P100-PCIE-16GB, 0\n1, 00000000:0C:00.0, Tesla P100-PCIE-16GB, 0\n"


@pytest.mark.parametrize("rc, out, err, rows, detail", [
    (0, SMI_TABLE, "", 2, None),
    # 14 is a warning: the table is used, the WARNING line nvidia-smi adds is no row (gpu-operator #20)
    (14, SMI_TABLE + "WARNING: infoROM is corrupted at gpu 0000:0B:00.0\n", "", 2, None),
    (14, "WARNING: infoROM is corrupted at gpu 0000:0B:00.0\n" + SMI_TABLE, "", 2, None),
    (14, "WARNING: infoROM is corrupted at gpu 0000:0B:00.0\n", "", None,
     "nvidia-smi failed rc=14 (the infoROM is corrupted): WARNING: infoROM is corrupted at gpu 0000:0B:00.0"),
    (14, "garbage\n", "", None, "nvidia-smi failed rc=14 (the infoROM is corrupted): garbage"),
    (15, "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot the system to "
         "recover this GPU\n", "", None,
     "nvidia-smi failed rc=15 (the GPU has fallen off the bus or has otherwise become inaccessible): Unable to "
     "determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU"),
    (9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", None,
     "nvidia-smi failed rc=9 (the NVIDIA driver is not loaded): NVIDIA-SMI has failed because it couldn't "
     "communicate with the NVIDIA driver."),
    (18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.161\n", "", None,
     "nvidia-smi failed rc=18 (the driver and the NVML library versions do not match): Failed to initialize "
     "NVML: Driver/library version mismatch"),
    (6, "No devices were found\n", "", None,
     "nvidia-smi failed rc=6 (a query to find an object was unsuccessful (no devices were found)): No devices "
     "were found"),
    # a table with a status that is not a warning is not used
    (15, SMI_TABLE, "", None, "nvidia-smi failed rc=15 (the GPU has fallen off the bus or has otherwise become "
                              "inaccessible): 0, 00000000:0B:00.0, Tesla P100-PCIE-16GB, 0"),
    (42, "", "", None, "nvidia-smi failed rc=42 (unknown exit status): no output"),
    (127, "", "[Errno 2] No such file or directory: 'nvidia-smi'", None,
     "nvidia-smi failed rc=127 (unknown exit status): [Errno 2] No such file or directory: 'nvidia-smi'"),
])
def test_nvidia_smi_exit_status(rc, out, err, rows, detail):
    got_rows, got_detail = gpu.read_nvidia_smi(rc, out, err)
    assert (None if got_rows is None else len(got_rows), got_detail) == (rows, detail)


def _doc_table(path, heading):
    """The rows of the first table after ``heading`` in a Markdown file: lists of cell texts."""
    with open(path) as f:
        text = f.read()
    rows = []
    for line in text[text.index(heading):].splitlines()[1:]:
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not set(cells[0]) <= set("-"):
                rows.append(cells)
        elif rows:
            break
    return rows[1:]  # without the header


def test_documented_nvidia_smi_exit_statuses_equal_the_check_and_the_policy():
    """docs/node-health.md's exit-status table equals NVIDIA_SMI_EXIT, NVIDIA_SMI_WARNINGS and
    the remediation policy's NVIDIA_SMI_REBOOT_RC, status by status."""
    from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import (
        NVIDIA_SMI_REBOOT_RC,
    )
    rows = _doc_table(os.path.join(REPO, "docs", "node-health.md"), "### nvidia-smi's exit status")
    documented = dict((int(r[0]), r) for r in rows if r[0].isdigit())
    assert sorted(documented) == sorted(gpu.NVIDIA_SMI_EXIT)
    for rc, (_status, meaning, check, remediation) in documented.items():
        assert meaning == gpu.NVIDIA_SMI_EXIT[rc]
        assert check.startswith("warning") == (rc in gpu.NVIDIA_SMI_WARNINGS)
        assert remediation == ("reboot" if rc in NVIDIA_SMI_REBOOT_RC else "human"), rc
    assert set(NVIDIA_SMI_REBOOT_RC) <= set(gpu.NVIDIA_SMI_EXIT)
    assert [r[3] for r in rows if not r[0].isdigit()] == ["human"]


# ---- DCGM: dcgmi health --check --json -----------------------------------------------------------
DCGM = os.path.join(REPO, "tests", "unit", "fixtures", "dcgm")


def dcgm_report(name):
    with open(os.path.join(DCGM, name)) as handle:
        return json.load(handle)


def dcgm_class(detail):
    """The default remediation class of the reason the check sets for ``detail``."""
    from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import (
        DEFAULT_REASON_CLASSES,
        classify,
        compile_classes,
    )
    found = classify(slurm.make_reason("dcgm_health", detail), compile_classes(DEFAULT_REASON_CLASSES))
    return found and found["name"]


@pytest.mark.parametrize("name, overall, detail, warning_detail, klass", [
    ("health-healthy.json", "Healthy", None, None, None),
    ("health-dbe-failure.json", "Failure",
     "DCGM_FR_VOLATILE_DBE_DETECTED GPU 1: Detected 2 volatile double-bit ECC error(s) in GPU 1.", None,
     "gpu_dcgm_reset"),
    ("health-thermal-warning.json", "Warning", None,
     "DCGM_FR_CLOCKS_EVENT_THERMAL GPU 0: Detected clocks event due to thermal violation in GPU 0.", "health_other"),
    ("health-fallen-off-bus.json", "Failure", "DCGM_FR_FALLEN_OFF_BUS GPU 3: GPU 3 has fallen off the bus", None,
     "gpu_dcgm_reset"),
    ("health-xid-119.json", "Failure", "DCGM_FR_XID_ERROR GPU 2: Detected XID 119 for GPU 2", None,
     "gpu_dcgm_reset"),
    ("health-row-remap-failure.json", "Failure",
     "DCGM_FR_ROW_REMAP_FAILURE GPU 5: GPU 5 had uncorrectable memory errors and row remapping failed.", None,
     "health_other"),
    ("health-nvswitch-fatal.json", "Failure",
     "DCGM_FR_NVSWITCH_FATAL_ERROR Switch 0: Detected fatal errors on NvSwitch 0 link 12", None, "health_other"),
    ("health-recovery-reboot.json", "Failure",
     "DCGM_FR_GPU_RECOVERY_REBOOT GPU 4: GPU 4 fault may have left the OS in an inconsistent state. Recovery "
     "action: 2 (NODE_REBOOT).", None, "gpu_dcgm_reset"),
])
def test_dcgm_health_report(name, overall, detail, warning_detail, klass):
    """Each report: its verdict, the detail of the incident that decides (a Warning only with
    drain_on_warning), and the default remediation class of the reason that detail makes."""
    got_overall, incidents = dcgm.dcgm_incidents(dcgm_report(name))
    assert got_overall == overall
    assert dcgm.dcgm_problem(got_overall, incidents) == detail
    assert dcgm.dcgm_problem(got_overall, incidents, drain_on_warning=True) == (detail or warning_detail)
    if detail or warning_detail:
        assert dcgm_class(detail or warning_detail) == klass


@pytest.mark.parametrize("report", [
    dcgm_report("health-internal-error.json"), {}, [], {"body": {}}, {"body": {"Overall Health": {}}},
    {"body": {"Overall Health": {"value": "Failure"}}},  # a failure without an incident
], ids=["internal-error", "empty", "list", "no-verdict", "verdict-without-value", "failure-without-incident"])
def test_dcgm_health_report_that_cannot_be_read_is_never_healthy(report):
    with pytest.raises(ValueError):
        dcgm.dcgm_incidents(report)


def _dbe_report(**change):
    """health-dbe-failure.json with one part replaced: ``change`` maps a path of keys joined by
    "/" ("body/GPU/children/1") to what stands there instead."""
    report = dcgm_report("health-dbe-failure.json")
    for path, value in change.items():
        keys = path.split("/")
        node = report
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return report


FINDING = "body/GPU/children/1/children/Errors/children/Memory system"


@pytest.mark.parametrize("report, where", [
    (_dbe_report(body=[]), "body is list"),
    (_dbe_report(**{"body/Overall Health": "Failure"}), "body/Overall Health is str"),
    (_dbe_report(**{"body/Overall Health/value": 1}), "body/Overall Health has the verdict 1"),
    (_dbe_report(**{"body/GPU": ["0", "1"]}), "body/GPU is list"),
    (_dbe_report(**{"body/GPU": "Failure"}), "body/GPU is str"),
    (_dbe_report(**{"body/GPU/children": [{"value": "Failure"}]}), "body/GPU/children is list"),
    (_dbe_report(**{"body/GPU/children/1": "Failure"}), "body/GPU/children/1 is str"),
    (_dbe_report(**{"body/GPU/children/1": None}), "body/GPU/children/1 is NoneType"),
    (_dbe_report(**{"body/GPU/children/1/value": "Internal error"}), "body/GPU/children/1 has the verdict"),
    (_dbe_report(**{"body/GPU/children/1/children": []}), "body/GPU/children/1/children is list"),
    (_dbe_report(**{"body/GPU/children/1/children/Errors": "Memory"}), "body/GPU/children/1/children/Errors is str"),
    (_dbe_report(**{"body/GPU/children/1/children/Errors/children": [["Memory system", "Failure"]]}),
     "Errors/children is list"),
    (_dbe_report(**{FINDING: ["Failure"]}), "Memory system is list"),
    (_dbe_report(**{FINDING + "/value": 2}), "Memory system has the verdict 2"),
    (_dbe_report(**{FINDING + "/value": None}), "Memory system has the verdict None"),
    (_dbe_report(**{FINDING + "/overflow": "Detected 2 volatile double-bit ECC error(s) in GPU 1."}),
     "overflow is str"),
    (_dbe_report(**{FINDING + "/overflow": [2, "volatile"]}), "overflow[] is int"),
    (_dbe_report(**{FINDING + "/overflow": {"0": "Detected"}}), "overflow is dict"),
    (_dbe_report(**{"body/Overall Health/value": "Healthy"}), "Overall Health Healthy but an incident is not"),
], ids=["body-list", "overall-string", "overall-number", "group-list", "group-string", "entities-list",
        "entity-string", "entity-null", "entity-internal-error", "entity-children-list", "errors-string",
        "error-children-list", "finding-list", "finding-verdict-number", "finding-verdict-null",
        "overflow-string", "overflow-number", "overflow-object", "healthy-with-a-failure"])
def test_dcgm_report_of_any_other_shape_is_unreadable_and_says_where(report, where):
    """Issue 38, part 4: a report the parser does not fully understand (a list where an object is, a
    string where a list or a verdict is) is never read in part, and never as healthy: ValueError
    naming the place. Each case is health-dbe-failure.json (read as Failure) with one part changed."""
    with pytest.raises(ValueError) as raised:
        dcgm.dcgm_incidents(report)
    assert where in str(raised.value)


def test_dcgm_report_without_optional_parts_still_reads():
    """What dcgmi may leave out is not an error: a group without children, an entity without a verdict
    or errors, a finding without message parts (the detail then names the system)."""
    report = _dbe_report(**{"body/GPU/children/0": {}, FINDING: {"value": "Failure"}})
    report["body"]["Switch"] = {}
    overall, incidents = dcgm.dcgm_incidents(report)
    assert overall == "Failure" and [(i["entity"], i["message"]) for i in incidents] == [("GPU 1", "")]
    assert dcgm.dcgm_problem(overall, incidents) == "DCGM_FR_UNRECOGNIZED GPU 1: Memory system"


def test_a_check_that_breaks_never_hides_the_findings_of_the_checks_after_it(fake_dcgmi, monkeypatch):
    """Issue 38, part 4: each check runs in a boundary of its own. A check that raises what it was
    not written for (here a TypeError inside the DCGM parser) fails with that error, and the mount
    check after it still runs: the drain reason is the first failure's, as documented, and the log
    has both."""
    def broken(_report):
        raise TypeError("'NoneType' object is not subscriptable")
    monkeypatch.setattr(dcgm, "dcgm_incidents", broken)
    missing = str(fake_dcgmi["tmp"] / "not-mounted")
    fake_dcgmi["data"]["checks"] = [{"type": "dcgm_health"}, {"type": "mount", "paths": [missing]}]
    fake_dcgmi["config"].write_text(json.dumps(fake_dcgmi["data"]))
    context = checks.Context(fake_dcgmi["data"], "n2")
    (fake_dcgmi["tmp"] / "report.json").write_text(json.dumps(dcgm_report("health-healthy.json")))
    failures = checks.run_checks(fake_dcgmi["data"], context, time.monotonic() + 30)
    assert [name for name, _detail in failures] == ["dcgm_health", "mount"], failures
    assert failures[0][1] == "check error: TypeError: 'NoneType' object is not subscriptable"
    assert missing in failures[1][1]
    assert _dcgmi(fake_dcgmi, dcgm_report("health-healthy.json")) == base.EXIT_FAILED
    assert _argvs(fake_dcgmi)[1] == ("update nodename=n2 state=drain reason=clusterops-health: dcgm_health: "
                                     "check error: TypeError: 'NoneType' object is not subscriptable")


@pytest.mark.parametrize("name, message", [
    ("DCGM_FR_XID_ERROR", "Detected XID 48 for GPU 0"),
    ("DCGM_FR_VOLATILE_DBE_DETECTED", "Detected 1 volatile double-bit ECC error(s) in GPU 7."),
    ("DCGM_FR_PENDING_PAGE_RETIREMENTS", "A pending retired page has been detected in GPU 2."),
    ("DCGM_FR_ROW_REMAP_FAILURE", "GPU 0 had uncorrectable memory errors and row remapping failed."),
    ("DCGM_FR_UNCORRECTABLE_ROW_REMAP_LIMIT", "GPU 1 exceeded uncorrectable row remap limit with 8 remapped rows"),
    ("DCGM_FR_UNCONTAINED_ERROR", "GPU had an uncontained error (XID 95)"),
    ("DCGM_FR_CONTAINED_ERROR", "GPU had a contained error."),
    ("DCGM_FR_FALLEN_OFF_BUS", "GPU 6 has fallen off the bus"),
    ("DCGM_FR_GPU_RECOVERY_RESET", "GPU 1 requires a reset to recover from a fault. Recovery action: 1 (GPU_RESET)."),
    ("DCGM_FR_GPU_RECOVERY_REBOOT",
     "GPU 1 fault may have left the OS in an inconsistent state. Recovery action: 2 (NODE_REBOOT)."),
    ("DCGM_FR_GPU_RECOVERY_DRAIN_RESET",
     "GPU 1 operating at reduced capacity due to a fault. Recovery action: 4 (DRAIN_AND_RESET)."),
    ("DCGM_FR_GPU_RECOVERY_DRAIN_P2P",
     "GPU 1 requires peer-to-peer traffic to be quiesced. Recovery action: 3 (DRAIN_P2P)."),
    ("DCGM_FR_RETIRED_PAGES_LIMIT", "60 or more retired pages have been detected in GPU 3. "),
    ("DCGM_FR_RETIRED_PAGES_DBE_LIMIT", "An excess of 15 retired pages due to DBEs have been detected and more than "
                                        "one page has been retired due to DBEs in the past week in GPU 3."),
    ("DCGM_FR_FAULTY_MEMORY", "Found 2 faulty memory elements on GPU 0"),
    ("DCGM_FR_CORRUPT_INFOROM", "A corrupt InfoROM has been detected in GPU 4."),
    ("DCGM_FR_PCI_REPLAY_RATE", "Detected more than 8 PCIe replays per minute for GPU 2 : 13"),
    ("DCGM_FR_NVLINK_DOWN", "GPU 0's NvLink link 5 is currently down"),
    ("DCGM_FR_NVLINK_ERROR_CRITICAL", "Detected 3 NVLink replay NvLink errors on GPU 0's NVLink (should be 0)"),
    ("DCGM_FR_NVLINK_ERROR_THRESHOLD",
     "Detected 120 CRC FLIT NvLink errors on GPU 0's NVLink which exceeds threshold of 100"),
    ("DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD",
     "150.0 CRC FLIT NvLink errors found occuring per second on GPU 0, exceeding the limit of 100 per second."),
    ("DCGM_FR_NVLINK_EFFECTIVE_BER_THRESHOLD", "Detected effective BER 1.00e-12 exceeds minimum threshold on GPU 0's "
                                               "NVLink."),
    ("DCGM_FR_NVLINK_SYMBOL_BER_THRESHOLD", "Detected symbol BER 3.20e-09 exceeds minimum threshold on GPU 0's NVLink."),
    ("DCGM_FR_NVSWITCH_FATAL_ERROR", "Detected fatal errors on NvSwitch 2 link 30"),
    ("DCGM_FR_NVSWITCH_NON_FATAL_ERROR", "Detected nonfatal errors on NvSwitch 2 link 30"),
    ("DCGM_FR_CLOCKS_EVENT_THERMAL", "Detected clocks event due to thermal violation in GPU 0."),
    ("DCGM_FR_CLOCKS_EVENT_POWER", "Detected clocks event due to power violation in GPU 0."),
    ("DCGM_FR_POWER_UNREADABLE", "Cannot reliably read the power usage for GPU 0."),
    ("DCGM_FR_FABRIC_PROBE_STATE", "GPU 0: Fabric State is Not Started (0)."),
    ("DCGM_FR_IMEX_UNHEALTHY", "IMEX domain status is DEGRADED (1 of 2 nodes)"),
    ("DCGM_FR_UNRECOGNIZED", "Something DCGM 9 says"),
])
def test_dcgm_findings_read_each_message_of_dcgm(name, message):
    """DCGM_FINDINGS: each message format of dcgm_errors.h (with values filled in) is named."""
    assert dcgm.dcgm_finding(message) == name


def test_every_dcgm_finding_is_tested_and_every_reboot_finding_is_one():
    from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import (
        DCGM_REBOOT_FINDINGS,
    )
    tested = set(p[0] for p in test_dcgm_findings_read_each_message_of_dcgm.pytestmark[0].args[1])
    assert tested == set(finding[0] for finding in dcgm.DCGM_FINDINGS) | {dcgm.DCGM_UNRECOGNIZED}
    assert set("DCGM_FR_" + n for n in DCGM_REBOOT_FINDINGS) <= tested


@pytest.mark.parametrize("xid, klass", [(48, "gpu_dcgm_reset"), (79, "gpu_dcgm_reset"), (154, "gpu_dcgm_reset"),
                                        (64, "health_other"), (92, "health_other"), (480, "health_other")])
def test_dcgm_xid_findings_take_the_gpu_xid_decision(xid, klass):
    """A DCGM_FR_XID_ERROR finding is rebooted for exactly the Xids the gpu_xid check's are."""
    from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import XID_REBOOT
    assert dcgm_class("DCGM_FR_XID_ERROR GPU 0: Detected XID %d for GPU 0" % xid) == klass
    assert (klass == "gpu_dcgm_reset") == (xid in XID_REBOOT)


@pytest.fixture()
def fake_dcgmi(fake):
    """The fake cluster of ``fake`` with a fake dcgmi: records its arguments, prints report.json,
    exits with the status in rc (0)."""
    tmp = fake["tmp"]
    (tmp / "rc").write_text("0")
    dcgmi = _script(str(tmp / "dcgmi"), 'printf "%%s\\n" "$*" >> %s\ncat %s\nexit $(cat %s)\n'
                    % (tmp / "dcgmi-calls", tmp / "report.json", tmp / "rc"))
    fake["data"].update({"dcgmi": [dcgmi], "checks": [{"type": "dcgm_health", "group": 2}]})
    fake["config"].write_text(json.dumps(fake["data"]))
    return fake


def _dcgmi(fake, report, rc=0):
    text = report if isinstance(report, str) else json.dumps(report)
    (fake["tmp"] / "report.json").write_text(text)
    (fake["tmp"] / "rc").write_text(str(rc))
    if fake["calls"].exists():
        fake["calls"].unlink()
    return loop.main(["--config", str(fake["config"]), "--node", "n2"])


def test_end_to_end_dcgm_failure_drains_with_dcgm_error_name(fake_dcgmi):
    assert _dcgmi(fake_dcgmi, dcgm_report("health-dbe-failure.json")) == base.EXIT_FAILED
    reason = ("clusterops-health: dcgm_health: DCGM_FR_VOLATILE_DBE_DETECTED GPU 1: Detected 2 volatile double-bit "
              "ECC error(s) in GPU 1.")
    assert _argvs(fake_dcgmi) == ["show node n2", "update nodename=n2 state=drain reason=" + reason]
    assert (fake_dcgmi["tmp"] / "dcgmi-calls").read_text().splitlines() == ["health --check --json --group 2"]
    assert dcgm_class(reason[len("clusterops-health: dcgm_health: "):]) == "gpu_dcgm_reset"


def test_end_to_end_dcgm_healthy_and_warning_pass(fake_dcgmi):
    assert _dcgmi(fake_dcgmi, dcgm_report("health-healthy.json")) == base.EXIT_OK
    assert _argvs(fake_dcgmi) == ["show node n2"]
    assert _dcgmi(fake_dcgmi, dcgm_report("health-thermal-warning.json")) == base.EXIT_OK
    assert _argvs(fake_dcgmi) == ["show node n2"]


@pytest.mark.parametrize("report, rc, detail", [
    ("Error: unable to establish a connection to the specified host: localhost\n", 235,
     "dcgmi health failed rc=235: Error: unable to establish a connection to the specified host: localhost"),
    ("Error: Health watches not enabled. Please enable watches. \n", 253,
     "dcgmi health failed rc=253: Error: Health watches not enabled. Please enable watches."),
    ('{"body": {"Overall Health": {"value": "Internal error"}}}', 0,
     "dcgmi health unreadable: dcgmi health: body/Overall Health has the verdict 'Internal error', not one of "
     "Healthy/Warning/Failure"),
    ('{"body": {"Overall Hea', 0, None),  # cut short: unreadable, whatever the parser says
    ("", 0, None),
], ids=["no-host-engine", "no-watches", "internal-error", "truncated", "no-output"])
def test_end_to_end_dcgm_that_cannot_look_drains_for_a_human(fake_dcgmi, report, rc, detail):
    """dcgmi failing or a report that cannot be read is a failure, never healthy; a person decides."""
    assert _dcgmi(fake_dcgmi, report, rc) == base.EXIT_FAILED
    argvs = _argvs(fake_dcgmi)
    assert argvs[0] == "show node n2" and len(argvs) == 2
    prefix = "update nodename=n2 state=drain reason=clusterops-health: dcgm_health: "
    assert argvs[1].startswith(prefix + "dcgmi health ")
    if detail:
        assert argvs[1] == prefix + detail
    assert dcgm_class(argvs[1][len(prefix):]) == "health_other"


def test_without_a_dcgm_check_dcgmi_is_never_run(fake_dcgmi):
    """Without DCGM nothing changes: the role's default checks have no dcgm_health, and a
    configuration without one never calls dcgmi."""
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        checks = yaml.safe_load(handle)["node_health_checks"]
    assert "dcgm_health" not in [c["type"] for c in checks]
    fake_dcgmi["data"]["checks"] = checks
    fake_dcgmi["config"].write_text(json.dumps(fake_dcgmi["data"]))
    _dcgmi(fake_dcgmi, dcgm_report("health-dbe-failure.json"))
    assert not (fake_dcgmi["tmp"] / "dcgmi-calls").exists()


def test_documented_dcgm_findings_equal_the_check_and_the_policy():
    """docs/node-health.md's DCGM table: every DCGM_FINDINGS name and UNRECOGNIZED, in order, and
    "reboot" exactly for the policy's DCGM_REBOOT_FINDINGS (XID_ERROR: by the Xid)."""
    from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import (
        DCGM_REBOOT_FINDINGS,
    )
    rows = _doc_table(os.path.join(REPO, "docs", "node-health.md"), "### DCGM health watches")
    names = ["DCGM_FR_" + re.match(r"`([A-Z_0-9]+)`", r[0]).group(1) for r in rows]
    assert names == [finding[0] for finding in dcgm.DCGM_FINDINGS] + [dcgm.DCGM_UNRECOGNIZED]
    for name, (_error, remediation) in zip(names, rows):
        if name == "DCGM_FR_XID_ERROR":
            assert remediation.startswith("reboot for the Xids of `gpu_xid_reset`")
            continue
        assert remediation == ("reboot" if name[len("DCGM_FR_"):] in DCGM_REBOOT_FINDINGS else "human"), name

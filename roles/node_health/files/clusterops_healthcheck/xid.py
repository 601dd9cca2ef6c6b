# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Xids in the kernel log: which lines are the NVIDIA driver's, how the kernel log is read, the gpu_xid check."""

from __future__ import annotations

import json
import os
import re
import shutil

from .commands import expand, run_cmd


DEFAULT_KERNEL_LOG = [["journalctl", "-k", "-b", "-o", "short-monotonic", "--no-pager"], ["dmesg"]]
# The NVIDIA driver's Xid message, which is the whole text of a kernel record and starts it:
#   NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
#   NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:00): 95, pid=..., name=..., <message>   (MIG attribution)
#   NVRM: Xid (0000:03:00): 13, 0003 00000000 ...                                      (older drivers)
# (open-gpu-kernel-modules prints the first two; drivers differ in the pid/name parts, some have
# neither). Matched at the START of the record's text only: see kernel_message().
XID_RE = re.compile(r"NVRM: Xid \(((?:PCI:)?[0-9A-Fa-f][0-9A-Fa-f:.]*(?: GPU-I:\d+)?(?: GPU-CI:\d+)?)\): "
                    r"(\d+), ([^\n]*)")
XID_NOISE_RE = re.compile(r"^(?:pid=[^,]*, )?(?:name=[^,]*, )?")
# One line of a kernel log as text: where a record starts, the prefixes before its text. A line that
# does not start with one (a record's continuation line, which dmesg and journalctl indent) is no
# record. Facility, where the format gives one: dmesg --decode "kern :", dmesg --raw "<N>" (see
# kernel_message()).
KERNEL_LINE_RE = re.compile(r"""
    (?:<(?P<pri>\d{1,4})>)?                            # dmesg --raw: <facility * 8 + level>
    (?:(?P<fac>[a-z][a-z0-9]*)\ *:[a-z]+\ *:\ )?       # dmesg --decode: "kern  :warn  : "
    (?:\[[^\]\n]*\]                                    # [ 1234.567890], [Fri Aug 30 11:43:09 2024], [  +0.000123]
      |\d{4}-\d\d-\d\dT\S+                             # dmesg --time-format iso, journalctl -o short-iso
      |[A-Z][a-z]{2}\ [\ \d]\d\ \d\d:\d\d:\d\d(?:\.\d+)?  # syslog, journalctl -o short, short-precise
    )
    (?:\ \[\ *[CT]\d+\])?                               # the caller id (CONFIG_PRINTK_CALLER)
    (?:\ \S+\ kernel:(?:\ \[[^\]\n]*\])?)?             # journalctl, syslog: "<host> kernel:", the kernel's [time]
    \ (?P<text>.*)""", re.X)
# journalctl: the output the program reads (the last -o wins), with the fields it needs.
JOURNALCTL_ARGS = ["--output=json", "--output-fields=MESSAGE,SYSLOG_FACILITY,_TRANSPORT"]
# dmesg options that would put a line a user wrote where a record starts (-S: syslog(2) prefixes each
# line of a record, as does --force-prefix; -t/notime: no prefix at all), add other facilities to
# --kernel (-u, -f), or print what the program does not read (-J). Short ones, then long ones.
DMESG_REFUSED = "SptufJ"
DMESG_REFUSED_LONG = ("syslog", "force-prefix", "notime", "userspace", "facility", "json")
# dmesg options that take an argument (in a bundle: the rest of it), util-linux 2.38 to 2.41.
DMESG_WITH_ARGUMENT = "FfKLlns"
DMESG_LONG_WITH_ARGUMENT = ("buffer-size", "console-level", "file", "kmsg-file", "level", "since",
                            "time-format", "until")


def kernel_message(line):
    """One line of kernel log output -> (kern, text) for a line that starts a kernel record, else None.

    ``kern`` is True when the record's facility is kern (0), False when it is another one, None when
    the format does not say. Formats:

    - ``journalctl -o json``: one object per record; only ``_TRANSPORT=kernel`` records are kernel
      records (userspace cannot set an underscore field), with ``SYSLOG_FACILITY``; ``MESSAGE`` is
      the whole text (a list of byte values when it is not UTF-8);
    - text: a record starts at column 0 with its time (``[ 1234.567890]``, ``[Fri Aug 30 11:43:09
      2024]``, ISO, or syslog's ``Dec  2 11:38:47``), optionally after dmesg's ``<N>`` (--raw) or
      ``kern  :warn  :`` (--decode), optionally followed by ``<host> kernel:`` (journalctl -o
      short*, syslog); ``text`` is what follows.
    """
    if line.startswith("{"):
        try:
            entry = json.loads(line)
        except ValueError:
            return None
        if not isinstance(entry, dict) or entry.get("_TRANSPORT") != "kernel":
            return None
        text = entry.get("MESSAGE")
        if isinstance(text, list):
            try:
                text = bytes(text).decode("utf-8", "replace")
            except (TypeError, ValueError):
                return None
        if not isinstance(text, str):
            return None
        return entry.get("SYSLOG_FACILITY") == "0", text
    m = KERNEL_LINE_RE.match(line)
    if not m:
        return None
    if m.group("pri") is not None:
        # Not kern when N >> 3 is not 0; the converse does not hold: util-linux until its issue
        # #2325 (2023; Debian 12's 2.38.1, measured) prints facility | level, so a user (1) warning
        # (4) shows as <5>.
        return (False if int(m.group("pri")) >> 3 else None), m.group("text")
    if m.group("fac") is not None:
        return m.group("fac") == "kern", m.group("text")
    return None, m.group("text")


def parse_xids(text, facility_required=False):
    """Kernel log text -> list of {xid, pci, message} in log order.

    An Xid counts only from a kernel record whose text STARTS with the driver's ``NVRM: Xid (...)``
    (kernel_message()), never from one of another facility; with ``facility_required`` (journalctl)
    also never from a record whose format does not give its facility. Lines are split at newlines
    only: a carriage return or another line separator in a file name that the kernel prints in a
    record (a crashing program's, say) is no line break, and dmesg indents a record's continuation
    lines.
    """
    out = []
    for line in text.split("\n"):
        if "NVRM: Xid" not in line and not line.startswith("{"):
            continue
        record = kernel_message(line)
        if record is None or record[0] is False or (record[0] is None and facility_required):
            continue
        m = XID_RE.match(record[1])
        if m:
            message = XID_NOISE_RE.sub("", m.group(3).strip(), count=1).rstrip(".").strip()
            out.append({"xid": int(m.group(2)), "pci": m.group(1), "message": message})
    return out


def xid_problem(xids, ignore=()):
    """First Xid not in ``ignore`` -> ``Xid <N> (<pci>): <message>``, or None."""
    for x in xids:
        if x["xid"] not in ignore:
            return "Xid %d (%s): %s" % (x["xid"], x["pci"], x["message"])
    return None


def dmesg_refused(args):
    """dmesg arguments -> the first refused option given (DMESG_REFUSED, DMESG_REFUSED_LONG,
    ``--time-format notime``), or None.

    Bundles count (``-Tu``), the argument of an option does not (``-lnotice``, ``-s 1048576``,
    ``--since 10:00``); a long option may be abbreviated, as getopt_long allows.
    """
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--":
            return None
        if arg.startswith("--"):
            name, equals, value = arg[2:].partition("=")
            for refused in DMESG_REFUSED_LONG:
                if refused.startswith(name):
                    return "--" + refused
            if not equals and any(o.startswith(name) for o in DMESG_LONG_WITH_ARGUMENT):
                value, skip = (args[i + 1] if i + 1 < len(args) else ""), True
            if "time-format".startswith(name) and value == "notime":
                return "--time-format notime"
        elif arg.startswith("-"):
            for pos, flag in enumerate(arg[1:], 1):
                if flag in DMESG_REFUSED:
                    return "-" + flag
                if flag in DMESG_WITH_ARGUMENT:
                    skip = pos == len(arg) - 1 and flag != "L"  # -L takes its argument only attached
                    break
    return None


def kernel_log_argv(argv):
    """A ``kernel_log_commands`` entry -> (argv to run, facility_required for parse_xids()).

    - journalctl: JOURNALCTL_ARGS appended, so that each record comes with ``_TRANSPORT`` and
      ``SYSLOG_FACILITY`` (whatever ``-o`` the config has: the last one wins); only kernel-facility
      records of the kernel transport count;
    - dmesg: ``--kernel`` appended (facility kern only); ValueError for an option in
      DMESG_REFUSED(_LONG);
    - any other program (a site's own reader, the dev cluster's stand-in): run as it is, its output
      read as text; the record must start with the prefix, but the facility is the command's to get
      right (it must print the kernel's messages only: not a syslog file that ``logger`` writes to).
    """
    program = os.path.basename(argv[0])
    if program == "journalctl":
        return list(argv) + JOURNALCTL_ARGS, True
    if program == "dmesg":
        refused = dmesg_refused(list(argv[1:]))
        if refused:
            raise ValueError("option %s refused (docs/node-health.md)" % refused)
        return list(argv) + ["--kernel"], False
    return list(argv), False


def check_gpu_xid(check, ctx, timeout):
    commands = check.get("commands") or ctx.config.get("kernel_log_commands") or DEFAULT_KERNEL_LOG
    errors = []
    for argv in commands:
        argv = expand(argv, ctx.node)
        if shutil.which(argv[0], path=ctx.env().get("PATH")) is None and not os.path.isfile(argv[0]):
            errors.append("%s: not found" % argv[0])
            continue
        try:
            argv, facility_required = kernel_log_argv(argv)
        except ValueError as exc:
            errors.append("%s: %s" % (argv[0], exc))
            continue
        rc, out, err = run_cmd(argv, timeout, ctx.env(), newlines=False)
        if rc == 0:
            xids = parse_xids(out, facility_required)
            return xid_problem(xids, set(int(i) for i in check.get("ignore", [])))
        errors.append("%s: rc=%s %s" % (argv[0], "timeout" if rc is None else rc, err.strip()[:80]))
    return "kernel log unreadable: " + "; ".join(errors)

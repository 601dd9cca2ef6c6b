# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm: reading the node through scontrol, the drain reason, deciding, draining and resuming."""

from __future__ import annotations

import re
import time

from .base import SlurmError
from .commands import command_env, run_cmd


PREFIX = "clusterops-health:"
MAX_REASON = 200
# The flags of a reboot in flight (scontrol reboot): the node has not registered since.
REBOOT_FLAGS = frozenset(("REBOOT_ISSUED", "REBOOT_REQUESTED"))


def parse_show_node(text):
    """``scontrol show node <node>`` (or ``-o``) -> {key: value}.

    Reason runs to the end of its line and its ``[user@time]`` suffix is dropped; other fields are
    split at ``Key=`` boundaries, so values with spaces are kept whole.
    """
    fields = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        reason_at = stripped.find("Reason=")
        rest = stripped
        if reason_at == 0 or (reason_at > 0 and stripped[reason_at - 1] == " "):
            reason = stripped[reason_at + len("Reason="):]
            reason = re.sub(r" \[[^\[\]@]*@[^\[\]]*\]$", "", reason)
            fields["Reason"] = reason
            rest = stripped[:reason_at]
        for m in re.finditer(r"(?:^|\s)([A-Za-z_]+)=(.*?)(?=\s+[A-Za-z_]+=|$)", rest):
            fields.setdefault(m.group(1), m.group(2).strip())
    return fields


def state_flags(state):
    """``IDLE+DRAIN`` -> {"IDLE", "DRAIN"} (whole words, any case)."""
    return {w.upper() for w in re.split(r"[+ ,]", state or "") if w}


def make_reason(check, detail):
    """The drain reason: ``clusterops-health: <check>: <detail>``, one line, at most 200 chars."""
    detail = " ".join(str(detail).split())
    reason = "%s %s: %s" % (PREFIX, check, detail)
    return reason if len(reason) <= MAX_REASON else reason[:MAX_REASON - 3] + "..."


def decide(failures, state, reason, resume_own=True):
    """What to do with the node -> (action, reason): action is drain, resume or none.

    - a failure: drain with the first failure's reason, unless the node is drained by someone else
      (DRAIN and a reason not ours: left alone) or already drained with exactly that reason;
    - no failure: resume only our own drain (DRAIN and a reason starting with the prefix), when
      ``resume_own``; never anything else.
    """
    flags = state_flags(state)
    drained = "DRAIN" in flags
    ours = (reason or "").startswith(PREFIX)
    # A reboot in flight (scontrol reboot ASAP ... adds DRAIN, nextstate=resume clears it when the
    # node registers): that DRAIN is the reboot's, not an admin's hold on the node.
    rebooting = bool(flags & REBOOT_FLAGS)
    if failures:
        want = make_reason(*failures[0])
        if drained and not ours and not rebooting:
            return "none", "drained by someone else: %s" % reason
        if drained and reason == want:
            return "none", want
        return "drain", want
    if drained and ours and resume_own:
        return "resume", reason
    return "none", reason or ""


def scontrol(config, args, timeout):
    argv = [config.get("scontrol", "scontrol")] + args
    env = command_env()
    if config.get("slurm_conf"):
        env["SLURM_CONF"] = config["slurm_conf"]
    rc, out, err = run_cmd(argv, timeout, env)
    if rc != 0:
        raise SlurmError("%s: rc=%s %s" % (" ".join(argv[:3]), rc, (err or out).strip()))
    return out


def wait_registered(config, node, slurm_timeout, limit=None):
    """Poll until the node shows no REBOOT_* flag (it registered), at most ``reboot_wait`` s."""
    end = time.monotonic() + float(limit or config.get("reboot_wait", 20))
    while time.monotonic() < end:
        fields = parse_show_node(scontrol(config, ["show", "node", node], slurm_timeout))
        if not state_flags(fields.get("State")) & REBOOT_FLAGS:
            return True
        time.sleep(0.5)
    return False

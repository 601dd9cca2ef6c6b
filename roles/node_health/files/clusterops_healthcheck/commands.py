# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Running commands: argument lists (never a shell), their own process group, hard timeouts."""

from __future__ import annotations

import os
import signal
import subprocess


SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def run_cmd(argv, timeout, env=None, newlines=True):
    """Run ``argv`` (a list, no shell) in its own process group; kill the group on timeout.

    Returns (rc, stdout, stderr); rc is None on timeout, 127 when the program is missing. With
    ``newlines`` false the output is decoded as UTF-8 as it is, no carriage return turned into a
    newline (the kernel log: a carriage return in it may come from a user's file name).
    """
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True,
                                universal_newlines=newlines, errors="replace" if newlines else None)
    except OSError as exc:
        return 127, "", str(exc)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            out, err = None, None
        rc = None
    if not newlines:
        out = (out or b"").decode("utf-8", "replace")
        err = (err or b"").decode("utf-8", "replace")
    return rc, out or "", err or ""


def expand(argv, node):
    """Replace ``{node}`` in each argument (commands that need the node name)."""
    return [str(a).replace("{node}", node) for a in argv]


def command_env():
    """The environment of the commands the program runs: its own, with a system PATH when it has none."""
    env = dict(os.environ)
    env.setdefault("PATH", SYSTEM_PATH)
    return env

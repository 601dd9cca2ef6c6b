# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node's own checks: mount, disk_free and a site's command."""

from __future__ import annotations

import os
import re

from .base import ConfigError
from .commands import expand, run_cmd


def mountpoints(text):
    """/proc/self/mountinfo text -> set of mount points (octal escapes decoded)."""
    points = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) > 4:
            points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[4]))
    return points


def parse_size(value):
    """``500G``, ``1.5TiB``, ``1048576`` -> bytes (int). Powers of 1024."""
    m = re.match(r"^\s*([0-9.]+)\s*([KMGTP]?)(i?B)?\s*$", str(value), re.I)
    if not m:
        raise ConfigError("not a size: %r" % (value,))
    return int(float(m.group(1)) * 1024 ** " KMGTP".index(m.group(2).upper() or " "))


def check_mount(check, ctx, timeout):
    with open(check.get("mountinfo", "/proc/self/mountinfo")) as handle:
        present = mountpoints(handle.read())
    missing = [p for p in check.get("paths", []) if os.path.normpath(p) not in present]
    return "%s not mounted" % ", ".join(missing) if missing else None


def check_disk_free(check, ctx, timeout):
    for path, minimum in sorted((check.get("paths") or {}).items()):
        want = parse_size(minimum)
        try:
            st = os.statvfs(path)
        except OSError as exc:
            return "%s: %s" % (path, exc.strerror)
        free = st.f_bavail * st.f_frsize
        if free < want:
            return "%s has %d bytes free, needs %d" % (path, free, want)
    return None


def check_command(check, ctx, timeout):
    argv = expand(check.get("argv") or [], ctx.node)
    if not argv:
        raise ConfigError("command check %s: argv is empty" % check.get("name"))
    rc, out, err = run_cmd(argv, timeout, ctx.env())
    if rc is None:
        return "%s timed out after %ss" % (argv[0], timeout)
    if rc != 0:
        text = (out.strip() or err.strip()).splitlines()
        return "%s exited %d%s" % (os.path.basename(argv[0]), rc, (": " + text[-1]) if text else "")
    return None

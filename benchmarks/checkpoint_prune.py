# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: pruning a run folder of many checkpoints; wall time and file-system calls per checkpoint.

Prints figures; it is not a timed test and asserts nothing about speed.

Builds ``--count`` (default 10,000) contract checkpoints (``step_N/`` with one 4 KiB file and its
manifest, written with ``write_checkpoint(fsync=False)``) in a temporary folder, then for each case:

* ``plan``: ``prune(keep_last=10, dry_run=True)``: the whole plan (9,990 would go), nothing deleted;
* ``prune``: ``prune(keep_last=10)``: 9,990 checkpoints renamed to ``tmp-deleting-*`` and removed;
* ``keep all``: ``prune(keep_last=10, keep_every=1)``: every checkpoint kept by policy (what a cron
  run costs when there is nothing to delete in a big folder);
* ``again``: the cron run after ``prune``: 10 checkpoints left, nothing to delete.

Two counts of file-system calls:

* Python level, in process: every call to the ``os`` functions the library and ``shutil.rmtree``
  use (``stat``, ``lstat``, ``scandir``, ``open``, ``rename``, ``unlink``, ``rmdir``, ...) and to
  ``open()``, counted by wrappers;
* system calls, when ``strace`` is installed: ``strace -f -c`` of ``python3 clusterops_checkpoint prune`` (the installed package folder)
  (the command cron runs, with the system python), less the same command on an empty folder
  (interpreter start), divided by the number of checkpoints.

Usage: python3 benchmarks/checkpoint_prune.py [--count 10000] [--keep-last 10] [--dir PARENT] [--json FILE]
"""

import argparse
import builtins
import collections
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = os.path.join(REPO, "plugins", "module_utils", "_checkpoint")  # the package folder
sys.path.insert(0, os.path.dirname(LIBRARY))

import _checkpoint as ck  # noqa: E402  pylint: disable=wrong-import-position,import-error

_COUNTED_OS = ("stat", "lstat", "fstat", "scandir", "listdir", "open", "close", "read", "rename", "replace",
               "unlink", "remove", "rmdir", "mkdir", "fsync", "statvfs", "readlink", "utime", "access")


class Counter(object):
    """Counts calls to the os functions above and to open(), while active."""

    def __init__(self):
        self.counts: collections.Counter[str] = collections.Counter()
        self.saved = {}

    def _wrap(self, owner, name, key):
        real = getattr(owner, name)

        def counted(*args, **kwargs):
            self.counts[key] += 1
            return real(*args, **kwargs)
        self.saved[(owner, name)] = real
        setattr(owner, name, counted)

    def __enter__(self):
        for name in _COUNTED_OS:
            if hasattr(os, name):
                self._wrap(os, name, "os." + name)
        self._wrap(builtins, "open", "open()")
        return self

    def __exit__(self, *exc):
        for (owner, name), real in self.saved.items():
            setattr(owner, name, real)
        return False


def build(root, count):
    os.makedirs(root)
    data = {"model.pt": os.urandom(4096)}
    for index in range(count):
        ck.write_checkpoint(root, (index + 1) * 100, index // 1000, data, fsync=False)


def strace_calls(tool, run_dir, keep_last, extra=()):
    """(total system calls, {name: count}) of the CLI prune under strace -f -c, or None."""
    if not shutil.which("strace") or not os.path.exists("/usr/bin/python3"):
        return None
    fd, out = tempfile.mkstemp(prefix="strace-")
    os.close(fd)
    cmd = ["strace", "-f", "-c", "-o", out, "/usr/bin/python3", tool, "prune", run_dir, "--keep-last", str(keep_last),
           "--quiet"] + list(extra)
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if proc.returncode != 0 or not os.path.exists(out):
        sys.stderr.write("strace failed (rc %d): %s\n" % (proc.returncode, proc.stderr.decode()[-300:]))
        return None
    per_call = {}
    total = 0
    with open(out) as handle:
        for line in handle:
            match = re.match(r"^\s*[0-9.]+\s+[0-9.]+\s+[0-9]+\s+([0-9]+)\s+(?:[0-9]+\s+)?(\w+)\s*$", line)
            if match and match.group(2) != "total":
                per_call[match.group(2)] = int(match.group(1))
            match = re.match(r"^\s*[0-9.]+\s+[0-9.]+\s+[0-9]+\s+([0-9]+)\s+(?:[0-9]+\s+)?total\s*$", line)
            if match:
                total = int(match.group(1))
    os.unlink(out)
    return total, per_call


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--keep-last", type=int, default=10)
    parser.add_argument("--dir", default=None, help="parent folder for the run folders (default: $TMPDIR)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    parent = tempfile.mkdtemp(prefix="ckpt-prune-bench-", dir=args.dir)
    tool = os.path.join(parent, "clusterops_checkpoint")  # as roles/checkpoint_tool installs it
    shutil.copytree(LIBRARY, tool, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(REPO, "roles", "checkpoint_tool", "files", "__main__.py"), tool)  # the role's entry point
    figures = dict(count=args.count, keep_last=args.keep_last, python=platform.python_version(),
                   machine=platform.machine(), cpus=os.cpu_count(), cases={})
    print("%d contract checkpoints (one 4 KiB file each), keep_last %d; Python %s, %s CPUs" % (
        args.count, args.keep_last, platform.python_version(), os.cpu_count()))
    try:
        run = os.path.join(parent, "run")
        cases: Tuple[Tuple[str, Dict[str, Any]], ...] = (("plan (dry run)", dict(dry_run=True)), ("prune", {}), ("again (nothing to delete)", {}),
                                                         ("keep all (keep_every 1)", dict(keep_every=1)))
        for label, kwargs in cases:
            if label != "again (nothing to delete)":
                shutil.rmtree(run, ignore_errors=True)
                start = time.perf_counter()
                build(run, args.count)
                built = time.perf_counter() - start
            else:
                built = 0.0
            before = len([n for n in os.listdir(run) if n.startswith("step_")])
            with Counter() as counter:
                start = time.perf_counter()
                result = ck.prune(run, args.keep_last, fsync=True, **kwargs)
                seconds = time.perf_counter() - start
            assert result.error is None and result.latest_valid == ck.checkpoint_name(args.count * 100)
            calls = sum(counter.counts.values())
            row = dict(seconds=round(seconds, 3), checkpoints=before, deleted=len(result.deleted),
                       python_calls=calls, python_calls_per_checkpoint=round(calls / float(before), 2),
                       python_calls_by_function=dict(counter.counts.most_common()), build_seconds=round(built, 1))
            figures["cases"][label] = row
            print("\n%s: %d checkpoints, %d deleted, %.3f s (%.1f us per checkpoint)" % (
                label, before, len(result.deleted), seconds, 1e6 * seconds / before))
            print("  Python-level file-system calls: %d, %.2f per checkpoint: %s" % (
                calls, calls / float(before), ", ".join("%s %d" % kv for kv in counter.counts.most_common())))
        # System calls of the command line (what cron runs), with the system python.
        empty = os.path.join(parent, "empty")
        os.mkdir(empty)
        baseline = strace_calls(tool, empty, args.keep_last)
        if baseline is not None:
            for label, extra, dry in (("CLI plan (--dry-run)", ["--dry-run"], True), ("CLI prune", [], False)):
                shutil.rmtree(run, ignore_errors=True)
                build(run, args.count)
                start = time.perf_counter()
                subprocess.run(["/usr/bin/python3", tool, "prune", run, "--keep-last", str(args.keep_last), "--quiet"]
                               + (["--dry-run"] if dry else []), check=True)
                wall = time.perf_counter() - start
                shutil.rmtree(run, ignore_errors=True)
                build(run, args.count)
                measured = strace_calls(tool, run, args.keep_last, extra)
                total, per_call = measured
                net = total - baseline[0]
                top = sorted(((count - baseline[1].get(name, 0), name) for name, count in per_call.items()),
                             reverse=True)[:8]
                figures["cases"][label] = dict(wall_seconds=round(wall, 3), syscalls=total,
                                               baseline_syscalls=baseline[0], net_syscalls=net,
                                               syscalls_per_checkpoint=round(net / float(args.count), 2),
                                               top=dict((name, count) for count, name in top))
                print("\n%s with /usr/bin/python3, process start included: %.3f s" % (label, wall))
                print("  system calls (strace -f -c): %d, less %d for the same command on an empty folder: "
                      "%.2f per checkpoint; most: %s" % (total, baseline[0], net / float(args.count),
                                                         ", ".join("%s %d" % (n, c) for c, n in top)))
        else:
            print("\n(strace not available: no system-call counts)")
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(figures, handle, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

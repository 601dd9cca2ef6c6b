# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: capturing a large command output with AnsibleModule.run_command against
_slurm_cli.read_large (what SlurmCLI.run_json uses for sinfo --json).

A child process writes N MB (default 1, 5, 21: 21 MB is sinfo --json at 16,384 nodes on the dev
cluster) to stdout; each way captures it once in a fresh Python process, as a module runs once per
task (the first large capture of a process is the slow one: run_command's growing bytes object is
copied at every 32 KiB read, and each copy faults in new pages until the allocator adapts);
median of 3 processes. No Slurm needed.

Usage: .venv/bin/python benchmarks/command_capture.py [--sizes 1 5 21]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".collections"))

from ansible.module_utils import basic  # noqa: E402
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (  # noqa: E402
    DECODE_ERRORS, read_large)
from ansible_collections.clusterops.slurm.tests.unit.plugins.modules.module_args import (  # noqa: E402
    patch_module_args)


def capture_once(way, size):
    """Seconds one capture of ``size`` MB takes in this (fresh) process."""
    with patch_module_args({}):
        module = basic.AnsibleModule(argument_spec={})
    argv = [sys.executable, "-c", "import sys; sys.stdout.write('x' * %d)" % (size * 1000 * 1000)]
    start = time.perf_counter()
    if way == "run_command":
        rc, out, err = module.run_command(argv, check_rc=False, errors=DECODE_ERRORS)
    else:
        rc, out, err = read_large(module, argv)
    assert rc == 0 and len(out) == size * 1000 * 1000, (rc, len(out), err)
    return time.perf_counter() - start


def median_in_fresh_processes(way, size, repeat=3):
    times = []
    for dummy in range(repeat):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", way, str(size)],
                             stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
        times.append(float(out))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 5, 21], help="MB written")
    parser.add_argument("--one", nargs=2, metavar=("WAY", "MB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print("%.4f" % capture_once(args.one[0], int(args.one[1])))
        return
    print("%8s  %14s  %12s  %6s" % ("MB", "run_command s", "read_large s", "ratio"))
    for size in args.sizes:
        slow = median_in_fresh_processes("run_command", size)
        fast = median_in_fresh_processes("read_large", size)
        print("%8d  %14.2f  %12.2f  %6.1f" % (size, slow, fast, slow / fast))


if __name__ == "__main__":
    main()

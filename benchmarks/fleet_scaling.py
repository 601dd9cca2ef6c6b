# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Wall time of remediate.yml on 1, 2 and 4 dev clusters in one run (issue 13).

    .venv/bin/python benchmarks/fleet_scaling.py [--clusters b c d e] [--counts 1 2 4] [--repeat 5]

Brings up the named dev clusters of the host's release (``make cluster-up CLUSTER=<name>``; e gets
DEVCLUSTER_PORT_OFFSET 7500), and for each count N runs remediate.yml on the fleet inventory of
the first N of them (dev/cluster/fleet_inventory.py), ``--repeat`` times after one warm-up run: before each run one node
of every cluster is drained "Prolog error" (to be resumed; healing budget off), so every cluster
has work. Printed:
the median wall time of ``ansible-playbook``, its ratio to one cluster, and the same for a run
with nothing to do. Stops the clusters it started. A figure-printing script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.dirname(os.path.abspath(sys.executable))
REMEDIATE = os.path.join(REPO, "playbooks", "remediate.yml")
#: Port offsets of the fleet clusters cluster.mk does not know.
EXTRA_OFFSETS = {"e": "7500"}

sys.path.insert(0, os.path.join(REPO, "dev", "cluster"))
from devcluster.releases import HOST_RELEASE  # noqa: E402  # pylint: disable=wrong-import-position


def env_for(state_dir=None):
    env = dict(os.environ)
    env.pop("DEVCLUSTER_DIR", None)
    env.pop("DEVCLUSTER_PORT_OFFSET", None)
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
    env["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    if state_dir:
        env["SLURM_CONF"] = os.path.join(state_dir, "etc", "slurm.conf")
    return env


def make(target, name, **variables):
    # A fleet cluster runs the host's release (dev/cluster/releases.txt).
    args = ["make", "-s", target, "SLURM=%s" % HOST_RELEASE, "CLUSTER=%s" % name]
    if name in EXTRA_OFFSETS:
        args.append("DEVCLUSTER_PORT_OFFSET=%s" % EXTRA_OFFSETS[name])
    args += ["%s=%s" % kv for kv in variables.items()]
    subprocess.run(args, cwd=REPO, env=env_for(), check=True, stdout=subprocess.DEVNULL)


def drain_one(state_dir):
    subprocess.run(["scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=Prolog error"],
                   env=env_for(state_dir), check=True)


def wait_idle(state_dir, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env_for(state_dir), check=False,
                             stdout=subprocess.PIPE, universal_newlines=True).stdout.split()
        if out and all(state == "idle" for state in out):
            return
        time.sleep(0.5)
    raise SystemExit("%s: nodes not idle after %ss" % (state_dir, timeout))


def run_remediate(inventory, started):
    # The same node is healed at every repetition: no healing budget (it would call it flapping).
    extra = {"remediate_nodes_max_percent": 100, "remediate_nodes_heal_budget": 0,
             "remediate_nodes_heal_since": int(started)}
    t0 = time.monotonic()
    proc = subprocess.run(["ansible-playbook", "-i", inventory, REMEDIATE, "-e", json.dumps(extra)],
                          cwd=REPO, env=env_for(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-4000:])
    return wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--clusters", nargs="+", default=["b", "c", "d", "e"])
    parser.add_argument("--counts", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=4)
    args = parser.parse_args()
    names = args.clusters[:max(args.counts)]
    dirs = [os.path.join(REPO, ".devcluster-%s" % name) for name in names]
    started = time.time()
    for name in names:
        make("cluster-up", name, NODES=args.nodes)
    tmp = tempfile.mkdtemp(prefix="fleet-bench-")
    rows = []
    try:
        for count in args.counts:
            inventory = os.path.join(tmp, "fleet-%d.yml" % count)
            subprocess.run([sys.executable, os.path.join(REPO, "dev", "cluster", "fleet_inventory.py"),
                            "--output", inventory] + dirs[:count], check=True)
            run_remediate(inventory, started)  # warm-up (page cache, Python bytecode), not counted
            work, idle = [], []
            for _repetition in range(args.repeat):
                for state_dir in dirs[:count]:
                    drain_one(state_dir)
                work.append(run_remediate(inventory, started))
                for state_dir in dirs[:count]:
                    wait_idle(state_dir)
                idle.append(run_remediate(inventory, started))
            rows.append((count, statistics.median(work), statistics.median(idle), work, idle))
            print("%d cluster(s): heal %.2f s, nothing to do %.2f s (runs %s / %s)" % (
                count, rows[-1][1], rows[-1][2], ["%.2f" % w for w in work], ["%.2f" % w for w in idle]),
                flush=True)
    finally:
        for name in names:
            make("cluster-down", name)
    base = rows[0]
    print("\n| clusters | heal one node each: wall s (median of %d) | ratio | nothing to do: wall s | ratio |"
          % args.repeat)
    print("|---|---|---|---|---|")
    for count, work, idle, _work_runs, _idle_runs in rows:
        print("| %d | %.2f | %.2f | %.2f | %.2f |" % (count, work, work / base[1], idle, idle / base[2]))


if __name__ == "__main__":
    main()

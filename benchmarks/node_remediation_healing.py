# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Node health and the healing budget on the 22.05 dev cluster: how long until a broken node is
drained, and until a flapping node is left for a human.

    make cluster-up && .venv/bin/python benchmarks/node_remediation_healing.py [--repeat N]

Printed, per repetition:

  fault->drained   an emulated GPU fault (fallen off the bus) on n2, then a power cycle: seconds
                   from the power-on to n2 DRAIN with the health check's reason (HealthCheckProgram
                   at slurmd start, dev/cluster/gpu_standin.py)
  flapping         n3 drained "Prolog error" again each time it is back, remediate.yml run at once
                   each time (the default budget: 3 heals in 24 h): runs, seconds from the first
                   failure to the run that sets the "clusterops: flapping" reason, and the wall
                   time of each remediate.yml run

With an AWX schedule every I minutes, the first failure to the stop is about (budget + 1) x I plus
Slurm's detection time; the figures here are the cost of the machinery itself. A figure-printing
script, not a test; the dev cluster must be up and otherwise idle.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from remediate_scaling import STATE, sh  # noqa: E402

INVENTORY = os.path.join(STATE, "inventory.yml")
XID79 = "clusterops-health: gpu_xid: Xid 79"


def node(name):
    """(state words, reason) of one node from scontrol's one-line form."""
    out = sh(["scontrol", "-o", "show", "node", name]).stdout
    state = out.split("State=", 1)[1].split()[0]
    reason = out.split("Reason=", 1)[1].rsplit(" [", 1)[0] if "Reason=" in out else ""
    return state, reason


def wait(what, predicate, timeout=120, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(interval)
    sys.exit("timed out waiting for %s" % what)


def fault_to_drained():
    sh(["make", "-s", "cluster-gpu-fault", "NODE=n2", "FAULT=fallen-off-bus"])
    try:
        sh(["make", "-s", "cluster-crash", "NODE=n2"])
        started = time.monotonic()
        sh(["make", "-s", "cluster-poweron", "NODE=n2"])
        drained = wait("n2 drained by the health check",
                       lambda: "DRAIN" in node("n2")[0] and node("n2")[1].startswith(XID79))
        return drained - started
    finally:
        sh(["make", "-s", "cluster-gpu-fault", "NODE=n2", "FAULT=none"])
        sh(["make", "-s", "cluster-reboot", "NODE=n2"])
        wait("n2 back", lambda: "DOWN" in node("n2")[0] or "DRAIN" in node("n2")[0], timeout=60)
        sh(["scontrol", "update", "NodeName=n2", "State=RESUME"], check=False)


def flapping(started_at):
    runs = []
    first = time.monotonic()
    while True:
        sh(["scontrol", "update", "NodeName=n3", "State=DRAIN", "Reason=Prolog error"])
        begin = time.monotonic()
        proc = sh(["ansible-playbook", "-i", INVENTORY, "playbooks/remediate.yml", "-e",
                   json.dumps({"remediate_nodes_max_percent": 100, "remediate_nodes_heal_since": int(started_at)})],
                  check=False)
        runs.append(time.monotonic() - begin)
        if node("n3")[1].startswith("clusterops: flapping:"):
            return len(runs), time.monotonic() - first, runs
        if proc.returncode != 0 or len(runs) > 10:
            sys.exit("remediate.yml did not stop n3:\n%s" % proc.stdout[-3000:])
        wait("n3 resumed", lambda: "DRAIN" not in node("n3")[0], timeout=30)
        time.sleep(1.5)  # accounting has whole seconds: let the node be back for a moment


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    drains = []
    for index in range(args.repeat):
        drains.append(fault_to_drained())
        print("fault->drained #%d: %.1f s" % (index + 1, drains[-1]))
    print("fault->drained median %.1f s, max %.1f s" % (statistics.median(drains), max(drains)))
    started_at = time.time()
    count, seconds, runs = flapping(started_at)
    sh(["scontrol", "update", "NodeName=n3", "State=RESUME"], check=False)
    print("flapping: %d remediate.yml runs, %.1f s from the first failure to the stop; "
          "run wall time median %.1f s" % (count, seconds, statistics.median(runs)))


if __name__ == "__main__":
    main()

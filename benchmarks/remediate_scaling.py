# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: Slurm calls and wall time of remediate.yml as the cluster grows.

For each size (default 8, 4,096 and 16,384 nodes) a dev cluster is brought up defining that many
nodes, of which at most 4 run a slurmd. The nodes without a slurmd are drained by "an admin"
("benchmark: powered off", not in the allowlist: remediate.yml must skip them), and 5 % of all
nodes are drained "Kill task failed" (remediable: each must be rebooted through Slurm).

It then measures, on the real slurmctld:

* ``sinfo --json`` alone, the one read of every node that remediate.yml cannot avoid: its floor;
* ``remediate.yml --check`` and ``remediate.yml`` for real, with no blast-radius limit;
* a naive loop (sizes up to ``--naive-max``, default 4,096: it takes 22 minutes there), as the usual
  scripts do it: ``scontrol show node -o NODE`` for every node,
  then ``scontrol reboot ASAP nextstate=resume reason=... NODE`` for each remediable one
  (on a second, disjoint 5 % so both start from the same state).

and prints wall time, the peak resident memory of the process tree (the largest process:
ansible-playbook, a worker or the module), the Slurm commands run (counted by wrappers put in front of sinfo and
scontrol (and sacctmgr, the node event history of the healing budget) through ``slurm_bin_dir``, independent of what the modules report) and the RPCs
slurmctld received (``sdiag``, reset before each measurement).

Targets: the number of Slurm calls of remediate.yml does not grow with the node count; its wall
time at 16,384 nodes is at most twice that at 8 nodes and at most ``sinfo --json``'s plus 3 s.

Before measuring, it waits until slurmctld's agent queues (to the slurmd and to slurmdbd) are empty;
``sinfo --json`` and ``--check`` run ``--repeat`` times (default 3), their median is reported.

Usage: .venv/bin/python benchmarks/remediate_scaling.py [--sizes 8 4096 16384] [--naive-max 4096]
[--repeat 3] [--json FILE]. The cluster is the dev cluster of DEVCLUSTER_DIR (default: the repository's
.devcluster); one in a state dir of its own needs its CLUSTER name and DEVCLUSTER_PORT_OFFSET in the
environment too, as for `make cluster-up CLUSTER=e DEVCLUSTER_PORT_OFFSET=6000`, and only that
cluster is brought up and down. Leaves it down at the end. Takes a few minutes (plus the naive loop).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".collections"))
sys.path.insert(0, os.path.join(REPO, "dev", "cluster"))

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import (  # noqa: E402
    compress_hostlist,
)
from observe import agent_queues, rpc_counts, thread_count  # noqa: E402

#: The dev cluster to bring up and down (see the module docstring); the make variables that name it.
CLUSTER = os.environ.get("CLUSTER") or ""
PORT_OFFSET = os.environ.get("DEVCLUSTER_PORT_OFFSET") or ""
STATE = os.path.abspath(os.environ.get("DEVCLUSTER_DIR")
                        or os.path.join(REPO, ".devcluster-" + CLUSTER if CLUSTER else ".devcluster"))
MAKE_VARS = (["DEVCLUSTER_DIR=" + STATE] + (["CLUSTER=" + CLUSTER] if CLUSTER else [])
             + (["DEVCLUSTER_PORT_OFFSET=" + PORT_OFFSET] if PORT_OFFSET else []))
SLURM_CONF = os.path.join(STATE, "etc", "slurm.conf")
VENV_BIN = os.path.dirname(sys.executable)
RUNNING = 4


def env():
    e = dict(os.environ)
    e.update(SLURM_CONF=SLURM_CONF, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
             ANSIBLE_PYTHON_INTERPRETER=sys.executable, LC_ALL="C.UTF-8",
             PATH=VENV_BIN + os.pathsep + e.get("PATH", ""))
    return e


def sh(cmd, check=True, **kw):
    proc = subprocess.run(cmd, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False, **kw)
    if check and proc.returncode != 0:
        sys.exit("%s failed:\n%s" % (" ".join(cmd), proc.stdout[-3000:]))
    return proc


def sdiag():
    """slurmctld's RPC counts by message type since the last ``sdiag --reset``."""
    return rpc_counts(sh(["sdiag"]).stdout)


def make_wrappers(directory, log):
    """sinfo/scontrol/sacctmgr wrappers that log each call, then run the real command."""
    for name in ("sinfo", "scontrol", "sacctmgr"):
        real = subprocess.run(["which", name], stdout=subprocess.PIPE, universal_newlines=True,
                              check=True).stdout.strip()
        path = os.path.join(directory, name)
        with open(path, "w") as handle:
            handle.write('#!/bin/sh\nprintf "%%s\\n" "%s $1" >> "%s"\nexec "%s" "$@"\n' % (name, log, real))
        os.chmod(path, 0o700)  # run by this user's playbook only (its folder is 0700 anyway)


def settle(silent, timeout=600):
    """Wait until slurmctld has sent every queued message (to slurmd and to slurmdbd: draining
    16,384 nodes queues as many node events for the accounting database), then 2 s more: a run
    measured before competes with that work (seen: `sinfo --json` 3.8 s instead of 1.6 s).

    With ``silent`` (nodes without a slurmd) in the thousands, also wait for the end of a ping
    round (one slurmctld thread per silent node, every 100 s with SLURMD_TIMEOUT=0): the
    measurements then run in the quiet minute after it."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        queues = agent_queues(sh(["sdiag"]).stdout)
        if queues and not any(queues):
            break
        time.sleep(1)
    else:
        sys.exit("slurmctld's agent queues did not empty within %d s" % timeout)
    pid_file = os.path.join(STATE, "run", "slurmctld.pid")
    if silent >= 1000 and thread_count(pid_file) is not None:
        seen = False
        while time.time() < deadline:
            threads = thread_count(pid_file) or 0
            if threads > silent // 2:
                seen = True
            elif seen and threads < 100:
                break
            time.sleep(0.5)
        else:
            sys.exit("no ping round of the %d silent nodes began and ended within %d s" % (silent, timeout))
    time.sleep(2)


def measure_median(label, cmd, log, repeat):
    """:func:`measure` ``repeat`` times; the run of median wall time, with every wall time in
    ``wall_s_runs``. Only for runs that change nothing (the same work each time)."""
    rows = sorted((measure(label, cmd, log) for dummy in range(repeat)), key=lambda row: row["wall_s"])
    row = dict(rows[len(rows) // 2])
    row["wall_s_runs"] = sorted(r["wall_s"] for r in rows)
    return row


def measure(label, cmd, log):
    open(log, "w").close()
    sh(["sdiag", "--reset"])
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True)
    if proc.stdout is None:  # stdout=PIPE above: never
        raise RuntimeError("no pipe from %s" % cmd)
    output = proc.stdout.read()
    # wait4: the child's rusage, whose ru_maxrss (KiB) is the largest of it and its descendants.
    dummy, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit("%s failed:\n%s" % (label, output[-3000:]))
    with open(log) as handle:
        calls = [line.split()[0] for line in handle if line.strip()]
    rpcs = sdiag()
    return {"run": label, "wall_s": round(wall, 2), "peak_rss_mb": usage.ru_maxrss // 1024,
            "slurm_commands": len(calls),
            "sinfo": calls.count("sinfo"), "scontrol": calls.count("scontrol"),
            "sacctmgr": calls.count("sacctmgr"), "rpc_total": sum(rpcs.values()),
            "rpc_node_info": rpcs.get("REQUEST_NODE_INFO", 0) + rpcs.get("REQUEST_NODE_INFO_SINGLE", 0),
            "rpc_update_or_reboot": rpcs.get("REQUEST_UPDATE_NODE", 0) + rpcs.get("REQUEST_REBOOT_NODES", 0)}


def naive_loop(names, remediable, wrapdir):
    """What the usual script does: read each node, then act on each one."""
    script = ("for n in %s; do %s/scontrol show node -o \"$n\" >/dev/null; done; "
              "for n in %s; do %s/scontrol reboot ASAP nextstate=resume reason=naive \"$n\"; done"
              % (" ".join(names), wrapdir, " ".join(remediable), wrapdir))
    return ["bash", "-c", script]


def bench(size, wrapdir, log, naive_max, repeat):
    sh(["make", "-s", "cluster-down"] + MAKE_VARS)
    # SLURMD_TIMEOUT=0: slurmctld pings the nodes that run no slurmd every 100 s, not every 3 s. Each
    # ping round is a thread per silent node (TreeWidth 65533): at 16,384 nodes that kept the 2
    # cores busy half of the time (runs of the same --check took 4.5 to 6.6 s), work that a real
    # cluster, whose nodes answer through a fan-out tree, does not do. settle() waits for a round.
    sh(["make", "-s", "cluster-up", "NODES=%d" % size, "SLURMD_NODES=%d" % min(size, RUNNING),
        "SLURMD_TIMEOUT=0"] + MAKE_VARS)
    names = ["n%d" % i for i in range(1, size + 1)]
    off = names[RUNNING:]
    if off:
        sh(["scontrol", "update", "NodeName=%s" % compress_hostlist(off), "State=DRAIN",
            "Reason=benchmark: powered off"])
    share = max(1, size * 5 // 100)
    # Every 20th node from the 2nd, then a disjoint set for the naive loop.
    first = names[1::20][:share]
    second = [n for n in names[11::20] + names if n not in first][:share]
    sh(["scontrol", "update", "NodeName=%s" % compress_hostlist(first), "State=DRAIN",
        "Reason=Kill task failed"])
    # 5 % of the cluster broken at once is what the circuit breaker exists for; here the cost of
    # healing them all is measured, so it is off (the healing budget's event read still runs).
    # The accounting outlives cluster-down: heals of earlier sizes and runs do not count.
    limits = json.dumps({"remediate_nodes_max_nodes": size, "remediate_nodes_max_percent": 100,
                         "remediate_nodes_circuit_window": 0, "remediate_nodes_heal_since": int(time.time()),
                         "slurm_bin_dir": wrapdir})
    playbook = ["ansible-playbook", "-i", os.path.join(STATE, "inventory.yml"),
                "playbooks/remediate.yml", "-e", limits]
    settle(len(off))
    rows = [measure_median("sinfo --json", ["sh", "-c", '"$0" --json >/dev/null', os.path.join(wrapdir, "sinfo")],
                           log, repeat),
            measure_median("remediate.yml --check", playbook + ["--check"], log, repeat),
            measure("remediate.yml", playbook, log)]
    if size <= naive_max:
        sh(["scontrol", "update", "NodeName=%s" % compress_hostlist(second), "State=DRAIN",
            "Reason=Kill task failed"])
        rows.append(measure("naive per-node loop", naive_loop(names, second, wrapdir), log))
    for row in rows:
        row.update(nodes=size, remediable=len(first))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 4096, 16384])
    parser.add_argument("--naive-max", type=int, default=4096,
                        help="run the naive per-node loop only up to this many nodes (default 4096)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="`sinfo --json` and `remediate.yml --check` run this many times, the median "
                             "reported (default 3); the real run once (a second one would find nothing to do)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    if STATE != os.path.join(REPO, ".devcluster") and not PORT_OFFSET:
        sys.exit("%s is not the default dev cluster: give its CLUSTER and DEVCLUSTER_PORT_OFFSET in the "
                 "environment, else it would take the default cluster's ports" % STATE)
    results = []
    with tempfile.TemporaryDirectory() as wrapdir:
        log = os.path.join(wrapdir, "calls.log")
        make_wrappers(wrapdir, log)
        try:
            for size in args.sizes:
                results.extend(bench(size, wrapdir, log, args.naive_max, args.repeat))
        finally:
            sh(["make", "-s", "cluster-down"] + MAKE_VARS, check=False)
    header = ("nodes", "remediable", "run", "wall_s", "peak_rss_mb", "slurm_commands", "sinfo", "scontrol", "sacctmgr",
              "rpc_total", "rpc_node_info", "rpc_update_or_reboot")
    widths = [max(len(h), *(len(str(r[h])) for r in results)) for h in header]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in results:
        print("  ".join(str(row[h]).ljust(w) for h, w in zip(header, widths)))
    for line in against_targets(results):
        print(line)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


def against_targets(results):
    """The figures the targets name (module docstring), per size against the smallest one: the
    median ``--check`` wall time as a multiple of the smallest size's, and what it takes beyond
    ``sinfo --json`` (of the same size) in seconds; both also for the fastest runs."""
    def wall(size, run, key):
        rows = [r for r in results if r["nodes"] == size and r["run"] == run]
        return None if not rows else (rows[0][key] if key == "wall_s" else min(rows[0][key]))
    sizes = sorted({r["nodes"] for r in results})
    lines = []
    for key, what in (("wall_s", "median"), ("wall_s_runs", "fastest")):
        base = wall(sizes[0], "remediate.yml --check", key)
        for size in sizes[1:]:
            check, floor = wall(size, "remediate.yml --check", key), wall(size, "sinfo --json", key)
            if base and check is not None and floor is not None:
                lines.append("%s, %d nodes: remediate.yml --check %.2f s = %.2f x %d nodes (target 2), "
                             "sinfo --json %.2f s + %.2f s (target + 3)"
                             % (what, size, check, check / base, sizes[0], floor, check - floor))
    return lines


if __name__ == "__main__":
    main()

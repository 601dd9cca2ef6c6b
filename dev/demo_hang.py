# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make demo-hang: a training run hangs; remediate.yml's watchdog saves its stacks, cancels it and
resubmits it, and the run finishes from its newest checkpoint.

    make demo-hang [SLURM=22.05|24.11|26.05] [CLUSTER=d | DEVCLUSTER_DIR=...]

A 2-node run of the reference trainer (role torchrun_launcher, owner clusterops-alice, heartbeat
every step, checkpoint every 20 steps, hang_timeout 20 s) is deployed with the trainer's fault
injection ``--hang-at-step 50``: after step 50 rank 1 blocks before the next collective and rank 0
waits in all_reduce; the job stays RUNNING and writes nothing. Once its heartbeat is older than
hang_timeout, one remediate.yml run decides it is hung, saves every rank's stacks (py-spy through
``srun --overlap``), records the cancel, cancels and resubmits it. The deploy-hang-remediate steps
are the hang benchmark's (benchmarks/training_hang.py), so the demo and the benchmark cannot
drift apart. The run's folder stays in place afterwards (its path is printed) for a look.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
from training_remediation import SLURM, STATE, USER, attempts, cluster_info, heal_since, sh, until  # noqa: E402
from training_hang import EVERY, HANG_AT, STEPS, hang_and_remediate  # noqa: E402

HANG_TIMEOUT = 20
# The demo's folder on the host cluster: a path the jobs see as it is (not a service's private /tmp).
HOST_PARENT = "/var/tmp"  # nosec B108  # a fixed name under it; a path planted there fails makedirs in main()


def say(text):
    print("\n\033[1m== %s\033[0m" % text, flush=True)


def remediate(base, name):
    return sh("ansible-playbook", "-i", os.path.join(STATE, "inventory.yml"), "playbooks/remediate.yml",
              "-e", json.dumps({"remediate_nodes_max_percent": 50, "remediate_training_runs": [name],
                                "remediate_nodes_heal_since": heal_since(),
                                "remediate_training_registry": os.path.join(base, "registry")}))


def report_lines(output, name):
    """The run's line and the cluster's line of remediate.yml's summary."""
    lines = [line.strip().strip('",') for line in output.splitlines()]
    return [line for line in lines if line.startswith(name + ": ") or line.startswith("cluster ")]


def hanging_frames(evidence):
    """For each rank in the evidence file: its header line and the innermost frames of its first
    thread (py-spy's ``    function (file:line)`` lines)."""
    out, frames = [], 0
    for line in evidence.splitlines():
        if line.startswith("=== node ") and " rank " in line:
            out.append(line)
            frames = 0
        elif out and re.match(r"^ {4}\S.* \(.+:\d+\)$", line) and frames < 3:
            out.append(line)
            frames += 1
        elif out and line.startswith("Thread ") and frames:
            frames = 3  # only the first thread of each rank
    return out


def main():
    if not os.path.exists(os.path.join(STATE, "etc", "slurm.conf")):
        raise SystemExit("the dev cluster is not up (%s): make cluster-up" % STATE)
    info = cluster_info()
    # A folder the jobs see at the same path: /var/tmp on the host, the container's shared folder.
    base = os.path.join(info.get("shared_dir") or HOST_PARENT,
                        "clusterops-demo-hang" + ("-" + SLURM if info.get("container") else ""))
    name = "demo-hang-%s" % time.strftime("%H%M%S")  # sacct keeps earlier demos' jobs by name
    say("Slurm %s dev cluster (%s)" % (sh("sinfo", "--version").split()[-1], STATE))
    sh("scancel", "--quiet", "-u", USER, check=False)  # an earlier demo's or test's jobs
    until(lambda: not sh("squeue", "-h", "-u", USER).strip(), "%s's earlier jobs to end" % USER, 120)
    nodes = sh("sinfo", "-N", "-h", "-o", "%8N %10T %E").splitlines()
    print("\n".join(sorted(set(nodes))))  # a node in two partitions is listed twice
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    os.chmod(base, 0o755)  # nosec B103  # the jobs run as USER, another uid: they must traverse it; only we write it

    say("Deploying run %s with the role torchrun_launcher: heartbeat every step, hang_timeout %d s, "
        "checkpoint every %d steps, --hang-at-step %d" % (name, HANG_TIMEOUT, EVERY, HANG_AT))
    started = time.time()

    def on_hang(ckpt, heartbeat):
        job = sh("squeue", "-h", "-n", name, "-u", USER, "-o", "%i %T %N").strip()
        with open(heartbeat) as handle:
            beat = json.load(handle)
        say("Rank 1 hangs after step %d (rank 0 waits in all_reduce)" % HANG_AT)
        print("job (id state nodes): %s" % job)
        print("heartbeat stopped at step %s; checkpoints: %s" % (beat.get("step"), ", ".join(
            sorted(d for d in os.listdir(ckpt) if d.startswith("step_")))))
        print("waiting until the heartbeat is %d s old (hang_timeout), then one remediate.yml run ..." % HANG_TIMEOUT)

    done = hang_and_remediate(base, name, HANG_TIMEOUT, on_hang=on_hang)
    ckpt, state, figures = done["ckpt"], done["state"], done["figures"]

    say("ansible-playbook playbooks/remediate.yml   (the summary)")
    print("\n".join(report_lines(done["output"], name)))

    hang = state["hang_cancels"][-1]
    say("Evidence: %s" % hang["evidence"])
    with open(hang["evidence"]) as handle:
        print("\n".join(hanging_frames(handle.read())))

    say("Cancelled and resubmitted")
    print("job %s: %s (state.json hang_cancels: job %s at step %s, idle %s s)" % (
        hang["job_id"], sh("sacct", "-n", "-X", "-P", "-j", str(hang["job_id"]), "-o", "State").split()[0],
        hang["job_id"], hang["step"], hang["idle"]))
    resub = state["resubmissions"][-1]
    print("resubmitted as job %s, from the checkpoint of step %s" % (resub["job_id"], resub["step"]))

    say("The run trains again from its checkpoint")
    until(lambda: os.path.exists(os.path.join(ckpt, "FINISHED")), "the run to finish", 300)
    runs = attempts(ckpt)
    first = max(e["step"] for e in runs[0] if e["event"] == "step")
    print("first job: trained up to step %d, then hung (newest checkpoint step %d)" % (
        first, max(e["step"] for e in runs[0] if e["event"] == "save")))
    print("second job: resumed from step %d and finished at step %d (of %d)" % (
        runs[1][0]["step"], max(e["step"] for e in runs[-1] if e["event"] == "step"), STEPS))
    print("steps lost: %d (checkpoint interval %d)" % (figures["lost"], EVERY))
    with open(os.path.join(ckpt, "FINISHED")) as handle:
        print("FINISHED: %s" % handle.read().strip())

    say("A second run changes nothing")
    out = remediate(base, name)
    print("\n".join(report_lines(out, name) + [line for line in out.splitlines() if line.startswith("localhost")]))

    say("Timings")
    print("last heartbeat -> remediate.yml starts: %5.1f s (hang_timeout %d s; an AWX schedule adds up to its "
          "interval)" % (figures["timeout"], HANG_TIMEOUT))
    print("remediate.yml (decide, stacks, cancel, resubmit): %5.1f s (stacks %.1f s)" % (
        figures["remediate"], figures["evidence"]))
    print("end of remediate.yml -> training again: %5.1f s" % figures["restart"])
    print("last heartbeat -> training again: %5.1f s; the whole demo: %.0f s" % (
        figures["total"], time.time() - started))
    print("the run's files: %s" % os.path.dirname(ckpt))


if __name__ == "__main__":
    main()

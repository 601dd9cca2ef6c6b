# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Time from a hang to the training run training again, on the dev cluster.

    make cluster-up && .venv/bin/python benchmarks/training_hang.py [--repeat N] [--hang-timeout 30]

For each repetition: a 2-node run of the reference trainer (role torchrun_launcher, owner
clusterops-alice, heartbeat every step, checkpoint every 20 steps, 0.1 s of emulated compute per
step, ``hang_timeout`` as given) hangs after step 50 (``--hang-at-step``: rank 1 blocks, rank 0
waits in all_reduce). playbooks/remediate.yml runs as soon as ``hang_timeout`` has passed since
the last heartbeat (an AWX schedule adds up to its interval). Printed, per repetition:

  hang_timeout  the last heartbeat -> the watchdog may act (the setting)
  decide        remediate start -> the hang is decided (ansible-playbook start-up, the node
                part, sacct/squeue, the checkpoint scan)
  evidence      py-spy on both nodes through srun --overlap (-> the evidence file written)
  cancel+resub  the evidence written -> the resubmission recorded (state.json, scancel, KillWait,
                the job leaving the queue, sacct/squeue again, the checkpoint scan, sbatch)
  restart       end of remediate -> the resubmitted job's first training step
  total         the last heartbeat -> training again
  steps lost    the step it hung at - the step resumed from

(state.json times are whole seconds.) A figure-printing script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training_remediation import STATE, USER, attempts, heal_since, sh, until  # noqa: E402
from training_remediation import deploy as deploy_run  # noqa: E402
from training_remediation import repeated  # noqa: E402

HANG_AT, EVERY, STEPS = 50, 20, 100


def deploy(base, name, hang_timeout, **extra):
    """Deploy and submit a run that hangs after step HANG_AT (training_remediation.deploy; ``extra``:
    more role variables). Returns (checkpoint folder, heartbeat file)."""
    heartbeat = os.path.join(base, name, "heartbeat.json")
    ckpt = deploy_run(base, name, trainer_args=("--total-steps", str(STEPS), "--checkpoint-every", str(EVERY),
                                                "--heartbeat", heartbeat, "--hang-at-step", str(HANG_AT)),
                      torchrun_launcher_hang_timeout=hang_timeout, torchrun_launcher_progress="heartbeat",
                      torchrun_launcher_heartbeat_file=heartbeat, **extra)
    return ckpt, heartbeat


def hang_and_remediate(base, name, hang_timeout, on_hang=None, **extra):
    """Deploy a run that hangs (:func:`deploy`), wait until it hangs and ``hang_timeout`` has passed
    since its last heartbeat, run playbooks/remediate.yml once (it must cancel and resubmit the
    run), and wait until the resubmitted job trains. ``on_hang(ckpt, heartbeat)`` is called once
    the run hung. Returns {ckpt, heartbeat, output (of ansible-playbook), state (the run's
    state.json), figures (the benchmark's, in seconds, and steps lost)}."""
    ckpt, heartbeat = deploy(base, name, hang_timeout, **extra)
    until(lambda: os.path.exists(os.path.join(ckpt, ".fault-hang-step%d" % HANG_AT)), "the hang", 300)
    t_hang = os.path.getmtime(heartbeat)
    if on_hang:
        on_hang(ckpt, heartbeat)
    until(lambda: time.time() - os.path.getmtime(heartbeat) > hang_timeout, "hang_timeout", hang_timeout + 60)
    t_start = time.time()
    out = sh("ansible-playbook", "-i", os.path.join(STATE, "inventory.yml"), "playbooks/remediate.yml",
             "-e", json.dumps({"remediate_nodes_max_percent": 50, "remediate_training_runs": [name],
                               "remediate_nodes_heal_since": heal_since(),
                               "remediate_training_registry": os.path.join(base, "registry")}))
    t_remediated = time.time()
    if "cancel_hung (evidence" not in out or ", resubmit (job" not in out:
        raise SystemExit("remediation did not cancel and resubmit the hung run:\n%s" % out[-3000:])
    with open(os.path.join(base, "registry", name, "state.json")) as handle:
        state = json.load(handle)
    t_decided = state["hang_cancels"][-1]["time"]
    t_evidence = os.path.getmtime(state["hang_cancels"][-1]["evidence"])
    t_resub = state["resubmissions"][-1]["time"]
    until(lambda: len(attempts(ckpt)) >= 2 and any(e["event"] == "step" for e in attempts(ckpt)[1]),
          "the resubmitted job to train", 300)
    t_again = [e["time"] for e in attempts(ckpt)[1] if e["event"] == "step"][0]
    lost = HANG_AT - attempts(ckpt)[1][0]["step"]
    figures = dict(timeout=t_start - t_hang, decide=t_decided - t_start, evidence=t_evidence - t_decided,
                   cancel=t_resub - t_evidence, restart=t_again - t_remediated, remediate=t_remediated - t_start,
                   total=t_again - t_hang, lost=lost)
    return dict(ckpt=ckpt, heartbeat=heartbeat, output=out, state=state, figures=figures)


def one(base, index, hang_timeout):
    name = "bench-hang-%d-%s" % (index, time.strftime("%H%M%S"))
    figures = hang_and_remediate(base, name, hang_timeout)["figures"]
    sh("scancel", "--quiet", "-n", name, "-u", USER, check=False)
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--hang-timeout", type=int, default=30)
    args = ap.parse_args()
    results = repeated(lambda base, i: one(base, i, args.hang_timeout), args.repeat)
    print("hang recovery on the dev cluster (2-node run, hang after step %d, checkpoint every %d steps, "
          "0.1 s/step, hang_timeout %d s)" % (HANG_AT, EVERY, args.hang_timeout))
    print("%-4s %12s %7s %9s %13s %10s %9s %9s %11s" % (
        "rep", "hang_timeout", "decide", "evidence", "cancel+resub", "remediate", "restart", "total", "steps lost"))
    for i, r in enumerate(results):
        print("%-4d %11.1fs %6.1fs %8.1fs %12.1fs %9.1fs %8.1fs %8.1fs %11d" % (
            i, r["timeout"], r["decide"], r["evidence"], r["cancel"], r["remediate"], r["restart"], r["total"],
            r["lost"]))


if __name__ == "__main__":
    main()

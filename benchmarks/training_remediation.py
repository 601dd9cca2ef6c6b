# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Time from a node crash to the training run training again, on the dev cluster.

    make cluster-up && .venv/bin/python benchmarks/training_remediation.py [--repeat N]

For each repetition: a 2-node run of the reference trainer (deployed by the role
torchrun_launcher, owned by clusterops-alice, --no-requeue) trains and saves every 20 steps; once
it passed a checkpoint, one of its nodes loses power. Printed, per repetition:

  detection   crash -> Slurm ends the job NODE_FAIL (SlurmdTimeout=10 on the dev cluster)
  remediate   the wall time of ansible-playbook playbooks/remediate.yml (nodes + training)
  restart     end of remediate -> the resubmitted job's first training step (queue, start,
              launcher, torch import, rendezvous, checkpoint load)
  total       crash -> training again
  steps lost  last step trained before the crash - the step resumed from

and, over the whole run, the checkpoint save time (the trainer's "save" events: staging,
torch.save on every rank, barrier, hashing, fsync, manifest, rename) against the time of a
training step. A figure-printing script, not a test; the dev cluster must be up.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "dev", "cluster"))
from devcluster.releases import HOST_RELEASE, state_dir  # noqa: E402  # pylint: disable=wrong-import-position

#: The dev cluster, as for `make cluster-up`: DEVCLUSTER_DIR, else the state dir of SLURM's release
#: (dev/cluster/releases.txt: the host's release in .devcluster, one in podman in .devcluster-<release>).
SLURM = os.environ.get("SLURM") or HOST_RELEASE
STATE = os.environ.get("DEVCLUSTER_DIR") or state_dir(REPO, SLURM)
USER = "clusterops-alice"
#: The healing budget counts heals in the dev cluster's accounting, which keeps those of earlier
#: tests and benchmarks: a benchmark's remediate.yml counts only its own (heal_since()).
STARTED = time.time()
VENV_BIN = os.path.dirname(os.path.abspath(sys.executable))

import observe  # noqa: E402  (the reference trainer's event log, read as the integration tests read it)


def cluster_info():
    """<state dir>/cluster.json (a containerised release: its ``venv`` and ``shared_dir``), or {}."""
    try:
        with open(os.path.join(STATE, "cluster.json")) as handle:
            return json.load(handle)
    except (OSError, IOError, ValueError):
        return {}


def env():
    e = dict(os.environ, SLURM_CONF=os.path.join(STATE, "etc", "slurm.conf"),
             ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_PYTHON_INTERPRETER=sys.executable,
             LC_ALL="C.UTF-8", ANSIBLE_NOCOLOR="1", SLURM=SLURM, DEVCLUSTER_DIR=STATE)
    e["PATH"] = VENV_BIN + os.pathsep + e.get("PATH", "")
    if os.path.isdir(os.path.join(STATE, "bin")):  # a containerised release's client commands
        e["PATH"] = os.path.join(STATE, "bin") + os.pathsep + e["PATH"]
    return e


def sh(*cmd, **kw):
    proc = subprocess.run(list(cmd), cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=kw.pop("timeout", 600), check=False)
    if kw.pop("check", True) and proc.returncode != 0:
        raise SystemExit("%s failed:\n%s" % (" ".join(cmd), proc.stdout[-3000:]))
    return proc.stdout


def until(predicate, what, timeout=300, interval=0.2):
    return observe.until(predicate, what, timeout, interval)


def attempts(ckpt):
    return observe.attempts(observe.read_events(ckpt))


def heal_since():
    """remediate_nodes_heal_since for this benchmark's own heals only (Unix seconds)."""
    return int(STARTED) + 1


def deploy(base, name, trainer_args=("--total-steps", "200", "--checkpoint-every", "20"), **extra):
    """Deploy and submit one run of the reference trainer with the role torchrun_launcher, as
    clusterops-alice; ``trainer_args`` and ``extra`` (role variables) vary the run. Returns the
    checkpoint folder."""
    ckpt = os.path.join(base, name, "checkpoints")
    variables = {
        "torchrun_launcher_run_name": name, "torchrun_launcher_owner": USER,
        "torchrun_launcher_registry_dir": os.path.join(base, "registry"),
        "torchrun_launcher_tool_dir": os.path.join(base, "tools"),
        "torchrun_launcher_install_reference_trainer": True,
        "torchrun_launcher_workdir": os.path.join(base, name), "torchrun_launcher_checkpoint_dir": ckpt,
        "torchrun_launcher_nodes": 2, "torchrun_launcher_time": "10",
        "torchrun_launcher_env_activation": "venv",
        # the jobs' venv: the repo's on the host, the container's own on 24.11/26.05
        "torchrun_launcher_venv": cluster_info().get("venv") or os.path.dirname(VENV_BIN),
        "torchrun_launcher_python": "python",
        "torchrun_launcher_program": os.path.join(base, "tools", "reference_trainer.py"),
        "torchrun_launcher_program_args": ["--checkpoint-dir", ckpt, "--events", os.path.join(ckpt, "events.jsonl"),
                                           "--step-time", "0.1"] + list(trainer_args),
        "torchrun_launcher_submit": True, "ansible_become_method": "su",
    }
    variables.update(extra)
    play = os.path.join(base, "deploy.yml")
    with open(play, "w") as handle:
        handle.write("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.include_role:\n"
                     "        name: clusterops.slurm.torchrun_launcher\n")
    with open(play + ".json", "w") as handle:
        json.dump(variables, handle)
    sh("ansible-playbook", "-i", os.path.join(STATE, "inventory.yml"), play, "-e", "@" + play + ".json")
    return ckpt


def one(base, index):
    name = "bench-%d-%s" % (index, time.strftime("%H%M%S"))
    ckpt = deploy(base, name)
    job = until(lambda: sh("squeue", "-h", "-n", name, "-u", USER, "-o", "%i").strip(), "the job")
    until(lambda: any(e["event"] == "save" and e["step"] >= 40 for e in observe.read_events(ckpt)),
          "a checkpoint", 180)
    time.sleep(1.0)  # some steps past the checkpoint
    nodes = sh("scontrol", "show", "hostnames", sh("squeue", "-h", "-j", job, "-o", "%N").strip()).split()
    victim = nodes[-1]
    t_crash = time.time()
    sh("make", "-s", "cluster-crash", "NODE=" + victim)
    until(lambda: sh("sacct", "-n", "-X", "-P", "-j", job, "-o", "State").strip().startswith("NODE_FAIL"),
          "NODE_FAIL", 180)
    t_detect = time.time()
    sh("ansible-playbook", "-i", os.path.join(STATE, "inventory.yml"), "playbooks/remediate.yml",
       "-e", json.dumps({"remediate_nodes_max_percent": 50, "remediate_nodes_heal_since": heal_since(),
                         "remediate_training_registry": os.path.join(base, "registry")}))
    t_remediated = time.time()
    until(lambda: len(attempts(ckpt)) >= 2 and any(e["event"] == "step" for e in attempts(ckpt)[1]),
          "the resubmitted job to train", 300)
    t_again = [e["time"] for e in attempts(ckpt)[1] if e["event"] == "step"][0]
    first = attempts(ckpt)[0]
    lost = max(e["step"] for e in first if e["event"] == "step") - attempts(ckpt)[1][0]["step"]
    # put the node back and let the run finish, for the save figures
    until(lambda: "REBOOT_ISSUED" in sh("scontrol", "show", "node", victim) or "reboot^" in
          sh("sinfo", "-h", "-n", victim, "-o", "%T"), "the reboot to be issued", 60)
    time.sleep(3)
    sh("make", "-s", "cluster-poweron", "NODE=" + victim)
    until(lambda: os.path.exists(os.path.join(ckpt, "FINISHED")), "the run to finish", 600)
    saves = [e["seconds"] for e in observe.read_events(ckpt) if e["event"] == "save"]
    steps = [e["time"] for e in attempts(ckpt)[-1] if e["event"] == "step"]
    step_time = statistics.median([b - a for a, b in zip(steps, steps[1:])]) if len(steps) > 2 else float("nan")
    return dict(detection=t_detect - t_crash, remediate=t_remediated - t_detect, restart=t_again - t_remediated,
                total=t_again - t_crash, lost=lost, saves=saves, step_time=step_time)


def repeated(run_one: Callable[[str, int], Dict[str, Any]], repeat: int) -> List[Dict[str, Any]]:
    """``run_one(base, i)`` for i in 0..repeat-1, ``base`` a fresh folder in the cluster's shared
    dir (the jobs see it); afterwards the user's jobs are cancelled and the folder removed.
    Exits (SystemExit) when the dev cluster is not up."""
    if not os.path.exists(os.path.join(STATE, "etc", "slurm.conf")):
        raise SystemExit("the dev cluster is not up: make cluster-up")
    base = tempfile.mkdtemp(prefix="clusterops-bench-", dir=cluster_info().get("shared_dir"))  # jobs see it
    os.chmod(base, 0o755)  # nosec B103  # the jobs run as USER, another uid: they must traverse it; only we write it
    try:
        return [run_one(base, i) for i in range(repeat)]
    finally:
        sh("scancel", "--quiet", "-u", USER, check=False)
        shutil.rmtree(base, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    results = repeated(one, args.repeat)
    print("training remediation on the dev cluster (2-node run, checkpoint every 20 steps, 0.1 s/step of emulated compute)")
    print("%-4s %10s %10s %10s %10s %11s" % ("rep", "detection", "remediate", "restart", "total", "steps lost"))
    for i, r in enumerate(results):
        figures = (i, r["detection"], r["remediate"], r["restart"], r["total"], r["lost"])
        print("%-4d %9.1fs %9.1fs %9.1fs %9.1fs %11d" % figures)
    saves = [s for r in results for s in r["saves"]]
    step = statistics.median([r["step_time"] for r in results])
    print("checkpoint save: %d saves, median %.3f s, max %.3f s; a training step takes %.3f s (median), "
          "so a save costs %.1f steps" % (len(saves), statistics.median(saves), max(saves), step,
                                          statistics.median(saves) / step))


if __name__ == "__main__":
    main()

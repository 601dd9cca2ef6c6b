# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Time from a failure to training again: Slurm's events (the event path) against a 60-second schedule.

    make cluster-up eda-venv && .venv/bin/python benchmarks/time_to_recover.py [--repeat 5]
        [--scenario node_crash|job_fail ...] [--path event|schedule ...] [--interval 60]

Each trial deploys a 2-node run of the reference trainer (role torchrun_launcher, clusterops-alice,
``--no-requeue``, a checkpoint every 20 steps), waits for its first checkpoint and a second more, then:

  node_crash  one of its nodes loses power (``make cluster-crash``): slurmd and the job's processes die;
              Slurm marks the node DOWN after SlurmdTimeout and ends the job NODE_FAIL;
  job_fail    the trainer's rank 1 is killed (SIGKILL, what the kernel's OOM killer or a crash does):
              torchrun stops the others and the job ends FAILED.

and remediation starts by one of two paths:

  event       ``make events-up`` (dev/cluster/eventpath.py): slurmctld's node triggers (every 15 s) and its
              EpilogSlurmctld send the event to ansible-rulebook, whose rule runs remediate.yml;
  schedule    remediate.yml every ``--interval`` seconds, as AWX's schedule would, its first run at a
              random point of the interval (a failure comes at any time of a schedule).

Phases (seconds), each from the end of the one before:

  detect      the failure -> Slurm says so (the node DOWN; the job ended), polled every 0.25 s
  trigger     -> remediation starts: the event received by the rulebook's source, or the schedule's
              next remediate.yml
  submit      -> the resubmitted job in the queue (remediate.yml's reads, decisions, the reboot and sbatch)
  start       -> the resubmitted job RUNNING
  train       -> the trainer's first new step (launcher, torch import, rendezvous, checkpoint load)
  total       the failure -> the first new step; ``down->step``: Slurm's detection -> the first new step

and remediate.yml's own wall time (the schedule's run; the event path's runs log no time, so the
schedule's figure stands for both). Medians over the repetitions, per scenario and path. The targets of
issue 23: the event within Slurm's 15 s trigger interval + 2 s of the detection; the event -> the job
running within 10 s + remediate.yml's own time; the node DOWN -> the first new step within 45 s. A
figure-printing script, not a test; the dev cluster must be up (any release).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "dev", "cluster"))
import eventpath as events  # noqa: E402  # pylint: disable=wrong-import-position
from training_remediation import STATE, USER, attempts, deploy, repeated, sh, until  # noqa: E402

SCENARIOS = ("node_crash", "job_fail")
PATHS = ("event", "schedule")
PHASES = ("detect", "trigger", "submit", "start", "train", "total", "down->step")
POLL = 0.25
#: An ansible-playbook of remediate.yml (the rulebook's runs name a copy in ansible-runner's project folder).
PLAYING = r"ansible-playbook .*remediate\.yml"


def remediate_vars(base: str, name: str, since: float) -> Dict[str, Any]:
    """remediate.yml's variables for a trial: a 4-node cluster, so one run may act on half of it; the
    trial's run only; its own heals only (heal_since), or the healing budget and the circuit breaker
    would add up the crashes of earlier trials."""
    return {"remediate_nodes_max_percent": 50, "remediate_training_registry": os.path.join(base, "registry"),
            "remediate_training_runs": [name], "remediate_nodes_heal_since": int(since)}


class Schedule(threading.Thread):
    """remediate.yml every ``interval`` seconds, the first after ``offset``; ``runs``: (start, end)."""

    def __init__(self, variables: Dict[str, Any], interval: float, offset: float):
        super().__init__(daemon=True)
        self.variables, self.interval, self.offset = variables, interval, offset
        self.runs: List[Tuple[float, float]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        due = time.time() + self.offset
        while not self.stopped.wait(max(0.0, due - time.time())):
            start = time.time()
            sh("ansible-playbook", "-i", os.path.join(STATE, "inventory.yml"), "playbooks/remediate.yml",
               "-e", json.dumps(self.variables), check=False)
            self.runs.append((start, time.time()))
            while due <= time.time():  # a run longer than the interval skips the slots it covered
                due += self.interval

    def stop(self) -> None:
        self.stopped.set()
        self.join(600)


class Watch(threading.Thread):
    """Polls Slurm every POLL seconds; ``seen``: when each thing was first seen (Unix seconds)."""

    def __init__(self, name: str, first_job: str, node: Optional[str]):
        super().__init__(daemon=True)
        self.name, self.first_job, self.node = name, first_job, node
        self.seen: Dict[str, float] = {}
        self.remediations: List[List[Optional[float]]] = []  # [start, end] of each remediate.yml seen
        self.stopped = threading.Event()

    def note(self, what: str, now: float) -> None:
        self.seen.setdefault(what, now)

    def run(self) -> None:
        while not self.stopped.wait(POLL):
            now = time.time()
            rows = [line.split() for line in sh("squeue", "-h", "--states=all", "-n", self.name, "-u", USER,
                                                "-o", "%i %T", check=False).splitlines()]
            for job, state in (row for row in rows if len(row) == 2):
                if job == self.first_job and state not in ("RUNNING", "CONFIGURING"):  # COMPLETING: it ended
                    self.note("ended", now)
                elif job != self.first_job:
                    self.note("submitted", now)
                    if state == "RUNNING":
                        self.note("running", now)
            playing = bool(sh("pgrep", "-f", PLAYING, check=False).strip())
            if playing and (not self.remediations or self.remediations[-1][1] is not None):
                self.remediations.append([now, None])
            elif not playing and self.remediations and self.remediations[-1][1] is None:
                self.remediations[-1][1] = now
            if self.node and "down" not in self.seen:
                states = sh("sinfo", "-h", "-N", "-o", "%N %T", check=False).split()
                if any(a == self.node and b.startswith("down") for a, b in zip(states, states[1:])):
                    self.note("down", now)

    def stop(self) -> None:
        self.stopped.set()
        self.join(30)


def trainer_pid(ckpt: str, rank: int = 1) -> Optional[int]:
    """The process of the run's trainer rank ``rank`` (its command line names the run folder; torchrun
    sets RANK in its environment), seen from the host: a node's processes, in a namespace or a container,
    are the host's too."""
    for entry in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                argv = handle.read().split(b"\0")
            if ckpt.encode() not in argv or not any(a.endswith(b"reference_trainer.py") for a in argv):
                continue
            with open("/proc/%s/environ" % entry, "rb") as handle:
                if b"RANK=%d" % rank in handle.read().split(b"\0"):
                    return int(entry)
        except (OSError, ValueError):
            continue
    return None


def fail(scenario: str, ckpt: str, victim: str) -> None:
    if scenario == "node_crash":
        sh("make", "-s", "cluster-crash", "NODE=" + victim)
    else:
        os.kill(until(lambda: trainer_pid(ckpt), "the trainer's rank 1", 30), signal.SIGKILL)


def first_new_step(ckpt: str) -> Optional[float]:
    tries = attempts(ckpt)
    steps = [e["time"] for e in tries[1] if e["event"] == "step"] if len(tries) >= 2 else []
    return steps[0] if steps else None


def trigger_time(path: str, schedule: Optional[Schedule], watch: Watch, after: float) -> tuple:
    """When remediation started after ``after`` (the detection): the event's arrival at the rulebook's
    source, or the schedule's next run (``after`` itself when a run was under way); and the wall time of
    that remediate.yml run."""
    if path == "event":
        received = [e["received"] for e in events.accepted() if e["received"] >= after - 1.0]
        start = min(received) if received else float("nan")
        runs = [(a, b) for a, b in watch.remediations if a is not None and b is not None and a >= start - 1.0]
    else:  # a run under way when Slurm said so may read it (the training part reads after the nodes)
        runs = [r for r in (schedule.runs if schedule else []) if r[1] >= after]
        start = max(runs[0][0], after) if runs else float("nan")
    return start, (runs[0][1] - runs[0][0]) if runs else float("nan")


def put_back(scenario: str, name: str, victim: str) -> None:
    """Cancel the run; power the crashed node on once remediation asked Slurm to reboot it (a schedule's
    run that resubmitted the job may have read the nodes before Slurm marked it DOWN: then nobody did,
    and it is resumed by hand); wait until every node is in service and no remediate.yml runs (a late one
    would delay the next trial)."""
    sh("scancel", "--quiet", "-n", name, "-u", USER, check=False)
    if scenario == "node_crash":
        try:
            until(lambda: "REBOOT_ISSUED" in sh("scontrol", "show", "node", victim)
                  or sh("sinfo", "-h", "-n", victim, "-o", "%T").strip().startswith("reboot"), "the reboot", 30)
            time.sleep(3)  # Slurm completes a reboot only on a boot after the request
        except TimeoutError:
            pass
        sh("make", "-s", "cluster-poweron", "NODE=" + victim)

    def idle() -> bool:
        states = sh("sinfo", "-h", "-N", "-o", "%N %T", check=False).split()
        for node, state in zip(states[::2], states[1::2]):
            if node == victim and state == "down":  # "Node unexpectedly rebooted": no reboot was asked
                sh("scontrol", "update", "NodeName=" + victim, "State=RESUME", check=False)
        return set(states[1::2]) <= {"idle"}
    until(idle, "every node idle", 180, 1.0)
    time.sleep(3)  # the end of the cancelled job is an event too: let its remediation start, then end
    until(lambda: not sh("pgrep", "-f", PLAYING, check=False).strip(), "remediate.yml to end", 180, 1.0)


def trial(base: str, index: int, scenario: str, path: str, interval: float,
          say: Callable[[str], None] = lambda text: None) -> Dict[str, float]:
    """One failure and its recovery; the phases in seconds (see the module's text)."""
    name = "ttr-%s-%s-%d" % (scenario.replace("_", ""), path, index)
    since = time.time()
    variables = remediate_vars(base, name, since)
    schedule = None
    if path == "event":
        events.up(variables)
        say("the rulebook listens; no schedule runs")
    ckpt = deploy(base, name, trainer_args=("--total-steps", "2000", "--checkpoint-every", "20"))
    if path == "schedule":
        if events.running():
            raise SystemExit("the event path's rulebook runs (make events-down): it would remediate too")
        schedule = Schedule(variables, interval, random.uniform(0, interval))  # nosec B311 - a schedule's phase
        schedule.start()
    job = until(lambda: sh("squeue", "-h", "-n", name, "-u", USER, "-o", "%i").strip(), "the job")
    until(lambda: any(e["event"] == "save" for e in sum(attempts(ckpt), [])), "a checkpoint", 240)
    time.sleep(1.0)
    victim = sh("scontrol", "show", "hostnames", sh("squeue", "-h", "-j", job, "-o", "%N").strip()).split()[-1]
    watch = Watch(name, job, victim if scenario == "node_crash" else None)
    watch.start()
    t_fail = time.time()
    say("job %s trains past its checkpoint; now %s" % (
        job, "node %s loses power" % victim if scenario == "node_crash" else "its rank 1 is killed"))
    fail(scenario, ckpt, victim)
    try:
        step = until(lambda: first_new_step(ckpt), "the resubmitted job's first step", 420, 0.5)
        until(lambda: watch.remediations and watch.remediations[-1][1] is not None, "remediate.yml to end", 300, 0.5)
    finally:
        watch.stop()
        if schedule:
            schedule.stop()
    tries = attempts(ckpt)
    saved = max(e["step"] for e in tries[0] if e["event"] == "save")
    if tries[1][0]["step"] != saved:
        raise SystemExit("%s resumed from step %s, not from its newest checkpoint %d" % (name, tries[1][0]["step"], saved))
    seen = watch.seen
    detected = seen.get("down" if scenario == "node_crash" else "ended", float("nan"))
    started, remediate_time = trigger_time(path, schedule, watch, detected)
    put_back(scenario, name, victim)
    marks = [t_fail, detected, started, seen.get("submitted", float("nan")), seen.get("running", float("nan")), step]
    result = dict(zip(PHASES, [b - a for a, b in zip(marks, marks[1:])]))
    result.update({"total": step - t_fail, "down->step": step - detected, "remediate": remediate_time})
    return result


def median(values: List[float]) -> float:
    values = [v for v in values if not math.isnan(v)]  # NaN: not seen
    return statistics.median(values) if values else float("nan")


def table(results: Dict[tuple, List[Dict[str, float]]]) -> None:
    columns = PHASES + ("remediate",)
    print("%-11s %-9s %4s " % ("scenario", "path", "n") + " ".join("%10s" % c for c in columns))
    for (scenario, path), rows in results.items():
        print("%-11s %-9s %4d " % (scenario, path, len(rows))
              + " ".join("%9.1fs" % median([r[c] for r in rows]) for c in columns))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--scenario", action="append", choices=SCENARIOS)
    ap.add_argument("--path", action="append", choices=PATHS)
    ap.add_argument("--interval", type=float, default=60.0, help="the schedule's interval, seconds")
    ap.add_argument("--json", help="also write every trial's phases here")
    args = ap.parse_args()
    results: Dict[tuple, List[Dict[str, float]]] = {}
    try:
        for scenario in args.scenario or SCENARIOS:
            for path in args.path or PATHS:
                def one(base: str, i: int, s: str = scenario, p: str = path) -> Dict[str, float]:
                    row = trial(base, i, s, p, args.interval)
                    print("%s %s #%d: %s" % (s, p, i, ", ".join("%s %.1f s" % kv for kv in row.items())), flush=True)
                    return row
                rows = repeated(one, args.repeat)
                results[(scenario, path)] = rows
                if path == "event":
                    events.down()  # or its rulebook would remediate the schedule's trials too
    finally:
        events.down()
    print("\ntime to recover on the dev cluster (Slurm %s, %s), medians of %d; schedule every %.0f s"
          % (os.environ.get("SLURM") or "host", STATE, args.repeat, args.interval))
    table(results)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"%s/%s" % key: rows for key, rows in results.items()}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

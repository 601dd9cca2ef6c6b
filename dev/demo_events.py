# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make demo-events: no schedule runs; Slurm's own events start remediation, and each phase is timed.

    make demo-events [SLURM=22.05|24.11|26.05] [CLUSTER=d | DEVCLUSTER_DIR=...]

The event path comes up on the dev cluster (``make events-up``: the role slurm_events' permanent node
triggers and EpilogSlurmctld program, ansible-rulebook with the collection's rulebook, which runs
remediate.yml). Then a 2-node run of the reference trainer (role torchrun_launcher, clusterops-alice)
fails twice, once each way:

  a node crash   one of its nodes loses power: Slurm marks it DOWN after SlurmdTimeout, its node_down
                 trigger sends the event, remediate.yml reboots the node through Slurm and resubmits the run;
  a failed job   the trainer's rank 1 is killed (as by the OOM killer): the job ends FAILED, EpilogSlurmctld
                 sends job_fini at once, remediate.yml resubmits the run.

Each resumes from its newest checkpoint; the phases are printed (detection, the event's arrival,
remediation, the job's start, the trainer's first new step). The steps are the benchmark's
(benchmarks/time_to_recover.py, one trial of each scenario on the event path), so the demo and the
benchmark cannot drift apart.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Dict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
from time_to_recover import PHASES, SCENARIOS, events, repeated, table, trial  # noqa: E402
from training_remediation import SLURM, sh  # noqa: E402

WHAT = {"node_crash": "A node of the run loses power", "job_fail": "The trainer's rank 1 is killed (as by the OOM killer)"}
MEANING = {
    "detect": "the failure -> Slurm says so (node DOWN after SlurmdTimeout / the job ended)",
    "trigger": "-> the event at the rulebook (node trigger: within 15 s; EpilogSlurmctld: at once)",
    "submit": "-> remediate.yml resubmitted the run (the node's reboot asked of Slurm first)",
    "start": "-> the resubmitted job RUNNING",
    "train": "-> the trainer's first new step, from its newest checkpoint",
    "total": "the failure -> training again",
    "down->step": "Slurm's detection -> training again (target: 45 s)",
    "remediate": "remediate.yml's own wall time",
}


def say(text: str) -> None:
    print("\n\033[1m== %s\033[0m" % text, flush=True)


def one(scenario: str, base: str, index: int) -> Dict[str, float]:
    return trial(base, index, scenario, "event", 60.0, say=print)


def main() -> int:
    say("Slurm %s dev cluster: remediation started by Slurm's own events (no schedule runs)" % SLURM)
    print("\n".join(dict.fromkeys(sh("sinfo", "-N", "-h", "-o", "%8N %12T %E").splitlines())))  # a node per partition
    results = {}
    try:
        for scenario in SCENARIOS:
            say(WHAT[scenario])
            rows = repeated(functools.partial(one, scenario), 1)
            results[(scenario, "event")] = rows
            for event in events.accepted():
                print("event %(kind)s %(subject)s of %(cluster)s: sent %(sent).3f, received %(received).3f" % event)
            for phase in PHASES + ("remediate",):
                print("  %-10s %6.1f s   %s" % (phase, rows[0][phase], MEANING[phase]))
            print("the run resumed from its newest checkpoint; every node is in service again")
    finally:
        events.down()
    say("Phases (s) of both failures, event path")
    table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The hang watchdog end to end on the dev cluster, with real torch (CPU, gloo) and real py-spy.

A run deployed by the torchrun_launcher role with a heartbeat and ``hang_timeout``; the reference
trainer's fault injection makes rank 1 block before the collective after step HANG_AT (rank 0 then
waits in all_reduce). remediate.yml must see the hang once the heartbeat is older than
``hang_timeout``, save both ranks' Python stacks next to the run's logs, cancel the job, resubmit
it, and the resumed run must finish bitwise equal to an uninterrupted run (the helpers and
fixtures of test_training_remediation.py). Without py-spy on the nodes the ranks' SIGUSR2 dumps
(faulthandler, in the job's log) are the evidence and the run is recovered the same way. A user's
scancel of a healthy run under the same watchdog is still never resubmitted.
"""

from __future__ import annotations

import glob
import json
import os
import time

from conftest import attempts, read_events, run
# The training-remediation helpers and fixtures (world, clean, reference): one home for them.
from test_training_remediation import (  # noqa: F401 pylint: disable=unused-import
    ALICE, EVERY, STEPS, TRAIN_ARGS, active_jobs, assert_bitwise_equal, clean, deploy,
    final_params, only, prometheus, reference, remediate, sacct_state, squeue, summary_line, until,
    world)

HANG_AT = 25  # newest checkpoint before the hang: step 20 (EVERY 10), so 5 steps are lost
HANG_TIMEOUT = 15


def watched(world_, name, hang_at=None, **role_vars):
    """Deploy ``name`` with a heartbeat and the watchdog; ``hang_at``: rank 1 hangs after that step;
    ``role_vars``: more variables of the role."""
    workdir = os.path.join(world_["base"], "%s-%s" % (name, world_["tag"]))
    heartbeat = os.path.join(workdir, "heartbeat.json")
    args = list(TRAIN_ARGS) + ["--heartbeat", heartbeat]
    if hang_at:
        args += ["--hang-at-step", str(hang_at)]
    r = deploy(world_, name, train_args=args, torchrun_launcher_hang_timeout=HANG_TIMEOUT,
               torchrun_launcher_progress="heartbeat", torchrun_launcher_heartbeat_file=heartbeat, **role_vars)
    r["heartbeat"] = heartbeat
    r["logs"] = os.path.join(workdir, "logs")
    return r


def runs_hung(prom):
    """(clusterops_remediate_runs_hung, clusterops_remediate_fleet_runs_hung) of the textfile."""
    metrics = prometheus(prom)
    return metrics["clusterops_remediate_runs_hung"], metrics["clusterops_remediate_fleet_runs_hung"]


def state_of(world_, r):
    with open(os.path.join(world_["registry"], r["name"], "state.json")) as handle:
        return json.load(handle)


def test_hung_run_stacks_saved_cancelled_resubmitted_and_matches_an_uninterrupted_run(clean, reference):
    r = watched(clean, "e2e-hang", hang_at=HANG_AT)
    marker = os.path.join(r["ckpt"], ".fault-hang-step%d" % HANG_AT)
    until(lambda: os.path.exists(marker), "rank 1 to hang after step %d" % HANG_AT, 180)
    first = active_jobs(r["name"])[0][0]
    hung_at = os.path.getmtime(r["heartbeat"])
    prom = os.path.join(clean["base"], "remediate-hang.prom")
    textfile = ["-e", "remediate_prometheus_textfile=%s" % prom]

    # Not hung yet (the heartbeat is fresh): nothing to do.
    proc, recap = remediate(clean["registry"], *(only(r["name"]) + textfile))
    assert "%s: active" % r["name"] in summary_line(proc, r["name"]) and recap["changed"] == 0
    assert runs_hung(prom) == (0, 0)

    until(lambda: time.time() - os.path.getmtime(r["heartbeat"]) > HANG_TIMEOUT + 1, "hang_timeout to pass",
          HANG_TIMEOUT + 30)
    proc, recap = remediate(clean["registry"], "--check", *only(r["name"]))
    line = summary_line(proc, r["name"])
    assert "hung" in line and "cancel_hung (check mode)" in line and "last step %d" % HANG_AT in line, line
    assert [row[1] for row in squeue(r["name"])] == ["RUNNING"], "check mode changed the job"
    assert not glob.glob(os.path.join(r["logs"], "hang-*")), "check mode collected evidence"

    # The first remediation that starts once hang_timeout has passed acts on the hang.
    started = time.time()
    assert started - hung_at > HANG_TIMEOUT
    proc, recap = remediate(clean["registry"], *(only(r["name"]) + textfile))
    line = summary_line(proc, r["name"])
    assert "-> cancel_hung (evidence " in line and ", resubmit (job " in line, line
    assert sacct_state(first) == "CANCELLED"
    assert runs_hung(prom) == (1, 1)  # the cluster's gauge and the fleet's total
    assert prometheus(prom)["clusterops_remediate_runs_resubmitted"] == 1

    # The evidence: named by job id and time, next to the run's logs, stacks of both ranks.
    files = glob.glob(os.path.join(r["logs"], "hang-%s-*Z.txt" % first))
    assert len(files) == 1, os.listdir(r["logs"])
    with open(files[0]) as handle:
        evidence = handle.read()
    ranks = evidence.split("=== node ")
    rank1 = [part for part in ranks if " rank 1 pid " in part.split("\n")[0]]
    rank0 = [part for part in ranks if " rank 0 pid " in part.split("\n")[0]]
    assert rank0 and rank1, evidence
    assert "injected_hang" in rank1[0] and "reference_trainer.py" in rank1[0], evidence
    assert "all_reduce" in rank0[0] and "agree" in rank0[0], evidence
    hang = state_of(clean, r)["hang_cancels"]
    assert [(h["job_id"], h["step"]) for h in hang] == [(int(first), HANG_AT)], hang

    until(lambda: os.path.exists(os.path.join(r["ckpt"], "FINISHED")), "the run to finish", 300)
    until(lambda: not active_jobs(r["name"]), "the job to leave the queue", 60)
    assert_bitwise_equal(final_params(r["ckpt"]), reference)
    tries = attempts(read_events(r["ckpt"]))
    assert len(tries) == 2
    assert tries[1][0]["step"] == HANG_AT // EVERY * EVERY, "did not resume from the newest checkpoint"
    steps = [e["step"] for e in tries[1] if e["event"] == "step"]
    assert steps == list(range(tries[1][0]["step"] + 1, STEPS + 1))

    # A second remediation changes nothing; the remediation-cancelled job is not a user's cancel.
    proc, recap = remediate(clean["registry"], *(only(r["name"]) + textfile))
    assert recap["changed"] == 0, proc.stdout
    assert runs_hung(prom) == (0, 0)
    assert "%s: finished" % r["name"] in summary_line(proc, r["name"])
    assert len(state_of(clean, r)["hang_cancels"]) == 1 and len(state_of(clean, r)["resubmissions"]) == 1


def test_without_py_spy_the_usr2_stack_dump_is_the_evidence_and_the_run_is_recovered(clean):
    """The run's py-spy command does not exist on the nodes (a training environment without
    py-spy): every rank gets SIGUSR2 instead, the trainer's faulthandler dump in the job's log is
    copied into the evidence, and the run is cancelled, resubmitted and finishes."""
    missing = os.path.join(clean["base"], "no-such-dir", "py-spy")
    r = watched(clean, "e2e-hang-usr2", hang_at=HANG_AT, torchrun_launcher_py_spy=missing)
    until(lambda: os.path.exists(os.path.join(r["ckpt"], ".fault-hang-step%d" % HANG_AT)),
          "rank 1 to hang after step %d" % HANG_AT, 180)
    first = active_jobs(r["name"])[0][0]
    until(lambda: time.time() - os.path.getmtime(r["heartbeat"]) > HANG_TIMEOUT + 1, "hang_timeout to pass",
          HANG_TIMEOUT + 30)
    proc, recap = remediate(clean["registry"], *only(r["name"]))
    line = summary_line(proc, r["name"])
    assert "-> cancel_hung (evidence " in line and ", resubmit (job " in line, line

    files = glob.glob(os.path.join(r["logs"], "hang-%s-*Z.txt" % first))
    assert len(files) == 1, os.listdir(r["logs"])
    with open(files[0]) as handle:
        evidence = handle.read()
    assert missing in evidence, evidence  # the py-spy command that was tried
    for rank in (0, 1):
        assert " rank %d pid " % rank in evidence and "py-spy failed; SIGUSR2" in evidence, evidence
    fallback = [line for line in evidence.splitlines()
                if line.startswith("=== node ") and "py-spy failed; SIGUSR2" in line]
    assert len(fallback) == 2, evidence  # both ranks were signalled
    # faulthandler's dump (all threads), copied from the job's log: rank 1 in the injected hang,
    # rank 0 waiting in the collective.
    tail = evidence.split("=== tail of ", 1)[1]
    assert "Current thread" in tail or "Thread 0x" in tail, evidence
    assert "in injected_hang" in tail and "in all_reduce" in tail, evidence
    assert [h["evidence"] for h in state_of(clean, r)["hang_cancels"]] == files

    until(lambda: os.path.exists(os.path.join(r["ckpt"], "FINISHED")), "the run to finish", 300)
    tries = attempts(read_events(r["ckpt"]))
    assert len(tries) == 2 and tries[1][0]["step"] == HANG_AT // EVERY * EVERY
    assert max(e["step"] for e in tries[1] if e["event"] == "step") == STEPS


def test_user_cancel_of_a_watched_healthy_run_is_never_resubmitted(clean):
    r = watched(clean, "e2e-hang-usercancel")
    until(lambda: os.path.exists(r["heartbeat"]), "the first heartbeat", 180)
    first = active_jobs(r["name"])[0][0]
    proc, recap = remediate(clean["registry"], *only(r["name"]))
    assert "%s: active" % r["name"] in summary_line(proc, r["name"]) and recap["changed"] == 0
    run(["runuser", "-u", ALICE, "--", "scancel", first])
    until(lambda: sacct_state(first) == "CANCELLED", "the job to be cancelled", 60)
    for dummy in range(2):
        proc, recap = remediate(clean["registry"], *only(r["name"]))
        line = summary_line(proc, r["name"])
        assert "cancelled" in line and "never resubmitted" in line and "-> none" in line, line
        assert recap["changed"] == 0
    assert [row[0] for row in squeue(r["name"])] == [first], "remediation submitted a job"

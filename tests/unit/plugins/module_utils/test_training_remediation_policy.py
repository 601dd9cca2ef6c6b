# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training-run policy (pure): the decision table, jobs read from recorded Slurm outputs, the bookkeeping entries."""

from __future__ import annotations

import io
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import parse_job_state
from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import (
    merge_jobs,
    parse_sacct,
    parse_squeue,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import policy
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import report
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry
from ansible_collections.clusterops.slurm.tests.unit.plugins.module_utils.training_remediation_cases import ckpt, job, run, state


# ---- the decision table ------------------------------------------------------------------------

@pytest.mark.parametrize("state_name", policy.RESUBMIT_STATES)
def test_resubmits_after_each_failure_state(state_name):
    d = policy.decide(run(), [job(7, state_name)], ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("resubmit", "failed", False)
    assert d["reason"] == "job 7 ended %s; resubmission 1 of 3, resume from step 40" % state_name
    assert d["last_job"]["job_id_raw"] == 7 and d["step"] == 40


def test_resubmits_from_scratch_when_no_checkpoint_or_folder_yet():
    for status in ("none", "missing"):
        d = policy.decide(run(), [job(7, "NODE_FAIL")], ckpt(status=status), state())
        assert d["action"] == "resubmit" and "start from scratch" in d["reason"]


def test_finished_marker_wins_over_everything():
    d = policy.decide(run(), [job(7, "NODE_FAIL")], ckpt(200, finished=True), state(1, 2, 3))
    assert (d["action"], d["status"]) == ("none", "finished")


@pytest.mark.parametrize("active", [
    job(8, "PENDING", active=True),
    job(8, "RUNNING", active=True),
    # Slurm requeued the job itself after its node failed: same id, PENDING, with history.
    job(8, "PENDING", active=True, requeued=True, history=[{"state": "NODE_FAIL"}]),
    job(8, "COMPLETING", active=True),
])
def test_an_active_job_means_nothing_to_do(active):
    d = policy.decide(run(), [job(7, "NODE_FAIL"), active], ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "active", False)
    if active["requeued"]:
        assert "Slurm requeued it itself after NODE_FAIL" in d["reason"]


def test_two_active_jobs_need_a_human():
    d = policy.decide(run(), [job(7, "RUNNING", active=True), job(8, "PENDING", active=True)], ckpt(40), state())
    assert d["action"] == "none" and d["needs_human"] and "7, 8" in d["reason"]


def test_the_newest_job_decides_and_other_runs_and_users_are_ignored():
    jobs = [job(9, "CANCELLED", submit=5), job(7, "NODE_FAIL", submit=10),
            job(20, "FAILED", name="other"), job(21, "RUNNING", active=True, user="bob")]
    d = policy.decide(run(), jobs, ckpt(40), state())
    assert d["last_job"]["job_id_raw"] == 7 and d["action"] == "resubmit"


def test_cancelled_is_never_resubmitted():
    d = policy.decide(run(), [job(7, "CANCELLED", cancelled_by=1001)], ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "cancelled", False)
    assert "by uid 1001" in d["reason"] and "never resubmitted" in d["reason"]


@pytest.mark.parametrize("state_name", ["OUT_OF_MEMORY", "DEADLINE", "COMPLETED", "REVOKED"])
def test_other_final_states_are_reported_not_resubmitted(state_name):
    d = policy.decide(run(), [job(7, state_name)], ckpt(40), state())
    assert (d["action"], d["needs_human"]) == ("none", True)
    assert state_name in d["reason"]


# ---- jobs read from recorded Slurm outputs (22.05: devcluster/, 24.11: slurm-24.11/) --------------

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")


def recorded_jobs(squeue, sacct=None):
    def read(name):
        with io.open(os.path.join(FIXTURES, name), encoding="utf-8", errors="replace") as handle:
            return handle.read()
    return merge_jobs(parse_squeue(read(squeue)), parse_sacct(read(sacct)) if sacct else [])


@pytest.mark.parametrize("squeue, sacct, name, job_id", [
    ("devcluster/squeue_node_fail_requeued.txt", "devcluster/sacct_node_fail_requeued.txt",
     "rec-node-fail", "57"),
    ("slurm-24.11/09-during-node-fail/squeue-product.out",
     "slurm-24.11/09-during-node-fail/sacct-product.out", "nsl-nf", "8"),
    ("slurm-24.11/10-after-node-fail/squeue-product.out",
     "slurm-24.11/10-after-node-fail/sacct-product.out", "nsl-nf", "8"),
])
def test_recorded_requeue_by_slurm_after_node_fail_is_active_on_every_release(squeue, sacct, name, job_id):
    jobs = recorded_jobs(squeue, sacct)
    (mine,) = [j for j in jobs if j["name"] == name]
    d = policy.decide(run(name=name, owner=mine["user"]), jobs, ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "active", False)
    assert "job %s is PENDING (Slurm requeued it itself after NODE_FAIL)" % job_id in d["reason"]


@pytest.mark.parametrize("squeue, name, who, reason", [
    ("devcluster/squeue_states.txt", "rec-held", "its owner", "JobHeldUser"),        # sbatch -H
    ("devcluster/squeue_held_running.txt", "rec-held", "an administrator", "JobHeldAdmin"),
])
def test_recorded_held_job_needs_a_human_never_waits_forever(squeue, name, who, reason):
    jobs = recorded_jobs(squeue)
    (mine,) = [j for j in jobs if j["name"] == name]
    d = policy.decide(run(name=name, owner=mine["user"]), jobs, ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "held", True)
    assert "held by %s (%s)" % (who, reason) in d["reason"]
    assert "scontrol release %s" % mine["job_id"] in d["reason"]
    assert d["last_job"]["held"] is True


@pytest.mark.parametrize("held_by, reason, who", [
    ("slurm", "launch failed requeued held", "Slurm itself"),
    ("slurm", "job requeued in held state", "Slurm itself"),
    ("admin", "JobHeldAdmin", "an administrator"),
])
def test_held_job_is_reported_with_who_held_it(held_by, reason, who):
    jobs = [job(7, "NODE_FAIL"), job(8, "PENDING", active=True, held=True, held_by=held_by,
                                     reason=reason, state_raw="PENDING")]
    d = policy.decide(run(), jobs, ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "held", True)
    assert "job 8 is held by %s (%s)" % (who, reason) in d["reason"]


@pytest.mark.parametrize("jobs", [
    [job(7, None, state_raw="WARPING", state_known=False)],
    [job(7, "NODE_FAIL"), job(8, None, state_raw="WARPING", state_known=False)],
    # even next to an active job: the unknown one may be active too
    [job(8, None, state_raw="WARPING", state_known=False), job(9, "RUNNING", active=True)],
])
def test_unknown_state_is_never_resubmitted_and_needs_a_human(jobs):
    d = policy.decide(run(), jobs, ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "unknown", True)
    assert "WARPING" in d["reason"] and "not resubmitting" in d["reason"]


def test_expediting_is_slurm_requeueing_the_job_active():
    (state_,) = [parse_job_state("EXPEDITING")]
    jobs = [job(7, state_.base, active=state_.active, flags=sorted(state_.flags), requeued=True,
                state_raw="EXPEDITING")]
    d = policy.decide(run(), jobs, ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "active", False)


@pytest.mark.parametrize("status", ["invalid", "error"])
def test_unusable_checkpoints_need_a_human(status):
    d = policy.decide(run(), [job(7, "NODE_FAIL")], ckpt(status=status), state())
    assert (d["action"], d["needs_human"]) == ("none", True) and "detail of" in d["reason"]


def test_budget_stops_the_run():
    d = policy.decide(run(max_resubmissions=2), [job(9, "NODE_FAIL")], ckpt(90), state(10, 50))
    assert (d["action"], d["needs_human"]) == ("stop", True)
    assert "budget of 2 resubmission(s) is used up" in d["reason"]
    d0 = policy.decide(run(max_resubmissions=0), [job(9, "NODE_FAIL")], ckpt(90), state())
    assert d0["action"] == "stop"


def test_no_progress_stops_after_k_resubmissions_at_the_same_step():
    r = run(max_resubmissions=10, no_progress_limit=2)
    # one resubmission at step 40 and still 40: one more chance
    assert policy.decide(r, [job(9, "FAILED")], ckpt(40), state(40))["action"] == "resubmit"
    assert policy.decide(r, [job(9, "FAILED")], ckpt(40), state(20, 40))["action"] == "resubmit"
    # two consecutive resubmissions at 40 and still 40: stop
    d = policy.decide(r, [job(9, "FAILED")], ckpt(40), state(20, 40, 40))
    assert d["action"] == "stop" and "no progress" in d["reason"] and "step 40" in d["reason"]
    # progress since: go on
    assert policy.decide(r, [job(9, "FAILED")], ckpt(60), state(40, 40))["action"] == "resubmit"
    # no checkpoint ever written counts as no progress too
    assert policy.decide(r, [job(9, "FAILED")], ckpt(), state(None, None))["action"] == "stop"
    # 0 turns the check off
    assert policy.decide(run(max_resubmissions=10, no_progress_limit=0), [job(9, "FAILED")], ckpt(40),
                         state(40, 40, 40))["action"] == "resubmit"


def test_a_stopped_run_stays_stopped_but_an_active_job_is_still_seen():
    st = state(40, 40, stopped={"time": 1, "after_job": 9, "reason": "no progress"})
    d = policy.decide(run(), [job(9, "FAILED")], ckpt(40), st)
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "stopped", True)
    assert training_registry.STATE_FILE in d["reason"]
    assert policy.decide(run(), [job(12, "RUNNING", active=True)], ckpt(40), st)["status"] == "active"


def test_never_resubmits_twice_after_the_same_job():
    # State says we resubmitted after job 50, but the new job (100) is not visible (yet): lost.
    st = state(40)
    d = policy.decide(run(), [job(50, "NODE_FAIL")], ckpt(40), st)
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "lost", True)
    d = policy.decide(run(), [], ckpt(40), st)
    assert (d["action"], d["status"]) == ("none", "lost")


def test_not_started_and_disabled():
    assert policy.decide(run(), [], ckpt(), state())["status"] == "not_started"
    d = policy.decide(run(enabled=False), [job(7, "NODE_FAIL")], ckpt(40), state())
    assert (d["action"], d["status"]) == ("none", "disabled")


def test_records():
    d = policy.decide(run(), [job(7, "NODE_FAIL")], ckpt(40), state())
    st = policy.record_resubmission(state(), d, 77, 1234.5)
    assert st["resubmissions"] == [{"time": 1234, "job_id": 77, "after_job": 7, "after_state": "NODE_FAIL",
                                    "step": 40}]
    assert policy.record_stop(st, d, 99)["stopped"] == {"time": 99, "after_job": 7, "reason": d["reason"]}


def test_needs_human_is_one_item_per_run_with_why():
    errors = [{"name": "broken", "error": "/reg/broken/run.json is not valid JSON"}]
    ok = dict(policy.decide(run(name="a"), [job(7, "NODE_FAIL", name="a")], ckpt(40), state()), error=None)
    oom = dict(policy.decide(run(name="b"), [job(8, "OUT_OF_MEMORY", name="b")], ckpt(40), state()), error=None)
    failed = dict(ok, name="c", needs_human=True, error="sbatch: error: Batch job submission failed")
    hung = dict(ok, name="d", needs_human=True, reason="job 9 is RUNNING but hung", then={
        "needs_human": True, "reason": "job 9 ended CANCELLED; the budget is used up", "error": None,
        "status": "failed", "action": "stop"})
    runbook = " (docs/training-remediation.md#runbook-needs-a-human)"
    assert report.needs_human([ok, oom, failed, hung], errors) == [
        {"run": "broken", "why": "registry entry unusable: /reg/broken/run.json is not valid JSON",
         "next": "next: fix the run's run.json in the registry folder, or remove the run's folder" + runbook},
        {"run": "b", "why": "job 8 ended OUT_OF_MEMORY: ran out of memory; the same job would fail again",
         "next": "next: raise the job's memory request or lower the batch size, then submit the launcher" + runbook},
        {"run": "c", "why": ok["reason"] + " (error: sbatch: error: Batch job submission failed)",
         "next": "next: fix what the error says; the next run tries again" + runbook},
        {"run": "d", "why": "job 9 is RUNNING but hung; then: job 9 ended CANCELLED; the budget is used up",
         "next": "next: read the per-node logs (<log_dir>/<run>-<job>-<node>.out) for the error each attempt ended "
                 "on; fix it, then remove state.json from the run's registry folder (the next run resubmits it)"
                 + runbook}]


@pytest.mark.parametrize("status, state, action, words", [
    ("unknown", "RUNNING", "none", "squeue -j"),
    ("active", "RUNNING", "none", "cancel the extra job"),
    ("held", "PENDING", "none", "scontrol release"),
    ("stopped", "FAILED", "none", "remove state.json"),
    ("lost", "FAILED", "none", "sacct -j"),
    ("ended", "COMPLETED", "none", "FINISHED marker"),
    ("ended", "DEADLINE", "none", "decide whether to submit"),
    ("failed", "FAILED", "none", "clusterops_checkpoint list"),
    ("failed", "NODE_FAIL", "stop", "per-node logs"),
])
def test_every_status_that_needs_a_human_has_its_next_step(status, state, action, words):
    decision = {"status": status, "action": action, "last_job": {"state": state}, "error": None}
    step = report.next_step(decision)
    assert step.startswith("next: ") and words in step and step.endswith(
        "(docs/training-remediation.md#runbook-needs-a-human)")

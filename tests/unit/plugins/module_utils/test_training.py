# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training-run remediation: the decision table, the registry, the bookkeeping and the lock."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import multiprocessing
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ckpt_lib
from ansible_collections.clusterops.slurm.plugins.module_utils import _training as tr
from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import parse_job_state
from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import (
    merge_jobs,
    parse_sacct,
    parse_squeue,
)

OWNER = "alice"


def run_spec(**kw):
    spec = {"format": tr.RUN_FORMAT, "format_version": 1, "name": "llm", "owner": OWNER,
            "launcher": "/reg/llm/launcher.sbatch", "checkpoint_dir": "/ckpt/llm",
            "max_resubmissions": 3, "no_progress_limit": 2, "enabled": True}
    spec.update(kw)
    return spec


def run(**kw):
    return tr._validate_run(run_spec(**kw), "/reg/" + kw.get("name", "llm"))


def job(job_id, state, active=False, name="llm", user=OWNER, submit=None, **kw):
    out = {"job_id": str(job_id), "job_id_raw": job_id, "name": name, "user": user, "state": state,
           "active": active, "submit_time": submit if submit is not None else 1000 + job_id,
           "flags": [], "exit_code": None, "signal": None, "cancelled_by": None, "requeued": False,
           "history": [], "reason": "", "node_list": "n[1-2]", "start_time": None, "end_time": None}
    out.update(kw)
    return out


def ckpt(step=None, status=None, finished=False):
    if status is None:
        status = "valid" if step is not None else "none"
    return {"finished": finished, "status": status, "step": step,
            "checkpoint": "/ckpt/llm/step_%09d" % step if step is not None else None,
            "detail": "detail of %s" % status, "warnings": []}


def state(*steps, **kw):
    st = tr.empty_state()
    st["resubmissions"] = [{"time": 1, "job_id": 100 + i, "after_job": 50 + i, "after_state": "NODE_FAIL",
                            "step": s} for i, s in enumerate(steps)]
    st.update(kw)
    return st


# ---- the decision table ------------------------------------------------------------------------

@pytest.mark.parametrize("state_name", tr.RESUBMIT_STATES)
def test_resubmits_after_each_failure_state(state_name):
    d = tr.decide(run(), [job(7, state_name)], ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("resubmit", "failed", False)
    assert d["reason"] == "job 7 ended %s; resubmission 1 of 3, resume from step 40" % state_name
    assert d["last_job"]["job_id_raw"] == 7 and d["step"] == 40


def test_resubmits_from_scratch_when_no_checkpoint_or_folder_yet():
    for status in ("none", "missing"):
        d = tr.decide(run(), [job(7, "NODE_FAIL")], ckpt(status=status), state())
        assert d["action"] == "resubmit" and "start from scratch" in d["reason"]


def test_finished_marker_wins_over_everything():
    d = tr.decide(run(), [job(7, "NODE_FAIL")], ckpt(200, finished=True), state(1, 2, 3))
    assert (d["action"], d["status"]) == ("none", "finished")


@pytest.mark.parametrize("active", [
    job(8, "PENDING", active=True),
    job(8, "RUNNING", active=True),
    # Slurm requeued the job itself after its node failed: same id, PENDING, with history.
    job(8, "PENDING", active=True, requeued=True, history=[{"state": "NODE_FAIL"}]),
    job(8, "COMPLETING", active=True),
])
def test_an_active_job_means_nothing_to_do(active):
    d = tr.decide(run(), [job(7, "NODE_FAIL"), active], ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "active", False)
    if active["requeued"]:
        assert "Slurm requeued it itself after NODE_FAIL" in d["reason"]


def test_two_active_jobs_need_a_human():
    d = tr.decide(run(), [job(7, "RUNNING", active=True), job(8, "PENDING", active=True)], ckpt(40), state())
    assert d["action"] == "none" and d["needs_human"] and "7, 8" in d["reason"]


def test_the_newest_job_decides_and_other_runs_and_users_are_ignored():
    jobs = [job(9, "CANCELLED", submit=5), job(7, "NODE_FAIL", submit=10),
            job(20, "FAILED", name="other"), job(21, "RUNNING", active=True, user="bob")]
    d = tr.decide(run(), jobs, ckpt(40), state())
    assert d["last_job"]["job_id_raw"] == 7 and d["action"] == "resubmit"


def test_cancelled_is_never_resubmitted():
    d = tr.decide(run(), [job(7, "CANCELLED", cancelled_by=1001)], ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "cancelled", False)
    assert "by uid 1001" in d["reason"] and "never resubmitted" in d["reason"]


@pytest.mark.parametrize("state_name", ["OUT_OF_MEMORY", "DEADLINE", "COMPLETED", "REVOKED"])
def test_other_final_states_are_reported_not_resubmitted(state_name):
    d = tr.decide(run(), [job(7, state_name)], ckpt(40), state())
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
    d = tr.decide(run(name=name, owner=mine["user"]), jobs, ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "active", False)
    assert "job %s is PENDING (Slurm requeued it itself after NODE_FAIL)" % job_id in d["reason"]


@pytest.mark.parametrize("squeue, name, who, reason", [
    ("devcluster/squeue_states.txt", "rec-held", "its owner", "JobHeldUser"),        # sbatch -H
    ("devcluster/squeue_held_running.txt", "rec-held", "an administrator", "JobHeldAdmin"),
])
def test_recorded_held_job_needs_a_human_never_waits_forever(squeue, name, who, reason):
    jobs = recorded_jobs(squeue)
    (mine,) = [j for j in jobs if j["name"] == name]
    d = tr.decide(run(name=name, owner=mine["user"]), jobs, ckpt(40), state())
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
    d = tr.decide(run(), jobs, ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "held", True)
    assert "job 8 is held by %s (%s)" % (who, reason) in d["reason"]


@pytest.mark.parametrize("jobs", [
    [job(7, None, state_raw="WARPING", state_known=False)],
    [job(7, "NODE_FAIL"), job(8, None, state_raw="WARPING", state_known=False)],
    # even next to an active job: the unknown one may be active too
    [job(8, None, state_raw="WARPING", state_known=False), job(9, "RUNNING", active=True)],
])
def test_unknown_state_is_never_resubmitted_and_needs_a_human(jobs):
    d = tr.decide(run(), jobs, ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "unknown", True)
    assert "WARPING" in d["reason"] and "not resubmitting" in d["reason"]


def test_expediting_is_slurm_requeueing_the_job_active():
    (state_,) = [parse_job_state("EXPEDITING")]
    jobs = [job(7, state_.base, active=state_.active, flags=sorted(state_.flags), requeued=True,
                state_raw="EXPEDITING")]
    d = tr.decide(run(), jobs, ckpt(40), state())
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "active", False)


@pytest.mark.parametrize("status", ["invalid", "error"])
def test_unusable_checkpoints_need_a_human(status):
    d = tr.decide(run(), [job(7, "NODE_FAIL")], ckpt(status=status), state())
    assert (d["action"], d["needs_human"]) == ("none", True) and "detail of" in d["reason"]


def test_budget_stops_the_run():
    d = tr.decide(run(max_resubmissions=2), [job(9, "NODE_FAIL")], ckpt(90), state(10, 50))
    assert (d["action"], d["needs_human"]) == ("stop", True)
    assert "budget of 2 resubmission(s) is used up" in d["reason"]
    d0 = tr.decide(run(max_resubmissions=0), [job(9, "NODE_FAIL")], ckpt(90), state())
    assert d0["action"] == "stop"


def test_no_progress_stops_after_k_resubmissions_at_the_same_step():
    r = run(max_resubmissions=10, no_progress_limit=2)
    # one resubmission at step 40 and still 40: one more chance
    assert tr.decide(r, [job(9, "FAILED")], ckpt(40), state(40))["action"] == "resubmit"
    assert tr.decide(r, [job(9, "FAILED")], ckpt(40), state(20, 40))["action"] == "resubmit"
    # two consecutive resubmissions at 40 and still 40: stop
    d = tr.decide(r, [job(9, "FAILED")], ckpt(40), state(20, 40, 40))
    assert d["action"] == "stop" and "no progress" in d["reason"] and "step 40" in d["reason"]
    # progress since: go on
    assert tr.decide(r, [job(9, "FAILED")], ckpt(60), state(40, 40))["action"] == "resubmit"
    # no checkpoint ever written counts as no progress too
    assert tr.decide(r, [job(9, "FAILED")], ckpt(), state(None, None))["action"] == "stop"
    # 0 turns the check off
    assert tr.decide(run(max_resubmissions=10, no_progress_limit=0), [job(9, "FAILED")], ckpt(40),
                     state(40, 40, 40))["action"] == "resubmit"


def test_a_stopped_run_stays_stopped_but_an_active_job_is_still_seen():
    st = state(40, 40, stopped={"time": 1, "after_job": 9, "reason": "no progress"})
    d = tr.decide(run(), [job(9, "FAILED")], ckpt(40), st)
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "stopped", True)
    assert tr.STATE_FILE in d["reason"]
    assert tr.decide(run(), [job(12, "RUNNING", active=True)], ckpt(40), st)["status"] == "active"


def test_never_resubmits_twice_after_the_same_job():
    # State says we resubmitted after job 50, but the new job (100) is not visible (yet): lost.
    st = state(40)
    d = tr.decide(run(), [job(50, "NODE_FAIL")], ckpt(40), st)
    assert (d["action"], d["status"], d["needs_human"]) == ("none", "lost", True)
    d = tr.decide(run(), [], ckpt(40), st)
    assert (d["action"], d["status"]) == ("none", "lost")


def test_not_started_and_disabled():
    assert tr.decide(run(), [], ckpt(), state())["status"] == "not_started"
    d = tr.decide(run(enabled=False), [job(7, "NODE_FAIL")], ckpt(40), state())
    assert (d["action"], d["status"]) == ("none", "disabled")


def test_records():
    d = tr.decide(run(), [job(7, "NODE_FAIL")], ckpt(40), state())
    st = tr.record_resubmission(state(), d, 77, 1234.5)
    assert st["resubmissions"] == [{"time": 1234, "job_id": 77, "after_job": 7, "after_state": "NODE_FAIL",
                                    "step": 40}]
    assert tr.record_stop(st, d, 99)["stopped"] == {"time": 99, "after_job": 7, "reason": d["reason"]}


# ---- registry and state files ----------------------------------------------------------------------

def write_run(reg, name, **kw):
    folder = reg / name
    folder.mkdir(parents=True)
    (folder / tr.RUN_FILE).write_text(json.dumps(run_spec(name=name, **kw)))
    return folder


def test_registry_reads_good_runs_and_reports_bad_ones(tmp_path):
    reg = tmp_path / "runs"
    write_run(reg, "a")
    write_run(reg, "b", max_resubmissions=-1)
    write_run(reg, "c", a_future_field=True)  # unknown fields are kept, not refused
    (reg / "d").mkdir()
    (reg / "d" / tr.RUN_FILE).write_text("{not json")
    write_run(reg, "e", format_version=99)
    (reg / ".remediate.lock").write_text("")
    runs, errors = tr.read_registry(str(reg))
    assert [r["name"] for r in runs] == ["a", "c"]
    assert runs[0]["max_resubmissions"] == 3 and runs[0]["requeue"] is False
    by_name = dict((e["name"], e["error"]) for e in errors)
    assert set(by_name) == {"b", "d", "e"}
    assert "max_resubmissions" in by_name["b"] and "not valid JSON" in by_name["d"]
    assert "format_version 99" in by_name["e"]
    runs, errors = tr.read_registry(str(reg), ["a", "zz"])
    assert [r["name"] for r in runs] == ["a"] and errors[0]["name"] == "zz"
    assert tr.read_registry(str(tmp_path / "missing")) == ([], [])


def test_registry_refuses_a_name_that_is_not_its_folder(tmp_path):
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / tr.RUN_FILE).write_text(json.dumps(run_spec(name="y")))
    runs, errors = tr.read_registry(str(tmp_path))
    assert runs == [] and "differs from its folder" in errors[0]["error"]


def test_state_round_trip_and_corruption(tmp_path):
    assert tr.read_state(str(tmp_path)) == tr.empty_state()
    st = state(40)
    tr.write_state(str(tmp_path), st)
    assert tr.read_state(str(tmp_path)) == st
    assert [p for p in os.listdir(str(tmp_path)) if p != tr.STATE_FILE] == []
    (tmp_path / tr.STATE_FILE).write_text("{")
    with pytest.raises(tr.RegistryError, match="not valid JSON"):
        tr.read_state(str(tmp_path))
    (tmp_path / tr.STATE_FILE).write_text("{}")
    with pytest.raises(tr.RegistryError, match="not a clusterops.training_state"):
        tr.read_state(str(tmp_path))


def _hold_lock(registry, ready, release):
    lock = tr.RegistryLock(registry)
    assert lock.acquire()
    ready.set()
    release.wait(30)
    lock.release()


def test_lock_excludes_a_second_holder_and_dies_with_its_holder(tmp_path):
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold_lock, args=(str(tmp_path), ready, release))
    proc.start()
    try:
        assert ready.wait(10)
        assert tr.RegistryLock(str(tmp_path), timeout=0).acquire() is False
        assert tr.RegistryLock(str(tmp_path), timeout=1.0).acquire() is False
    finally:
        proc.kill()  # no release: the kernel drops a dead holder's flock
        proc.join()
    lock = tr.RegistryLock(str(tmp_path), timeout=0)
    assert lock.acquire() is True
    lock.release()


def test_checkpoint_status_from_a_real_run_folder(tmp_path):
    run_dir = tmp_path / "run"
    assert tr.checkpoint_status(str(run_dir), "sizes")["status"] == "missing"
    run_dir.mkdir()
    assert tr.checkpoint_status(str(run_dir), "sizes")["status"] == "none"
    for step in (10, 20):
        ckpt_lib.write_checkpoint(str(run_dir), step, 0, {"model.pt": b"x" * 64})
    st = tr.checkpoint_status(str(run_dir), "sizes")
    assert (st["status"], st["step"], st["finished"]) == ("valid", 20, False)
    # the newest one truncated: the previous one, with a warning
    with open(os.path.join(st["checkpoint"], "model.pt"), "r+b") as handle:
        handle.truncate(10)
    st = tr.checkpoint_status(str(run_dir), "sizes")
    assert (st["status"], st["step"]) == ("valid", 10) and st["warnings"]
    with open(os.path.join(st["checkpoint"], "model.pt"), "r+b") as handle:
        handle.truncate(10)
    st = tr.checkpoint_status(str(run_dir), "sizes")
    assert st["status"] == "invalid" and st["step"] is None
    ckpt_lib.mark_finished(str(run_dir))
    assert tr.checkpoint_status(str(run_dir), "sizes")["finished"]


def test_checkpoints_that_cannot_be_ordered_need_a_human_never_a_fresh_start(tmp_path):
    # Lightning files whose step neither the name nor the file tells: "exist but none usable".
    torch = pytest.importorskip("torch")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    torch.save({"global_step": 10, "epoch": 0}, str(run_dir / "step=10.ckpt"))
    torch.save({"w": torch.zeros(2)}, str(run_dir / "best.ckpt"))  # no global_step inside
    st = tr.checkpoint_status(str(run_dir), "sizes")
    assert (st["status"], st["step"], st["checkpoint"]) == ("invalid", None, None)
    assert "cannot be ordered" in st["detail"] and "best.ckpt" in st["detail"]
    d = tr.decide(run(checkpoint_dir=str(run_dir)), [job(7, "NODE_FAIL")], st, state())
    assert (d["action"], d["needs_human"]) == ("none", True) and "cannot be ordered" in d["reason"]
    assert "from scratch" not in d["reason"]
    # The run's name template cannot rescue a name without the step; a bad template is an error.
    assert tr.checkpoint_status(str(run_dir), "sizes", "{epoch}")["status"] == "error"
    (run_dir / "best.ckpt").unlink()
    st = tr.checkpoint_status(str(run_dir), "sizes")
    assert (st["status"], st["step"]) == ("valid", 10)


def test_registry_refuses_unknown_levels_and_bad_name_templates(tmp_path):
    reg = tmp_path / "runs"
    write_run(reg, "a", checkpoint_validate="load", checkpoint_name_template="{epoch}-{step}")
    write_run(reg, "b", checkpoint_validate="full")
    write_run(reg, "c", checkpoint_name_template="{epoch}")
    runs, errors = tr.read_registry(str(reg))
    assert [(r["name"], r["checkpoint_validate"], r["checkpoint_name_template"]) for r in runs] == [
        ("a", "load", "{epoch}-{step}")]
    by_name = dict((e["name"], e["error"]) for e in errors)
    assert "checkpoint_validate 'full' is not a validation level" in by_name["b"]
    assert "has no {step}" in by_name["c"]


def test_launcher_role_levels_and_name_template_match_the_library():
    yaml = pytest.importorskip("yaml")
    role = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "roles", "torchrun_launcher")
    with open(os.path.join(role, "meta", "argument_specs.yml")) as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    with open(os.path.join(role, "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    assert options["torchrun_launcher_checkpoint_validate"]["choices"] == list(ckpt_lib.LEVELS)
    assert defaults["torchrun_launcher_checkpoint_validate"] == options["torchrun_launcher_checkpoint_validate"][
        "default"] == tr._RUN_DEFAULTS["checkpoint_validate"]
    assert defaults["torchrun_launcher_checkpoint_name_template"] == options[
        "torchrun_launcher_checkpoint_name_template"]["default"] == ""
    # The role writes "" for no template: the registry reads it as none.
    assert run(checkpoint_name_template="")["checkpoint_name_template"] is None

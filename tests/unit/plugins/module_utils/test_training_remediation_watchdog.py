# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The hang watchdog of training remediation: when a RUNNING job is hung, what follows its cancel,
the registry fields and the progress read from the file system (table-driven)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SlurmCommandError
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import REC_END, SEP
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import policy
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import observe

OWNER = "alice"
NOW = 10000.0
START = 9000.0


def run(**kw):
    spec = {"format": training_registry.RUN_FORMAT, "format_version": 1, "name": "llm", "owner": OWNER,
            "launcher": "/reg/llm/launcher.sbatch", "checkpoint_dir": "/ckpt/llm", "log_dir": "/logs",
            "max_resubmissions": 3, "no_progress_limit": 2, "enabled": True, "hang_timeout": 600,
            "progress": "heartbeat", "heartbeat_file": "/ckpt/llm/heartbeat.json"}
    spec.update(kw)
    return training_registry.validate_run(spec, "/reg/llm")


def job(job_id, state, active=False, **kw):
    out = {"job_id": str(job_id), "job_id_raw": job_id, "name": "llm", "user": OWNER, "state": state,
           "active": active, "submit_time": 1000 + job_id, "flags": [], "exit_code": None, "signal": None,
           "cancelled_by": None, "requeued": False, "history": [], "reason": "", "node_list": "n[1-2]",
           "start_time": START, "end_time": None}
    out.update(kw)
    return out


def ckpt(step=20):
    return {"finished": False, "status": "valid", "step": step, "checkpoint": "/ckpt/llm/step_%09d" % step,
            "detail": "", "warnings": []}


def progress(age=None, step=25):
    """Progress ``age`` seconds before NOW (None: nothing yet)."""
    return {"source": "heartbeat", "path": "/hb", "time": None if age is None else NOW - age,
            "step": None if age is None else step}


# ---- hang_check: (run fields, job fields, progress, expected) ------------------------------------

HANG_CASES = [
    # progress age vs hang_timeout 600
    ("fresh heartbeat", {}, {}, progress(10), None),
    ("exactly at the timeout is not hung", {}, {}, progress(600), None),
    ("stale heartbeat", {}, {}, progress(601), {"idle": 601, "since": NOW - 601, "step": 25}),
    ("watchdog off (0)", {"hang_timeout": 0}, {}, progress(5000), None),
    ("not RUNNING (PENDING)", {}, {"state": "PENDING"}, progress(5000), None),
    ("held", {}, {"held": True}, progress(5000), None),
    ("no start time", {}, {"start_time": None}, progress(5000), None),
    # no heartbeat yet: counted from the job's start (1000 s ago)
    ("no heartbeat, started long ago", {}, {}, progress(None), {"idle": 1000, "since": START, "step": None}),
    ("no heartbeat, started just now", {}, {"start_time": NOW - 30}, progress(None), None),
    # a heartbeat older than the job (the job before wrote it) does not count, nor its step
    ("stale heartbeat of the job before, job just started", {}, {"start_time": NOW - 30}, progress(5000), None),
    ("heartbeat of the job before, job started long ago", {}, {"start_time": NOW - 700}, progress(5000),
     {"idle": 700, "since": NOW - 700, "step": None}),
]


@pytest.mark.parametrize("what,run_kw,job_kw,prog,expected", HANG_CASES, ids=[c[0] for c in HANG_CASES])
def test_hang_check(what, run_kw, job_kw, prog, expected):
    r = run(**run_kw)
    job_kw = dict(job_kw)
    state = job_kw.pop("state", "RUNNING")
    assert policy.hang_check(r, job(7, state, active=True, **job_kw), prog, NOW) == expected


# ---- decide: the hang paths ----------------------------------------------------------------------

def hang_state(*cancels, **kw):
    st = training_registry.empty_state()
    st["hang_cancels"] = [{"time": 9500, "job_id": j, "step": s, "idle": 700, "evidence": "/logs/e"}
                          for j, s in cancels]
    st.update(kw)
    return st


def resub(job_id, after, step, hang_step=None):
    entry = {"time": 1, "job_id": job_id, "after_job": after, "after_state": "HUNG", "step": step}
    if hang_step is not None:
        entry["hang_step"] = hang_step
    return entry


DECIDE_CASES = [
    # (what, jobs, state, progress, expected (status, action, human, words in reason))
    ("running and healthy", [job(7, "RUNNING", True)], hang_state(), progress(10),
     ("active", "none", False, "is RUNNING: nothing to do")),
    ("running and hung", [job(7, "RUNNING", True)], hang_state(), progress(700),
     ("hung", "cancel_hung", False, "has not moved for 700 s (hang_timeout 600 s), last step 25: hung")),
    ("hung but cancelled already: never twice", [job(7, "RUNNING", True)], hang_state((7, 25)), progress(700),
     ("hung", "none", False, "remediation cancelled it")),
    ("cancelled by remediation, COMPLETING", [job(7, "COMPLETING", True)], hang_state((7, 25)), progress(700),
     ("hung", "none", False, "is not cancelled again")),
    ("cancelled by remediation, ended: resubmit", [job(7, "CANCELLED", cancelled_by=0)], hang_state((7, 25)),
     None, ("failed", "resubmit", False, "job 7 hung at step 25 and remediation cancelled it; resubmission 1 of 3")),
    ("a user's cancel is never resubmitted", [job(7, "CANCELLED", cancelled_by=1000)], hang_state((6, 25)),
     None, ("cancelled", "none", False, "never resubmitted")),
    ("hung at the same step after each of the last 2 resubmissions: no progress",
     [job(5, "CANCELLED"), job(6, "CANCELLED"), job(7, "CANCELLED")],
     hang_state((5, 25), (6, 25), (7, 25), resubmissions=[resub(6, 5, 10, 25), resub(7, 6, 20, 25)]), None,
     ("failed", "stop", True, "hung at step 25 again")),
    ("hung at a later step: progress", [job(6, "CANCELLED"), job(7, "CANCELLED")],
     hang_state((6, 25), (7, 45), resubmissions=[resub(7, 6, 20, 25)]), None,
     ("failed", "resubmit", False, "resubmission 2 of 3, resume from step 20")),
    ("hung, the checkpoint did not move over 2 resubmissions: no progress",
     [job(5, "CANCELLED"), job(6, "CANCELLED"), job(7, "CANCELLED")],
     hang_state((5, 25), (6, 35), (7, 45), resubmissions=[resub(6, 5, 20, 25), resub(7, 6, 20, 35)]), None,
     ("failed", "stop", True, "no progress: the newest valid checkpoint is still step 20")),
    ("hung, budget used up", [job(7, "CANCELLED")],
     hang_state((7, 25), resubmissions=[resub(4, 3, 1), resub(5, 4, 2), resub(6, 5, 3)]), None,
     ("failed", "stop", True, "budget of 3 resubmission(s) is used up")),
]


@pytest.mark.parametrize("what,jobs,st,prog,expected", DECIDE_CASES, ids=[c[0] for c in DECIDE_CASES])
def test_decide_hang(what, jobs, st, prog, expected):
    d = policy.decide(run(), jobs, ckpt(20), st, prog, NOW)
    status, action, human, words = expected
    assert (d["status"], d["action"], d["needs_human"]) == (status, action, human), d["reason"]
    assert words in d["reason"], d["reason"]


def test_decide_without_watchdog_never_hangs_and_without_progress_counts_from_the_start():
    d = policy.decide(run(hang_timeout=0), [job(7, "RUNNING", True)], ckpt(20), hang_state(), progress(10 ** 6), NOW)
    assert d["action"] == "none" and d["status"] == "active"
    d = policy.decide(run(), [job(7, "RUNNING", True)], ckpt(20), training_registry.empty_state(), None, NOW)
    assert d["action"] == "cancel_hung" and "for 1000 s" in d["reason"] and "last step" not in d["reason"]


def test_record_hang_cancel_then_resubmission_carries_the_hang_step():
    d = policy.decide(run(), [job(7, "RUNNING", True)], ckpt(20), hang_state(), progress(700), NOW)
    st = policy.record_hang_cancel(hang_state(), d, NOW, "/logs/hang-7.txt")
    assert st["hang_cancels"] == [{"time": int(NOW), "job_id": 7, "step": 25, "idle": 700,
                                   "evidence": "/logs/hang-7.txt"}]
    then = policy.decide(run(), [job(7, "CANCELLED")], ckpt(20), st)
    assert then["action"] == "resubmit"
    st2 = policy.record_resubmission(st, then, 8, NOW)
    assert st2["resubmissions"][-1] == {"time": int(NOW), "job_id": 8, "after_job": 7, "after_state": "HUNG",
                                        "step": 20, "hang_step": 25}


# ---- registry fields -----------------------------------------------------------------------------

@pytest.mark.parametrize("kw,error", [
    ({"hang_timeout": -1}, "hang_timeout must be an integer"),
    ({"hang_timeout": True}, "hang_timeout must be an integer"),
    ({"progress": "mtime"}, "progress 'mtime' is not one of heartbeat, checkpoint, log"),
    ({"heartbeat_file": ""}, "progress is heartbeat but heartbeat_file is not set"),
    ({"heartbeat_file": "hb.json"}, "heartbeat_file 'hb.json' is not an absolute path"),
    ({"progress": "log", "log_dir": ""}, "progress is log but log_dir is not set"),
    ({"py_spy": ""}, "py_spy must be"),
])
def test_registry_rejects_bad_watchdog_fields(kw, error):
    with pytest.raises(training_registry.RegistryError, match=error):
        run(**kw)


def test_registry_defaults_leave_the_watchdog_off():
    spec = {"format": training_registry.RUN_FORMAT, "format_version": 1, "name": "llm", "owner": OWNER,
            "launcher": "/reg/llm/launcher.sbatch", "checkpoint_dir": "/ckpt/llm"}
    r = training_registry.validate_run(spec, "/reg/llm")
    assert (r["hang_timeout"], r["progress"], r["heartbeat_file"], r["py_spy"]) == (0, "log", None, "py-spy")


# ---- progress from the file system ---------------------------------------------------------------

def test_read_progress_heartbeat_checkpoint_and_log(tmp_path):
    hb = tmp_path / "heartbeat.json"
    hb.write_text(json.dumps({"step": 12, "time": 1.0}))
    os.utime(str(hb), (5000, 5000))
    r = run(heartbeat_file=str(hb), checkpoint_dir=str(tmp_path / "ckpt"), log_dir=str(tmp_path / "logs"))
    assert observe.read_progress(r) == {"source": "heartbeat", "path": str(hb), "time": 5000, "step": 12}
    hb.write_text("{half")
    os.utime(str(hb), (5001, 5001))
    assert observe.read_progress(r)["step"] is None and observe.read_progress(r)["time"] == 5001

    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "step_000000010").mkdir()
    os.utime(str(tmp_path / "ckpt"), (100, 100))
    os.utime(str(tmp_path / "ckpt" / "step_000000010"), (200, 200))
    r["progress"] = "checkpoint"
    assert observe.read_progress(r)["time"] == 200

    logs = tmp_path / "logs"
    logs.mkdir()
    for name, t in (("llm-7.out", 300), ("llm-7-n1.out", 400), ("llm-70.out", 900), ("other-7.out", 900)):
        (logs / name).write_text("x")
        os.utime(str(logs / name), (t, t))
    r["progress"] = "log"
    assert observe.read_progress(r, 7)["time"] == 400
    assert observe.read_progress(r, 8)["time"] is None


class QueueAnswers(object):
    """A SlurmCLI stand-in for observe.job_ended: each squeue call gets the next (rc, out, err)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def run(self, name, args, **kwargs):
        self.calls.append([name] + list(args))
        return self.answers.pop(0)

    def failure(self, name, rc, out, err, what=None):
        return SlurmCommandError("%s failed" % name, self.calls[-1], rc, out, err)


def squeue_line(state):
    fields = ["41", "41", "train", "alice", state, "None", "0", "n1", "1700000000", "1700000010",
              "1700000100", "0", "gpu", "devcluster"]
    return SEP.join(fields + ["(null)"]) + REC_END + "\n"


@pytest.mark.parametrize("answer, ended", [
    ((0, squeue_line("RUNNING"), ""), False),
    ((0, squeue_line("COMPLETING"), ""), False),          # its processes are still being killed
    ((0, squeue_line("CANCELLED"), ""), True),            # listed for MinJobAge after its end
    ((1, "", "slurm_load_jobs error: Invalid job id specified\n"), True),   # left the controller
    ((1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"), False),
    ((0, squeue_line("RUNNING").rstrip(REC_END + "\n"), ""), False),   # cut short: no answer
])
def test_a_cancelled_hung_job_has_ended_only_when_squeue_says_so(answer, ended):
    cli = QueueAnswers(answer)
    assert observe.job_ended(cli, 41) is ended
    assert cli.calls[0][0] == "squeue" and "--jobs=41" in cli.calls[0] and "--states=all" in cli.calls[0]

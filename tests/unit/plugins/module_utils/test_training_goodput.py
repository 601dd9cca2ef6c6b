# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The goodput of a run (``_training_remediation.goodput``) from the readers' own answers: jobs
parsed by ``_jobs`` from sacct/squeue text (recorded on Slurm 22.05 and 24.11, or written in the
exact form our sacct and squeue print), state.json and heartbeat files read from tmp_path by the
registry's and observe's readers, and trainer events as the reference trainer writes them."""

from __future__ import annotations

import io
import json
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import merge_jobs, parse_sacct, parse_squeue
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import REC_END, SEP
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.goodput import goodput
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.observe import read_progress

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")


def recorded(name):
    with io.open(os.path.join(FIXTURES, name), encoding="utf-8", errors="replace") as handle:
        return handle.read()


def recorded_run(squeue, sacct, name):
    jobs = merge_jobs(parse_squeue(recorded(squeue)), parse_sacct(recorded(sacct)) if sacct else [])
    return [j for j in jobs if j["name"] == name]


def sacct_line(job, state, nodes, submit, start, end, name="llm"):
    """One job line in our sacct's form (``_slurm_commands.SACCT_FIELDS``, times as Unix seconds)."""
    return SEP.join([str(job), str(job), "nsl", "alice", "train", state, "0:0", "None", nodes or "None assigned",
                     str(submit), str(start) if start else "Unknown", str(end) if end else "Unknown", name]) + "\n"


def squeue_record(job, state, nodes, submit, start, restarts=0, name="llm"):
    """One record in our squeue's form (``_slurm_commands.SQUEUE_FIELDS``)."""
    fields = [str(job), str(job), name, "alice", state, "None", "0", nodes, str(submit), str(start) if start else "N/A",
              "NONE", str(restarts), "train", "nsl", "clusterops-key=llm"]
    return SEP.join(fields) + REC_END


def jobs_of(sacct, squeue=""):
    return merge_jobs(parse_squeue(squeue), parse_sacct(sacct))


def state_file(tmp_path, **fields):
    """A state.json written to tmp_path and read back with the registry's reader."""
    data = registry.empty_state()
    data.update(fields)
    (tmp_path / registry.STATE_FILE).write_text(json.dumps(data))
    return registry.read_state(str(tmp_path))


def step_events(start_time, first, last, every=10.0, begin=None):
    """The reference trainer's events of one job: ``start`` at ``start_time`` with the step it
    resumed from, then one ``step`` event per step, ``every`` seconds apart."""
    events = [{"event": "start", "step": first, "time": start_time}]
    when = begin if begin is not None else start_time
    for step in range(first + 1, last + 1):
        when += every
        events.append({"event": "step", "step": step, "time": when, "loss": 1.0})
    return events


# ---- a run whose every part is known -------------------------------------------------------
#
# job 100 on n[1-2]: submitted 1000, started 1010, NODE_FAIL at 1100 (last step 7 at 1090), requeued
# by Slurm (same id) at 1100, started again 1130 resuming step 5, TIMEOUT at 1300 (last step 20 at
# 1290); remediation resubmitted it as job 101 at 1350 (recorded 1360, from step 15); 101 started
# 1400 resuming step 15 and is running at 1500 (step 21 at 1470).

FULL_SACCT = (sacct_line(100, "NODE_FAIL", "n[1-2]", 1000, 1010, 1100)
              + sacct_line(100, "TIMEOUT", "n[1-2]", 1100, 1130, 1300)
              + sacct_line(101, "RUNNING", "n[1-2]", 1350, 1400, None))
FULL_SQUEUE = squeue_record(101, "RUNNING", "n[1-2]", 1350, 1400)
FULL_EVENTS = (step_events(1012, 0, 7, begin=1020)
               + step_events(1135, 5, 20, begin=1140)
               + step_events(1405, 15, 21, begin=1410))
CHECKPOINTS = [{"step": 5, "time": 1075.0}, {"step": 15, "time": 1245.0}]


def full(tmp_path, **kw):
    state = state_file(tmp_path, resubmissions=[
        {"time": 1360, "job_id": 101, "after_job": 100, "after_state": "TIMEOUT", "step": 15}])
    args = dict(checkpoints=CHECKPOINTS, events=FULL_EVENTS)
    args.update(kw)
    return goodput(jobs_of(FULL_SACCT, FULL_SQUEUE), state, 1500, **args)


def test_totals_of_a_run_known_in_full(tmp_path):
    g = full(tmp_path)
    assert g["unknown"] == []
    assert (g["first_submit"], g["wall_time"], g["queued_time"], g["running_time"], g["between_jobs_time"]) == (
        1000, 500.0, 90.0, 360.0, 50.0)
    assert g["wall_time"] == g["queued_time"] + g["running_time"] + g["between_jobs_time"]
    # detection is lost, not productive: 1090-1100 (step 7 to NODE_FAIL) and 1290-1300 (step 20 to TIMEOUT)
    assert [f["lost_to_detection"] for f in g["failures"]] == [10.0, 10.0]
    assert (g["recompute_time"], g["lost_to_detection"]) == (110.0, 20.0)
    assert (g["productive_time"], g["effective_ratio"]) == (230.0, 0.46)      # 360 - 110 - 20
    assert g["node_seconds"] == 720.0
    assert (g["restarts"], g["steps_lost"], g["active"]) == (2, 7, True)
    assert g["restarts_by_cause"] == {"node_failure": 1, "hang": 0, "time_limit": 1, "preemption": 0,
                                      "program_error": 0, "other": 0}
    assert [(j["job_id"], j["state"], j["queued"], j["running"]) for j in g["jobs"]] == [
        ("100", "NODE_FAIL", 10.0, 90.0), ("100", "TIMEOUT", 30.0, 170.0), ("101", "RUNNING", 50.0, 100.0)]


def test_a_restart_slurm_made_after_a_node_failure(tmp_path):
    first = full(tmp_path)["failures"][0]
    assert (first["cause"], first["restarted_by"], first["next_job_id"]) == ("node_failure", "slurm", "100")
    assert (first["reached_step"], first["reached_source"], first["last_progress_time"]) == (7, "events", 1090.0)
    assert (first["resumed_step"], first["resumed_source"], first["steps_lost"]) == (5, "events", 2)
    assert first["recompute_time"] == 40.0      # start 1130 to step 8 at 1170
    assert (first["detection"], first["waiting_for_remediation"], first["remediation"]) == (10.0, 0.0, 0.0)
    assert (first["queue"], first["start_to_first_step"], first["end_to_start"], first["time_to_training"]) == (
        30.0, 20.0, 30, 60.0)
    assert first["unknown"] == []


def test_a_resubmission_by_remediation_after_a_time_limit(tmp_path):
    second = full(tmp_path)["failures"][1]
    assert (second["cause"], second["restarted_by"], second["job_id"], second["next_job_id"]) == (
        "time_limit", "remediation", "100", "101")
    assert (second["reached_step"], second["resumed_step"], second["steps_lost"]) == (20, 15, 5)
    assert second["recompute_time"] == 70.0     # start 1400 to step 21 at 1470
    assert (second["waiting_for_remediation"], second["remediation"], second["queue"]) == (50.0, 10.0, 50.0)
    assert (second["detection"], second["start_to_first_step"], second["end_to_start"]) == (10.0, 20.0, 100)


def test_without_events_the_resubmission_and_checkpoints_say_the_resumed_step(tmp_path):
    g = full(tmp_path, events=None)
    first, second = g["failures"]
    assert (first["resumed_step"], first["resumed_source"]) == (5, "checkpoints")    # step 5 written at 1075
    assert (second["resumed_step"], second["resumed_source"]) == (15, "state.json")
    assert first["reached_step"] is None and first["steps_lost"] is None and g["steps_lost"] is None
    assert g["recompute_time"] is None and g["productive_time"] is None and g["effective_ratio"] is None
    # no progress record: neither the recompute nor the detection is known, so no bound below 360
    assert g["lost_to_detection"] is None and g["productive_time_at_most"] == 360.0
    figures = set(u["figure"] for u in g["unknown"])
    assert {"events", "recompute_time", "steps_lost", "productive_time", "effective_ratio"} <= figures
    # sacct alone still gives the spans
    assert (g["wall_time"], g["queued_time"], g["running_time"], first["end_to_start"]) == (500.0, 90.0, 360.0, 30)


def test_finished_run_ends_its_wall_time_with_its_last_job(tmp_path):
    sacct = FULL_SACCT.replace(sacct_line(101, "RUNNING", "n[1-2]", 1350, 1400, None),
                               sacct_line(101, "COMPLETED", "n[1-2]", 1350, 1400, 1480))
    state = state_file(tmp_path, resubmissions=[{"time": 1360, "job_id": 101, "after_job": 100, "step": 15}])
    g = goodput(jobs_of(sacct), state, 9999, checkpoints=CHECKPOINTS, events=FULL_EVENTS, finished=True)
    assert (g["wall_time"], g["running_time"], g["active"]) == (480.0, 340.0, False)


# ---- recorded on a real Slurm -------------------------------------------------------------------

@pytest.mark.parametrize("squeue, sacct, name, end, submit", [
    # 22.05: 57 NODE_FAIL when n2 lost power, PENDING again with a new submit time (devcluster/README.md)
    ("devcluster/squeue_node_fail_requeued.txt", "devcluster/sacct_node_fail_requeued.txt",
     "rec-node-fail", 1796042309, 1796042309),
    # 24.11: 8 NODE_FAIL when n3 died, requeued by Slurm (slurm-24.11/README.md)
    ("slurm-24.11/10-after-node-fail/squeue-product.out", "slurm-24.11/10-after-node-fail/sacct-product.out",
     "nsl-nf", 1796061514, 1796061514),
])
def test_recorded_requeue_after_node_fail_without_any_progress_record(squeue, sacct, name, end, submit):
    mine = recorded_run(squeue, sacct, name)
    now = submit + 60
    g = goodput(mine, registry.empty_state(), now)
    (item,) = g["failures"]
    assert (item["cause"], item["restarted_by"], item["state"]) == ("node_failure", "slurm", "NODE_FAIL")
    assert (item["waiting_for_remediation"], item["remediation"], item["queue"]) == (0.0, float(submit - end), 60.0)
    assert item["recompute_time"] == 0.0          # pending: nothing recomputed yet
    for figure in ("reached_step", "resumed_step", "detection", "start_to_first_step"):
        assert item[figure] is None and figure in [u["figure"] for u in item["unknown"]]
    assert item["end_to_start"] is None and item["time_to_training"] is None
    assert g["active"] is True and g["restarts_by_cause"]["node_failure"] == 1
    assert g["steps_lost"] is None and "steps_lost" in [u["figure"] for u in g["unknown"]]
    assert g["wall_time"] == g["queued_time"] + g["running_time"] + g["between_jobs_time"]


def test_recorded_node_fail_with_a_heartbeat_file_and_checkpoints(tmp_path):
    """24.11's job 8 ran 1796061462-1796061514 on n3; its heartbeat (read by observe.read_progress)
    was written at step 12 during that run; step 10 was checkpointed before: 2 steps lost."""
    beat = tmp_path / "heartbeat.json"
    beat.write_text(json.dumps({"step": 12, "time": 1796061500}))
    os.utime(str(beat), (1796061500, 1796061500))
    progress = read_progress({"name": "nsl-nf", "progress": "heartbeat", "heartbeat_file": str(beat)})
    mine = recorded_run("slurm-24.11/10-after-node-fail/squeue-product.out",
                        "slurm-24.11/10-after-node-fail/sacct-product.out", "nsl-nf")
    # the requeued run has not started: its resumed step is the newest checkpoint before its start,
    # unknown until it starts
    g = goodput(mine, registry.empty_state(), 1796061600, progress=progress,
                checkpoints=[{"step": 10, "time": 1796061490.0}])
    (item,) = g["failures"]
    assert (item["reached_step"], item["reached_source"], item["last_progress_time"]) == (12, "heartbeat", 1796061500)
    assert item["detection"] == 14.0             # last heartbeat to sacct's End
    assert item["resumed_step"] is None


def test_a_hang_cancelled_by_remediation(tmp_path):
    """Job 200 stopped at step 9 (heartbeat at 2180); the watchdog cancelled it at 2300 after 120 s
    idle; it ended CANCELLED at 2310; resubmitted as 201 at 2325 from step 5."""
    state = state_file(tmp_path, hang_cancels=[{"time": 2300, "job_id": 200, "step": 9, "idle": 120,
                                                "evidence": "/logs/hang-200.txt"}],
                       resubmissions=[{"time": 2330, "job_id": 201, "after_job": 200, "after_state": "HUNG",
                                       "step": 5, "hang_step": 9}])
    sacct = sacct_line(200, "CANCELLED by 0", "n1", 2000, 2005, 2310) + sacct_line(201, "RUNNING", "n2", 2325, 2340, None)
    progress = {"source": "heartbeat", "path": "/hb", "time": 2180.0, "step": 9}
    g = goodput(jobs_of(sacct, squeue_record(201, "RUNNING", "n2", 2325, 2340)), state, 2350, progress=progress)
    (item,) = g["failures"]
    assert (item["cause"], item["restarted_by"]) == ("hang", "remediation")
    assert (item["reached_step"], item["resumed_step"], item["steps_lost"]) == (9, 5, 4)
    assert (item["detection"], item["waiting_for_remediation"], item["remediation"]) == (120.0, 0.0, 25.0)
    assert g["restarts_by_cause"]["hang"] == 1
    assert item["recompute_time"] is None and g["productive_time"] is None
    # 2180 (last heartbeat) to 2310 (sacct End): the 120 s idle and the 10 s of the cancel, all lost
    assert item["lost_to_detection"] == 130.0 and g["lost_to_detection"] == 130.0
    assert g["productive_time_at_most"] == g["running_time"] - 130.0


@pytest.mark.parametrize("state_word, cause", [
    ("FAILED", "program_error"), ("OUT_OF_MEMORY", "program_error"), ("PREEMPTED", "preemption"),
    ("BOOT_FAIL", "node_failure"), ("TIMEOUT", "time_limit"), ("NODE_FAIL", "node_failure"),
    ("CANCELLED by 1001", "other"), ("DEADLINE", "other"),
])
def test_restart_causes_from_the_job_end_state(state_word, cause):
    sacct = sacct_line(300, state_word, "n1", 100, 110, 200) + sacct_line(301, "COMPLETED", "n1", 300, 310, 400)
    g = goodput(jobs_of(sacct), registry.empty_state(), 500)
    (item,) = g["failures"]
    assert item["cause"] == cause and g["restarts_by_cause"][cause] == 1 and g["restarts"] == 1
    # nobody recorded a resubmission: submitted by someone else
    assert item["restarted_by"] == "unknown" and item["waiting_for_remediation"] is None
    assert "not submitted by remediation" in dict((u["figure"], u["why"]) for u in item["unknown"])["remediation"]


def test_a_job_still_running_without_restarts_is_productive_until_now():
    sacct = sacct_line(400, "RUNNING", "n[1-4]", 100, 160, None)
    g = goodput(jobs_of(sacct, squeue_record(400, "RUNNING", "n[1-4]", 100, 160)), registry.empty_state(), 400)
    assert (g["wall_time"], g["queued_time"], g["running_time"], g["productive_time"]) == (300.0, 60.0, 240.0, 240.0)
    assert (g["effective_ratio"], g["restarts"], g["steps_lost"], g["node_seconds"]) == (0.8, 0, 0, 960.0)
    assert g["active"] is True and [u["figure"] for u in g["unknown"]] == ["events"]


def test_no_accounting_says_so_and_keeps_what_squeue_knows():
    g = goodput(jobs_of("", squeue_record(500, "PENDING", "", 100, None)), registry.empty_state(), 130,
                accounting=False, events=[])
    assert g["accounting"] is False and g["queued_time"] == 30.0
    assert [u["figure"] for u in g["unknown"]] == ["jobs"]


def test_no_job_at_all_is_all_unknown():
    g = goodput([], registry.empty_state(), 100)
    assert g["wall_time"] is None and g["restarts"] == 0 and g["jobs"] == []
    assert g["unknown"] == [{"figure": "wall_time", "why": "no job of the run was found"}]


def test_a_resubmission_of_a_job_outside_the_jobs_read_is_reported(tmp_path):
    state = state_file(tmp_path, resubmissions=[{"time": 90, "job_id": 600, "after_job": 599, "step": 0}])
    g = goodput(jobs_of(sacct_line(600, "COMPLETED", "n1", 95, 100, 120)), state, 130, events=[])
    assert g["unknown"][0]["figure"] == "wall_time" and "job 599" in g["unknown"][0]["why"]


def test_a_restarted_job_that_never_passed_the_step_reached_recomputed_all_its_time():
    sacct = sacct_line(700, "NODE_FAIL", "n1", 5, 10, 100) + sacct_line(700, "FAILED", "n1", 100, 110, 150) \
        + sacct_line(701, "RUNNING", "n1", 160, 170, None)
    events = step_events(10, 0, 8, begin=10) + step_events(110, 2, 5, begin=110) + step_events(170, 2, 9, begin=170)
    g = goodput(jobs_of(sacct), registry.empty_state(), 300, events=events)
    first, second = g["failures"]
    assert (first["reached_step"], first["resumed_step"], first["steps_lost"]) == (8, 2, 6)
    assert first["recompute_time"] == 40.0       # 110 to its end at 150: never past step 8
    assert (second["reached_step"], second["resumed_step"], second["steps_lost"]) == (5, 2, 3)
    assert second["recompute_time"] == 40.0      # 170 to step 6 at 210
    # detection lost: 90-100 for the first; the second's (140-150) is inside its recompute (110-150): not twice
    assert (first["lost_to_detection"], second["lost_to_detection"], g["lost_to_detection"]) == (10.0, 0.0, 10.0)
    assert g["productive_time"] == g["running_time"] - 80.0 - 10.0


def test_detection_time_is_lost_not_productive():
    """Issue 37 part 5: the failed job's running time from its last step to its end (the detection)
    trained nothing: the productive time is the running time less the recompute AND the detection."""
    sacct = sacct_line(800, "NODE_FAIL", "n[1-2]", 1000, 1000, 1100) \
        + sacct_line(801, "COMPLETED", "n[1,3]", 1110, 1120, 1200)
    events = step_events(1000, 0, 6, begin=1000) + step_events(1120, 4, 12, begin=1120)   # step 6 at 1060
    g = goodput(jobs_of(sacct), registry.empty_state(), 1300, events=events, finished=True)
    (item,) = g["failures"]
    assert (item["last_progress_time"], item["detection"], item["lost_to_detection"]) == (1060.0, 40.0, 40.0)
    # 180 s running: 30 s recomputing steps 5 and 6 (1120 to step 7 at 1150), 40 s of detection
    assert (g["running_time"], g["recompute_time"], g["lost_to_detection"]) == (180.0, 30.0, 40.0)
    assert g["productive_time"] == 110.0 and g["effective_ratio"] == 0.55     # 110 / 200 s of wall time
    # a job that never started lost nothing to detection
    sacct = sacct_line(810, "CANCELLED by 0", "", 1000, None, 1050) + sacct_line(811, "COMPLETED", "n1", 1060, 1070, 1100)
    g = goodput(jobs_of(sacct), registry.empty_state(), 1300, events=step_events(1070, 0, 3, begin=1070),
                finished=True)
    assert g["failures"][0]["lost_to_detection"] == 0.0 and g["lost_to_detection"] == 0.0

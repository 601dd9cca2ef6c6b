# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Job parsers fed with squeue/sacct/sbatch outputs recorded on the real dev cluster
(tests/unit/fixtures/devcluster, written by dev/cluster/record-jobs.sh)."""

from __future__ import annotations

import glob
import io
import json
import os
import re

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._job_actions import (
    has_key,
    parse_sbatch_output,
    plan_action,
    uncertain_failure,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import (
    hold_kind,
    parse_job_state,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import (
    JobParseError,
    merge_jobs,
    parse_exit_code,
    parse_sacct,
    parse_squeue,
    parse_wait_status,
    read_jobs,
    read_queue,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SlurmCommandError,
    stderr_errors,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import REC_END, SEP
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import policy
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "devcluster")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def captured(name):
    """(rc, stdout, stderr) of a ``# command: / # rc: / # stdout: / # stderr:`` fixture."""
    text = fixture(name)
    head, dummy, rest = text.partition("# stdout:\n")
    stdout, dummy, stderr = rest.partition("# stderr:\n")
    rc = int(head.split("# rc: ", 1)[1].splitlines()[0])
    return rc, stdout, stderr


def by_name(jobs):
    result = {}
    for job in jobs:
        result.setdefault(job["name"], []).append(job)
    return result


@pytest.mark.parametrize("name, expected", [
    ("sbatch_plain.txt", (34, None)),
    ("sbatch_parsable.txt", (35, None)),
    ("sbatch_on_cluster.txt", (36, "devcluster")),
    ("sbatch_parsable_on_cluster.txt", (37, "devcluster")),
    ("sbatch_stdin_script.txt", (38, None)),
])
def test_recorded_sbatch_outputs(name, expected):
    rc, stdout, stderr = captured(name)
    assert rc == 0
    assert parse_sbatch_output(stdout, stderr) == expected


@pytest.mark.parametrize("name, uncertain", [
    ("sbatch_timeout_accepted.txt", True),     # the job WAS created (job 39)
    ("sbatch_connect_failure.txt", True),
    ("sbatch_invalid_partition.txt", False),
    ("sbatch_not_a_script.txt", False),
])
def test_recorded_sbatch_failures(name, uncertain):
    rc, stdout, stderr = captured(name)
    assert rc == 1
    assert uncertain_failure(SlurmCommandError("x", ["sbatch"], rc, stdout, stderr)) is uncertain


def test_recorded_squeue_every_kind_of_job():
    jobs = by_name(parse_squeue(fixture("squeue_states.txt")))
    (array,) = [j for j in jobs["rec-array"] if j["array_tasks"]]
    assert (array["job_id"], array["job_id_raw"], array["array_job_id"], array["array_tasks"],
            array["array_max_running"], array["reason"]) == (
        "47_[3-100%2]", 47, 47, "3-100", 2, "JobArrayTaskLimit")
    assert sorted((j["job_id"], j["job_id_raw"], j["array_task_id"]) for j in jobs["rec-array"]
                  if j["array_task_id"]) == [("47_1", 54, 1), ("47_2", 55, 2)]
    assert [(j["job_id"], j["job_id_raw"], j["het_job_id"], j["het_job_offset"])
            for j in jobs["rec-het"]] == [("51+0", 51, 51, 0), ("51+1", 52, 51, 1)]
    (held,) = jobs["rec-held"]
    assert held["state"] == "PENDING" and held["reason"] == "JobHeldUser"   # sbatch -H
    (failed,) = jobs["rec-fail"]
    # squeue's exit_code is the raw wait status: 768 is exit 3
    assert (failed["state"], failed["exit_code"], failed["signal"], failed["reason"]) == (
        "FAILED", 3, 0, "NonZeroExitCode")
    (killed,) = jobs["rec-signal"]
    assert (killed["exit_code"], killed["signal"]) == (0, 9)
    (alice,) = jobs["rec-alice"]
    assert alice["user"] == "clusterops-alice" and alice["state"] == "CANCELLED"
    (running,) = jobs["rec-run"]
    assert running["active"] and running["start_time"] and running["end_time"] is None
    assert running["nodes"] == ["n1"] and running["cluster"] == "devcluster"
    assert running["comment"] == ""
    assert all(j["source"] == "squeue" for js in jobs.values() for j in js)


def test_recorded_sacct_steps_never_jobs():
    jobs = parse_sacct(fixture("sacct_states.txt"))
    ids = [j["job_id"] for j in jobs]
    assert not [i for i in ids if "." in i]
    (steps,) = [j for j in jobs if j["name"] == "rec-steps"]
    assert [(s["step_id"], s["state"], s["exit_code"], s["node_list"]) for s in steps["steps"]] == [
        ("batch", "COMPLETED", 0, "n2"), ("0", "COMPLETED", 0, "n[2-3]"), ("1", "FAILED", 1, "n2")]
    het = [j for j in jobs if j["name"] == "rec-het"]
    assert [(j["job_id"], j["job_id_raw"], [s["job_step"] for s in j["steps"]]) for j in het] == [
        ("51+0", 51, ["51+0.batch", "51+0.0"]), ("51+1", 52, [])]
    (task,) = [j for j in jobs if j["job_id"] == "47_1"]
    assert task["job_id_raw"] == 54 and [s["job_step"] for s in task["steps"]] == ["47_1.batch"]
    (cancelled,) = [j for j in jobs if j["job_id"] == "47_2"]
    assert (cancelled["state"], cancelled["cancelled_by"], cancelled["state_raw"]) == (
        "CANCELLED", 0, "CANCELLED by 0")
    assert cancelled["steps"][0]["signal"] == 15
    (requeued,) = [j for j in jobs if j["job_id"] == "42"]
    assert requeued["state"] == "REQUEUED" and requeued["exit_code"] == 3
    (timeout,) = [j for j in jobs if j["name"] == "rec-timeout"]
    assert (timeout["state"], timeout["exit_code"], timeout["steps"][0]["signal"]) == ("TIMEOUT", 0, 15)
    assert not any(j["active"] for j in jobs)   # accounting alone never says active


def test_recorded_node_fail_then_requeued_by_slurm():
    """The job on the crashed node: sacct --duplicates has the NODE_FAIL record and the new
    PENDING one with the same id; squeue has it PENDING, restart count 1: one job, PENDING,
    requeued, with the NODE_FAIL run as history."""
    queued = parse_squeue(fixture("squeue_node_fail_requeued.txt"))
    accounted = parse_sacct(fixture("sacct_node_fail_requeued.txt"))
    # the 2-node job's new record was not in the database yet (it lags 1-2.5 s)
    assert [(j["job_id"], j["state"]) for j in accounted] == [
        ("57", "NODE_FAIL"), ("58", "NODE_FAIL"), ("57", "PENDING")]
    jobs = merge_jobs(queued, accounted)
    assert [(j["job_id"], j["state"], j["active"], j["requeued"], j["restart_count"]) for j in jobs] == [
        ("57", "PENDING", True, True, 1), ("58", "PENDING", True, True, 1)]
    assert [[(h["state"], h["node_list"]) for h in j["history"]] for j in jobs] == [
        [("NODE_FAIL", "n2")], [("NODE_FAIL", "n[2-3]")]]
    assert [s["job_step"] for s in jobs[1]["history"][0]["steps"]] == ["58.batch", "58.0"]
    # the 2-node job was submitted again 3 s after its NODE_FAIL end (COMPLETING on n3 first)
    assert jobs[1]["submit_time"] - jobs[1]["history"][0]["end_time"] == 3
    assert jobs[0]["reason"] == "BeginTime" and jobs[0]["start_time"] is None


def test_recorded_node_fail_while_completing():
    """3 s after the NODE_FAIL the 2-node job is still COMPLETING on n3 (restart count already
    1, old submit time): it is active, so nothing resubmits it, and its base state comes from
    its accounting record."""
    queued = parse_squeue(fixture("squeue_node_fail_completing.txt"))
    accounted = parse_sacct(fixture("sacct_node_fail_requeued.txt"))
    jobs = dict((j["job_id"], j) for j in merge_jobs(queued, accounted))
    assert (jobs["58"]["state"], jobs["58"]["flags"], jobs["58"]["active"], jobs["58"]["requeued"]) == (
        "NODE_FAIL", ["COMPLETING"], True, True)
    assert jobs["57"]["state"] == "PENDING" and jobs["57"]["active"]


def test_recorded_sacct_without_jobs_misses_jobs_never_eligible():
    """sacct without --jobs lists only jobs that became eligible: the requeued runs' new PENDING
    records (BeginTime in the future), held jobs and jobs cancelled before their begin time are
    missing; squeue supplies them while the controller still knows them."""
    accounted = parse_sacct(fixture("sacct_states.txt"))
    assert not [j for j in accounted if j["name"] in ("rec-held", "rec-cancel", "rec-alice")]
    queued = parse_squeue(fixture("squeue_final.txt"))
    jobs = dict((j["job_id"], j) for j in merge_jobs(queued, accounted))
    # 45 (held while running, then requeued, then cancelled): sacct without --jobs did not list
    # even its REQUEUED record; the restart count from squeue still says it was requeued
    for job_id, state, ended in (("42", "CANCELLED", ["REQUEUED"]), ("45", "CANCELLED", []),
                                 ("57", "PENDING", ["NODE_FAIL"]), ("58", "PENDING", ["NODE_FAIL"])):
        job = jobs[job_id]
        assert (job["state"], job["requeued"], job["restart_count"], job["source"]) == (
            state, True, 1, "squeue"), job_id
        assert [h["state"] for h in job["history"]] == ended, job_id
    assert jobs["53"]["user"] == "clusterops-alice" and jobs["53"]["source"] == "squeue"
    assert jobs["34"]["state"] == "COMPLETED" and [s["step_id"] for s in jobs["34"]["steps"]] == ["batch"]


def test_recorded_sacct_with_jobs_lists_them_all():
    jobs = dict((j["job_id"], j) for j in merge_jobs([], parse_sacct(fixture("sacct_states_jobs.txt"))))
    assert jobs["53"]["state_raw"] == "CANCELLED by 1001" and jobs["53"]["cancelled_by"] == 1001
    assert jobs["46"]["reason"] == "JobHeldAdmin" and jobs["46"]["nodes"] == []
    assert jobs["47_[3-100%2]"]["array_tasks"] == "3-100"
    assert (jobs["42"]["state"], [h["state"] for h in jobs["42"]["history"]]) == ("CANCELLED", ["REQUEUED"])
    assert (jobs["57"]["state"], [h["state"] for h in jobs["57"]["history"]]) == ("PENDING", ["NODE_FAIL"])
    assert not jobs["57"]["active"]   # sacct alone: the controller was not asked


def test_recorded_hold_of_a_running_job():
    """scontrol hold on a RUNNING job: rc 0, it keeps running with reason JobHeldAdmin."""
    rc, stdout, stderr = captured("scontrol_hold_running.txt")
    assert (rc, stdout, stderr) == (0, "", "")
    jobs = dict((j["name"], j) for j in parse_squeue(fixture("squeue_held_running.txt")))
    assert (jobs["rec-run"]["state"], jobs["rec-run"]["reason"]) == ("RUNNING", "JobHeldAdmin")
    assert (jobs["rec-held"]["state"], jobs["rec-held"]["reason"]) == ("PENDING", "JobHeldAdmin")


def test_recorded_json_of_22_05_is_not_used_and_why():
    """What the JSON of Slurm 22.05.8 (openapi v0.0.38) says, recorded: sacct --json reports the
    job that ended with ``exit 3`` as exit code SUCCESS/0 (the text says ``3:0``), and carries no
    restart count; squeue --json has restart_cnt but gives the raw wait status too (768), and it
    ignores every filter (-u, -n, -j: it always dumps every job of the cluster)."""
    sacct = dict((j["name"], j) for j in json.loads(fixture("sacct_json_states.json"))["jobs"])
    assert sacct["rec-fail"]["state"]["current"] == "FAILED"
    assert sacct["rec-fail"]["exit_code"] == {"status": "SUCCESS", "return_code": 0}
    (text,) = [j for j in parse_sacct(fixture("sacct_states.txt")) if j["name"] == "rec-fail"]
    assert text["exit_code"] == 3
    assert "restart_cnt" not in sacct["rec-fail"]
    node_fail = json.loads(fixture("sacct_json_node_fail.json"))["jobs"]
    assert [(j["job_id"], j["state"]["current"]) for j in node_fail] == [(57, "NODE_FAIL"), (57, "PENDING")]
    squeue = dict((j["job_id"], j) for j in json.loads(fixture("squeue_json_states.json"))["jobs"])
    assert squeue[42]["exit_code"] == 768 and "restart_cnt" in squeue[42]
    assert squeue[47]["array_task_string"] == "3-100%2" and squeue[52]["het_job_offset"] == 1


# ---------------------------------------------------------------------------------------------
# Every release: the same kinds of jobs, recorded on Slurm 22.05.8 (devcluster/, written by
# dev/cluster/record-jobs.sh) and on Slurm 24.11.5 (slurm-24.11/<snapshot>/<command>.out and
# .rc, from ../shared/recordings/24.11: "-product" files are exactly our squeue -O / sacct
# --format asks, see its README).
# ---------------------------------------------------------------------------------------------

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")


def recorded(release, name):
    """The text of a recorded output: ``slurm-<release>/<name>`` (``<snapshot>/<command>.out``),
    else for 22.05 ``devcluster/<name>`` (dev/cluster/record-jobs.sh). Read with invalid bytes
    as U+FFFD, as the command layer decodes Slurm's output."""
    path = os.path.join(ROOT, "slurm-" + release, name)
    if release == "22.05" and not os.path.exists(path):
        path = os.path.join(ROOT, "devcluster", name)
    with io.open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def raw_answers_2411():
    """``slurm-24.11/raw-job-answers.txt``: each command's stdout and stderr, then ``rc=N``; in
    order: squeue --jobs=<unknown id>, squeue --jobs=<two unknown ids>, sbatch, sbatch
    --parsable, sbatch -p nosuch, sacct -P."""
    answers = []
    lines = []
    for line in recorded("24.11", "raw-job-answers.txt").splitlines():
        if re.match(r"^rc=\d+$", line):
            answers.append((int(line[3:]), "\n".join(lines)))
            lines = []
        else:
            lines.append(line)
    return answers


SQUEUE_0811 = "08-jobs/squeue-product.out"
SACCT_0811 = "08-jobs/sacct-product.out"


@pytest.mark.parametrize("release, squeue, name, expected", [
    # (state, exit_code, signal, reason); 22.05's squeue prints the raw wait status (768, 9),
    # 24.11's prints exit:signal (3:0, 0:9, 0:15)
    ("22.05", "squeue_states.txt", "rec-fail", ("FAILED", 3, 0, "NonZeroExitCode")),
    ("24.11", SQUEUE_0811, "nsl-fail", ("FAILED", 3, 0, "NonZeroExitCode")),
    ("22.05", "squeue_states.txt", "rec-signal", ("FAILED", 0, 9, "JobLaunchFailure")),
    ("24.11", SQUEUE_0811, "nsl-sig", ("FAILED", 0, 9, "RaisedSignal:9(Killed)")),
    ("22.05", "squeue_states.txt", "rec-done", ("COMPLETED", 0, 0, "")),
    ("24.11", SQUEUE_0811, "nsl-ok", ("COMPLETED", 0, 0, "")),
    ("24.11", SQUEUE_0811, "nsl-cancel", ("CANCELLED", 0, 15, "")),
    ("22.05", "squeue_states.txt", "rec-run", ("RUNNING", 0, 0, "")),
    ("24.11", SQUEUE_0811, "nsl-train", ("RUNNING", 0, 0, "")),
])
def test_recorded_squeue_state_exit_code_reason_on_every_release(release, squeue, name, expected):
    (job,) = [j for j in parse_squeue(recorded(release, squeue)) if j["name"] == name]
    assert (job["state"], job["exit_code"], job["signal"], job["reason"]) == expected
    assert job["state_known"] and not job["held"]
    assert job["active"] is (expected[0] == "RUNNING")
    if job["active"]:
        assert job["start_time"] and job["end_time"] is None
    else:
        assert job["end_time"] >= job["start_time"] >= job["submit_time"]


def test_recorded_24_11_squeue_every_field():
    jobs = dict((j["name"], j) for j in parse_squeue(recorded("24.11", SQUEUE_0811)))
    train = jobs["nsl-train"]
    assert (train["job_id"], train["job_id_raw"], train["user"], train["partition"], train["cluster"],
            train["node_list"], train["nodes"], train["comment"], train["restart_count"],
            train["submit_time"], train["start_time"], train["end_time"]) == (
        "1", 1, "root", "debug", "nsl", "n1", ["n1"], "clusterops-key=k1", 0,
        1796061370, 1796061370, None)
    assert jobs["nsl-ok"]["comment"] == ""


@pytest.mark.parametrize("release, sacct, name, expected", [
    # (state, cancelled_by, exit_code, signal, [(step, state, exit_code, signal)])
    ("22.05", "sacct_states.txt", "rec-fail", ("REQUEUED", None, 3, 0, None)),
    ("24.11", SACCT_0811, "nsl-fail", ("FAILED", None, 3, 0, [("batch", "FAILED", 3, 0)])),
    ("24.11", SACCT_0811, "nsl-sig", ("FAILED", None, 0, 9, [("batch", "CANCELLED", 0, 9)])),
    ("24.11", SACCT_0811, "nsl-cancel", ("CANCELLED", 0, 0, 0, [("batch", "CANCELLED", 0, 15)])),
    ("24.11", SACCT_0811, "nsl-train", ("RUNNING", None, 0, 0, [("batch", "RUNNING", 0, 0)])),
])
def test_recorded_sacct_on_every_release(release, sacct, name, expected):
    (job,) = [j for j in parse_sacct(recorded(release, sacct)) if j["name"] == name]
    steps = [(s["step_id"], s["state"], s["exit_code"], s["signal"]) for s in job["steps"]]
    assert (job["state"], job["cancelled_by"], job["exit_code"], job["signal"]) == expected[:4]
    if expected[4] is not None:
        assert steps == expected[4]
    assert job["state_known"] and not job["active"] and not job["held"]


@pytest.mark.parametrize("release, squeue, sacct, job_id, node_fail_on", [
    ("22.05", "squeue_node_fail_requeued.txt", "sacct_node_fail_requeued.txt", "57", "n2"),
    # 24.11, during the failure (reason None) and after it (reason BeginTime)
    ("24.11", "09-during-node-fail/squeue-product.out", "09-during-node-fail/sacct-product.out",
     "8", "n3"),
    ("24.11", "10-after-node-fail/squeue-product.out", "10-after-node-fail/sacct-product.out",
     "8", "n3"),
])
def test_recorded_requeued_after_node_fail_on_every_release(release, squeue, sacct, job_id, node_fail_on):
    """The job of the crashed node, requeued by Slurm itself: one job, PENDING, active (never
    to be submitted again), requeued, with the NODE_FAIL run as its history."""
    merged = merge_jobs(parse_squeue(recorded(release, squeue)), parse_sacct(recorded(release, sacct)))
    jobs = dict((j["job_id"], j) for j in merged)
    job = jobs[job_id]
    assert (job["state"], job["active"], job["requeued"], job["restart_count"], job["held"]) == (
        "PENDING", True, True, 1, False)
    assert [(h["state"], h["node_list"]) for h in job["history"]] == [("NODE_FAIL", node_fail_on)]


def test_recorded_24_11_cancelled_job_is_cancelled_by_its_state_not_its_exit_code():
    """A cancelled job's exit code here is 0:15 (squeue) / 0:0 (sacct); elsewhere 143:0 (a
    program that exits 128+15 itself) or 137:0. Only the state says CANCELLED; the exit code is
    reported as Slurm gave it."""
    queued = parse_squeue(recorded("24.11", "09-during-node-fail/squeue-product.out"))
    accounted = parse_sacct(recorded("24.11", "09-during-node-fail/sacct-product.out"))
    jobs = dict((j["name"], j) for j in merge_jobs(queued, accounted))
    assert (jobs["nsl-train"]["state"], jobs["nsl-train"]["exit_code"], jobs["nsl-train"]["signal"]) == (
        "CANCELLED", 0, 15)
    # nsl-cancel: squeue says CANCELLED, sacct adds who (uid 0)
    assert (jobs["nsl-cancel"]["state"], jobs["nsl-cancel"]["cancelled_by"]) == ("CANCELLED", 0)


def test_recorded_24_11_sbatch_answers():
    answers = raw_answers_2411()
    assert parse_sbatch_output(answers[2][1]) == (6, None)        # Submitted batch job 6
    assert parse_sbatch_output(answers[3][1]) == (7, None)        # --parsable
    rc, text = answers[4]
    assert rc == 1 and "Invalid partition name specified" in text
    assert not uncertain_failure(SlurmCommandError("x", ["sbatch"], rc, "", text))


@pytest.mark.parametrize("release, text", [
    ("22.05", lambda: captured("squeue_unknown_job.txt")),
    ("24.11", lambda: (raw_answers_2411()[0][0], "", raw_answers_2411()[0][1])),
])
def test_recorded_unknown_job_id_is_no_job_on_every_release(release, text):
    rc, out, err = text()
    assert rc == 1 and "Invalid job id specified" in err
    assert read_queue(FakeCLI([(rc, out, err)]), job_ids=["999999"]) == []


class FakeCLI(object):
    """The command layer's interface, answering with recorded (rc, stdout, stderr)."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = []

    def run(self, name, args, check=True, what=None, data=None, environ=None):
        self.calls.append([name] + list(args))
        return self.answers.pop(0)

    def failure(self, name, rc, out, err, what=None):
        return SlurmCommandError("%s failed (rc=%s) while trying to %s: %s" % (
            name, rc, what, (err or out or "").strip().splitlines()[0]), self.calls[-1], rc, out, err)


# Partial reads: never "no jobs"

@pytest.mark.parametrize("release, name", [
    ("22.05", "squeue_states.txt"),
    ("24.11", SQUEUE_0811),
    ("24.11", "10-after-node-fail/squeue-product.out"),
])
def test_recorded_squeue_cut_short_anywhere_inside_a_record_fails(release, name):
    text = recorded(release, name)
    complete = len(parse_squeue(text))
    for cut in range(1, len(text) - 1):
        head = text[:cut]
        if head.endswith(REC_END) or head.endswith(REC_END + "\n"):
            assert len(parse_squeue(head)) < complete   # a cut between records is undetectable
            continue
        with pytest.raises(JobParseError):
            parse_squeue(head)


@pytest.mark.parametrize("release, name", [
    ("22.05", "sacct_states.txt"),
    ("24.11", SACCT_0811),
    ("24.11", "10-after-node-fail/sacct-product.out"),
])
def test_recorded_sacct_cut_short_inside_a_line_fails(release, name):
    text = recorded(release, name)
    for cut in range(1, len(text) - 1):
        head = text[:cut]
        if head.endswith("\n"):
            continue
        with pytest.raises(JobParseError):
            parse_sacct(head)


# What Slurm prints on stderr when slurmdbd cannot be reached (src/sacct/options.c: error()
# then exit(1); the persist_conn lines come first), and an error with rc 0.
SLURMDBD_DOWN = ("sacct: error: slurm_persist_conn_open_without_init: failed to open persistent "
                 "connection to host:ctl:6819: Connection refused\n"
                 "sacct: error: Sending PersistInit msg: Connection refused\n"
                 "sacct: error: Problem talking to the database: Connection refused\n")


@pytest.mark.parametrize("rc", [1, 0])
def test_slurmdbd_down_is_a_failure_never_no_jobs(rc):
    cli = FakeCLI([(rc, "", SLURMDBD_DOWN)])
    with pytest.raises(SlurmCommandError) as info:
        read_jobs(cli, names=["nsl-train"], users=["root"])
    assert "Connection refused" in info.value.msg
    assert [c[0] for c in cli.calls] == ["sacct"]    # squeue not even asked


def test_recorded_records_with_an_error_on_stderr_and_rc_0_fail():
    """24.11's recorded jobs, plus an error line on stderr: the listing may lack jobs."""
    cli = FakeCLI([(0, recorded("24.11", SACCT_0811), ""),
                   (0, recorded("24.11", SQUEUE_0811),
                    "squeue: error: slurm_load_jobs: Unable to contact slurm controller")])
    with pytest.raises(SlurmCommandError) as info:
        read_jobs(cli, names=["nsl-train"], users=["root"])
    assert "Unable to contact slurm controller" in info.value.msg
    # warnings are not errors
    cli = FakeCLI([(0, recorded("24.11", SACCT_0811), "sacct: Warning: something to note\n"),
                   (0, recorded("24.11", SQUEUE_0811), "")])
    jobs, accounting = read_jobs(cli, names=["nsl-train"], users=["root"])
    assert accounting and len(jobs) == 5


@pytest.mark.parametrize("release", ["22.05"])
def test_recorded_accounting_disabled_is_no_accounting_not_a_failure(release):
    rc, out, err = captured("sacct_accounting_disabled.txt")
    cli = FakeCLI([(rc, out, err), (0, recorded(release, "squeue_states.txt"), "")])
    jobs, accounting = read_jobs(cli, names=["rec-run"], users=["root"])
    assert accounting is False and jobs


# Bytes that are not UTF-8 (a Latin-1 job name or comment), decoded as U+FFFD by the command
# layer: kept, never fatal.

def latin1(text, old, new):
    """``text`` with ``old`` replaced by ``new`` encoded in Latin-1 and decoded as the command
    layer does (``errors="replace"``)."""
    assert old in text
    return text.replace(old, new.encode("latin-1").decode("utf-8", "replace"))


@pytest.mark.parametrize("release, squeue, old", [
    ("22.05", "squeue_states.txt", "rec-run"),
    ("24.11", SQUEUE_0811, "nsl-train"),
])
def test_recorded_squeue_with_latin1_name_and_comment(release, squeue, old):
    text = latin1(recorded(release, squeue), old, u"caf\u00e9-run")
    if "clusterops-key=k1" in text:
        text = latin1(text, "clusterops-key=k1", u"clusterops-key=k1 r\u00e9sum\u00e9")
    jobs = dict((j["name"], j) for j in parse_squeue(text))
    job = jobs[u"caf\ufffd-run"]
    assert job["state"] == "RUNNING" and job["active"]
    if release == "24.11":
        assert job["comment"] == u"clusterops-key=k1 r\ufffdsum\ufffd"
        assert has_key(job, "k1")
    json.dumps(job)   # a module result stays serialisable


def test_recorded_sacct_and_json_with_latin1_name():
    text = latin1(recorded("24.11", SACCT_0811), "nsl-train", u"\u00e9t\u00e9")
    (job,) = [j for j in parse_sacct(text) if j["job_id"] == "1"]
    assert job["name"] == u"\ufffdt\ufffd" and job["state"] == "RUNNING"
    doc = json.loads(latin1(recorded("24.11", "08-jobs/squeue-json.out"), '"nsl-train"', u'"\u00e9t\u00e9"'))
    assert u"\ufffdt\ufffd" in [j["name"] for j in doc["jobs"]]


# The JSON the same Slurm printed at the same moment, as an oracle for the text readers (the
# collection reads text on every release; see _jobs' docstring). 23.02+ JSON shapes: numbers
# and times as {set, infinite, number}, exit codes as {status: [...], return_code: {...},
# signal: {id: {...}, name}}, states as lists (squeue job_state; sacct state.current).

def json_number(value):
    """A number of Slurm's JSON: ``{"set": true, "infinite": false, "number": N}`` (23.02+) is N,
    unset or infinite is None; a plain number (22.05) is itself."""
    if isinstance(value, dict):
        return value["number"] if value.get("set") and not value.get("infinite") else None
    return value


def json_exit(value):
    """``(exit_code, signal)`` as the text gives them: from a 23.02+ exit code object
    (``{status: [...], return_code: {...}, signal: {id: {...}, name}}``), 22.05's sacct object
    (``{status, return_code}``, no signal) or 22.05's squeue raw wait status (an int)."""
    if not isinstance(value, dict):
        return parse_wait_status(str(value))
    code = json_number(value["return_code"])
    sig = json_number(value["signal"]["id"]) if isinstance(value.get("signal"), dict) else None
    return (code if code is not None else 0), (sig if sig is not None else 0)


def json_jobs(doc, where=""):
    """The jobs of a recorded JSON document. 22.05's sacct --json says "Nothing found" in
    ``errors`` when no job matched (its only error that means "none"). Any other error is Slurm
    not answering: then the document must be one taken with slurmctld stopped, and lists no job
    (22.05's squeue --json exits 0 with "Failed while looking for jobs" and ``jobs: []``: why an
    errors list, whatever the exit status, is a failed read); None is returned for it."""
    errors = doc.get("errors") or []
    if errors and not doc.get("jobs") and all(e.get("description") == "Nothing found" for e in errors):
        return []
    if errors:
        assert "controller-stopped" in where and not doc.get("jobs"), (where, errors)
        return None
    return doc["jobs"]


@pytest.mark.parametrize("snapshot", ["08-jobs", "09-during-node-fail", "10-after-node-fail"])
def test_recorded_24_11_text_agrees_with_the_json_of_the_same_moment(snapshot):
    squeue = dict((j["job_id_raw"], j) for j in parse_squeue(recorded("24.11", snapshot + "/squeue-product.out")))
    doc = json.loads(recorded("24.11", snapshot + "/squeue-json.out"))
    assert doc["errors"] == [] and doc["meta"]["slurm"]["release"] == "24.11.5"
    assert doc["jobs"]     # squeue --json lists the active jobs only (no --states=all)
    for entry in doc["jobs"]:
        job = squeue[entry["job_id"]]
        state = parse_job_state(entry["job_state"])
        assert (job["state"], job["flags"], job["active"]) == (state.base, sorted(state.flags), state.active)
        assert job["restart_count"] == entry["restart_cnt"]
        assert job["submit_time"] == json_number(entry["submit_time"])
        assert job["name"] == entry["name"] and job["comment"] == entry["comment"]
        assert (job["exit_code"], job["signal"]) == json_exit(entry["exit_code"])
        # held <=> JSON hold / priority 0 (none of these jobs is held)
        assert job["held"] is (entry["hold"] or json_number(entry["priority"]) == 0) is False
        assert job["reason"] == (entry["state_description"] or entry["state_reason"] or "").replace("None", "")
    sacct = dict((j["job_id_raw"], j) for j in parse_sacct(recorded("24.11", snapshot + "/sacct-product.out")))
    for entry in json.loads(recorded("24.11", snapshot + "/sacct-json.out"))["jobs"]:
        job = sacct[entry["job_id"]]
        assert job["state"] == parse_job_state(entry["state"]["current"]).base
        assert (job["exit_code"], job["signal"]) == json_exit(entry["exit_code"])
        assert (job["submit_time"], job["start_time"], job["end_time"]) == (
            entry["time"]["submission"], entry["time"]["start"] or None, entry["time"]["end"] or None)
        assert [(s["job_step"], s["state"]) for s in job["steps"]] == [
            (s["step"]["id"], parse_job_state(s["state"]).base) for s in entry["steps"]]


# Every JSON document recorded from a real cluster of any release (slurm-<release>/<snapshot>/
# squeue-json.out, sacct-json.out): the state words, holds and exit codes Slurm wrote there, read
# the way the text readers read them. New recordings are picked up as they are added.

def json_recordings(command):
    params = []
    for path in sorted(glob.glob(os.path.join(ROOT, "slurm-*", "*", command + "-json.out"))):
        with io.open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        rc_path = path[:-len(".out")] + ".rc"
        rc = int(open(rc_path).read().strip()) if os.path.exists(rc_path) else 0
        if rc == 0 and text.strip():      # no accounting (24.11 01-04) or controller stopped: no document
            params.append(pytest.param(text, os.path.relpath(path, ROOT), id=os.path.relpath(path, ROOT)))
    return params


def _reason(entry):
    """What squeue prints as the reason (src/squeue/print.c): the description slurmctld wrote,
    else the reason code's name."""
    return entry.get("state_description") or entry.get("state_reason") or ""


@pytest.mark.parametrize("text, where", json_recordings("squeue"))
def test_every_recorded_squeue_json_state_and_hold_is_read(text, where):
    for entry in json_jobs(json.loads(text), where) or []:
        state = parse_job_state(entry["job_state"])
        assert state.known, entry["job_state"]
        held_by = hold_kind(state, _reason(entry))
        if state.active and state.base == "PENDING":
            # Slurm's own view: a held pending job has hold true (23.02+) / priority 0
            held = entry.get("hold") or json_number(entry["priority"]) == 0
            assert (held_by is not None) is held, (entry["job_id"], entry["job_state"], _reason(entry))


@pytest.mark.parametrize("text, where", json_recordings("sacct"))
def test_every_recorded_sacct_json_state_is_known(text, where):
    for entry in json_jobs(json.loads(text), where) or []:
        assert parse_job_state(entry["state"]["current"]).known, entry["state"]
        for step in entry["steps"]:
            assert parse_job_state(step["state"]).known, step["state"]


# Recordings of dev/cluster/record-fixtures.sh (slurm-<release>/jobs/): a job running, held by
# its user (sbatch -H), held by an admin (scontrol hold), held by Slurm itself after a prolog
# failure ("launch failed requeued held"), an array, a het job, a failed and a cancelled one.

def record_fixture_releases(snapshot, *commands):
    return sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))[len("slurm-"):]
                  for p in glob.glob(os.path.join(ROOT, "slurm-*", snapshot, commands[0] + ".out"))
                  if all(os.path.exists(os.path.join(os.path.dirname(p), c + ".out")) for c in commands))


def squeue_product(release, snapshot):
    """Our ``squeue -O`` record layout, every field as Slurm printed it in that snapshot:
    id, array id, name, user, state, reason and node list from the recorded ``squeue -o
    %A|%i|%j|%u|%T|%r|%N`` (squeue-text), exit code, times, restart count, partition, cluster and
    comment from the ``squeue --json`` taken right after it (record-fixtures.sh records no -O
    output). Only the jobs both list (squeue --json lists no finished job)."""
    doc = json.loads(recorded(release, snapshot + "/squeue-json.out"))
    by_id = dict((j["job_id"], j) for j in doc["jobs"])
    records = []
    for line in recorded(release, snapshot + "/squeue-text.out").splitlines():
        raw, array_id, name, user, state, reason, nodes = line.split("|", 6)
        entry = by_id.get(int(raw))
        if entry is None:
            continue
        code, sig = json_exit(entry["exit_code"])

        def seconds(key):
            value = json_number(entry[key])
            return str(value) if value else "N/A"
        fields = [raw, array_id, name, user, state, reason, "%d:%d" % (code, sig), nodes,
                  seconds("submit_time"), seconds("start_time"), seconds("end_time"),
                  str(entry["restart_cnt"]), entry["partition"], entry["cluster"],
                  entry["comment"] or "(null)"]
        records.append(SEP.join(fields) + REC_END + "\n")
    return "".join(records)


@pytest.mark.parametrize("release", record_fixture_releases("jobs", "squeue-text", "squeue-json"))
def test_recorded_held_jobs_on_every_release(release):
    jobs = dict((j["name"], j) for j in parse_squeue(squeue_product(release, "jobs")))
    assert dict((n, (jobs[n]["state"], jobs[n]["held"], jobs[n]["held_by"])) for n in (
        "running", "held-user", "held-admin", "held-by-slurm")) == {
        "running": ("RUNNING", False, None),
        "held-user": ("PENDING", True, "user"),
        "held-admin": ("PENDING", True, "admin"),
        "held-by-slurm": ("PENDING", True, "slurm"),
    }
    slurm_held = jobs["held-by-slurm"]
    assert slurm_held["reason"] == "launch failed requeued held" and slurm_held["active"]
    assert slurm_held["restart_count"] == 1 and slurm_held["requeued"]
    # slurm_job state=released releases it; state=held leaves it alone
    plan = plan_action([slurm_held], "released")
    assert plan["targets"] == [str(slurm_held["job_id_raw"])] and not plan["refused"]
    assert plan_action([slurm_held], "held")["targets"] == []
    # training remediation: needs a human, neither waits forever nor resubmits
    run = training_registry.validate_run(
        {"format": training_registry.RUN_FORMAT, "format_version": 1, "name": "held-by-slurm",
         "owner": "root", "launcher": "/reg/l.sbatch", "checkpoint_dir": "/ckpt"},
        "/reg/held-by-slurm")
    decision = policy.decide(run, list(jobs.values()), {"step": 40, "status": "valid"}, {"resubmissions": []})
    assert (decision["action"], decision["status"], decision["needs_human"]) == ("none", "held", True)
    assert "held by Slurm itself (launch failed requeued held)" in decision["reason"]


@pytest.mark.parametrize("release", record_fixture_releases("jobs", "sacct-text", "sacct-json"))
def test_recorded_sacct_exit_codes_and_states_agree_with_json(release):
    """``sacct -P -o JobID,JobIDRaw,JobName,User,State,ExitCode,Reason,NodeList`` against
    ``sacct --json`` of the same snapshot: exit codes ``exit:signal`` and the cancelled-by word."""
    lines = recorded(release, "jobs/sacct-text.out").splitlines()
    header = lines[0].split("|")
    rows = [dict(zip(header, line.split("|"))) for line in lines[1:]]
    by_id = dict((j["job_id"], j) for j in json_jobs(json.loads(recorded(release, "jobs/sacct-json.out"))))
    seen = 0
    for row in rows:
        if "." in row["JobIDRaw"] or int(row["JobIDRaw"]) not in by_id:
            continue
        entry = by_id[int(row["JobIDRaw"])]
        text_state = parse_job_state(row["State"])
        if text_state.base != parse_job_state(entry["state"]["current"]).base:
            continue   # the job moved on between the two commands
        seen += 1
        if release == "22.05":
            # 22.05's sacct --json (openapi v0.0.38) drops the exit status: "exit 3" is SUCCESS/0
            # there (the reason the text is read); the text has it
            if row["JobName"] == "fail3":
                assert (parse_exit_code(row["ExitCode"]), json_exit(entry["exit_code"])) == ((3, 0), (0, 0))
        else:
            assert parse_exit_code(row["ExitCode"]) == json_exit(entry["exit_code"]), row
        if text_state.base == "CANCELLED":
            assert text_state.cancelled_by == 0   # all cancelled by root in the recording
    assert seen >= 5


def recorded_answer(release, snapshot, command):
    """(rc, stdout, stderr) of a record-fixtures.sh command (stderr kept only when not empty)."""
    base = os.path.join(ROOT, "slurm-" + release, snapshot, command)
    err = recorded(release, snapshot + "/" + command + ".err") if os.path.exists(base + ".err") else ""
    return (int(recorded(release, snapshot + "/" + command + ".rc").strip()),
            recorded(release, snapshot + "/" + command + ".out"), err)


@pytest.mark.parametrize("release", record_fixture_releases("down-not-responding", "squeue-text", "squeue-json"))
def test_recorded_job_requeued_by_slurm_after_its_node_died_on_every_release(release):
    """record-fixtures.sh's job ``node-fail`` ran on n3 when n3 lost power: Slurm requeued it
    (PENDING, restart count 1). Active, not held; training remediation leaves it to Slurm."""
    jobs = dict((j["name"], j) for j in parse_squeue(squeue_product(release, "down-not-responding")))
    job = jobs["node-fail"]
    assert (job["state"], job["active"], job["held"], job["requeued"], job["restart_count"]) == (
        "PENDING", True, False, True, 1)
    run = training_registry.validate_run(
        {"format": training_registry.RUN_FORMAT, "format_version": 1, "name": "node-fail",
         "owner": "root", "launcher": "/reg/l.sbatch", "checkpoint_dir": "/ckpt"},
        "/reg/node-fail")
    decision = policy.decide(run, list(jobs.values()), {"step": 40, "status": "valid"}, {"resubmissions": []})
    assert (decision["action"], decision["status"], decision["needs_human"]) == ("none", "active", False)


@pytest.mark.parametrize("release", record_fixture_releases("controller-stopped", "squeue-text"))
def test_recorded_controller_stopped_is_a_failure_never_no_jobs(release):
    """squeue with slurmctld stopped, as recorded: whatever the command printed, reading it must
    fail (rc not 0, or an error on stderr); it is never an empty list of jobs."""
    rc, out, err = recorded_answer(release, "controller-stopped", "squeue-text")
    assert rc != 0 or stderr_errors(err), "squeue said nothing was wrong: %r %r %r" % (rc, out, err)
    with pytest.raises(SlurmCommandError):
        read_queue(FakeCLI([(rc, out, err)]), names=["x"])

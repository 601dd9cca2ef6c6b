# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Job parsers fed with squeue/sacct/sbatch outputs recorded on the real dev cluster
(tests/unit/fixtures/devcluster, written by dev/cluster/record-jobs.sh)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._job_actions import (
    parse_sbatch_output,
    uncertain_failure,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import (
    merge_jobs,
    parse_sacct,
    parse_squeue,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SlurmCommandError

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

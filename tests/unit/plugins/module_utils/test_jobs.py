# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""squeue and sacct parsers, and merging them into one entry per job: the inputs that break
naive tools (array and het ids, steps, ``CANCELLED by``, OUT_OF_MEMORY with 0:0, requeues)."""

from __future__ import annotations

import time

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import (
    JobParseError,
    in_window,
    job_matches_states,
    merge_jobs,
    parse_exit_code,
    parse_job_id,
    parse_sacct,
    parse_squeue,
    parse_time,
    parse_wait_status,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import REC_END, SACCT_FIELDS, SEP, SQUEUE_FIELDS


def sacct_line(job_id, raw, state, exit_code="0:0", name="train", user="alice", partition="gpu",
               nodes="n[1-2]", submit="1700000000", start="1700000010", end="1700000100",
               reason="None", cluster="devcluster"):
    row = dict(JobID=job_id, JobIDRaw=raw, Cluster=cluster, User=user, Partition=partition,
               State=state, ExitCode=exit_code, Reason=reason, NodeList=nodes, Submit=submit,
               Start=start, End=end, JobName=name)
    return SEP.join(row[f] for f in SACCT_FIELDS) + "\n"


def squeue_record(job_id, raw, state, name="train", user="alice", reason="None", exit_code="0:0",
                  nodes="", submit="1700000000", start="N/A", end="N/A", restarts="0",
                  partition="gpu", cluster="devcluster", comment="(null)"):
    row = dict(JobID=raw, JobArrayID=job_id, Name=name, UserName=user, State=state, Reason=reason,
               exit_code=exit_code, NodeList=nodes, SubmitTime=submit, StartTime=start,
               EndTime=end, RestartCnt=restarts, Partition=partition, Cluster=cluster,
               Comment=comment)
    return SEP.join(row[f] for f in SQUEUE_FIELDS) + REC_END + "\n"


@pytest.mark.parametrize("text, expected", [
    ("778010", dict(id=778010)),
    ("1043074_91", dict(id=1043074, array_task_id=91)),
    ("57829110_[5-100]", dict(id=57829110, array_tasks="5-100")),
    ("123_[1-5%2]", dict(id=123, array_tasks="1-5", array_max_running=2)),
    ("123_[1,3,7-9]", dict(id=123, array_tasks="1,3,7-9")),
    ("1234+0", dict(id=1234, het_job_offset=0)),
    ("1234+1", dict(id=1234, het_job_offset=1)),
])
def test_parse_job_id(text, expected):
    full = dict(id=None, array_task_id=None, array_tasks=None, array_max_running=None,
                het_job_offset=None)
    full.update(expected)
    assert parse_job_id(text) == full


@pytest.mark.parametrize("text", ["778010.batch", "778010.extern", "", "abc", "123_", "123_[1-5", "12 3"])
def test_parse_job_id_rejects(text):
    with pytest.raises(JobParseError):
        parse_job_id(text)


@pytest.mark.parametrize("text, expected", [
    ("0:0", (0, 0)), ("0:9", (0, 9)), ("1:0", (1, 0)), ("137:0", (137, 0)), ("0:15", (0, 15)),
    ("2", (2, None)), ("", (None, None)), ("N/A", (None, None)),
])
def test_parse_exit_code(text, expected):
    assert parse_exit_code(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("0", (0, 0)), ("768", (3, 0)), ("256", (1, 0)), ("9", (0, 9)), ("15", (0, 15)),
    ("3:0", (3, 0)), ("", (None, None)), ("N/A", (None, None)),
])
def test_parse_wait_status(text, expected):
    """squeue's exit_code is the raw wait(2) status (recorded: 768 for exit 3, 9 for SIGKILL)."""
    assert parse_wait_status(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("1700000000", 1700000000), ("Unknown", None), ("None", None), ("N/A", None), ("", None),
    ("0", None),
    ("2026-03-01T12:00:00", int(time.mktime((2026, 3, 1, 12, 0, 0, 0, 0, -1)))),
])
def test_parse_time(text, expected):
    assert parse_time(text) == expected


def test_sacct_array_task_with_raw_id():
    (job,) = parse_sacct(sacct_line("1043074_91", "1043166", "COMPLETED"))
    assert job["job_id"] == "1043074_91"
    assert job["job_id_raw"] == 1043166
    assert job["array_job_id"] == 1043074 and job["array_task_id"] == 91
    assert job["state"] == "COMPLETED" and job["exit_code"] == 0


def test_sacct_steps_attached_never_listed():
    out = "\n".join([
        sacct_line("778010", "778010", "FAILED", exit_code="1:0"),
        sacct_line("778010.batch", "778010.batch", "FAILED", exit_code="1:0", name="batch",
                   user="", partition="", nodes="n1"),
        sacct_line("778010.extern", "778010.extern", "COMPLETED", name="extern", user="",
                   partition=""),
        sacct_line("778010.interactive", "778010.interactive", "COMPLETED", name="interactive",
                   user="", partition=""),
        sacct_line("778010.0", "778010.0", "CANCELLED by 1234", exit_code="0:9", name="python",
                   user="", partition=""),
        sacct_line("778011", "778011", "RUNNING", end="Unknown"),
    ])
    jobs = parse_sacct(out)
    assert [j["job_id"] for j in jobs] == ["778010", "778011"]
    steps = jobs[0]["steps"]
    assert [s["step_id"] for s in steps] == ["batch", "extern", "interactive", "0"]
    assert [s["job_step"] for s in steps] == [
        "778010.batch", "778010.extern", "778010.interactive", "778010.0"]
    assert steps[0]["exit_code"] == 1 and steps[0]["nodes"] == ["n1"]
    assert steps[3]["state"] == "CANCELLED" and steps[3]["cancelled_by"] == 1234
    assert steps[3]["signal"] == 9
    assert jobs[1]["steps"] == [] and jobs[1]["end_time"] is None


def test_sacct_array_and_het_steps_go_to_their_job():
    out = "\n".join([
        sacct_line("1043074_91", "1043166", "COMPLETED"),
        sacct_line("1043074_91.batch", "1043166.batch", "COMPLETED", name="batch"),
        sacct_line("1234+0", "1234", "COMPLETED"),
        sacct_line("1234+0.batch", "1234.batch", "COMPLETED", name="batch"),
        sacct_line("1234+1", "1235", "FAILED", exit_code="3:0"),
        sacct_line("1234+1.0", "1235.0", "FAILED", exit_code="3:0", name="python"),
    ])
    jobs = parse_sacct(out)
    assert [(j["job_id"], j["job_id_raw"], [s["job_step"] for s in j["steps"]]) for j in jobs] == [
        ("1043074_91", 1043166, ["1043074_91.batch"]),
        ("1234+0", 1234, ["1234+0.batch"]),
        ("1234+1", 1235, ["1234+1.0"]),
    ]
    assert [(j["het_job_id"], j["het_job_offset"]) for j in jobs[1:]] == [(1234, 0), (1234, 1)]
    assert jobs[2]["exit_code"] == 3


def test_sacct_cancelled_by_and_oom_with_zero_exit():
    jobs = parse_sacct("\n".join([
        sacct_line("5", "5", "CANCELLED by 1234", exit_code="0:15"),
        sacct_line("6", "6", "OUT_OF_MEMORY", exit_code="0:0"),
        sacct_line("7", "7", "NODE_FAIL", exit_code="0:0"),
        sacct_line("8", "8", "TIMEOUT", exit_code="0:0"),
        sacct_line("9", "9", "PREEMPTED", exit_code="0:0"),
        sacct_line("10", "10", "BOOT_FAIL", exit_code="0:0"),
        sacct_line("11", "11", "DEADLINE", exit_code="0:0"),
    ]))
    assert [(j["state"], j["cancelled_by"], j["exit_code"], j["signal"]) for j in jobs] == [
        ("CANCELLED", 1234, 0, 15),
        ("OUT_OF_MEMORY", None, 0, 0),  # the state says it, not the exit code
        ("NODE_FAIL", None, 0, 0),
        ("TIMEOUT", None, 0, 0),
        ("PREEMPTED", None, 0, 0),
        ("BOOT_FAIL", None, 0, 0),
        ("DEADLINE", None, 0, 0),
    ]
    assert jobs[0]["state_raw"] == "CANCELLED by 1234"


def test_sacct_pending_array_and_unassigned_nodes():
    (job,) = parse_sacct(sacct_line("57829110_[5-100]", "57829110", "PENDING", nodes="None assigned",
                                    start="Unknown", end="Unknown"))
    assert job["array_job_id"] == 57829110 and job["array_task_id"] is None
    assert job["array_tasks"] == "5-100"
    assert job["node_list"] == "" and job["nodes"] == []
    assert job["start_time"] is None and job["end_time"] is None


def test_sacct_name_with_pipes_and_spaces_kept():
    (job,) = parse_sacct(sacct_line("5", "5", "COMPLETED", name="a|b c=d [x]"))
    assert job["name"] == "a|b c=d [x]"


def test_sacct_bad_lines():
    with pytest.raises(JobParseError):
        parse_sacct("5" + SEP + "5" + SEP + "COMPLETED\n")
    with pytest.raises(JobParseError):
        parse_sacct(sacct_line("5", "5", ""))


def test_sacct_state_of_a_later_release_is_kept_not_fatal():
    (job,) = parse_sacct(sacct_line("5", "5", "RUNNABLE"))
    assert (job["state"], job["state_raw"], job["state_known"], job["active"]) == (
        None, "RUNNABLE", False, False)


def test_squeue_array_records_and_throttle():
    out = "".join([
        squeue_record("57829110_[5-100]", "57829110", "PENDING", reason="JobArrayTaskLimit"),
        squeue_record("57829110_4", "57829114", "RUNNING", nodes="n[3-4]", start="1700000050",
                      end="1700003650"),
        squeue_record("123_[1-5%2]", "123", "PENDING", reason="Priority"),
    ])
    jobs = parse_squeue(out)
    assert [(j["job_id"], j["job_id_raw"], j["array_job_id"], j["array_task_id"], j["array_tasks"],
             j["array_max_running"]) for j in jobs] == [
        ("57829110_[5-100]", 57829110, 57829110, None, "5-100", None),
        ("57829110_4", 57829114, 57829110, 4, None, None),
        ("123_[1-5%2]", 123, 123, None, "1-5", 2),
    ]
    assert jobs[1]["nodes"] == ["n3", "n4"] and jobs[1]["node_list"] == "n[3-4]"
    # an active job's end time is only Slurm's expectation: not reported
    assert jobs[1]["start_time"] == 1700000050 and jobs[1]["end_time"] is None
    assert jobs[0]["start_time"] is None and jobs[0]["reason"] == "JobArrayTaskLimit"
    assert all(j["active"] and j["source"] == "squeue" for j in jobs)


def test_squeue_comment_last_and_whole():
    comment = "clusterops-key=run-1 free text " + SEP + " with | and\nnewline"
    (job,) = parse_squeue(squeue_record("7", "7", "RUNNING", comment=comment))
    assert job["comment"] == comment
    (job,) = parse_squeue(squeue_record("7", "7", "RUNNING"))
    assert job["comment"] == ""


def test_squeue_requeued_job_and_finished_job():
    jobs = parse_squeue("".join([
        squeue_record("3", "3", "PENDING", reason="BeginTime", restarts="1"),
        squeue_record("4", "4", "COMPLETING", nodes="n3", restarts="0"),
        squeue_record("5", "5", "COMPLETED", nodes="n1", start="1700000010", end="1700000020",
                      exit_code="0:0"),
        squeue_record("6", "6", "FAILED", nodes="n1", exit_code="1:0", reason="NonZeroExitCode"),
    ]))
    assert [(j["state"], j["flags"], j["active"], j["requeued"], j["restart_count"]) for j in jobs] == [
        ("PENDING", [], True, True, 1),
        (None, ["COMPLETING"], True, False, 0),
        ("COMPLETED", [], False, False, 0),
        ("FAILED", [], False, False, 0),
    ]
    assert jobs[2]["end_time"] == 1700000020
    assert jobs[3]["exit_code"] == 1 and jobs[3]["reason"] == "NonZeroExitCode"


def test_squeue_bad_record():
    with pytest.raises(JobParseError):
        parse_squeue("5" + SEP + "5" + REC_END + "\n")


def _requeued_node_fail():
    """A batch job on a node that crashed: NODE_FAIL record, then Slurm's own requeue (same id,
    submit time reset to the moment of the requeue), as sacct --duplicates lists it."""
    accounted = parse_sacct("\n".join([
        sacct_line("3", "3", "NODE_FAIL", nodes="n2", submit="1700000000", start="1700000001",
                   end="1700000030"),
        sacct_line("3.batch", "3.batch", "CANCELLED", name="batch", nodes="n2"),
        sacct_line("3", "3", "PENDING", nodes="None assigned", submit="1700000030", start="Unknown",
                   end="Unknown", reason="BeginTime"),
    ]))
    return accounted


def test_merge_requeued_after_node_fail_is_one_pending_job_with_history():
    queued = parse_squeue(squeue_record("3", "3", "PENDING", reason="BeginTime", restarts="1",
                                        submit="1700000030"))
    (job,) = merge_jobs(queued, _requeued_node_fail())
    assert job["state"] == "PENDING" and job["active"] and job["requeued"]
    assert job["restart_count"] == 1
    assert [(h["state"], h["node_list"], h["end_time"]) for h in job["history"]] == [
        ("NODE_FAIL", "n2", 1700000030)]
    assert job["history"][0]["steps"][0]["job_step"] == "3.batch"


def test_merge_requeued_known_only_to_accounting():
    (job,) = merge_jobs([], _requeued_node_fail())
    assert job["state"] == "PENDING" and job["requeued"] and job["source"] == "sacct"
    assert not job["active"]  # the controller does not list it: a stale record
    assert [h["state"] for h in job["history"]] == ["NODE_FAIL"]


def test_merge_reused_id_is_not_history():
    """The dev cluster starts job ids at 1 again: an old job with the same id and name that
    ended long before is not a run of this one."""
    accounted = parse_sacct("\n".join([
        sacct_line("1", "1", "COMPLETED", submit="1600000000", start="1600000001", end="1600000100"),
        sacct_line("1", "1", "RUNNING", submit="1700000000", start="1700000001", end="Unknown"),
    ]))
    queued = parse_squeue(squeue_record("1", "1", "RUNNING", submit="1700000000", nodes="n1",
                                        start="1700000001"))
    (job,) = merge_jobs(queued, accounted)
    assert job["history"] == [] and not job["requeued"]
    (job,) = merge_jobs([], accounted)
    assert job["history"] == [] and job["submit_time"] == 1700000000


def test_merge_restart_count_zero_means_no_history():
    accounted = parse_sacct("\n".join([
        sacct_line("1", "1", "CANCELLED by 0", submit="1700000000", end="1700000005"),
        sacct_line("1", "1", "PENDING", submit="1700000005", start="Unknown", end="Unknown"),
    ]))
    queued = parse_squeue(squeue_record("1", "1", "PENDING", submit="1700000005", restarts="0"))
    (job,) = merge_jobs(queued, accounted)
    assert job["history"] == [] and not job["requeued"]


def test_merge_completing_job_takes_base_state_and_steps_from_accounting():
    accounted = parse_sacct("\n".join([
        sacct_line("4", "4", "FAILED", exit_code="2:0", submit="1700000000"),
        sacct_line("4.batch", "4.batch", "FAILED", exit_code="2:0", name="batch"),
    ]))
    queued = parse_squeue(squeue_record("4", "4", "COMPLETING", submit="1700000000", nodes="n1",
                                        exit_code="2:0"))
    (job,) = merge_jobs(queued, accounted)
    assert job["state"] == "FAILED" and job["flags"] == ["COMPLETING"] and job["active"]
    assert [s["step_id"] for s in job["steps"]] == ["batch"]
    assert job_matches_states(job, ["FAILED"]) and job_matches_states(job, ["CG"])
    assert not job_matches_states(job, ["COMPLETED"])


def test_merge_orders_by_submit_and_keeps_queue_only_jobs():
    accounted = parse_sacct(sacct_line("9", "9", "COMPLETED", submit="1700000100"))
    queued = parse_squeue(squeue_record("10", "10", "PENDING", submit="1700000050"))
    assert [j["job_id"] for j in merge_jobs(queued, accounted)] == ["10", "9"]


def test_in_window():
    job = {"submit_time": 100, "end_time": 200}
    assert in_window(job)
    assert in_window(job, start=150, end=150)
    assert not in_window(job, start=201)
    assert not in_window(job, end=99)
    assert in_window({"submit_time": 100, "end_time": None}, start=10 ** 10)

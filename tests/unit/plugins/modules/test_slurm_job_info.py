# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_job_info as data: every run_command call expected (sacct first, then squeue), with
rc/stdout/stderr recorded from the real dev cluster (dev/cluster/record-jobs.sh). A filtered
answer (``--name``, ``--jobs``) is the recorded output cut down to those jobs, as the command
itself filters."""

from __future__ import annotations

import io
import os
import time

import pytest

from ansible_collections.clusterops.slurm.plugins.modules import slurm_job_info

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "devcluster")
US = "\x1f"
RS = "\x1e"
SQUEUE_FIELDS = ["JobID", "JobArrayID", "Name", "UserName", "State", "Reason", "exit_code", "NodeList",
                 "SubmitTime", "StartTime", "EndTime", "RestartCnt", "Partition", "Cluster", "Comment"]
SQUEUE = ["/usr/bin/squeue", "--noheader", "--states=all",
          "--Format=" + ",".join(f + ":" + US for f in SQUEUE_FIELDS[:-1]) + ",Comment:" + RS]
SACCT = ["/usr/bin/sacct", "--noheader", "--parsable2", "--delimiter=" + US, "--duplicates",
         "--format=JobID,JobIDRaw,Cluster,User,Partition,State,ExitCode,Reason,NodeList,Submit,Start,End,JobName"]


def recorded(name):
    """A recorded output: ``devcluster/<name>`` (22.05), or ``slurm-24.11/...`` given as such."""
    path = os.path.join(FIXTURES, "..", name) if name.startswith("slurm-") else os.path.join(FIXTURES, name)
    with io.open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


# What sacct prints when slurmdbd cannot be reached (src/sacct/options.c).
SLURMDBD_DOWN = ("sacct: error: Sending PersistInit msg: Connection refused\n"
                 "sacct: error: Problem talking to the database: Connection refused\n")


def captured(name):
    text = recorded(name)
    head, dummy, rest = text.partition("# stdout:\n")
    stdout, dummy, stderr = rest.partition("# stderr:\n")
    return int(head.split("# rc: ", 1)[1].splitlines()[0]), stdout, stderr


def queue(name, job_names=None, raw_ids=None):
    records = [r for r in recorded(name).split(RS + "\n") if r]
    if job_names is not None:
        records = [r for r in records if r.split(US)[2] in job_names]
    if raw_ids is not None:
        records = [r for r in records if r.split(US)[0] in raw_ids]
    return "".join(r + RS + "\n" for r in records)


def accounting(name, job_names=None, raw_ids=None):
    """Recorded sacct lines of the jobs named (steps go with their job)."""
    out, keep = [], False
    for line in recorded(name).splitlines():
        fields = line.split(US)
        if "." not in fields[1]:
            keep = ((job_names is None or fields[12] in job_names)
                    and (raw_ids is None or fields[1] in raw_ids))
        if keep:
            out.append(line + "\n")
    return "".join(out)


CASES = [
    dict(id="the job Slurm requeued after its node crashed: PENDING, requeued, NODE_FAIL in history",
         args={"names": ["rec-node-fail"]},
         calls=[(SACCT + ["--name=rec-node-fail", "--allusers"], 0,
                 accounting("sacct_node_fail_requeued.txt", ["rec-node-fail"]), ""),
                (SQUEUE + ["--name=rec-node-fail"], 0,
                 queue("squeue_node_fail_requeued.txt", ["rec-node-fail"]), "")],
         jobs=[("57", "PENDING", True, True, ["NODE_FAIL"])]),
    dict(id="states filter: the current state, not the history",
         args={"names": ["rec-node-fail"], "states": ["NODE_FAIL"]},
         calls=[(SACCT + ["--name=rec-node-fail", "--allusers"], 0,
                 accounting("sacct_node_fail_requeued.txt", ["rec-node-fail"]), ""),
                (SQUEUE + ["--name=rec-node-fail"], 0,
                 queue("squeue_node_fail_requeued.txt", ["rec-node-fail"]), "")],
         jobs=[]),
    dict(id="COMPLETING while requeued: base NODE_FAIL from sacct matches the states filter",
         args={"names": ["rec-node-fail-2n"], "states": ["NODE_FAIL"]},
         calls=[(SACCT + ["--name=rec-node-fail-2n", "--allusers"], 0,
                 accounting("sacct_node_fail_requeued.txt", ["rec-node-fail-2n"]), ""),
                (SQUEUE + ["--name=rec-node-fail-2n"], 0,
                 queue("squeue_node_fail_completing.txt", ["rec-node-fail-2n"]), "")],
         jobs=[("58", "NODE_FAIL", True, True, [])]),
    dict(id="by ids: array tasks and the het job, steps attached, never listed",
         args={"job_ids": ["47", "51"]},
         calls=[(SACCT + ["--jobs=47,51", "--allusers"], 0,
                 accounting("sacct_states.txt", raw_ids=["47", "51", "52", "54", "55"]), ""),
                (SQUEUE + ["--jobs=47,51"], 0,
                 queue("squeue_final.txt", raw_ids=["47", "51", "52", "54", "55"]), "")],
         jobs=[("47_[3-100%2]", "CANCELLED", False, False, []), ("47_1", "CANCELLED", False, False, []),
               ("47_2", "CANCELLED", False, False, []), ("51+0", "COMPLETED", False, False, []),
               ("51+1", "COMPLETED", False, False, [])],
         steps={"47_1": ["batch"], "51+0": ["batch", "0"], "51+1": []}),
    dict(id="steps: false",
         args={"job_ids": ["44"], "steps": False},
         calls=[(SACCT + ["--jobs=44", "--allusers"], 0, accounting("sacct_states.txt", raw_ids=["44"]), ""),
                (SQUEUE + ["--jobs=44"], 0, queue("squeue_final.txt", raw_ids=["44"]), "")],
         jobs=[("44", "COMPLETED", False, False, [])], steps={"44": []}),
    dict(id="a cluster without accounting: squeue only, said so",
         args={"users": ["clusterops-alice"]},
         calls=[(SACCT + ["--user=clusterops-alice"],) + captured("sacct_accounting_disabled.txt"),
                (SQUEUE + ["--user=clusterops-alice"], 0, queue("squeue_final.txt", ["rec-alice"]), "")],
         jobs=[("53", "CANCELLED", False, False, [])], accounting=False),
    dict(id="accounting: false reads squeue only",
         args={"names": ["rec-timeout"], "accounting": False},
         calls=[(SQUEUE + ["--name=rec-timeout"], 0, queue("squeue_final.txt", ["rec-timeout"]), "")],
         jobs=[("40", "TIMEOUT", False, False, [])], accounting=False),
    dict(id="sacct fails otherwise: the task fails with its words",
         args={"users": ["nosuchuser-clusterops"]},
         calls=[(SACCT + ["--user=nosuchuser-clusterops"],) + captured("sacct_no_such_user.txt")],
         failed=True, msg_contains="sacct failed (rc=1) while trying to read job accounting: "
                                   "sacct: error: Invalid user id: nosuchuser-clusterops"),
    dict(id="one id the controller forgot: accounting answers, squeue's error is no error",
         args={"job_ids": ["44"]},
         calls=[(SACCT + ["--jobs=44", "--allusers"], 0, accounting("sacct_states.txt", raw_ids=["44"]), ""),
                (SQUEUE + ["--jobs=44"],) + captured("squeue_unknown_job.txt")],
         jobs=[("44", "COMPLETED", False, False, [])]),
    dict(id="time window passed to sacct as local time",
         args={"names": ["rec-done"], "start": "1796042000", "end": "1796042999"},
         calls=[(SACCT + ["--name=rec-done", "--allusers",
                          "--starttime=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(1796042000)),
                          "--endtime=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(1796042999))],
                 0, accounting("sacct_states.txt", ["rec-done"]), ""),
                (SQUEUE + ["--name=rec-done"], 0, queue("squeue_final.txt", ["rec-done"]), "")],
         jobs=[("41", "COMPLETED", False, False, [])]),
    dict(id="a job squeue lists but which ended before the window is left out",
         args={"names": ["rec-done"], "start": "1796043000"},
         calls=[(SACCT + ["--name=rec-done", "--allusers",
                          "--starttime=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(1796043000))],
                 0, "", ""),
                (SQUEUE + ["--name=rec-done"], 0, queue("squeue_final.txt", ["rec-done"]), "")],
         jobs=[]),
    dict(id="squeue cannot answer: the task fails",
         args={"names": ["x"]},
         calls=[(SACCT + ["--name=x", "--allusers"], 0, "", ""),
                (SQUEUE + ["--name=x"],) + captured("squeue_connect_failure.txt")],
         failed=True, msg_contains="Unable to contact slurm controller"),
    dict(id="24.11: the job Slurm requeued after its node died: PENDING, requeued, NODE_FAIL in history",
         args={"names": ["nsl-nf"]},
         calls=[(SACCT + ["--name=nsl-nf", "--allusers"], 0,
                 accounting("slurm-24.11/10-after-node-fail/sacct-product.out", ["nsl-nf"]), ""),
                (SQUEUE + ["--name=nsl-nf"], 0,
                 queue("slurm-24.11/10-after-node-fail/squeue-product.out", ["nsl-nf"]), "")],
         jobs=[("8", "PENDING", True, True, ["NODE_FAIL"])],
         fields={"8": dict(state_known=True, held=False, held_by=None, restart_count=1,
                           reason="BeginTime")}),
    dict(id="24.11: every kind of ended job, cancelled by its state (exit code 0:15 of squeue)",
         args={"names": ["nsl-cancel", "nsl-fail", "nsl-sig", "nsl-ok", "nsl-train"]},
         calls=[(SACCT + ["--name=nsl-cancel,nsl-fail,nsl-sig,nsl-ok,nsl-train", "--allusers"], 0,
                 accounting("slurm-24.11/08-jobs/sacct-product.out"), ""),
                (SQUEUE + ["--name=nsl-cancel,nsl-fail,nsl-sig,nsl-ok,nsl-train"], 0,
                 queue("slurm-24.11/08-jobs/squeue-product.out"), "")],
         jobs=[("1", "RUNNING", True, False, []), ("2", "COMPLETED", False, False, []),
               ("3", "FAILED", False, False, []), ("4", "FAILED", False, False, []),
               ("5", "CANCELLED", False, False, [])],
         fields={"5": dict(cancelled_by=0, exit_code=0, signal=15), "3": dict(exit_code=3, signal=0),
                 "4": dict(exit_code=0, signal=9), "1": dict(comment="clusterops-key=k1")}),
    dict(id="slurmdbd down: the task fails with sacct's words, squeue is not asked",
         args={"names": ["nsl-nf"]},
         calls=[(SACCT + ["--name=nsl-nf", "--allusers"], 1, "", SLURMDBD_DOWN)],
         failed=True, msg_contains="sacct failed (rc=1)"),
    dict(id="an error on stderr with rc 0 is a failure, not a shorter list",
         args={"names": ["nsl-nf"]},
         calls=[(SACCT + ["--name=nsl-nf", "--allusers"], 0,
                 accounting("slurm-24.11/10-after-node-fail/sacct-product.out", ["nsl-nf"]), SLURMDBD_DOWN)],
         failed=True, msg_contains="Problem talking to the database: Connection refused"),
    dict(id="squeue cut short: the task fails",
         args={"names": ["nsl-nf"]},
         calls=[(SACCT + ["--name=nsl-nf", "--allusers"], 0, "", ""),
                (SQUEUE + ["--name=nsl-nf"], 0,
                 queue("slurm-24.11/10-after-node-fail/squeue-product.out", ["nsl-nf"])[:-20], "")],
         failed=True, msg_contains="cut short"),
    # bytes that are not UTF-8 (a job name and comment typed in Latin-1), decoded by the command
    # layer as U+FFFD, in the recorded 24.11 answers
    dict(id="a Latin-1 job name and comment are listed with U+FFFD, never fatal",
         args={"job_ids": ["1"]},
         calls=[(SACCT + ["--jobs=1", "--allusers"], 0,
                 accounting("slurm-24.11/08-jobs/sacct-product.out", raw_ids=["1"]).replace(
                     "nsl-train", u"nsl-tr\ufffdin"), ""),
                (SQUEUE + ["--jobs=1"], 0,
                 queue("slurm-24.11/08-jobs/squeue-product.out", raw_ids=["1"]).replace(
                     "nsl-train", u"nsl-tr\ufffdin").replace("key=k1", u"key=k1 \ufffdt\ufffd"), "")],
         jobs=[("1", "RUNNING", True, False, [])],
         fields={"1": dict(name=u"nsl-tr\ufffdin", comment=u"clusterops-key=k1 \ufffdt\ufffd")}),
    dict(id="EXPEDITING is a valid states filter",
         args={"names": ["nsl-nf"], "states": ["EXPEDITING"]},
         calls=[(SACCT + ["--name=nsl-nf", "--allusers"], 0, "", ""),
                (SQUEUE + ["--name=nsl-nf"], 0,
                 queue("slurm-24.11/10-after-node-fail/squeue-product.out", ["nsl-nf"]), "")],
         jobs=[]),
    dict(id="a bad state name fails before any call",
         args={"states": ["RUN"]}, calls=[], failed=True, msg_contains="states: not a Slurm job state"),
    dict(id="a bad time fails before any call",
         args={"start": "yesterday"}, calls=[], failed=True, msg_contains="start: not a time"),
]


def _time_format_is_seconds(argv, kwargs):
    assert (kwargs.get("environ_update") or {}).get("SLURM_TIME_FORMAT") == "%s"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_slurm_job_info(case, run_module):
    result = run_module(slurm_job_info, case["args"], case["calls"], on_call=_time_format_is_seconds)
    assert bool(result.get("failed")) is case.get("failed", False), result
    assert result.get("changed") is False or result.get("failed")
    if "msg_contains" in case:
        assert case["msg_contains"] in result["msg"]
    if "jobs" in case:
        assert [(j["job_id"], j["state"], j["active"], j["requeued"], [h["state"] for h in j["history"]])
                for j in result["jobs"]] == case["jobs"]
    for job_id, fields in case.get("fields", {}).items():
        (job,) = [j for j in result["jobs"] if j["job_id"] == job_id]
        assert dict((k, job[k]) for k in fields) == fields, job_id
    for job_id, steps in case.get("steps", {}).items():
        (job,) = [j for j in result["jobs"] if j["job_id"] == job_id]
        assert [s["step_id"] for s in job["steps"]] == steps
    if "accounting" in case:
        assert result["accounting"] is case["accounting"]

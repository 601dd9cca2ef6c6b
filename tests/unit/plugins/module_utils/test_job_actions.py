# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""sbatch output and arguments, identity keys, and which jobs each action changes."""

from __future__ import annotations

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._job_actions import (
    SbatchOutputError,
    has_key,
    key_comment,
    plan_action,
    sbatch_environ,
    uncertain_failure,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._job_actions import (
    parse_sbatch_output,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SlurmCommandError


SBATCH_OUTPUTS = [
    ("plain", "Submitted batch job 60060368\n", "", (60060368, None)),
    ("on a cluster", "Submitted batch job 60060368 on cluster clusterA\n", "", (60060368, "clusterA")),
    ("--parsable with cluster", "75168975;clusterA\n", "", (75168975, "clusterA")),
    ("--parsable bare", "15786755\n", "", (15786755, None)),
    ("no newline", "15786755", "", (15786755, None)),
    ("wrapper lines before",
     "Checking quota for project ml-42... ok\nYou have 1234 GPU hours left\nSubmitted batch job 42\n",
     "", (42, None)),
    ("wrapper lines after (the last word is not the id)",
     "Submitted batch job 42\nJob 42 will be charged to account ml. Queue position: 17\n", "", (42, None)),
    ("parsable then a wrapper line", "4242\nsubmitted by wrapper v2.1 on 2026-03-01\n", "", (4242, None)),
    ("sbatch warnings on stderr", "4242\n",
     "sbatch: warning: can't honor --ntasks-per-node set to 8 which doesn't match the requested tasks 4\n",
     (4242, None)),
    ("wrapper prints the id only on stderr", "", "Submitted batch job 77\n", (77, None)),
    ("Submitted line wins over a bare number", "2026\nSubmitted batch job 42\n", "", (42, None)),
    ("same id twice", "Submitted batch job 42\nSubmitted batch job 42\n", "", (42, None)),
    ("windows line ends", "Submitted batch job 42\r\n", "", (42, None)),
]


@pytest.mark.parametrize("stdout, stderr, expected", [c[1:] for c in SBATCH_OUTPUTS],
                         ids=[c[0] for c in SBATCH_OUTPUTS])
def test_parse_sbatch_output(stdout, stderr, expected):
    assert parse_sbatch_output(stdout, stderr) == expected


@pytest.mark.parametrize("stdout, stderr", [
    ("", ""),
    ("sbatch: error: Batch job submission failed: Invalid partition name specified\n", ""),
    ("Your job will start soon\n", ""),
    ("Submitted batch job 42\nSubmitted batch job 43\n", ""),   # two ids: never guessed
    ("42\n43\n", ""),
    ("Submitted batch job\n", ""),
    ("Submitted batch job 42abc\n", ""),
    ("job 42 submitted\n", ""),   # a wrapper's own words: not sbatch's
    ("42;\n", ""),
], ids=["empty", "error text", "no id", "two Submitted", "two bare", "no number", "number+junk",
        "other words", "empty cluster"])
def test_parse_sbatch_output_refuses(stdout, stderr):
    with pytest.raises(SbatchOutputError):
        parse_sbatch_output(stdout, stderr)


@pytest.mark.parametrize("stderr, rc, uncertain", [
    ("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n", 1, True),
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n", 1, True),
    ("sbatch: error: slurm_receive_msg: Zero Bytes were transmitted or received\n", 1, True),
    ("", 124, True),
    ("sbatch: error: Batch job submission failed: Invalid partition name specified\n", 1, False),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available\n", 1, False),
])
def test_uncertain_failure(stderr, rc, uncertain):
    assert uncertain_failure(SlurmCommandError("x", ["sbatch"], rc, "", stderr)) is uncertain


def test_key_comment_and_match():
    assert key_comment(None, None) is None
    assert key_comment(None, "hello") == "hello"
    assert key_comment("run-1", None) == "clusterops-key=run-1"
    assert key_comment("run-1", "nightly eval") == "clusterops-key=run-1 nightly eval"
    job = {"comment": "clusterops-key=run-1 nightly eval"}
    assert has_key(job, "run-1") and has_key(job, None)
    assert not has_key(job, "run")          # whole word, never a prefix
    assert not has_key({"comment": "clusterops-key=run-10"}, "run-1")
    assert not has_key({"comment": None}, "run-1")


def test_sbatch_environ_keeps_values_out_of_argv(monkeypatch):
    monkeypatch.delenv("LC_ALL", raising=False)
    assert sbatch_environ({"A": "x, y=z", "N": 3}) == {"LC_ALL": "", "A": "x, y=z", "N": "3"}
    monkeypatch.setenv("LC_ALL", "en_US.UTF-8")
    assert sbatch_environ(None) == {"LC_ALL": "en_US.UTF-8"}


def job(job_id, state, reason="None", raw=None, array=None, submit=100, active=None):
    from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import parse_job_state
    parsed = parse_job_state(state)
    return {"job_id": job_id, "job_id_raw": raw or int(job_id.split("_")[0]), "array_job_id": array,
            "het_job_id": None, "state": parsed.base, "flags": sorted(parsed.flags),
            "state_raw": state, "active": parsed.active if active is None else active,
            "reason": "" if reason == "None" else reason, "submit_time": submit}


PLANS = [
    ("absent: running and pending cancelled in one call", "absent",
     [job("5", "RUNNING"), job("6", "PENDING")], ["5", "6"]),
    ("absent: completing is left to end", "absent", [job("5", "COMPLETING")], []),
    ("absent: finished jobs: nothing", "absent", [job("5", "COMPLETED"), job("6", "CANCELLED by 0")], []),
    ("absent: an array once, by its array id", "absent",
     [job("7_[3-9]", "PENDING", raw=7, array=7), job("7_1", "RUNNING", raw=8, array=7),
      job("7_2", "RUNNING", raw=9, array=7)], ["7"]),
    ("requeued: running is requeued", "requeued", [job("5", "RUNNING")], ["5"]),
    ("requeued: pending already", "requeued", [job("5", "PENDING", reason="BeginTime")], []),
    ("requeued: requeue hold is pending already", "requeued", [job("5", "REQUEUE_HOLD")], []),
    ("requeued: no active job: the newest finished one", "requeued",
     [job("5", "FAILED", submit=100), job("9", "NODE_FAIL", submit=200)], ["9"]),
    ("requeued: an active job wins over finished ones", "requeued",
     [job("5", "FAILED"), job("9", "PENDING")], []),
    ("held: pending not held", "held", [job("5", "PENDING", reason="Priority")], ["5"]),
    ("held: already held", "held", [job("5", "PENDING", reason="JobHeldAdmin")], []),
    ("held: a running job is held too (it keeps running)", "held",
     [job("5", "RUNNING"), job("6", "RUNNING", reason="JobHeldAdmin")], ["5"]),
    ("held: completing is left alone", "held", [job("5", "COMPLETING")], []),
    ("held: finished jobs are not held", "held", [job("5", "COMPLETED")], []),
    ("released: held ones only", "released",
     [job("5", "PENDING", reason="JobHeldUser"), job("6", "PENDING", reason="Resources"),
      job("7", "REQUEUE_HOLD", reason="JobHeldAdmin")], ["5", "7"]),
    ("released: nothing held", "released", [job("5", "RUNNING")], []),
]


@pytest.mark.parametrize("action, jobs, targets", [p[1:] for p in PLANS], ids=[p[0] for p in PLANS])
def test_plan_action(action, jobs, targets):
    plan = plan_action(jobs, action)
    assert plan["targets"] == targets
    assert plan["refused"] == {}


def test_plan_action_refuses_requeueing_a_completing_job():
    plan = plan_action([job("5", "COMPLETING")], "requeued")
    assert plan["targets"] == [] and list(plan["refused"]) == ["5"]
    assert "COMPLETING" in plan["refused"]["5"]


def test_plan_action_keeps_the_given_id():
    plan = plan_action([job("7_2", "RUNNING", raw=9, array=7)], "absent", job_id="7_2")
    assert plan["targets"] == ["7_2"]

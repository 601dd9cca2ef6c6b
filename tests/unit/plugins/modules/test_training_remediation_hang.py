# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""training_remediation's hang watchdog as data: a RUNNING job whose log has not moved for longer
than the run's hang_timeout is cancelled after its stacks are saved, then read, decided and
resubmitted once it ended (the decision ``then``); in check mode only the commands are said; a job
that does not end within hang_cancel_wait is left to the next run. Every Slurm command in the
records' formats (``_slurm_commands``), the clock fixed."""

from __future__ import annotations

import json
import os
import time

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _options, _slurm_commands
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import REC_END, SEP
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.evidence import EVIDENCE_SCRIPT
from ansible_collections.clusterops.slurm.plugins.modules import training_remediation

RUN = "rec-hang"
USER = "nobody"
RUNUSER = ["/usr/bin/runuser", "-u", USER, "--"]
HISTORY = "2026-11-01"
NOW = 1796050000
START = NOW - 1000
JOB = 70

pytestmark = pytest.mark.usefixtures("owner_calls_in_place")


def sacct_text(state, end="Unknown"):
    return SEP.join([str(JOB), str(JOB), "devcluster", USER, "debug", state, "0:0", "None", "n1",
                     str(START - 5), str(START), end, RUN]) + "\n"


def squeue_text(state):
    return SEP.join([str(JOB), str(JOB), RUN, USER, state, "None", "0", "n1", str(START - 5), str(START),
                     str(NOW + 3600), "0", "debug", "devcluster", "(null)"]) + REC_END + "\n"


def read_calls(sacct, squeue):
    start = _options.parse_time_option(HISTORY)
    return [(["/usr/bin/sacct"] + _slurm_commands.accounting(names=[RUN], users=[USER], start=start)[1], 0, sacct, ""),
            (["/usr/bin/squeue"] + _slurm_commands.queue(names=[RUN], users=[USER])[1], 0, squeue, "")]


def job_queue(state):
    return (["/usr/bin/squeue"] + _slurm_commands.queue(job_ids=[str(JOB)])[1], 0, squeue_text(state), "")


def evidence_call():
    argv = _slurm_commands.stack_collection(JOB, 1, EVIDENCE_SCRIPT, ["clusterops-evidence", str(JOB), "py-spy"])[1]
    return (RUNUSER + ["/usr/bin/srun"] + argv, 0, "0: === node n1: 1 rank(s)\n", "")


def registry(tmp_path):
    folder = tmp_path / "runs" / RUN
    folder.mkdir(parents=True)
    (tmp_path / "logs").mkdir()
    (folder / "launcher.sbatch").write_text("#!/bin/bash\n")
    (folder / training_registry.RUN_FILE).write_text(json.dumps({
        "format": training_registry.RUN_FORMAT, "format_version": 1, "name": RUN, "owner": USER,
        "launcher": str(folder / "launcher.sbatch"), "checkpoint_dir": str(tmp_path / "ckpt"),
        "log_dir": str(tmp_path / "logs"), "hang_timeout": 60, "max_resubmissions": 2}))
    return str(tmp_path / "runs"), folder


@pytest.fixture
def clock(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: NOW)


def test_check_mode_says_the_evidence_and_the_cancel_and_runs_neither(run_module, tmp_path, clock):
    reg, folder = registry(tmp_path)
    result = run_module(training_remediation, {"registry": reg, "history": HISTORY, "_ansible_check_mode": True,
                                               "_ansible_diff": True},
                        read_calls(sacct_text("RUNNING"), squeue_text("RUNNING")))
    (run,) = result["runs"]
    assert (run["action"], run["status"], run["hang"]["idle"]) == ("cancel_hung", "hung", 1000)
    assert run["command"] == ["/usr/bin/scancel", str(JOB)] and run["evidence_command"][0] == "/usr/bin/srun"
    assert "evidence" not in run and "then" not in run
    assert result["hung"] == [RUN] and result["changed"] is True
    assert result["diff"]["after"][RUN] == "would collect stacks and cancel the hung job"


def test_a_hung_job_is_cancelled_after_its_stacks_then_resubmitted(run_module, tmp_path, clock):
    reg, folder = registry(tmp_path)
    launcher = str(folder / "launcher.sbatch")
    result = run_module(training_remediation, {"registry": reg, "history": HISTORY, "retry_delay": 0, "_ansible_diff": True},
                        read_calls(sacct_text("RUNNING"), squeue_text("RUNNING")) + [
                            evidence_call(),
                            (["/usr/bin/scancel", str(JOB)], 0, "", ""),
                            job_queue("CANCELLED")] +
                        read_calls(sacct_text("CANCELLED", str(NOW)), squeue_text("CANCELLED")) + [
                            (RUNUSER + ["/usr/bin/sbatch", launcher], 0, "Submitted batch job 71\n", "")])
    (run,) = result["runs"]
    assert (run["action"], run["status"]) == ("cancel_hung", "hung")
    assert run["evidence"] == str(tmp_path / "logs" / ("hang-70-%s.txt" % time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(NOW))))
    assert "1 rank(s)" in open(run["evidence"]).read()
    then = run["then"]
    assert (then["action"], then["job_id"], then["needs_human"]) == ("resubmit", 71, False)
    assert then["reason"].startswith("job 70 hung and remediation cancelled it")
    assert result["resubmitted"] == [RUN] and result["hung"] == [RUN] and result["changed"] is True
    assert result["diff"]["after"][RUN] == "cancelled the hung job; resubmit"
    state = training_registry.read_state(str(folder))
    assert [(c["job_id"], c["idle"]) for c in state["hang_cancels"]] == [(JOB, 1000)]
    assert [(r["job_id"], r["after_state"]) for r in state["resubmissions"]] == [(71, "HUNG")]


def test_a_job_that_does_not_end_in_time_is_left_to_the_next_run(run_module, tmp_path, clock):
    reg, folder = registry(tmp_path)
    result = run_module(training_remediation, {"registry": reg, "history": HISTORY, "hang_cancel_wait": 0},
                        read_calls(sacct_text("RUNNING"), squeue_text("RUNNING")) + [
                            evidence_call(), (["/usr/bin/scancel", str(JOB)], 0, "", ""), job_queue("RUNNING")])
    (run,) = result["runs"]
    assert "then" not in run and run["evidence"] and run["error"] is None
    assert result["report"] == ["%s: hung, newest valid step none -> cancel_hung (evidence %s): %s" % (
        RUN, run["evidence"], run["reason"])]
    assert os.path.isfile(run["evidence"])

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""training_remediation as data: a real registry folder on disk, and every Slurm command with the
output recorded on the dev cluster (a 2-node job, 58 ``rec-node-fail-2n``, that ended NODE_FAIL
when one of its nodes lost power)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _options, _slurm_commands
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry
from ansible_collections.clusterops.slurm.plugins.modules import training_remediation

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "devcluster")
RUN = "rec-node-fail-2n"
HISTORY = "2026-11-01"
#: The runs' owner: a user on every Debian host that is not root (remediation refuses runs of root).
USER = "nobody"
RUNUSER = ["/usr/bin/runuser", "-u", USER, "--"]

pytestmark = pytest.mark.usefixtures("owner_calls_in_place")


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def sacct_call(user, text):
    start = _options.parse_time_option(HISTORY)
    argv = ["/usr/bin/sacct"] + _slurm_commands.accounting(names=[RUN], users=[user], start=start)[1]
    return (argv, 0, text, "")


def squeue_call(user):
    return (["/usr/bin/squeue"] + _slurm_commands.queue(names=[RUN], users=[user])[1], 0, "", "")


def registry(tmp_path, owner=USER):
    folder = tmp_path / "runs" / RUN
    folder.mkdir(parents=True)
    (folder / "launcher.sbatch").write_text("#!/bin/bash\n")
    (folder / training_registry.RUN_FILE).write_text(json.dumps({
        "format": training_registry.RUN_FORMAT, "format_version": 1, "name": RUN, "owner": owner,
        "launcher": str(folder / "launcher.sbatch"), "checkpoint_dir": str(tmp_path / "ckpt"),
        "max_resubmissions": 2, "no_progress_limit": 2}))
    return str(tmp_path / "runs"), folder


def args(reg, **kw):
    return dict({"registry": reg, "history": HISTORY, "retry_delay": 0}, **kw)


def as_user(text, user):
    """Recorded sacct text (jobs of root) as if ``user`` had submitted them."""
    return text.replace(_slurm_commands.SEP + "root" + _slurm_commands.SEP, _slurm_commands.SEP + user + _slurm_commands.SEP)


SACCT = as_user(recorded("sacct_node_fail_requeued.txt"), USER)


def test_check_mode_plans_the_resubmission_and_runs_only_sacct_and_squeue(run_module, tmp_path):
    reg, folder = registry(tmp_path)
    result = run_module(training_remediation, dict(args(reg), _ansible_check_mode=True, _ansible_diff=True),
                        [sacct_call(USER, SACCT), squeue_call(USER)])
    (run,) = result["runs"]
    assert result["changed"] is True and result["resubmitted"] == [RUN]
    assert (run["action"], run["status"], run["step"]) == ("resubmit", "failed", None)
    assert run["reason"] == "job 58 ended NODE_FAIL; resubmission 1 of 2, start from scratch (no checkpoint yet)"
    assert run["command"] == RUNUSER + ["/usr/bin/sbatch", str(folder / "launcher.sbatch")]
    assert not [c for c in result["commands"] if "sbatch" in c[0]]
    assert sorted(os.listdir(str(folder))) == ["launcher.sbatch", "run.json"]  # no state, no lock
    assert result["diff"]["before"][RUN] == "failed (job 58 NODE_FAIL)"
    assert result["diff"]["after"][RUN] == "would resubmit"
    assert result["report"] == [RUN + ": failed, newest valid step none -> resubmit (check mode): " + run["reason"]]


def test_resubmits_once_then_never_again_after_the_same_job(run_module, tmp_path):
    reg, folder = registry(tmp_path)
    launcher = str(folder / "launcher.sbatch")
    result = run_module(training_remediation, args(reg), [
        sacct_call(USER, SACCT), squeue_call(USER),
        (RUNUSER + ["/usr/bin/sbatch", launcher], 0, "Submitted batch job 99\n", "")])
    assert result["changed"] is True and result["runs"][0]["job_id"] == 99
    state = training_registry.read_state(str(folder))
    assert [(r["job_id"], r["after_job"], r["after_state"], r["step"]) for r in state["resubmissions"]] == [
        (99, 58, "NODE_FAIL", None)]
    # The next run still sees job 58 last (99 not visible yet): it must not submit again.
    again = run_module(training_remediation, args(reg), [sacct_call(USER, SACCT), squeue_call(USER)])
    (run,) = again["runs"]
    assert again["changed"] is False and (run["action"], run["status"]) == ("none", "lost")
    assert run["needs_human"] and again["needs_human"] == [{"run": RUN, "why": run["reason"], "next": (
        "next: look the job up (sacct -j <job>); the next run reports the run once the job shows up "
        "(docs/training-remediation.md#runbook-needs-a-human)")}]
    assert "was already resubmitted (as job 99)" in run["reason"]


def test_submits_as_the_runs_owner(run_module, tmp_path):
    reg, folder = registry(tmp_path, owner="daemon")
    theirs = as_user(recorded("sacct_node_fail_requeued.txt"), "daemon")
    result = run_module(training_remediation, args(reg), [
        sacct_call("daemon", theirs), squeue_call("daemon"),
        (["/usr/bin/runuser", "-u", "daemon", "--", "/usr/bin/sbatch", str(folder / "launcher.sbatch")],
         0, "Submitted batch job 100\n", "")])
    assert result["runs"][0]["job_id"] == 100 and result["resubmitted"] == [RUN]


def test_a_held_lock_leaves_the_runs_alone(run_module, tmp_path):
    reg, dummy = registry(tmp_path)
    lock = training_registry.RegistryLock(reg)
    assert lock.acquire()
    try:
        result = run_module(training_remediation, args(reg, lock_timeout=0), [])
    finally:
        lock.release()
    assert result["locked"] is True and result["changed"] is False and result["runs"] == []


def test_a_broken_registry_entry_is_reported_not_fatal(run_module, tmp_path):
    reg, dummy = registry(tmp_path)
    bad = tmp_path / "runs" / "broken"
    bad.mkdir()
    (bad / training_registry.RUN_FILE).write_text("{")
    result = run_module(training_remediation, dict(args(reg), _ansible_check_mode=True),
                        [sacct_call(USER, SACCT), squeue_call(USER)])
    assert [i["run"] for i in result["needs_human"]] == ["broken"] and result["resubmitted"] == [RUN]
    assert result["needs_human"][0]["why"].startswith("registry entry unusable: ")
    assert "run.json is not valid JSON" in result["needs_human"][0]["why"]
    assert result["report"][-1].startswith("broken: registry entry unusable")


# What sacct prints when slurmdbd cannot be reached (src/sacct/options.c: "Problem talking to
# the database: %m", exit 1, after the persistent connection's own errors).
SLURMDBD_DOWN = ("sacct: error: slurm_persist_conn_open_without_init: failed to open persistent "
                 "connection to host:ctl:6819: Connection refused\n"
                 "sacct: error: Sending PersistInit msg: Connection refused\n"
                 "sacct: error: Problem talking to the database: Connection refused\n")


def _captured(name):
    text = recorded(name)
    head, dummy, rest = text.partition("# stdout:\n")
    stdout, dummy, stderr = rest.partition("# stderr:\n")
    return int(head.split("# rc: ", 1)[1].splitlines()[0]), stdout, stderr


def _failed(run_module, reg, calls, expect):
    result = run_module(training_remediation, args(reg), calls)
    assert result["failed"] is True and expect in result["msg"]
    assert not [c for c in result["commands"] if c[0].endswith("sbatch")]
    assert result["runs"] == [], "a failure reports the runs decided so far (none: the read failed)"
    return result


def test_slurmdbd_down_fails_and_resubmits_nothing(run_module, tmp_path):
    reg, folder = registry(tmp_path)
    sacct = sacct_call(USER, "")
    for rc in (1, 0):   # whatever sacct's exit status, an error on stderr is not "no jobs"
        _failed(run_module, reg, [(sacct[0], rc, "", SLURMDBD_DOWN)], "Connection refused")
    assert not os.path.exists(str(folder / training_registry.STATE_FILE))


def test_controller_unreachable_fails_and_resubmits_nothing(run_module, tmp_path):
    reg, folder = registry(tmp_path)
    rc, out, err = _captured("squeue_connect_failure.txt")     # recorded, rc 1
    squeue = squeue_call(USER)
    _failed(run_module, reg, [sacct_call(USER, SACCT), (squeue[0], rc, out, err)],
            "Unable to contact slurm controller")
    # the same words with rc 0
    _failed(run_module, reg, [sacct_call(USER, SACCT), (squeue[0], 0, "", err)],
            "Unable to contact slurm controller")
    assert not os.path.exists(str(folder / training_registry.STATE_FILE))


def test_accounting_cut_short_fails_and_resubmits_nothing(run_module, tmp_path):
    reg, folder = registry(tmp_path)
    _failed(run_module, reg, [sacct_call(USER, SACCT[:-7])], "cut short")
    assert not os.path.exists(str(folder / training_registry.STATE_FILE))


def test_a_registry_that_is_not_there_is_said_not_silent(run_module, tmp_path):
    """Issue 37: an HA backup host without the shared registry's mount would restart nothing, silently."""
    result = run_module(training_remediation, args(str(tmp_path / "not-mounted")), [])
    assert not result.get("failed") and result["runs"] == []
    assert "does not exist on this host" in result["report"][0]  # and a warning (module.warn)
    os.makedirs(os.path.join(str(tmp_path), "empty"))
    quiet = run_module(training_remediation, args(os.path.join(str(tmp_path), "empty")), [])
    assert quiet["report"] == []

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""training_remediation's suspect nodes as data: a registry on disk, every Slurm command expected in
order (sacct text in the module's format, ``sinfo --json`` recorded on the dev cluster)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _options, _slurm_commands
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry
from ansible_collections.clusterops.slurm.plugins.modules import training_remediation

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "devcluster")
RUN = "llama"
HISTORY = "2026-11-01"
REASON = "clusterops: suspect: run llama failed on it (jobs 11,12)"
#: The run's owner (not root: remediation refuses runs of root); sbatch runs through runuser.
USER = "nobody"
RUNUSER = ["/usr/bin/runuser", "-u", USER, "--"]
pytestmark = pytest.mark.usefixtures("owner_calls_in_place")
VERSION_2205 = (["/usr/bin/sinfo", "--version"], 0, "slurm-wlm 22.05.8\n", "")


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def sacct_text(*rows):
    lines = []
    for i, (job_id, state, node_list) in enumerate(rows):
        submit = 1796040000 + 60 * i
        lines.append(_slurm_commands.SEP.join([job_id, job_id, "devcluster", USER, "debug", state, "1:0", "None",
                                               node_list, str(submit), str(submit + 1), str(submit + 30), RUN]))
    return "".join(line + "\n" for line in lines)


TWO_FAILED_ON_N3 = sacct_text(("11", "FAILED", "n3"), ("12", "NODE_FAIL", "n[3-4]"))


def reads(text):
    start = _options.parse_time_option(HISTORY)
    return [(["/usr/bin/sacct"] + _slurm_commands.accounting(names=[RUN], users=[USER], start=start)[1], 0, text, ""),
            (["/usr/bin/squeue"] + _slurm_commands.queue(names=[RUN], users=[USER])[1], 0, "", "")]


def registry(tmp_path, **spec):
    folder = tmp_path / "runs" / RUN
    folder.mkdir(parents=True)
    (folder / "launcher.sbatch").write_text("#!/bin/bash\n")
    (folder / training_registry.RUN_FILE).write_text(json.dumps(dict({
        "format": training_registry.RUN_FORMAT, "format_version": 1, "name": RUN, "owner": USER,
        "launcher": str(folder / "launcher.sbatch"), "checkpoint_dir": str(tmp_path / "ckpt")}, **spec)))
    return str(tmp_path / "runs"), str(folder / "launcher.sbatch")


def args(reg, **kw):
    return dict({"registry": reg, "history": HISTORY, "retry_delay": 0}, **kw)


def test_check_mode_reports_the_drain_and_the_exclude_and_runs_neither(run_module, tmp_path):
    reg, launcher = registry(tmp_path)
    result = run_module(training_remediation, dict(args(reg), _ansible_check_mode=True),
                        reads(TWO_FAILED_ON_N3) + [VERSION_2205,
                                                   (["/usr/bin/sinfo", "--json"], 0,
                                                    recorded("sinfo_json_all_idle.json"), "")])
    (run,) = result["runs"]
    assert run["command"] == RUNUSER + ["/usr/bin/sbatch", "--exclude=n3", launcher]
    assert (run["suspects"], run["exclude"]) == (["n3"], "n3")
    assert result["suspect_commands"] == [["/usr/bin/scontrol", "update", "NodeName=n3", "State=DRAIN",
                                           "Reason=" + REASON]]
    assert [(s["node"], s["action"], s["jobs"]) for s in result["suspects"]] == [("n3", "drain", ["11", "12"])]
    assert not [c for c in result["commands"] if "scontrol" in c[0] or "sbatch" in c[0]]
    assert result["changed"] is True
    assert result["report"][-1] == ("suspect node n3: run llama failed on it (jobs 11,12) -> would drain it "
                                    "(was IDLE) - next: test the node (run a job on it alone, or its health check), "
                                    "repair, then scontrol update NodeName=n3 State=RESUME "
                                    "(docs/training-remediation.md#suspect-nodes) [needs a human]")


def test_drains_in_one_call_then_resubmits_excluding_the_node(run_module, tmp_path):
    reg, launcher = registry(tmp_path)
    result = run_module(training_remediation, args(reg, suspect_drain_limit=2), reads(TWO_FAILED_ON_N3) + [
        VERSION_2205, (["/usr/bin/sinfo", "--json"], 0, recorded("sinfo_json_all_idle.json"), ""),
        (["/usr/bin/scontrol", "update", "NodeName=n3", "State=DRAIN", "Reason=" + REASON], 0, "", ""),
        (RUNUSER + ["/usr/bin/sbatch", "--exclude=n3", launcher], 0, "Submitted batch job 13\n", "")])
    assert result["changed"] is True and result["runs"][0]["job_id"] == 13
    assert result["suspects"][0]["action"] == "drain"


def test_an_already_drained_node_is_excluded_not_drained_again(run_module, tmp_path):
    # n3 is drained by an admin (sinfo_json_drained_n3): no scontrol, its reason stays.
    reg, launcher = registry(tmp_path)
    result = run_module(training_remediation, args(reg), reads(TWO_FAILED_ON_N3) + [
        VERSION_2205, (["/usr/bin/sinfo", "--json"], 0, recorded("sinfo_json_drained_n3.json"), ""),
        (RUNUSER + ["/usr/bin/sbatch", "--exclude=n3", launcher], 0, "Submitted batch job 13\n", "")])
    assert result["suspects"][0]["action"] == "already" and result["suspect_commands"] == []


def test_opted_out_globally_or_per_run_reads_no_node_and_excludes_nothing(run_module, tmp_path):
    reg, launcher = registry(tmp_path)
    result = run_module(training_remediation, args(reg, suspect_nodes=False), reads(TWO_FAILED_ON_N3) + [
        (RUNUSER + ["/usr/bin/sbatch", launcher], 0, "Submitted batch job 13\n", "")])
    assert result["suspects"] == [] and result["runs"][0]["exclude"] is None
    other = tmp_path / "other"
    other.mkdir()
    reg, launcher = registry(other, suspect_nodes=False)
    result = run_module(training_remediation, args(reg), reads(TWO_FAILED_ON_N3) + [
        (RUNUSER + ["/usr/bin/sbatch", launcher], 0, "Submitted batch job 13\n", "")])
    assert result["suspects"] == []


def test_a_run_not_failing_now_reads_no_node_and_drains_nothing(run_module, tmp_path):
    # After the resubmission a newer job 13 is the run's last: the decision is not resubmit or
    # stop, so the old failures are not looked at again (no sinfo, no scontrol).
    reg, launcher = registry(tmp_path)
    running = TWO_FAILED_ON_N3 + sacct_text(("11", "FAILED", "n3"), ("12", "FAILED", "n3"),
                                            ("13", "RUNNING", "n1")).splitlines(True)[2]
    result = run_module(training_remediation, args(reg), reads(running))
    assert result["changed"] is False and result["suspects"] == [] and result["suspect_commands"] == []
    assert result["runs"][0]["action"] == "none"


def test_a_refused_drain_reads_the_nodes_again_and_reports_the_node_it_did_not_reach(run_module, tmp_path):
    # The drain goes through _node_actions.apply_node_changes: Slurm refuses it, the nodes are read
    # once more, n3 is still not drained: reported as drain FAILED with Slurm's words, not changed.
    reg, launcher = registry(tmp_path)
    result = run_module(training_remediation, args(reg, suspect_drain_limit=2), reads(TWO_FAILED_ON_N3) + [
        VERSION_2205, (["/usr/bin/sinfo", "--json"], 0, recorded("sinfo_json_all_idle.json"), ""),
        (["/usr/bin/scontrol", "update", "NodeName=n3", "State=DRAIN", "Reason=" + REASON], 1, "",
         "slurm_update error: Access/permission denied\n"),
        (["/usr/bin/sinfo", "--json"], 0, recorded("sinfo_json_all_idle.json"), ""),
        (RUNUSER + ["/usr/bin/sbatch", "--exclude=n3", launcher], 0, "Submitted batch job 13\n", "")])
    (suspect,) = result["suspects"]
    assert suspect["action"] == "drain_failed" and "Access/permission denied" in suspect["error"]
    assert result["suspect_commands"] == [["/usr/bin/scontrol", "update", "NodeName=n3", "State=DRAIN",
                                           "Reason=" + REASON]]
    assert any("drain FAILED" in line and "Access/permission denied" in line for line in result["report"])

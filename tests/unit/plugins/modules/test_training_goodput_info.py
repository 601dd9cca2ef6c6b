# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""training_goodput_info as data: a real registry folder, run folder, event log and state.json on
disk, and the Slurm reads answered with the outputs recorded on the dev cluster (22.05): job 58
``rec-node-fail-2n`` ran 1796042281-1796042309 on n[2-3], ended NODE_FAIL when n2 lost power and
Slurm requeued it (PENDING again, submit time 1796042312)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck
from ansible_collections.clusterops.slurm.plugins.module_utils import _options, _slurm_commands
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry
from ansible_collections.clusterops.slurm.plugins.modules import training_goodput_info

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "devcluster")
RUN = "rec-node-fail-2n"
HISTORY = "2026-11-01"
USER = "nobody"
END = 1796042309         # sacct End of the NODE_FAIL run
REQUEUED = 1796042312    # its new submit time (squeue)

pytestmark = pytest.mark.usefixtures("owner_calls_in_place")


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def as_user(text, user=USER):
    sep = _slurm_commands.SEP
    return text.replace(sep + "root" + sep, sep + user + sep)


def calls(sacct=None, squeue=None, sacct_rc=0, sacct_err=""):
    start = _options.parse_time_option(HISTORY)
    return [
        (["/usr/bin/sacct"] + _slurm_commands.accounting(names=[RUN], users=[USER], start=start)[1], sacct_rc,
         as_user(recorded("sacct_node_fail_requeued.txt")) if sacct is None else sacct, sacct_err),
        (["/usr/bin/squeue"] + _slurm_commands.queue(names=[RUN], users=[USER])[1], 0,
         as_user(recorded("squeue_node_fail_requeued.txt")) if squeue is None else squeue, ""),
    ]


def registry(tmp_path, state=None, events=None, checkpoint_step=None):
    folder = tmp_path / "runs" / RUN
    folder.mkdir(parents=True)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (folder / "launcher.sbatch").write_text("#!/bin/bash\n")
    (folder / training_registry.RUN_FILE).write_text(json.dumps({
        "format": training_registry.RUN_FORMAT, "format_version": 1, "name": RUN, "owner": USER,
        "launcher": str(folder / "launcher.sbatch"), "checkpoint_dir": str(ckpt)}))
    if state is not None:
        data = training_registry.empty_state()
        data.update(state)
        (folder / training_registry.STATE_FILE).write_text(json.dumps(data))
    if events is not None:
        (ckpt / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events) + '{"event": "st')
    if checkpoint_step is not None:
        path = ck.write_checkpoint(str(ckpt), checkpoint_step, 0, {"model.bin": b"x" * 16}, fsync=False)
        os.utime(path, (END - 10, END - 10))
    return str(tmp_path / "runs")


def args(reg, **kw):
    return dict({"registry": reg, "history": HISTORY}, **kw)


def test_a_recorded_node_failure_with_the_trainers_event_log(run_module, tmp_path):
    events = [{"event": "start", "step": 0, "time": 1796042282.0}] + [
        {"event": "step", "step": s, "time": 1796042283.0 + 3 * s} for s in range(1, 8)]
    reg = registry(tmp_path, events=events, checkpoint_step=5)
    result = run_module(training_goodput_info, dict(args(reg, event_log="events.jsonl"), _ansible_check_mode=True),
                        calls())
    assert result["changed"] is False and result["accounting"] is True and result["errors"] == []
    assert [c[0] for c in result["commands"]] == ["/usr/bin/sacct", "/usr/bin/squeue"]
    (run,) = result["runs"]
    assert (run["name"], run["owner"], run["finished"], run["active"]) == (RUN, USER, False, True)
    assert run["restarts"] == 1 and run["restarts_by_cause"]["node_failure"] == 1
    (item,) = run["failures"]
    assert (item["job_id"], item["state"], item["restarted_by"]) == ("58", "NODE_FAIL", "slurm")
    assert (item["reached_step"], item["reached_source"]) == (7, "events")     # step 7 at ...304
    assert item["detection"] == END - 1796042304.0
    assert (item["waiting_for_remediation"], item["remediation"]) == (0.0, float(REQUEUED - END))
    assert run["first_submit"] == 1796042276 and run["running_time"] == float(END - 1796042281)
    assert run["node_seconds"] == 2.0 * (END - 1796042281)
    # pending again: resumes from the newest checkpoint once it starts, unknown before
    assert item["resumed_step"] is None and run["steps_lost"] is None
    # the timeline of the report: the event log's curve (the cut last line skipped), the checkpoint
    # (step 5, its mtime) and no remediation action (Slurm requeued it)
    assert run["timeline"]["progress"] == [[e["time"], e["step"]] for e in events]
    assert run["timeline"]["checkpoints"] == [{"step": 5, "time": float(END - 10)}]
    assert run["timeline"]["actions"] == []


def test_a_resubmission_recorded_in_state_json_and_no_event_log(run_module, tmp_path):
    reg = registry(tmp_path, state={"resubmissions": [
        {"time": REQUEUED + 1, "job_id": 58, "after_job": 57, "after_state": "NODE_FAIL", "step": 3}]})
    result = run_module(training_goodput_info, args(reg), calls())
    (run,) = result["runs"]
    figures = [u["figure"] for u in run["unknown"]]
    assert "events" in figures and "wall_time" in figures     # job 57 is not this run's (another name)
    assert run["failures"][0]["reached_step"] is None
    assert run["timeline"]["progress"] is None      # no event log: no curve
    assert run["timeline"]["actions"] == [{"action": "resubmit", "time": float(REQUEUED + 1), "job_id": 58,
                                           "step": 3, "after_job": 57, "after_state": "NODE_FAIL", "idle": None}]


def test_no_accounting_reads_the_controller_only(run_module, tmp_path):
    reg = registry(tmp_path)
    result = run_module(training_goodput_info, args(reg), calls(
        sacct="", sacct_rc=1, sacct_err="sacct: error: Slurm accounting storage is disabled\n"))
    (run,) = result["runs"]
    assert result["accounting"] is False and run["accounting"] is False
    assert run["unknown"][0]["figure"] == "jobs"
    assert run["restarts"] == 0 and run["queued_time"] is not None


def test_unreadable_state_json_is_reported_for_that_run(run_module, tmp_path):
    reg = registry(tmp_path)
    (tmp_path / "runs" / RUN / training_registry.STATE_FILE).write_text("{")
    result = run_module(training_goodput_info, args(reg), calls())
    (run,) = result["runs"]
    assert run["unknown"][0]["figure"] == "state" and "not valid JSON" in run["unknown"][0]["why"]


def test_an_unusable_registry_entry_and_no_run(run_module, tmp_path):
    bad = tmp_path / "runs" / "broken"
    bad.mkdir(parents=True)
    (bad / training_registry.RUN_FILE).write_text("{")
    result = run_module(training_goodput_info, args(str(tmp_path / "runs")), [])
    assert result["runs"] == [] and [e["name"] for e in result["errors"]] == ["broken"]
    assert result["accounting"] is None and result["commands"] == []


def test_a_bad_history_fails_before_any_call(run_module, tmp_path):
    reg = registry(tmp_path)
    result = run_module(training_goodput_info, args(reg, history="yesterday-ish"), [])
    assert result["failed"] is True and result["msg"].startswith("history: ")


def test_slurmdbd_down_fails(run_module, tmp_path):
    reg = registry(tmp_path)
    result = run_module(training_goodput_info, args(reg), calls(
        sacct="", sacct_rc=1, sacct_err="sacct: error: Problem talking to the database: Connection refused\n")[:1])
    assert result["failed"] is True and "Connection refused" in result["msg"]


def test_the_requeued_run_resumed_from_the_newest_checkpoint_before_its_start(run_module, tmp_path):
    """The recorded squeue answer, with 58's requeued run started at 1796042320 on n[3-4]: with
    no start event of it in the event log, the step it resumed from is the newest checkpoint
    written before that start (step 5, written at END - 10)."""
    sep = _slurm_commands.SEP
    squeue = as_user(recorded("squeue_node_fail_requeued.txt")).replace(
        sep.join(["PENDING", "BeginTime", "0", "", "1796042312", "1796042433"]),
        sep.join(["RUNNING", "None", "0", "n[3-4]", "1796042312", "1796042320"]))
    events = [{"event": "step", "step": s, "time": 1796042283.0 + 3 * s} for s in range(1, 8)]
    reg = registry(tmp_path, events=events, checkpoint_step=5)
    result = run_module(training_goodput_info, args(reg, event_log="events.jsonl"), calls(squeue=squeue))
    (item,) = result["runs"][0]["failures"]
    assert (item["resumed_step"], item["resumed_source"], item["steps_lost"]) == (5, "checkpoints", 2)
    assert item["end_to_start"] == 1796042320 - END and item["queue"] == 8.0


@pytest.mark.parametrize("record, problem", [
    ({"event": "step", "step": 10 ** 400, "time": 1796042290.0}, "is not an integer of 0 to 2**53"),
    ({"event": "step", "step": 2 ** 53 + 1, "time": 1796042290.0}, "is not an integer of 0 to 2**53"),
    ({"event": "step", "step": -5, "time": 1796042290.0}, "is not an integer of 0 to 2**53"),
    ({"event": "step", "step": True, "time": 1796042290.0}, "is not an integer of 0 to 2**53"),
    ({"event": "save", "step": "5", "time": 1796042290.0}, "is not an integer of 0 to 2**53"),
    ({"event": "step", "step": 5, "time": 10 ** 400}, "is not a number of seconds"),
    ({"event": "step", "step": 5, "time": -1.0}, "is not a number of seconds"),
    ({"event": "start", "step": 5, "time": "1796042290"}, "is not a number of seconds"),
], ids=["step-10e400", "step-over-2e53", "step-negative", "step-bool", "step-string", "time-10e400",
        "time-negative", "time-string"])
def test_a_number_out_of_range_in_the_users_event_log_leaves_its_figures_unknown(run_module, tmp_path, record,
                                                                                 problem):
    """Issue 38, part 3: the event log is the user's; a step or time out of range (here after 7 good
    records) is never read in part and never an exception: the run's figures from the log are unknown,
    the reason names the file, the line and the value; what Slurm and the checkpoints say remains."""
    events = [{"event": "step", "step": s, "time": 1796042283.0 + 3 * s} for s in range(1, 8)] + [record]
    reg = registry(tmp_path, events=events, checkpoint_step=5)
    result = run_module(training_goodput_info, args(reg, event_log="events.jsonl"), calls())
    assert "failed" not in result, result
    (run,) = result["runs"]
    item = [u for u in run["unknown"] if u["figure"] == "events"][0]   # the reason first, then the figures it leaves
    assert "events.jsonl line 8: " in item["why"] and problem in item["why"], run["unknown"]
    assert run["timeline"]["progress"] is None and run["restarts"] == 1
    assert run["failures"][0]["reached_step"] is None
    assert run["timeline"]["checkpoints"] == [{"step": 5, "time": float(END - 10)}]


def test_one_runs_fault_is_that_runs_own(run_module, tmp_path, monkeypatch):
    """Issue 38, part 3: the goodput module has remediation's per-run boundary. A run whose figures
    cannot be computed (here a fault inside the computation, as an unforeseen value would raise) gets
    every figure unknown and the reason; the other runs are reported, and the module does not fail."""
    from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import goodput_runner
    reg = registry(tmp_path, checkpoint_step=5)
    other = tmp_path / "runs" / "zz-second"
    other.mkdir()
    entry = json.loads((tmp_path / "runs" / RUN / training_registry.RUN_FILE).read_text())
    entry["name"] = "zz-second"
    (other / training_registry.RUN_FILE).write_text(json.dumps(entry))
    real = goodput_runner.run_goodput

    def faulty(run, *rest):
        if run["name"] == RUN:
            raise OverflowError("int too large to convert to float")
        return real(run, *rest)
    monkeypatch.setattr(goodput_runner, "run_goodput", faulty)
    start = _options.parse_time_option(HISTORY)
    both = [RUN, "zz-second"]
    result = run_module(training_goodput_info, args(reg), [
        (["/usr/bin/sacct"] + _slurm_commands.accounting(names=both, users=[USER], start=start)[1], 0,
         as_user(recorded("sacct_node_fail_requeued.txt")), ""),
        (["/usr/bin/squeue"] + _slurm_commands.queue(names=both, users=[USER])[1], 0,
         as_user(recorded("squeue_node_fail_requeued.txt")), "")])
    assert "failed" not in result, result
    broken, fine = result["runs"]
    assert broken["name"] == RUN and broken["unknown"][0] == {
        "figure": "run", "why": "cannot compute the run's goodput: OverflowError: int too large to convert to float"}
    assert broken["restarts"] == 0 and broken["wall_time"] is None and set(broken) == set(fine)
    assert fine["name"] == "zz-second" and fine["timeline"]["checkpoints"] == [{"step": 5, "time": float(END - 10)}]


def test_failed_nodes_reads_the_node_events_of_the_failed_jobs_nodes_once(run_module, tmp_path):
    """Issue 37 part 5: the page names the failed node. With failed_nodes, one sacctmgr call for the
    nodes of the jobs that ended NODE_FAIL (job 58, n[2-3], from its start); its answer in the form
    22.05 prints (slurm-22.05/node-events-crash): n2 went DOWN* at the job's End, n3 was drained
    before the job started (not this failure's), n4 is no node of the job."""
    events = [{"event": "start", "step": 0, "time": 1796042282.0}] + [
        {"event": "step", "step": s, "time": 1796042283.0 + 3 * s} for s in range(1, 8)]
    reg = registry(tmp_path, events=events)
    answer = ("n3|1796042200|1796042250|DRAIN|root(0)|maintenance\n"
              "n2|%d|%d|DOWN*|root(0)|Not responding\n"
              "n4|%d|Unknown|DOWN*|root(0)|Not responding\n") % (END, END + 20, END)
    sacctmgr = (["/usr/bin/sacctmgr"] + _slurm_commands.node_events(1796042281, ["n2", "n3"])[1], 0, answer, "")
    result = run_module(training_goodput_info, args(reg, event_log="events.jsonl", failed_nodes=True),
                        calls() + [sacctmgr])
    assert [c[0] for c in result["commands"]] == ["/usr/bin/sacct", "/usr/bin/squeue", "/usr/bin/sacctmgr"]
    assert "nodes=n2,n3" in result["commands"][2]
    (item,) = result["runs"][0]["failures"]
    assert (item["node_list"], item["failed_nodes"]) == ("n[2-3]", ["n2"])
    # no event of its nodes at the failure: unknown, said why
    answer = "n3|1796042200|1796042250|DRAIN|root(0)|maintenance\n"
    result = run_module(training_goodput_info, args(reg, event_log="events.jsonl", failed_nodes=True),
                        calls() + [sacctmgr[:2] + (answer, "")])
    (item,) = result["runs"][0]["failures"]
    assert item["failed_nodes"] is None
    assert "no node event of n[2-3]" in dict((u["figure"], u["why"]) for u in item["unknown"])["failed_nodes"]
    # without the option: no sacctmgr call (remediate.yml's goodput task), the node list only
    result = run_module(training_goodput_info, args(reg, event_log="events.jsonl"), calls())
    assert [c[0] for c in result["commands"]] == ["/usr/bin/sacct", "/usr/bin/squeue"]
    (item,) = result["runs"][0]["failures"]
    assert (item["node_list"], item["failed_nodes"]) == ("n[2-3]", None)
    assert "failed_nodes" not in [u["figure"] for u in item["unknown"]]

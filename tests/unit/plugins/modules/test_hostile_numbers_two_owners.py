# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue 38, part 3, at the module level: two runs of two owners in one registry, one owner's heartbeat or
``state.json`` hostile (a number out of range), the other's untouched. training_remediation gives the hostile
run to a human with the file and the field, and resubmits the other as it would alone; training_goodput_info
leaves the hostile run's figures from that file unknown, with the reason, and reports the other's in full.

The Slurm reads are the ones recorded on the dev cluster (22.05): job 57 ``rec-node-fail`` (here daemon's)
ended NODE_FAIL and was requeued, job 58 ``rec-node-fail-2n`` (here nobody's) ran 1796042281-1796042309 on
n[2-3], ended NODE_FAIL and was requeued (submit time 1796042312)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _options, _slurm_commands
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry
from ansible_collections.clusterops.slurm.plugins.modules import training_goodput_info, training_remediation

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "devcluster")
HISTORY = "2026-11-01"
HOSTILE_RUN, HOSTILE_OWNER = "rec-node-fail", "daemon"       # job 57
FINE_RUN, FINE_OWNER = "rec-node-fail-2n", "nobody"          # job 58
END = 1796042309         # sacct End of job 58's NODE_FAIL run
REQUEUED = 1796042312    # its new submit time (squeue)

pytestmark = pytest.mark.usefixtures("owner_calls_in_place")

#: ``(id, JSON text)``: what a hostile user writes where a number belongs.
HOSTILE = [("10e400", "1" + "0" * 400), ("1e308", "1e308"), ("Infinity", "Infinity"), ("NaN", "NaN"),
           ("minus-1", "-1"), ("true", "true"), ("string", '"7"'), ("list", "[]"), ("object", "{}")]
hostile = pytest.mark.parametrize("text", [t for dummy, t in HOSTILE], ids=[i for i, dummy in HOSTILE])


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def two_owners(text):
    """Recorded text (jobs of root) as if daemon had submitted job 57 and nobody job 58."""
    sep = _slurm_commands.SEP
    return "".join(line.replace(sep + "root" + sep, sep + (HOSTILE_OWNER if line.startswith("57") else FINE_OWNER) + sep)
                   for line in text.splitlines(True))


def reads(squeue=""):
    names, users = sorted([HOSTILE_RUN, FINE_RUN]), sorted([HOSTILE_OWNER, FINE_OWNER])
    start = _options.parse_time_option(HISTORY)
    return [(["/usr/bin/sacct"] + _slurm_commands.accounting(names=names, users=users, start=start)[1], 0,
             two_owners(recorded("sacct_node_fail_requeued.txt")), ""),
            (["/usr/bin/squeue"] + _slurm_commands.queue(names=names, users=users)[1], 0, squeue, "")]


def registry(tmp_path, kind, text):
    """Both runs registered; the hostile run's heartbeat (``kind`` heartbeat: its step, written while job
    57 ran) or ``state.json`` (``kind`` state: a resubmission's time) says ``text``."""
    for name, owner in ((HOSTILE_RUN, HOSTILE_OWNER), (FINE_RUN, FINE_OWNER)):
        folder = tmp_path / "runs" / name
        folder.mkdir(parents=True)
        (folder / "launcher.sbatch").write_text("#!/bin/bash\n")
        spec = {"format": training_registry.RUN_FORMAT, "format_version": 1, "name": name, "owner": owner,
                "launcher": str(folder / "launcher.sbatch"), "checkpoint_dir": str(tmp_path / ("ckpt-" + name)),
                "max_resubmissions": 2, "no_progress_limit": 2}
        if name == HOSTILE_RUN:
            (tmp_path / "beat").mkdir()
            spec.update(progress="heartbeat", heartbeat_file=str(tmp_path / "beat" / "heartbeat.json"))
            beat = {"step": "25", "time": "1796042300.5"}
            if kind == "heartbeat":
                beat["step"] = text
            (tmp_path / "beat" / "heartbeat.json").write_text("{%s}" % ", ".join(
                '"%s": %s' % item for item in beat.items()))
            os.utime(str(tmp_path / "beat" / "heartbeat.json"), (1796042300, 1796042300))
            if kind == "state":
                (folder / training_registry.STATE_FILE).write_text(
                    '{"format": "%s", "format_version": 1, "resubmissions": [{"time": %s, "job_id": 57, '
                    '"after_job": 56, "after_state": "NODE_FAIL", "step": null}], "hang_cancels": []}'
                    % (training_registry.STATE_FORMAT, text))
        (folder / training_registry.RUN_FILE).write_text(json.dumps(spec))
    return str(tmp_path / "runs")


def what_is_named(tmp_path, kind):
    """The file and the field the hostile run's reason must name."""
    if kind == "heartbeat":
        return "heartbeat %s: step " % (tmp_path / "beat" / "heartbeat.json")
    return "%s is not a clusterops.training_state file: resubmissions[0].time " % (
        tmp_path / "runs" / HOSTILE_RUN / training_registry.STATE_FILE)


@hostile
@pytest.mark.parametrize("kind", ["heartbeat", "state"])
def test_remediation_gives_the_hostile_run_to_a_human_and_resubmits_the_other(run_module, tmp_path, kind, text):
    reg = registry(tmp_path, kind, text)
    launcher = str(tmp_path / "runs" / FINE_RUN / "launcher.sbatch")
    # squeue lists job 57 only (pending again): alone, the hostile run would just wait, and job 58 is resubmitted
    pending = two_owners(recorded("squeue_node_fail_requeued.txt")).splitlines(True)[0]
    result = run_module(training_remediation, {"registry": reg, "history": HISTORY, "retry_delay": 0}, reads(pending) + [
        (["/usr/bin/runuser", "-u", FINE_OWNER, "--", "/usr/bin/sbatch", launcher], 0, "Submitted batch job 99\n", "")])
    assert "failed" not in result, result
    bad, fine = result["runs"]
    assert (bad["name"], bad["action"], bad["needs_human"]) == (HOSTILE_RUN, "none", True)
    assert what_is_named(tmp_path, kind) in bad["reason"], bad["reason"]
    assert [h["run"] for h in result["needs_human"]] == [HOSTILE_RUN]
    # the other owner's run, as if it were alone
    assert (fine["name"], fine["action"], fine["job_id"], fine["needs_human"]) == (FINE_RUN, "resubmit", 99, False)
    assert result["resubmitted"] == [FINE_RUN] and result["changed"] is True
    state = training_registry.read_state(str(tmp_path / "runs" / FINE_RUN))
    assert [(r["job_id"], r["after_job"], r["after_state"]) for r in state["resubmissions"]] == [(99, 58, "NODE_FAIL")]


@hostile
@pytest.mark.parametrize("kind", ["heartbeat", "state"])
def test_goodput_leaves_the_hostile_runs_figures_unknown_and_reports_the_other(run_module, tmp_path, kind, text):
    reg = registry(tmp_path, kind, text)
    result = run_module(training_goodput_info, {"registry": reg, "history": HISTORY},
                        reads(two_owners(recorded("squeue_node_fail_requeued.txt"))))
    assert "failed" not in result, result
    bad, fine = result["runs"]
    figure = {"heartbeat": "progress", "state": "state"}[kind]
    (item,) = [u for u in bad["unknown"] if u["figure"] == figure]
    assert what_is_named(tmp_path, kind) in item["why"], bad["unknown"]
    assert bad["name"] == HOSTILE_RUN and "run" not in [u["figure"] for u in bad["unknown"]]
    assert bad["restarts"] == 1 and bad["restarts_by_cause"]["node_failure"] == 1   # what Slurm says remains
    # the other file still counts: the heartbeat's step 25 (written while job 57 ran) with a bad state.json
    assert bad["failures"][0]["reached_step"] == {"heartbeat": None, "state": 25}[kind]
    assert bad["timeline"]["actions"] == []
    # the other owner's run, as if it were alone
    assert (fine["name"], fine["owner"], fine["restarts"]) == (FINE_RUN, FINE_OWNER, 1)
    assert not [u for u in fine["unknown"] if u["figure"] in ("run", "state", "progress", "folders")]
    (failure,) = fine["failures"]
    assert (failure["job_id"], failure["state"], failure["cause"], failure["restarted_by"]) == (
        "58", "NODE_FAIL", "node_failure", "slurm")
    assert failure["remediation"] == float(REQUEUED - END) and fine["running_time"] == float(END - 1796042281)

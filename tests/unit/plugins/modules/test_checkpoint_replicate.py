# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""checkpoint_replicate (and checkpoint_prune's replicas) run as Ansible runs them (arguments in, JSON out) on
run folders built in tmp_path: check mode copies nothing, a second run changes nothing, diff lists the copies."""

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils import basic
from ansible_collections.clusterops.slurm.tests.unit.plugins.modules.module_args import patch_module_args

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck
from ansible_collections.clusterops.slurm.plugins.modules import checkpoint_prune, checkpoint_replicate


@pytest.fixture
def run_module(monkeypatch, capsys):
    """``run_module(module, args) -> result``; no command may run."""
    def no_command(self, argv, **kwargs):
        raise AssertionError("the module ran a command: %s" % (argv,))

    monkeypatch.setattr(basic.AnsibleModule, "run_command", no_command)

    def run(module, args):
        with patch_module_args(args):
            with pytest.raises(SystemExit):
                module.main()
        return json.loads(capsys.readouterr().out)
    return run


def build(run, steps=(100, 200, 300)):
    for step in steps:
        ck.write_checkpoint(run, step, 0, {"model.pt": b"w" * 100}, fsync=False)


def test_check_mode_copies_nothing_then_a_run_copies_then_a_second_changes_nothing(tmp_path, run_module):
    run, replica = str(tmp_path / "run"), str(tmp_path / "replica")
    build(run)
    args = {"run_folder": run, "replica": replica, "keep_last": 2, "_ansible_check_mode": True, "_ansible_diff": True}
    result = run_module(checkpoint_replicate, args)
    assert result["changed"] is True and [c["name"] for c in result["copied"]] == ["step_000000300", "step_000000200"]
    assert not os.path.exists(replica)
    assert result["diff"]["after"] == "step_000000200\nstep_000000300\n" and result["diff"]["before"] == ""
    args["_ansible_check_mode"] = False
    result = run_module(checkpoint_replicate, args)
    assert result["changed"] is True and sorted(ck.read_index(replica)) == ["step_000000200", "step_000000300"]
    assert result["lag"] == {"primary_step": 300, "replica_step": 300, "checkpoints_behind": 0, "seconds_behind": 0.0}
    result = run_module(checkpoint_replicate, args)
    assert result["changed"] is False and result["diff"]["before"] == result["diff"]["after"]


def test_bad_values_fail_the_task_clearly(tmp_path, run_module):
    run = str(tmp_path / "run")
    build(run)
    result = run_module(checkpoint_replicate, {"run_folder": run, "replica": run})
    assert result["failed"] is True and "is the run folder itself" in result["msg"]
    result = run_module(checkpoint_replicate, {"run_folder": run, "replica": str(tmp_path / "r"), "bwlimit": "fast"})
    assert result["failed"] is True and result["msg"].startswith("bwlimit:")
    result = run_module(checkpoint_replicate, {"run_folder": str(tmp_path / "none"), "replica": str(tmp_path / "r")})
    assert result["failed"] is True and "does not exist" in result["msg"]


def test_checkpoint_prune_waits_for_the_replica(tmp_path, run_module):
    run, replica = str(tmp_path / "run"), str(tmp_path / "replica")
    build(run, (100, 200))
    run_module(checkpoint_replicate, {"run_folder": run, "replica": replica, "keep_last": 1})
    build(run, (300, 400))
    result = run_module(checkpoint_prune, {"run_folder": run, "keep_last": 1, "replicas": [replica]})
    assert sorted(d["name"] for d in result["deleted"]) == ["step_000000100", "step_000000200"]
    assert sorted(n for n in os.listdir(run) if not n.startswith(".")) == ["step_000000300", "step_000000400"]

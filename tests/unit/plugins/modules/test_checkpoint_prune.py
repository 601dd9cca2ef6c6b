# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""checkpoint_prune run as Ansible runs it (arguments in, JSON out) on run folders built in tmp_path.

The module runs no command: the shared harness's ``run_command`` stand-in (conftest.py) is installed
with an empty list of expected calls, so any command would fail the test. The harness's own
``run_module`` adds ``command_timeout`` (an option of the Slurm modules only), so the arguments are
passed here with the same ``patch_module_args``.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils import basic
from ansible_collections.clusterops.slurm.tests.unit.plugins.modules.module_args import patch_module_args

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck
from ansible_collections.clusterops.slurm.plugins.modules import checkpoint_prune


@pytest.fixture
def prune_module(monkeypatch, capsys):
    """``prune_module(args) -> (result, warnings shown, lines logged)``; no command may run."""
    shown, logged = [], []

    def no_command(self, argv, **kwargs):
        raise AssertionError("checkpoint_prune ran a command: %s" % (argv,))

    monkeypatch.setattr(basic.AnsibleModule, "run_command", no_command)
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg, **kwargs: shown.append(msg))
    monkeypatch.setattr(basic.AnsibleModule, "log", lambda self, msg, **kwargs: msg.startswith("Invoked with") or logged.append(msg))

    def run(args):
        del shown[:], logged[:]
        with patch_module_args(args):
            with pytest.raises(SystemExit):
                checkpoint_prune.main()
        return json.loads(capsys.readouterr().out), list(shown), list(logged)
    return run


def build(run):
    for step in (100, 200, 300, 400, 500):
        ck.write_checkpoint(run, step, 0, {"model.pt": b"w" * 100}, fsync=False)
    os.symlink("step_000000200", os.path.join(run, "latest"))


def entries(run):
    return sorted(n for n in os.listdir(run) if n != ck.PRUNE_LOCK)


def test_prunes_and_is_idempotent(tmp_path, prune_module):
    run = str(tmp_path)
    build(run)
    result, shown, logged = prune_module({"run_folder": run, "keep_last": 2})
    assert result["changed"] is True and "failed" not in result
    assert result["run_folder"] == run and "path" not in result and "mode" not in result
    assert [d["name"] for d in result["deleted"]] == ["step_000000100", "step_000000300"]
    assert result["latest_valid"] == "step_000000500"
    assert entries(run) == ["latest", "step_000000200", "step_000000400", "step_000000500"]
    assert dict((k["name"], k["reason"]) for k in result["kept"])["step_000000200"] == "named by the pointer latest"
    assert result["after"] == ["step_000000200", "step_000000400", "step_000000500"]
    assert shown == result["checkpoint_warnings"] == ["latest points to step_000000200, older than the newest "
                                                      "valid step_000000500"]
    assert len(logged) == 2 and logged[0].startswith("checkpoint_prune %s: deleted step_000000100" % run)
    assert "diff" not in result
    again, _shown, logged = prune_module({"run_folder": run, "keep_last": 2})
    assert again["changed"] is False and again["deleted"] == [] and logged == []


def test_check_mode_and_diff(tmp_path, prune_module):
    run = str(tmp_path)
    build(run)
    result, _shown, logged = prune_module({"run_folder": run, "keep_last": 1, "keep_every": 400,
                                           "_ansible_check_mode": True, "_ansible_diff": True})
    assert result["changed"] is True and logged == []
    assert [d["name"] for d in result["deleted"]] == ["step_000000100", "step_000000300"]
    assert len(entries(run)) == 6 and not os.path.exists(os.path.join(run, ck.PRUNE_LOCK))
    assert result["diff"]["before"] == "".join("step_%09d\n" % s for s in (100, 200, 300, 400, 500))
    assert result["diff"]["after"] == "step_000000200\nstep_000000400\nstep_000000500\n"
    assert result["free_after"] is None


@pytest.mark.parametrize("keep_last", [0, -1])
def test_keep_last_zero_or_less_changes_nothing(tmp_path, prune_module, keep_last):
    run = str(tmp_path)
    build(run)
    result, _shown, _logged = prune_module({"run_folder": run, "keep_last": keep_last})
    assert result["changed"] is False and result["deleted"] == [] and len(entries(run)) == 6


@pytest.mark.parametrize("args, message", [
    ({"keep_last": 2, "min_free": "lots"}, "min_free must be a size"),
    ({"keep_last": 2, "keep_every": -5}, "keep_every must be 0"),
    ({"keep_last": 2, "validate": "md5"}, "value of validate must be one of"),
    ({"keep_last": "two"}, "cannot be converted to an int"),
    ({}, "missing required arguments: keep_last"),
])
def test_argument_validation(tmp_path, prune_module, args, message):
    run = str(tmp_path)
    build(run)
    result, _shown, _logged = prune_module(dict(args, path=run))
    assert result["failed"] is True and message in result["msg"]
    assert len(entries(run)) == 6


def test_missing_folder_fails(tmp_path, prune_module):
    result, _shown, _logged = prune_module({"run_folder": str(tmp_path / "nope"), "keep_last": 1})
    assert result["failed"] is True and "does not exist" in result["msg"] and result["deleted"] == []


def test_locked_folder_fails_and_deletes_nothing(tmp_path, prune_module):
    run = str(tmp_path)
    build(run)
    fd = ck.pruning._lock(os.path.join(run, ck.PRUNE_LOCK))
    try:
        result, _shown, _logged = prune_module({"run_folder": run, "keep_last": 1})
    finally:
        os.close(fd)
    assert result["failed"] is True and "another prune" in result["msg"]
    assert len(entries(run)) == 6
    elsewhere = str(tmp_path / "locks" / "run.lock")
    os.makedirs(os.path.dirname(elsewhere))
    result, _shown, _logged = prune_module({"run_folder": run, "keep_last": 1, "lock_file": elsewhere})
    assert result["changed"] is True and os.path.exists(elsewhere)


def test_an_error_fails_the_task_and_lists_what_went(tmp_path, prune_module, monkeypatch):
    run = str(tmp_path)
    build(run)
    real_delete = ck.pruning._delete_checkpoint

    def delete(root, ckpt):
        if ckpt.step == 300:
            raise OSError(30, "Read-only file system", ckpt.path)
        real_delete(root, ckpt)

    monkeypatch.setattr(ck.pruning, "_delete_checkpoint", delete)
    result, _shown, logged = prune_module({"run_folder": run, "keep_last": 1})
    assert result["failed"] is True and result["changed"] is True
    assert "Read-only file system" in result["msg"] and "nothing more deleted (1 deleted before)" in result["msg"]
    assert [d["name"] for d in result["deleted"]] == ["step_000000100"]
    assert entries(run) == ["latest", "step_000000200", "step_000000300", "step_000000400", "step_000000500"]
    assert logged[-1].endswith("stopped, nothing more deleted")

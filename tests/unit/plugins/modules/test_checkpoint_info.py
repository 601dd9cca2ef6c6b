# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""checkpoint_info run as Ansible runs it (arguments in, JSON out) on run folders built in tmp_path."""

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils import basic
from ansible_collections.clusterops.slurm.tests.unit.plugins.modules.module_args import patch_module_args

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck
from ansible_collections.clusterops.slurm.plugins.modules import checkpoint_info


def run_module(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            checkpoint_info.main()
    return json.loads(capsys.readouterr().out)


def build(run):
    ck.write_checkpoint(run, 100, 0, {"model.pt": b"a" * 100})
    ck.write_checkpoint(run, 200, 1, {"model.pt": b"b" * 100})
    newest = ck.write_checkpoint(run, 300, 1, {"model.pt": b"c" * 100})
    with open(os.path.join(newest, "model.pt"), "r+b") as handle:
        handle.write(b"X")  # same size: only sha256 sees it
    os.mkdir(os.path.join(run, "handpicked"))
    os.symlink("step_000000100", os.path.join(run, "latest"))


@pytest.mark.parametrize("check_mode", [False, True])
def test_sizes_level_lists_everything(tmp_path, capsys, monkeypatch, check_mode):
    run = str(tmp_path)
    build(run)
    shown = []
    # Where a warning ends up depends on whether controller code was imported in this process,
    # so record the calls rather than reading the result's "warnings".
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg, **kwargs: shown.append(msg))
    result = run_module(capsys, {"run_folder": run, "_ansible_check_mode": check_mode})
    assert result["changed"] is False and "failed" not in result
    assert result["run_folder"] == run and "path" not in result and "mode" not in result
    assert result["latest_valid"]["name"] == "step_000000300"
    assert [(c["step"], c["epoch"], c["valid"], c["checked"]) for c in result["checkpoints"]] == [
        (100, 0, True, "structure"), (200, 1, True, "structure"), (300, 1, True, "sizes")]
    assert result["ignored"] == [{"name": "handpicked", "reason": "matches no checkpoint layout"}]
    assert result["pointers"][0]["status"] == "older"
    assert result["checkpoint_warnings"] == [result["pointers"][0]["message"]]
    assert shown == result["checkpoint_warnings"]  # also shown as task warnings
    assert result["finished"] is None


def test_sha256_level_falls_back(tmp_path, capsys):
    run = str(tmp_path)
    build(run)
    result = run_module(capsys, {"run_folder": run, "validate": "sha256", "validate_all": True})
    assert result["latest_valid"]["name"] == "step_000000200"
    assert [c["checked"] for c in result["checkpoints"]] == ["sha256"] * 3
    assert "sha256" in result["checkpoints"][2]["why_invalid"]
    assert any(w.startswith("step_000000300 is invalid") for w in result["checkpoint_warnings"])


def test_empty_folder_gives_null(tmp_path, capsys):
    result = run_module(capsys, {"run_folder": str(tmp_path)})
    assert result["latest_valid"] is None and result["checkpoints"] == [] and result["checkpoint_warnings"] == []


def test_missing_folder_fails(tmp_path, capsys):
    result = run_module(capsys, {"run_folder": str(tmp_path / "nope")})
    assert result["failed"] is True and "does not exist" in result["msg"]


def test_path_is_the_old_name_of_run_folder(tmp_path, capsys):
    """One name in and out (run_folder); ``path``, its name before, still works."""
    run = str(tmp_path)
    build(run)
    result = run_module(capsys, {"path": run})
    assert result["run_folder"] == run and result["latest_valid"]["name"] == "step_000000300"

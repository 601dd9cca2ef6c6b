# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_checkpoint.writer: CheckpointWriter, write_checkpoint, commit_checkpoint, crashes before the rename."""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck

from checkpoint_builders import LIBRARY, contract, torch_zip, write  # noqa: E402 pylint: disable=import-error


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

def test_writer_context_manager_commits(tmp_path):
    writer = ck.CheckpointWriter(str(tmp_path / "run"), 7, epoch=1)
    with writer as staging:
        assert os.path.basename(staging).startswith("tmp-step_000000007.")
        assert ck.latest_valid(str(tmp_path / "run")) is None  # nothing visible while writing
        write(os.path.join(staging, "model.pt"), torch_zip())
    assert writer.path == os.path.join(str(tmp_path / "run"), "step_000000007")
    assert os.listdir(str(tmp_path / "run")) == ["step_000000007"]
    assert ck.latest_valid(str(tmp_path / "run"), "sha256").path == writer.path


def test_writer_exception_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with ck.CheckpointWriter(str(tmp_path), 7) as staging:
            write(os.path.join(staging, "model.pt"), b"half")
            raise RuntimeError("out of memory while saving")
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize("files, error", [
    ({"manifest.json": b"{}"}, ValueError),
    ({}, ValueError),
    ({"../x": b"1"}, ValueError),
])
def test_writer_refuses(tmp_path, files, error):
    with pytest.raises(error):
        ck.write_checkpoint(str(tmp_path), 1, 0, files)
    assert os.listdir(str(tmp_path)) == []


def test_writer_refuses_symlinks_and_existing_steps(tmp_path):
    contract(tmp_path, 1)
    with pytest.raises(FileExistsError):
        contract(tmp_path, 1)
    with pytest.raises(ValueError):
        ck.write_checkpoint(str(tmp_path), 2, 0, lambda d: os.symlink("/etc/hostname", os.path.join(d, "x")))
    assert sorted(os.listdir(str(tmp_path))) == ["step_000000001"]
    with pytest.raises(ValueError):
        ck.commit_checkpoint(str(tmp_path / "elsewhere"), str(tmp_path), 3)


@pytest.mark.parametrize("damage", ["manifest", "truncate", "empty"])
def test_writer_sets_an_invalid_existing_step_aside(tmp_path, damage):
    # A run resumed from step 1 because step 2 was damaged writes step 2 again: the damaged one
    # is renamed to a tmp- entry (never a candidate), the new one committed.
    contract(tmp_path, 1)
    old = contract(tmp_path, 2)
    if damage == "manifest":
        os.unlink(os.path.join(old, "manifest.json"))
    elif damage == "truncate":
        victim = [n for n in os.listdir(old) if n != "manifest.json"][0]
        with open(os.path.join(old, victim), "r+b") as handle:
            handle.truncate(1)
    else:
        shutil.rmtree(old)
        os.mkdir(old)
    new = ck.write_checkpoint(str(tmp_path), 2, 0, {"model.pt": b"new" * 100})
    assert new == old and ck.verify(new, ck.SHA256).valid
    names = sorted(os.listdir(str(tmp_path)))
    assert names[:2] == ["step_000000001", "step_000000002"]
    assert len(names) == 3 and names[2].startswith("tmp-invalid-step_000000002.")
    assert ck.latest_valid(str(tmp_path)).name == "step_000000002"


_CRASHER = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import _checkpoint as ck
where = sys.argv[3]
real_rename = os.rename
def crash(*args):
    os.kill(os.getpid(), signal.SIGKILL)
if where == "rename":
    os.rename = crash  # killed after the manifest is written and fsynced, before the rename
def fill(d):
    with open(os.path.join(d, "model.pt"), "wb") as f:
        f.write(b"x" * 100000)
    if where == "writing":
        crash()
ck.write_checkpoint(sys.argv[2], 200, 1, fill)
"""


@pytest.mark.parametrize("where", ["rename", "writing"])
def test_crash_before_rename_is_never_chosen(tmp_path, where):
    run = str(tmp_path / "run")
    contract(run, 100)
    proc = subprocess.run([sys.executable, "-c", _CRASHER, os.path.dirname(LIBRARY), run, where], check=False)
    assert proc.returncode == -9
    leftovers = [n for n in os.listdir(run) if n.startswith("tmp-")]
    assert len(leftovers) == 1
    if where == "rename":
        assert os.path.isfile(os.path.join(run, leftovers[0], "manifest.json"))
    for level in ck.LEVELS:
        if level == ck.LOAD and importlib.util.find_spec("torch") is None:
            # Where torch is not installed (the ansible-core matrix's venvs), the load level says so.
            with pytest.raises(ck.CheckpointError, match="needs torch"):
                ck.latest_valid(run, level)
            continue
        assert ck.latest_valid(run, level).name == "step_000000100"
    assert ck.main(["latest", run], out=io.StringIO(), err=io.StringIO()) == 0

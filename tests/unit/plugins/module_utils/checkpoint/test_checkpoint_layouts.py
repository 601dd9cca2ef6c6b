# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_checkpoint.layouts and .formats on real torch files (when torch is installed), and the ``load``
validation level."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck

from checkpoint_builders import (  # noqa: E402 pylint: disable=import-error
    _steps,
    contract,
    flip_byte,
    install_tool,
    lightning_ckpt,
    truncate,
)


# ---------------------------------------------------------------------------------------------
# Real torch files (when torch is installed)
# ---------------------------------------------------------------------------------------------

def test_real_torch_save_truncated(tmp_path):
    torch = pytest.importorskip("torch")
    for epoch, step in ((1, 100), (1, 200)):
        torch.save({"w": torch.arange(4096, dtype=torch.float32), "step": step},
                   os.path.join(str(tmp_path), "checkpoint_epoch_%d_step_%d.pth" % (epoch, step)))
    assert ck.latest_valid(str(tmp_path), "sha256").step == 200
    newest = os.path.join(str(tmp_path), "checkpoint_epoch_1_step_200.pth")
    truncate(newest, 3)
    with pytest.raises(Exception):
        torch.load(newest)  # torch agrees that it is broken
    assert ck.verify(newest, "structure").valid is True
    assert ck.verify(newest, "sizes").valid is False
    assert ck.latest_valid(str(tmp_path), "sizes").step == 100


def test_real_torch_save_corrupt_data_sha256_level(tmp_path):
    torch = pytest.importorskip("torch")
    path = os.path.join(str(tmp_path), "checkpoint_epoch_0_step_1.pth")
    torch.save({"w": torch.ones(4096)}, path)
    flip_byte(path, 2000)
    assert ck.verify(path, "sizes").valid is True
    assert "CRC" in ck.verify(path, "sha256").why_invalid


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_real_dcp_folder(tmp_path):
    torch = pytest.importorskip("torch")
    dcp = pytest.importorskip("torch.distributed.checkpoint")
    for step in (10, 20):
        dcp.save({"w": torch.arange(2048, dtype=torch.float32), "step": step},
                 checkpoint_id=os.path.join(str(tmp_path), "step-%d" % step))
    assert ck.latest_valid(str(tmp_path), "sizes").name == "step-20"
    data = [n for n in os.listdir(os.path.join(str(tmp_path), "step-20")) if n.endswith(".distcp")][0]
    truncate(os.path.join(str(tmp_path), "step-20", data), 16)
    report = ck.inspect(str(tmp_path), "sizes")
    assert report.latest_valid.name == "step-10"
    assert "truncated" in [c for c in report.checkpoints if c.name == "step-20"][0].why_invalid


def test_real_torch_save_in_contract(tmp_path):
    torch = pytest.importorskip("torch")
    writer = ck.CheckpointWriter(str(tmp_path), 1000, epoch=2)
    with writer as staging:
        torch.save({"w": torch.ones(16)}, os.path.join(staging, "model.pt"))
    loaded = torch.load(os.path.join(ck.latest_valid(str(tmp_path), "sha256").path, "model.pt"))
    assert float(loaded["w"].sum()) == 16.0


# ---------------------------------------------------------------------------------------------
# Loadability (issue 12 part 4)
# ---------------------------------------------------------------------------------------------

def test_load_level_marks_a_numpy_rng_state_invalid(tmp_path, torch_save_numpy_rng):
    torch = pytest.importorskip("torch")

    def without_numpy(staging):
        torch.save({"w": torch.ones(2)}, os.path.join(staging, "model.pt"))
        torch.save({"torch": torch.get_rng_state()}, os.path.join(staging, "rng.pt"))

    good = ck.write_checkpoint(str(tmp_path), 10, 0, without_numpy, fsync=False)

    def with_numpy(staging):
        torch.save({"w": torch.ones(2)}, os.path.join(staging, "model.pt"))
        torch_save_numpy_rng(os.path.join(staging, "rng.pt"))

    ck.write_checkpoint(str(tmp_path), 20, 0, with_numpy, fsync=False)
    assert ck.latest_valid(str(tmp_path), "sha256").name == "step_000000020"  # whole: only load tells
    report = ck.inspect(str(tmp_path), ck.LOAD)
    assert report.latest_valid.path == good
    bad = report.checkpoints[-1]
    assert bad.valid is False and bad.checked == ck.LOAD
    assert bad.why_invalid.startswith("rng.pt: torch.load(weights_only=True) fails: UnpicklingError: ")
    assert "numpy" in bad.why_invalid and "\n" not in bad.why_invalid
    assert any("step_000000020 is invalid (rng.pt: torch.load" in w for w in report.warnings)
    out, err = io.StringIO(), io.StringIO()
    assert ck.main(["latest", str(tmp_path), "--validate", "load"], out, err) == 0 and out.getvalue() == good + "\n"
    assert ck.verify(bad.path, ck.LOAD).valid is False
    # A Lightning file whose callbacks saved a numpy RNG state: the same at the file level.
    path = os.path.join(str(tmp_path), "step=30.ckpt")
    torch_save_numpy_rng(path, global_step=30, epoch=0)
    checked = ck.verify(path, ck.LOAD)
    assert checked.valid is False and "torch.load(weights_only=True) fails" in checked.why_invalid
    assert ck.verify(path, ck.SHA256).valid is True


def test_unknown_levels_are_errors_never_replaced(tmp_path):
    contract(tmp_path, 10)
    with pytest.raises(ValueError):
        ck.inspect(str(tmp_path), "loads")
    with pytest.raises(ValueError):
        ck.verify(os.path.join(str(tmp_path), "step_000000010"), "full")
    err = io.StringIO()
    with pytest.raises(SystemExit) as exc:
        ck.main(["latest", str(tmp_path), "--validate", "loads"], io.StringIO(), err)
    assert exc.value.code == 2


def test_load_level_without_torch_is_a_usage_error(tmp_path):
    contract(tmp_path, 10)
    script = ("import sys, builtins; real = builtins.__import__\n"
              "def imp(name, *a, **k):\n"
              "    if name == 'torch' or name.startswith('torch.'): raise ImportError('no torch here')\n"
              "    return real(name, *a, **k)\n"
              "builtins.__import__ = imp\n"
              "sys.argv = ['clusterops_checkpoint', 'latest', sys.argv[1], '--validate', 'load']\n"
              "import runpy; runpy.run_path(%r, run_name='__main__')\n" % install_tool(str(tmp_path / "tool")))
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode == 2 and "needs torch" in proc.stderr and proc.stdout == "", proc.stderr


def test_prune_keeps_lightning_last_copy_and_verify_reads_its_step(tmp_path):
    _steps(tmp_path, ("step=10.ckpt", 10), ("step=20.ckpt", 20), ("step=30.ckpt", 30))
    last = lightning_ckpt(tmp_path, "last.ckpt", 30)  # the same step as the newest: the named one is chosen
    os.utime(last, (1000, 1000))  # older on disk: only the last.ckpt rule keeps it
    report = ck.inspect(str(tmp_path))
    assert report.latest_valid.name == "step=30.ckpt" and not any("same (epoch, step)" in w for w in report.warnings)
    result = ck.prune(str(tmp_path), keep_last=1, tmp_grace=None)
    assert sorted(d["name"] for d in result.deleted) == ["step=10.ckpt", "step=20.ckpt"]
    assert [k["reason"] for k in result.kept if k["name"] == "last.ckpt"] == [
        "Lightning's last checkpoint (save_last), which a resume with ckpt_path='last' opens"]
    assert os.path.exists(os.path.join(str(tmp_path), "last.ckpt"))
    checked = ck.verify(os.path.join(str(tmp_path), "last.ckpt"))
    assert (checked.valid, checked.step, checked.step_from) == (True, 30, "metadata")

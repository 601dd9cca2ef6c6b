# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training remediation's observe step: what a run's checkpoint folder says (checkpoint_status on real folders)."""

from __future__ import annotations

import os
import shutil

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ckpt_lib
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import policy
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import observe
from ansible_collections.clusterops.slurm.tests.unit.plugins.module_utils.training_remediation_cases import job, run, state


def test_checkpoint_status_from_a_real_run_folder(tmp_path):
    run_dir = tmp_path / "run"
    assert observe.checkpoint_status(str(run_dir), "sizes")["status"] == "missing"
    run_dir.mkdir()
    assert observe.checkpoint_status(str(run_dir), "sizes")["status"] == "none"
    for step in (10, 20):
        ckpt_lib.write_checkpoint(str(run_dir), step, 0, {"model.pt": b"x" * 64})
    st = observe.checkpoint_status(str(run_dir), "sizes")
    assert (st["status"], st["step"], st["finished"]) == ("valid", 20, False)
    # the newest one truncated: the previous one, with a warning
    with open(os.path.join(st["checkpoint"], "model.pt"), "r+b") as handle:
        handle.truncate(10)
    st = observe.checkpoint_status(str(run_dir), "sizes")
    assert (st["status"], st["step"]) == ("valid", 10) and st["warnings"]
    with open(os.path.join(st["checkpoint"], "model.pt"), "r+b") as handle:
        handle.truncate(10)
    st = observe.checkpoint_status(str(run_dir), "sizes")
    assert st["status"] == "invalid" and st["step"] is None
    ckpt_lib.mark_finished(str(run_dir))
    assert observe.checkpoint_status(str(run_dir), "sizes")["finished"]


def test_checkpoint_status_takes_the_newest_copy_of_run_folder_and_replicas(tmp_path):
    run_dir, replica = tmp_path / "run", tmp_path / "replica"
    assert observe.checkpoint_status(str(run_dir), "sizes", replicas=[str(replica)])["status"] == "missing"
    for step in (10, 20):
        ckpt_lib.write_checkpoint(str(run_dir), step, 0, {"model.pt": b"x" * 64}, fsync=False)
    ckpt_lib.replicate(str(run_dir), str(replica), keep_last=2, fsync=False)
    st = observe.checkpoint_status(str(run_dir), "sizes", replicas=[str(replica)])
    assert (st["status"], st["step"], st["copy"]) == ("valid", 20, "primary")
    # The run folder's newest damaged: the replica's copy, and the detail says why.
    with open(os.path.join(str(run_dir), "step_000000020", "model.pt"), "r+b") as handle:
        handle.truncate(10)
    st = observe.checkpoint_status(str(run_dir), "sizes", replicas=[str(replica)])
    assert (st["status"], st["step"], st["copy"]) == ("valid", 20, str(replica))
    assert st["checkpoint"] == os.path.join(str(replica), "step_000000020") and "newer than the run folder" in st["detail"]
    # The run folder lost whole: still the replica's.
    shutil.rmtree(str(run_dir))
    st = observe.checkpoint_status(str(run_dir), "sizes", replicas=[str(replica)])
    assert (st["status"], st["step"]) == ("valid", 20) and "does not exist" in st["detail"]
    # Without the replica, the lost folder is missing (what remediation said before replicas).
    assert observe.checkpoint_status(str(run_dir), "sizes")["status"] == "missing"


def test_checkpoints_that_cannot_be_ordered_need_a_human_never_a_fresh_start(tmp_path):
    # Lightning files whose step neither the name nor the file tells: "exist but none usable".
    torch = pytest.importorskip("torch")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    torch.save({"global_step": 10, "epoch": 0}, str(run_dir / "step=10.ckpt"))
    torch.save({"w": torch.zeros(2)}, str(run_dir / "best.ckpt"))  # no global_step inside
    st = observe.checkpoint_status(str(run_dir), "sizes")
    assert (st["status"], st["step"], st["checkpoint"]) == ("invalid", None, None)
    assert "cannot be ordered" in st["detail"] and "best.ckpt" in st["detail"]
    d = policy.decide(run(checkpoint_dir=str(run_dir)), [job(7, "NODE_FAIL")], st, state())
    assert (d["action"], d["needs_human"]) == ("none", True) and "cannot be ordered" in d["reason"]
    assert "from scratch" not in d["reason"]
    # The run's name template cannot rescue a name without the step; a bad template is an error.
    assert observe.checkpoint_status(str(run_dir), "sizes", "{epoch}")["status"] == "error"
    (run_dir / "best.ckpt").unlink()
    st = observe.checkpoint_status(str(run_dir), "sizes")
    assert (st["status"], st["step"]) == ("valid", 10)

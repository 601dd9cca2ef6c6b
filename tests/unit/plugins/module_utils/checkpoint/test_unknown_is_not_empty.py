# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unknown is not empty: a run folder holding training state that no known layout explains is
"exists, none usable" (``latest`` exit 3, remediation status ``invalid``: a human decides), never
"no checkpoint yet" (exit 1, start from scratch). Only a folder with nothing of the kind is empty.

The cases below are training state no layout explains (issue 24): layouts one level down or of
older releases, sidecars and parts of a layout without their checkpoint, torch.distributed.checkpoint
shards under a name of the program's own. The layouts this collection reads are in
test_checkpoint_trainer_layouts.py.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import observe


def build(root, entries):
    """Create ``entries`` under ``root``: a path ending in ``/`` is a folder, else a file (a few bytes)."""
    for rel in entries:
        path = os.path.join(str(root), rel)
        if rel.endswith("/"):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(b"state")


def latest_exit(run_dir):
    out, err = io.StringIO(), io.StringIO()
    return ck.main(["latest", str(run_dir)], out=out, err=err)


UNEXPLAINED = {
    # Accelerate's automatic_checkpoint_naming one level down: project_dir/checkpoints/checkpoint_<N>
    "accelerate_project_dir": ["checkpoints/checkpoint_0/model.safetensors",
                               "checkpoints/checkpoint_0/random_states_0.pkl"],
    # torchtune before 0.5: flat files with the epoch at the end, no folders
    "torchtune_flat": ["hf_model_0001_0.pt", "hf_model_0002_0.pt", "adapter_0.pt"],
    # sidecars and parts of a layout without the checkpoint they belong to
    "megatron_bridge_sidecar_alone": ["latest_train_state.pt"],
    "torchtune_recipe_state_alone": ["recipe_state/recipe_state.pt"],
    "composer_other_rank_alone": ["ep1-ba1200-rank1.pt"],
    "nemo_ema_alone": ["megatron_gpt--val_loss=1.23-step=1000-EMA.ckpt"],
    # DCP shards under a name of the program's own
    "dcp_own_name": ["save/.metadata", "save/__0_0.distcp"],
    # a plain weights file
    "safetensors": ["model.safetensors"],
    # a name a layout accepts, of the wrong kind (a file named like a contract folder)
    "wrong_kind": ["step_000000005"],
    # state two levels down in a folder with no telling name
    "nested": ["output/rank0/optimizer.bin"],
}

EMPTY = {
    "nothing": [],
    "logs_and_config": ["logs/train.log", "config.yaml", "README.md", "notes/"],
    "tensorboard": ["tb/events.out.tfevents.1733140000.node01.4711.0"],
    "wandb": ["wandb/run-20261202_101010-abc123/files/output.log", "wandb/latest-run/"],
    "run_state": ["heartbeat", "run.json", "slurm-4242.out"],
}


@pytest.mark.parametrize("layout", sorted(UNEXPLAINED))
def test_training_state_no_layout_explains_is_never_empty(tmp_path, layout):
    run_dir = tmp_path / "run"
    build(run_dir, UNEXPLAINED[layout])
    report = ck.inspect(str(run_dir), "sizes")
    assert report.latest_valid is None and not report.empty
    assert report.unexplained, report.ignored
    assert any("no known layout" in w or "training state" in w for w in report.warnings)
    assert latest_exit(run_dir) == ck.EXIT_INVALID
    status = observe.checkpoint_status(str(run_dir), "sizes")
    assert status["status"] == "invalid", status
    assert "not starting from scratch" in status["detail"] or "none is valid" in status["detail"]


@pytest.mark.parametrize("layout", sorted(EMPTY))
def test_a_folder_without_training_state_is_empty(tmp_path, layout):
    run_dir = tmp_path / "run"
    os.makedirs(str(run_dir))
    build(run_dir, EMPTY[layout])
    report = ck.inspect(str(run_dir), "sizes")
    assert report.empty and report.unexplained == []
    assert latest_exit(run_dir) == ck.EXIT_NONE
    assert observe.checkpoint_status(str(run_dir), "sizes")["status"] == "none"


def test_a_valid_checkpoint_is_still_chosen_beside_unexplained_state(tmp_path):
    run_dir = tmp_path / "run"
    ck.write_checkpoint(str(run_dir), 10, 0, {"model.pt": b"m" * 8}, fsync=False)
    build(run_dir, ["final_model.safetensors"])
    report = ck.inspect(str(run_dir), "sizes")
    assert report.latest_valid.step == 10 and not report.empty
    assert [u["name"] for u in report.unexplained] == ["final_model.safetensors"]
    assert any("final_model.safetensors" in w for w in report.warnings)  # said, not silent


def test_links_are_not_followed_when_looking_into_a_folder(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    build(elsewhere, ["model.safetensors"])
    run_dir = tmp_path / "run"
    build(run_dir, ["misc/"])
    os.symlink(str(elsewhere), str(run_dir / "misc" / "data"))
    assert ck.inspect(str(run_dir), "sizes").empty


@pytest.mark.parametrize("name, state", [
    ("epoch_4", True), ("epoch_0_step_19", True), ("step=19", True), ("ep3-ba1200-rank0.pt", True),
    ("iteration-500", True), ("ckpt_12", True), ("global_step7", True), ("weights.bin", True),
    ("shard.distcp", True), ("last.ckpt", True), (".metadata", True), ("trainer_state.json", True),
    ("train.log", False), ("config.yaml", False), ("split_1", False), ("commit123", False),
    ("run-20261202_101010-abc123", False), ("events.out.tfevents.1733140000.node01", False),
    ("stepper", False), ("README.md", False),
])
def test_training_state_hint_by_name(name, state):
    assert (ck.names.training_state_hint(name) is not None) == state


# Names every known layout accepts (names.py's patterns and Lightning's), as file or folder, empty
# or not: the answer is never "none".
_N = st.integers(min_value=0, max_value=10 ** 7)
_ACCEPTED = st.one_of(
    _N.map(lambda n: "step_%09d" % n),
    _N.map(lambda n: "step-%d" % n),
    _N.map(lambda n: "checkpoint-%d" % n),
    _N.map(lambda n: "global_step%d" % n),
    _N.map(lambda n: "iter_%07d" % n),
    st.tuples(_N, _N).map(lambda es: "checkpoint_epoch_%d_step_%d.pth" % es),
    st.tuples(_N, _N).map(lambda es: "epoch=%d-step=%d.ckpt" % es),
    _N.map(lambda n: "step=%d.ckpt" % n),
    _N.map(lambda n: "checkpoint_%d" % n),
    _N.map(lambda n: "epoch_%d" % n),
    st.tuples(_N, _N).map(lambda es: "epoch_%d_step_%d" % es),
    st.tuples(_N, _N).map(lambda es: "ep%d-ba%d-rank0.pt" % es),
    st.tuples(_N, _N).map(lambda es: "ep%d-ba%d" % es),
    _N.map(str),
    _N.map(lambda n: "model_name=0--val_loss=0.00-step=%d-consumed_samples=1280.0-last" % n),
)


@settings(max_examples=60, deadline=None)
@given(names=st.lists(_ACCEPTED, min_size=1, max_size=4, unique=True),
       kinds=st.lists(st.sampled_from(["file", "empty_dir", "dir_with_file"]), min_size=4, max_size=4))
def test_property_a_name_any_layout_accepts_is_never_none(names, kinds):
    root = tempfile.mkdtemp(prefix="clusterops-unknown-")
    try:
        for name, kind in zip(names, kinds):
            path = os.path.join(root, name)
            if kind == "file":
                with open(path, "wb") as handle:
                    handle.write(b"x")
            else:
                os.makedirs(path)
                if kind == "dir_with_file":
                    with open(os.path.join(path, "part.bin"), "wb") as handle:
                        handle.write(b"x")
        report = ck.inspect(root, "sizes")
        assert not report.empty, (names, kinds, report.ignored)
        assert latest_exit(root) != ck.EXIT_NONE
        assert observe.checkpoint_status(root, "sizes")["status"] != "none"
    finally:
        shutil.rmtree(root)

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The layouts of other trainers (issue 24), each laid out as the trainer's own code writes it
(docs/checkpoint-contract.md, "Layouts read from other tools", names each source): Accelerate's
save_state, NeMo 2, torchtune, NeMo Automodel, Megatron-Bridge, MosaicML Composer, Orbax and
torchtitan's Hugging Face export. For each: the newest whole save is chosen, and each way a save is
left incomplete makes it invalid, so that the one before it is chosen."""

from __future__ import annotations

import json
import os
import re

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck

from checkpoint_builders import (  # noqa: E402 pylint: disable=import-error
    dcp_folder,
    safetensors,
    torch_zip,
    truncate,
    write,
)


REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 5))


def chosen(run_dir, level="sizes"):
    report = ck.inspect(str(run_dir), level)
    best = report.latest_valid
    return report, (best.name if best else None)


def why(report, name):
    return [c for c in report.checkpoints if c.name == name][0].why_invalid


def hf_weights(folder, shards=2, drop=None):
    """Sharded safetensors with their index (``save_pretrained``): model-0000i-of-0000n."""
    names = ["model-%05d-of-%05d.safetensors" % (i + 1, shards) for i in range(shards)]
    weight_map = dict(("layer%d.w" % i, name) for i, name in enumerate(names))
    write(os.path.join(folder, "model.safetensors.index.json"), json.dumps(
        {"metadata": {"total_size": 256 * shards}, "weight_map": weight_map}).encode())
    for name in names:
        if name != drop:
            write(os.path.join(folder, name), safetensors())


# ---------------------------------------------------------------------------------------------
# Accelerate: Accelerator.save_state (accelerate/checkpointing.py save_accelerator_state)
# ---------------------------------------------------------------------------------------------

def accelerate_folder(root, name, processes=2, drop_rank=None, model="model.safetensors"):
    folder = os.path.join(str(root), name)
    if model.endswith(".safetensors"):
        write(os.path.join(folder, model), safetensors())
    elif model.endswith("/"):  # FSDP SHARDED_STATE_DICT: pytorch_model_fsdp_0/ (DCP)
        dcp_folder(folder, model.rstrip("/"), sizes=(3000, 3000))
    else:
        write(os.path.join(folder, model), torch_zip("pytorch_model"))
    write(os.path.join(folder, "optimizer.bin"), torch_zip("optimizer"))
    write(os.path.join(folder, "scheduler.bin"), torch_zip("scheduler"))
    write(os.path.join(folder, "sampler.bin"), torch_zip("sampler"))
    for rank in range(processes):
        if rank != drop_rank:
            write(os.path.join(folder, "random_states_%d.pkl" % rank), torch_zip("random_states_%d" % rank))
    return folder


def test_accelerate_save_state_folders_are_read_as_accelerate(tmp_path):
    for step in (500, 1000):
        accelerate_folder(tmp_path, "checkpoint-%d" % step)
    report, name = chosen(tmp_path)
    assert name == "checkpoint-1000" and report.latest_valid.layout == "accelerate"
    assert report.latest_valid.step == 1000 and report.warnings == []


def test_accelerate_automatic_checkpoint_naming(tmp_path):
    # ProjectConfiguration(automatic_checkpoint_naming=True): checkpoints/checkpoint_<iteration>
    for iteration in (0, 1, 2):
        accelerate_folder(tmp_path, "checkpoint_%d" % iteration, processes=1)
    report, name = chosen(tmp_path)
    assert name == "checkpoint_2" and report.latest_valid.layout == "accelerate"


@pytest.mark.parametrize("model", ["pytorch_model.bin", "pytorch_model_fsdp_0/"])
def test_accelerate_other_model_files(tmp_path, model):
    accelerate_folder(tmp_path, "checkpoint-10", model=model)
    assert chosen(tmp_path)[1] == "checkpoint-10"


@pytest.mark.parametrize("damage, reason", [
    ("no_random_states", "no random_states_<rank>.pkl: not committed"),
    ("rank_missing", "random_states_<rank>.pkl incomplete: ranks [0, 2]"),
    ("no_model", "no model weights"),
    ("model_truncated", "model.safetensors"),
    ("optimizer_empty", "optimizer.bin is empty"),
])
def test_accelerate_incomplete_saves_are_invalid(tmp_path, damage, reason):
    accelerate_folder(tmp_path, "checkpoint-500")
    newest = accelerate_folder(tmp_path, "checkpoint-1000", processes=3,
                               drop_rank=1 if damage == "rank_missing" else None)
    if damage == "no_random_states":
        for rank in range(3):
            os.remove(os.path.join(newest, "random_states_%d.pkl" % rank))
    elif damage == "no_model":
        os.remove(os.path.join(newest, "model.safetensors"))
    elif damage == "model_truncated":
        truncate(os.path.join(newest, "model.safetensors"), 9)
    elif damage == "optimizer_empty":
        write(os.path.join(newest, "optimizer.bin"), b"")
    report, name = chosen(tmp_path)
    assert name == "checkpoint-500"
    assert reason in why(report, "checkpoint-1000")


def test_a_trainer_checkpoint_without_trainer_state_is_still_the_trainers(tmp_path):
    # The Trainer writes trainer_state.json last: without it, its folder is not Accelerate's.
    folder = os.path.join(str(tmp_path), "checkpoint-20")
    write(os.path.join(folder, "model.safetensors"), safetensors())
    write(os.path.join(folder, "optimizer.pt"), torch_zip("optimizer"))
    write(os.path.join(folder, "rng_state.pth"), torch_zip("rng_state"))
    report, name = chosen(tmp_path)
    assert name is None and report.checkpoints[0].layout == "huggingface"
    assert "trainer_state.json" in why(report, "checkpoint-20")


# ---------------------------------------------------------------------------------------------
# NeMo 2 (nemo/lightning/pytorch/callbacks/model_checkpoint.py): a folder per save
# ---------------------------------------------------------------------------------------------

NEMO = "model_name=0--val_loss=%.2f-step=%d-consumed_samples=%.1f%s"


def nemo_folder(root, step, last=False, weights=True):
    name = NEMO % (1.0 / (step + 1), step, step * 64.0, "-last" if last else "")
    folder = os.path.join(str(root), name)
    if weights:
        dcp_folder(folder, "weights", sizes=(3000, 3000))
        write(os.path.join(folder, "weights", "common.pt"), torch_zip("common"))
        write(os.path.join(folder, "weights", "metadata.json"), b'{"sharded_backend": "torch_dist"}')
    write(os.path.join(folder, "context", "io.json"), b"{}")
    write(os.path.join(folder, "context", "model.yaml"), b"_target_: nemo.collections.llm.GPTModel\n")
    return name


def test_nemo2_folders_are_ordered_by_the_step_in_their_names(tmp_path):
    nemo_folder(tmp_path, 19)
    nemo_folder(tmp_path, 39)
    last = nemo_folder(tmp_path, 39, last=True)
    report, name = chosen(tmp_path)
    assert report.latest_valid.layout == "nemo" and report.latest_valid.step == 39
    assert name == NEMO % (1.0 / 40, 39, 39 * 64.0, "")  # the named save after its -last copy
    assert [c.name for c in report.checkpoints if c.last] == [last]


@pytest.mark.parametrize("damage, reason", [
    ("unfinished", "-unfinished is beside it: NeMo has not finished this save"),
    ("no_weights", "no weights/"),
    ("no_metadata", "no weights/.metadata: not committed"),
    ("truncated", "truncated"),
])
def test_nemo2_incomplete_saves_are_invalid(tmp_path, damage, reason):
    older = nemo_folder(tmp_path, 19, last=True)
    newest = nemo_folder(tmp_path, 39, last=True, weights=damage != "no_weights")
    folder = os.path.join(str(tmp_path), newest)
    if damage == "unfinished":
        write(os.path.join(str(tmp_path), newest + "-unfinished"), b"")
    elif damage == "no_metadata":
        os.remove(os.path.join(folder, "weights", ".metadata"))
    elif damage == "truncated":
        truncate(os.path.join(folder, "weights", "__0_0.distcp"), 5)
    report, name = chosen(tmp_path)
    assert name == older
    assert reason in why(report, newest)
    if damage == "unfinished":
        assert {"name": newest + "-unfinished", "reason": "NeMo's marker of an unfinished save (the checkpoint it "
                "names is invalid while it exists)"} in report.ignored
        assert report.unexplained == []


def test_nemo_unfinished_marker_of_a_lightning_file(tmp_path):
    # NeMo 1 (NeMoModelCheckpoint): the marker drops ".ckpt" and "-EMA"
    for step in (100, 200):
        write(os.path.join(str(tmp_path), "megatron_gpt--val_loss=1.00-step=%d.ckpt" % step), torch_zip("ckpt"))
    write(os.path.join(str(tmp_path), "megatron_gpt--val_loss=1.00-step=200-EMA.ckpt"), torch_zip("ckpt"))
    assert chosen(tmp_path)[1] == "megatron_gpt--val_loss=1.00-step=200.ckpt"
    write(os.path.join(str(tmp_path), "megatron_gpt--val_loss=1.00-step=200-unfinished"), b"")
    report, name = chosen(tmp_path)
    assert name == "megatron_gpt--val_loss=1.00-step=100.ckpt"
    assert "NeMo has not finished this save" in why(report, "megatron_gpt--val_loss=1.00-step=200.ckpt")


# ---------------------------------------------------------------------------------------------
# torchtune (torchtune/training/checkpointing/_checkpointer.py): epoch_<N>/ and recipe_state/
# ---------------------------------------------------------------------------------------------

def torchtune_folder(root, epoch, drop=None):
    folder = os.path.join(str(root), "epoch_%d" % epoch)
    hf_weights(folder, shards=2, drop=drop)
    write(os.path.join(folder, "config.json"), b'{"model_type": "llama"}')
    write(os.path.join(folder, "adapter_model.safetensors"), safetensors())
    return folder


def test_torchtune_epoch_folders(tmp_path):
    for epoch in range(3):
        torchtune_folder(tmp_path, epoch)
    write(os.path.join(str(tmp_path), "recipe_state", "recipe_state.pt"), torch_zip("recipe_state"))
    report, name = chosen(tmp_path)
    assert name == "epoch_2" and report.latest_valid.layout == "torchtune"
    assert (report.latest_valid.step, report.latest_valid.epoch) == (2, 2)
    assert report.unexplained == [] and report.warnings == []
    assert any(i["name"] == "recipe_state" and "torchtune" in i["reason"] for i in report.ignored)


@pytest.mark.parametrize("damage, reason", [
    ("shard_missing", "model.safetensors.index.json names model-00002-of-00002.safetensors, which is missing"),
    ("shard_truncated", "model-00001-of-00002.safetensors"),
    ("no_weights", "no weights in the folder"),
])
def test_torchtune_incomplete_epochs_are_invalid(tmp_path, damage, reason):
    torchtune_folder(tmp_path, 0)
    folder = torchtune_folder(tmp_path, 1, drop="model-00002-of-00002.safetensors" if damage == "shard_missing" else None)
    if damage == "shard_truncated":
        truncate(os.path.join(folder, "model-00001-of-00002.safetensors"), 3)
    elif damage == "no_weights":
        for name in os.listdir(folder):
            if name.endswith((".safetensors", ".json")) and name != "config.json":
                os.remove(os.path.join(folder, name))
    report, name = chosen(tmp_path)
    assert name == "epoch_0"
    assert reason in why(report, "epoch_1")


# ---------------------------------------------------------------------------------------------
# NeMo Automodel (nemo_automodel/components/checkpoint): epoch_<E>_step_<S>/ with model/, optim/
# ---------------------------------------------------------------------------------------------

def automodel_folder(root, epoch, step, model_format="dcp", optim=True):
    folder = os.path.join(str(root), "epoch_%d_step_%d" % (epoch, step))
    if model_format == "dcp":
        dcp_folder(folder, "model", sizes=(3000, 3000))
    else:  # safetensors, consolidated
        hf_weights(os.path.join(folder, "model"), shards=2)
    if optim:
        dcp_folder(folder, "optim", sizes=(5000, 5000))
    write(os.path.join(folder, "dataloader", "dataloader.pt"), torch_zip("dataloader"))
    write(os.path.join(folder, "rng", "rng.pt"), torch_zip("rng"))
    write(os.path.join(folder, "config.yaml"), b"step_scheduler:\n  ckpt_every_steps: 20\n")
    return folder


@pytest.mark.parametrize("model_format", ["dcp", "safetensors"])
def test_automodel_folders_are_ordered_by_epoch_then_step(tmp_path, model_format):
    automodel_folder(tmp_path, 0, 19, model_format)
    automodel_folder(tmp_path, 1, 39, model_format)
    report, name = chosen(tmp_path)
    assert name == "epoch_1_step_39" and report.latest_valid.layout == "nemo_automodel"
    assert (report.latest_valid.epoch, report.latest_valid.step) == (1, 39)


@pytest.mark.parametrize("damage, reason", [
    ("no_optim", "no optim/ (NeMo Automodel saves the optimizer after the model)"),
    ("optim_uncommitted", "no optim/.metadata: not committed"),
    ("model_truncated", "model/__0_0.distcp"),
])
def test_automodel_incomplete_saves_are_invalid(tmp_path, damage, reason):
    automodel_folder(tmp_path, 0, 19)
    folder = automodel_folder(tmp_path, 1, 39, optim=damage != "no_optim")
    if damage == "optim_uncommitted":
        os.remove(os.path.join(folder, "optim", ".metadata"))
    elif damage == "model_truncated":
        truncate(os.path.join(folder, "model", "__0_0.distcp"), 5)
    report, name = chosen(tmp_path)
    assert name == "epoch_0_step_19"
    assert reason in why(report, "epoch_1_step_39")


# ---------------------------------------------------------------------------------------------
# Megatron-Bridge (megatron/bridge/training/checkpointing.py): iter_<S>/ of torch_dist, its
# train_state.pt, and latest_train_state.pt + latest_checkpointed_iteration.txt at the top
# ---------------------------------------------------------------------------------------------

def test_megatron_bridge_sidecars_are_explained(tmp_path):
    for step in (10, 20):
        folder = dcp_folder(tmp_path, "iter_%07d" % step, sizes=(3000, 3000))
        write(os.path.join(folder, "train_state.pt"), torch_zip("train_state"))
        write(os.path.join(folder, "run_config.yaml"), b"train:\n  train_iters: 100\n")
    write(os.path.join(str(tmp_path), "latest_train_state.pt"), torch_zip("train_state"))
    write(os.path.join(str(tmp_path), "latest_checkpointed_iteration.txt"), b"20")
    report, name = chosen(tmp_path)
    assert name == "iter_0000020" and report.warnings == [] and report.unexplained == []
    assert [p["status"] for p in report.pointers] == ["current"]
    assert any(i["name"] == "latest_train_state.pt" and "Megatron-Bridge" in i["reason"] for i in report.ignored)


# ---------------------------------------------------------------------------------------------
# MosaicML Composer (composer/callbacks/checkpoint_saver.py): ep{epoch}-ba{batch}-rank{rank}.pt
# ---------------------------------------------------------------------------------------------

def test_composer_files_rank0_is_the_checkpoint(tmp_path):
    for epoch, batch in ((0, 600), (1, 1200)):
        for rank in (0, 1):
            write(os.path.join(str(tmp_path), "ep%d-ba%d-rank%d.pt" % (epoch, batch, rank)), torch_zip("state"))
    os.symlink("ep1-ba1200-rank0.pt", os.path.join(str(tmp_path), "latest-rank0.pt"))
    report, name = chosen(tmp_path)
    assert name == "ep1-ba1200-rank0.pt" and report.latest_valid.layout == "composer"
    assert (report.latest_valid.epoch, report.latest_valid.step) == (1, 1200)
    assert report.pointers[0]["name"] == "latest-rank0.pt" and report.pointers[0]["status"] == "current"
    assert report.unexplained == [] and report.warnings == []
    truncate(os.path.join(str(tmp_path), "ep1-ba1200-rank0.pt"), 7)
    report, name = chosen(tmp_path)
    assert name == "ep0-ba600-rank0.pt"
    assert report.pointers[0]["status"] == "invalid"


def test_composer_sharded_folders(tmp_path):
    dcp_folder(tmp_path, "ep0-ba600", sizes=(3000, 3000))
    newest = dcp_folder(tmp_path, "ep1-ba1200", sizes=(3000, 3000))
    assert chosen(tmp_path)[1] == "ep1-ba1200"
    os.remove(os.path.join(newest, ".metadata"))
    report, name = chosen(tmp_path)
    assert name == "ep0-ba600" and "not committed" in why(report, "ep1-ba1200")


# ---------------------------------------------------------------------------------------------
# Orbax (orbax/checkpoint): <step>/ with _CHECKPOINT_METADATA and one folder per item
# ---------------------------------------------------------------------------------------------

def orbax_folder(root, step, markers=True):
    folder = os.path.join(str(root), str(step))
    if markers:
        write(os.path.join(folder, "_CHECKPOINT_METADATA"), json.dumps(
            {"item_handlers": {"default": "orbax.checkpoint._src.handlers.pytree_checkpoint_handler."
                                          "PyTreeCheckpointHandler"}, "metrics": {},
             "init_timestamp_nsecs": 1733140000000000000, "commit_timestamp_nsecs": 1733140001000000000}).encode())
        write(os.path.join(folder, "default", "_METADATA"), b'{"tree_metadata": {}}')
        write(os.path.join(folder, "default", "manifest.ocdbt"), b"OCDBT\x00manifest")
    write(os.path.join(folder, "default", "ocdbt.process_0", "d", "6e3b1a"), b"\x11" * 4096)
    return folder


def test_orbax_numbered_folders(tmp_path):
    for step in (1000, 2000):
        orbax_folder(tmp_path, step)
    # a save in progress: Orbax writes into a temporary folder and renames it when done
    orbax_folder(tmp_path, "3000.orbax-checkpoint-tmp-1733140002")
    report, name = chosen(tmp_path)
    assert name == "2000" and report.latest_valid.layout == "orbax" and report.latest_valid.step == 2000
    assert any(i["name"].startswith("3000.orbax-checkpoint-tmp-") and "temporary" in i["reason"]
               for i in report.ignored)


def test_orbax_folder_without_markers_is_invalid(tmp_path):
    orbax_folder(tmp_path, 1000)
    orbax_folder(tmp_path, 2000, markers=False)
    report, name = chosen(tmp_path)
    assert name == "1000" and "no _METADATA or manifest.ocdbt" in why(report, "2000")


# ---------------------------------------------------------------------------------------------
# torchtitan (torchtitan/components/checkpoint.py): step-<S>/ as DCP, the last save maybe in
# Hugging Face format (checkpoint.last_save_in_hf)
# ---------------------------------------------------------------------------------------------

def test_torchtitan_last_save_in_hugging_face_format(tmp_path):
    dcp_folder(tmp_path, "step-100", sizes=(3000, 3000))
    hf_weights(os.path.join(str(tmp_path), "step-200"), shards=2)
    report, name = chosen(tmp_path)
    assert name == "step-200" and report.latest_valid.layout == "torch_dcp"
    os.remove(os.path.join(str(tmp_path), "step-200", "model-00002-of-00002.safetensors"))
    report, name = chosen(tmp_path)
    assert name == "step-100" and "model-00002-of-00002.safetensors, which is missing" in why(report, "step-200")


# ---------------------------------------------------------------------------------------------
# The docs' table names every layout the library reads
# ---------------------------------------------------------------------------------------------

def test_the_layouts_table_names_every_layout():
    with open(os.path.join(REPO, "docs", "checkpoint-contract.md")) as handle:
        text = handle.read()
    table = text[text.index("## Layouts read from other tools"):].split("\n\n")[2]
    rows = table.splitlines()[2:]
    documented = [re.match(r"^\| [^|]*\(`([a-z_]+)`\)", line).group(1) for line in rows]
    assert sorted(documented) == sorted(ck.LAYOUTS)
    for line in rows:
        assert len([c for c in line.split("|")[1:-1] if c.strip()]) == 5, line  # source included


def test_verify_reads_a_nemo2_folder(tmp_path):
    name = nemo_folder(tmp_path, 19, last=True)
    ckpt = ck.verify(os.path.join(str(tmp_path), name), "sizes")
    assert (ckpt.layout, ckpt.step, ckpt.valid) == ("nemo", 19, True)
    write(os.path.join(str(tmp_path), name + "-unfinished"), b"")
    assert "NeMo has not finished" in ck.verify(os.path.join(str(tmp_path), name), "sizes").why_invalid


RECORDED = os.path.join(REPO, "tests", "unit", "fixtures", "checkpoints")


def test_recorded_accelerate_save_state(tmp_path):
    import shutil
    for name in ("checkpoint-8", "checkpoint_3"):
        shutil.copytree(os.path.join(RECORDED, "accelerate-1.16.0", "checkpoint-8"), str(tmp_path / name))
        ckpt = ck.verify(str(tmp_path / name), "sha256")
        assert (ckpt.layout, ckpt.valid, ckpt.files) == ("accelerate", True, 4), ckpt.why_invalid
    truncate(str(tmp_path / "checkpoint-8" / "optimizer.bin"), 100)
    assert "optimizer.bin" in ck.verify(str(tmp_path / "checkpoint-8"), "sizes").why_invalid
    os.remove(str(tmp_path / "checkpoint_3" / "random_states_0.pkl"))
    assert "not committed" in ck.verify(str(tmp_path / "checkpoint_3"), "sizes").why_invalid


def test_recorded_orbax_checkpoint_manager(tmp_path):
    import shutil
    shutil.copytree(os.path.join(RECORDED, "orbax-0.12.8"), str(tmp_path / "run"), ignore=shutil.ignore_patterns("*.md"))
    report, name = chosen(tmp_path / "run", "sha256")
    assert name == "200" and report.latest_valid.layout == "orbax" and report.warnings == []
    for marker in ("_METADATA", "manifest.ocdbt"):
        os.remove(str(tmp_path / "run" / "200" / "default" / marker))
    report, name = chosen(tmp_path / "run")
    assert name == "100" and "no _METADATA or manifest.ocdbt" in why(report, "200")

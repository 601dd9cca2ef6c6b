# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each layout's validity from its library's own load (issue 39), on the folders the real libraries wrote
(tests/unit/fixtures/checkpoints/*, recorded by tests/trainers/record_fixtures.py: names, sizes, metadata), each
damaged the way a kill or a lost node leaves it. No library is needed here: tests/trainers proves the same against
the libraries' own resume (make trainers)."""

from __future__ import annotations

import os
import shutil

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck

from checkpoint_builders import rebuild_recorded, truncate  # noqa: E402 pylint: disable=import-error

RECORDED = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 3, "fixtures", "checkpoints"))


def rebuilt(tmp_path, name):
    return rebuild_recorded(os.path.join(RECORDED, name), tmp_path / "run")


def apply_damage(path, kind):
    """A file ``missing`` (removed) or ``cut`` (its first half left), as a kill or a crash leaves it."""
    if kind == "missing":
        os.remove(path)
    else:
        truncate(path, os.path.getsize(path) // 2)


def chosen(run_dir, level="sizes"):
    report = ck.inspect(str(run_dir), level)
    return report, report.latest_valid.name if report.latest_valid else None


def why(report, name):
    return [c.why_invalid for c in report.checkpoints if c.name == name][0]


# --- the Hugging Face Trainer (transformers 5.25.0: trainer.py _load_from_checkpoint, _load_optimizer_and_scheduler)

@pytest.mark.parametrize("damage, reason", [
    (None, None),
    ("model.safetensors missing", "no model weights the Trainer loads"),
    ("optimizer.pt missing", "the optimizer state (optimizer.pt) missing: the Trainer would resume with a fresh"),
    ("scheduler.pt missing", "scheduler.pt missing"),
    ("config.json cut", "config.json is not valid JSON"),
    ("optimizer.pt cut", "optimizer.pt: zip"),
    ("trainer_state.json missing", "no trainer_state.json"),
])
def test_trainer(tmp_path, damage, reason):
    run = rebuilt(tmp_path, "transformers-5.25.0")
    if damage:
        name, kind = damage.split()
        path = str(run / "checkpoint-4" / name)
        apply_damage(path, kind)
    report, name = chosen(run)
    assert name == ("checkpoint-2" if damage else "checkpoint-4"), report.warnings
    assert report.latest_valid.layout == "huggingface"
    if damage:
        assert reason in why(report, "checkpoint-4")


# --- Accelerate (1.16.0: accelerator.py save_state / load_state, checkpointing.py)

@pytest.mark.parametrize("naming", ["step_<S>", "epoch_<E>", "checkpoint_<N>", "checkpoint-<S>"])
@pytest.mark.parametrize("damage, reason", [
    (None, None),
    ("custom_checkpoint_0.pkl missing", "0 custom_checkpoint_<i>.pkl, the save before it"),
    ("custom_checkpoint_0.pkl cut", "custom_checkpoint_0.pkl: zip"),
    ("random_states_0.pkl missing", "no random_states_<rank>.pkl: not committed"),
    ("random_states_0.pkl cut", "random_states_0.pkl: zip"),
    ("optimizer.bin missing", "optimizer.bin missing"),
    ("scheduler.bin missing", "0 scheduler[_<i>].bin, the save before it"),
    ("model.safetensors missing", "no model weights"),
])
def test_accelerate(tmp_path, naming, damage, reason):
    run = rebuilt(tmp_path, "accelerate-1.16.0-step")
    names = {"step_<S>": ("step_2", "step_4"), "epoch_<E>": ("epoch_0", "epoch_1"),
             "checkpoint_<N>": ("checkpoint_0", "checkpoint_1"), "checkpoint-<S>": ("checkpoint-2", "checkpoint-4")}
    older, newest = names[naming]
    os.rename(str(run / "step_2"), str(run / older))
    os.rename(str(run / "step_4"), str(run / newest))
    if damage:
        name, kind = damage.split()
        path = str(run / newest / name)
        apply_damage(path, kind)
    report, name = chosen(run)
    assert name == (older if damage else newest), report.warnings
    assert report.latest_valid.layout == "accelerate" and report.unexplained == []
    if damage:
        assert reason in why(report, newest)


def test_accelerate_killed_after_the_model_file_of_an_epoch_folder_is_accelerates_not_torchtunes(tmp_path):
    run = rebuilt(tmp_path, "accelerate-1.16.0-step")
    os.rename(str(run / "step_2"), str(run / "epoch_0"))
    for name in os.listdir(str(run / "step_4")):
        if name != "model.safetensors":
            os.remove(str(run / "step_4" / name))
    os.rename(str(run / "step_4"), str(run / "epoch_1"))
    report, name = chosen(run)
    assert name == "epoch_0"
    assert [c.layout for c in report.checkpoints] == ["accelerate", "accelerate"]
    assert "no random_states_<rank>.pkl: not committed" in why(report, "epoch_1")


# --- torch.distributed.checkpoint, rank-local metadata (torch 2.13.0: state_dict_loader.py load, filesystem.py)

@pytest.mark.parametrize("damage, reason", [
    (None, None),
    (["__1.metadata"], "rank-local metadata incomplete"),
    (["__1.metadata", "__1_0.distcp"], "1 __<rank>.metadata, the save before it (step-2) has 2"),
    (["__0.metadata", "__0_0.distcp", "__1.metadata", "__1_0.distcp"], "every file is empty"),
    ("cut", "__1_0.distcp"),
])
def test_dcp_rank_local_metadata(tmp_path, damage, reason):
    run = rebuilt(tmp_path, "torch-2.13.0-dcp-rank-local")
    if damage == "cut":
        truncate(str(run / "step-4" / "__1_0.distcp"), 100)
    elif damage:
        for name in damage:
            os.remove(str(run / "step-4" / name))
    report, name = chosen(run)
    assert name == ("step-2" if damage else "step-4"), report.warnings
    assert report.latest_valid.layout == "torch_dcp"
    if damage and reason != "every file is empty":
        assert reason in why(report, "step-4")


def test_dcp_rank_local_metadata_of_a_contract_folder_name(tmp_path):
    run = rebuilt(tmp_path, "torch-2.13.0-dcp-rank-local")
    os.rename(str(run / "step-4"), str(run / "step_000000004"))
    report, name = chosen(run)
    assert name == "step_000000004" and report.latest_valid.layout == "torch_dcp"


# --- DeepSpeed (0.19.8: engine.py save_checkpoint writes latest on rank 0 before its barrier; load_checkpoint)

@pytest.mark.parametrize("damage, reason", [
    (None, None),
    ("zero_pp_rank_1_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt missing: the model "
                                                  "states say dp_world_size 2, mp_world_size 1"),
    ("zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt missing"),
    ("mp_rank_00_model_states.pt", "no *model_states.pt"),
])
def test_deepspeed_zero2_a_ranks_shard_missing_with_latest_written(tmp_path, damage, reason):
    run = rebuilt(tmp_path, "deepspeed-0.19.8-zero2")
    with open(str(run / "latest")) as handle:
        assert handle.read().strip() == "global_step4"
    if damage:
        os.remove(str(run / "global_step4" / damage))
    report, name = chosen(run)
    assert name == ("global_step2" if damage else "global_step4"), report.warnings
    if damage:
        assert reason in why(report, "global_step4")
        assert report.pointers[0]["status"] == "invalid"


def test_deepspeed_world_size_out_of_range_is_invalid(tmp_path):
    run = rebuilt(tmp_path, "deepspeed-0.19.8-zero2")
    import pickle  # pylint: disable=import-outside-toplevel
    from checkpoint_builders import torch_zip, write  # noqa: E402 pylint: disable=import-error,import-outside-toplevel
    write(str(run / "global_step4" / "mp_rank_00_model_states.pt"), torch_zip("mp_rank_00_model_states", data={
        "dp_world_size": 10 ** 400, "mp_world_size": 1, "optimizer": None, "param_shapes": []}))
    report, name = chosen(run)
    assert name == "global_step2" and "dp_world_size <a 1329-bit integer> is not an integer of 1 to 2**20" in why(
        report, "global_step4")


def test_the_recordings_name_their_versions():
    for name in ("transformers-5.25.0", "accelerate-1.16.0-step", "torch-2.13.0-dcp-rank-local",
                 "deepspeed-0.19.8-zero2"):
        with open(os.path.join(RECORDED, name, "README.md")) as handle:
            text = handle.read()
        assert "torch 2.13.0" in text and name.split("-")[1] in text, name


def test_accelerate_with_deepspeed_needs_every_ranks_shard(tmp_path):
    # Accelerate under DeepSpeed: save_state has the engine save_checkpoint into pytorch_model/ (accelerator.py)
    run = rebuilt(tmp_path, "accelerate-1.16.0-step")
    zero = rebuild_recorded(os.path.join(RECORDED, "deepspeed-0.19.8-zero2"), tmp_path / "zero")
    for step in ("step_2", "step_4"):
        os.remove(str(run / step / "model.safetensors"))
        shutil.copytree(str(zero / "global_step4"), str(run / step / "pytorch_model"))
    assert chosen(run)[1] == "step_4"
    os.remove(str(run / "step_4" / "pytorch_model" / "zero_pp_rank_1_mp_rank_00_optim_states.pt"))
    report, name = chosen(run)
    assert name == "step_2" and "pytorch_model/zero_pp_rank_1_mp_rank_00_optim_states.pt missing" in why(report, "step_4")


@pytest.mark.parametrize("form, valid", [
    ("adapter_model.safetensors", True),          # PEFT: the adapter is the weights the Trainer loads
    ("pytorch_model_fsdp_0/", True),              # FSDP SHARDED_STATE_DICT: a folder the Trainer recognises
    ("sharded", True),                            # save_pretrained's shards with their index
    ("save_only_model", True),                    # no optimizer, scheduler nor rng state: nothing to resume them from
    ("rng_state.pth alone", False),               # rng state written, optimizer and scheduler gone
    ("training_args.bin alone", False),           # no weights in any form the Trainer loads
])
def test_trainer_weight_forms(tmp_path, form, valid):
    run = rebuilt(tmp_path, "transformers-5.25.0")
    folder = run / "checkpoint-4"
    from checkpoint_builders import dcp_folder, safetensors, write  # noqa: E402 pylint: disable=import-error,import-outside-toplevel
    if form in ("adapter_model.safetensors", "pytorch_model_fsdp_0/", "sharded", "training_args.bin alone"):
        os.remove(str(folder / "model.safetensors"))
    if form == "adapter_model.safetensors":
        write(str(folder / form), safetensors())
    elif form == "pytorch_model_fsdp_0/":
        dcp_folder(str(folder), "pytorch_model_fsdp_0", sizes=(3000, 3000))
    elif form == "sharded":
        write(str(folder / "model.safetensors.index.json"),
              b'{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}')
        for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
            write(str(folder / shard), safetensors())
    elif form == "save_only_model":
        for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
            os.remove(str(folder / name))
    elif form == "rng_state.pth alone":
        for name in ("optimizer.pt", "scheduler.pt"):
            os.remove(str(folder / name))
    report, name = chosen(run)
    assert name == ("checkpoint-4" if valid else "checkpoint-2"), report.warnings

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""The checks of each layout at each validation level (structure, sizes, sha256, load)."""

from __future__ import annotations

import os
import posixpath
import re
import stat

try:
    from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .bounds import bytes_problem, number_problem, step_problem
from .common import (
    ACCELERATE,
    AUTOMODEL,
    Checkpoint,
    COMPOSER,
    CONTRACT,
    DCP,
    DEEPSPEED,
    FORMAT,
    FORMAT_VERSION,
    HUGGINGFACE,
    Invalid,
    LIGHTNING,
    LOAD,
    LOAD_SAFE_GLOBALS,
    MANIFEST,
    MEGATRON,
    NEMO,
    ORBAX,
    SHA256,
    SIZES,
    TORCH_FILE,
    TORCHTUNE,
)
from .names import CKPT_SUFFIX, NEMO_UNFINISHED
from .fsutil import hash_file, read_json, require_nonempty, stat_regular, walk_files
from .parts import (
    check_dcp_files,
    check_deepspeed_files,
    check_weight_files,
    check_zip_members,
    DCP_RANK_METADATA,
    gapless,
    level_at_least,
    TORCH_SUFFIXES,
)
from .formats import check_torch_zip


_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_MEGATRON_RANK_DIR = re.compile(r"^mp_rank_([0-9]+)(?:_([0-9]+))?(?:_([0-9]+))?$")


def _check_contract(ckpt: Checkpoint, level: str, base_real: str) -> None:
    manifest_path = os.path.join(ckpt.path, MANIFEST)
    if not os.path.lexists(manifest_path):
        names = os.listdir(ckpt.path)
        if ".metadata" in names or any(n.endswith(".distcp") or DCP_RANK_METADATA.match(n) for n in names):
            ckpt.layout = DCP
            _check_dcp(ckpt, level, base_real)
            return
        if any(_ACCELERATE_STATE.match(n) for n in names):
            # Accelerate's own examples save_state to step_<S> (examples/complete_nlp_example.py)
            ckpt.layout = ACCELERATE
            _check_accelerate(ckpt, level, base_real)
            return
        raise Invalid("no %s: not committed" % MANIFEST)
    if os.path.islink(manifest_path):
        raise Invalid("%s is a symlink" % MANIFEST)
    manifest = read_json(manifest_path, MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise Invalid("%s is not a %s manifest" % (MANIFEST, FORMAT))
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise Invalid("%s has no format_version" % MANIFEST)
    if version > FORMAT_VERSION:
        raise Invalid("%s format_version %d is newer than this reader's %d" % (MANIFEST, version, FORMAT_VERSION))
    step, epoch = manifest.get("step"), manifest.get("epoch")
    if step != ckpt.step or isinstance(step, bool):
        raise Invalid("%s step %r does not match the folder name's %d" % (MANIFEST, step, ckpt.step))
    if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool)):
        raise Invalid("%s epoch %r is not an integer" % (MANIFEST, epoch))
    ckpt.epoch = epoch
    ckpt.time = manifest.get("time") if isinstance(manifest.get("time"), str) else None
    entries = manifest.get("files")
    if not isinstance(entries, list) or not entries:
        raise Invalid("%s lists no files" % MANIFEST)
    seen = set()
    checked: List[Tuple[str, str, int, str]] = []
    for entry in entries:
        rel = entry.get("path") if isinstance(entry, dict) else None
        size = entry.get("size") if isinstance(entry, dict) else None
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(rel, str) or not rel or rel.startswith("/") or "\x00" in rel or \
                posixpath.normpath(rel) != rel or rel == ".." or rel.startswith("../") or rel == MANIFEST:
            raise Invalid("%s lists a bad path: %r" % (MANIFEST, rel))
        if rel in seen:
            raise Invalid("%s lists %s twice" % (MANIFEST, rel))
        seen.add(rel)
        if not isinstance(size, int) or bytes_problem(size):
            raise Invalid("%s: bad size for %s: %s" % (MANIFEST, rel, bytes_problem(size)))
        if not isinstance(digest, str) or not _SHA256_HEX.match(digest):
            raise Invalid("%s: bad sha256 for %s" % (MANIFEST, rel))
        checked.append((rel, os.path.join(ckpt.path, *rel.split("/")), size, digest))
    ckpt.files = len(checked)
    ckpt.size = sum(size for _rel, _path, size, _digest in checked)
    if ckpt.size == 0:
        raise Invalid("every file is empty")
    for rel, path, size, _digest in checked:
        try:
            st = os.lstat(path)
        except OSError:
            raise Invalid("%s is missing" % rel)
        if not stat.S_ISREG(st.st_mode):
            raise Invalid("%s is not a regular file (the contract stores regular files only)" % rel)
        if level_at_least(level, SIZES) and st.st_size != size:
            raise Invalid("%s: %d bytes on disk, the manifest says %d" % (rel, st.st_size, size))
    if level_at_least(level, SHA256):
        for rel, path, size, digest in checked:
            try:
                count, actual = hash_file(path)
            except OSError as exc:
                raise Invalid("%s cannot be read: %s" % (rel, exc))
            if count != size:
                raise Invalid("%s: read %d bytes, the manifest says %d" % (rel, count, size))
            if actual != digest:
                raise Invalid("%s: sha256 %s does not match the manifest's %s" % (rel, actual, digest))


def _check_dcp(ckpt: Checkpoint, level: str, base_real: str) -> None:
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "torch.distributed.checkpoint")
    rels = [rel for rel, _path, _size in files]
    if ".metadata" not in rels and not any(DCP_RANK_METADATA.match(rel) for rel in rels) and any(
            rel.endswith(".safetensors") for rel in rels):
        # torchtitan's last save in Hugging Face format (checkpoint.last_save_in_hf)
        check_weight_files(ckpt, files, level)
        return
    check_dcp_files(ckpt, files, level)


# The Hugging Face Trainer (transformers 5.25.0, trainer.py): _save_checkpoint writes the model (save_model:
# config.json, model.safetensors or its shards and index, or an adapter; training_args.bin), then
# _save_optimizer_and_scheduler (optimizer.pt, scheduler.pt; DeepSpeed's global_step<S>/, FSDP's
# optimizer_0/), scaler.pt, rng_state[_<rank>].pth, and trainer_state.json last. _load_from_checkpoint
# needs one of the weight files below (else "Can't find a valid checkpoint"); _load_optimizer_and_scheduler
# loads the optimizer and the scheduler only when both are there, and otherwise goes on silently with a
# fresh optimizer and a restarted schedule.
_HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
               "pytorch_model.bin.index.json", "adapter_model.safetensors", "adapter_model.bin")
_HF_FSDP_MODEL = "pytorch_model_fsdp"
_HF_OPTIMIZER = ("optimizer.pt", "optimizer.bin")
_HF_SCHEDULER = "scheduler.pt"
_HF_RNG = re.compile(r"^rng_state(?:_[0-9]+)?\.pth\Z")


def _hf_trainer_parts(ckpt: Checkpoint, files: List[Tuple[str, str, int]]) -> None:
    """What the Trainer's own load needs of a ``checkpoint-<S>`` folder (see above), else Invalid."""
    tops = set(rel.split("/", 1)[0] for rel, _path, _size in files)
    if "config.json" in tops:   # _load_from_checkpoint reads it (its transformers_version) when it is there
        read_json(os.path.join(ckpt.path, "config.json"), "config.json")
    folders = set(rel.split("/", 1)[0] for rel, _path, _size in files if "/" in rel)
    adapters = [f for f in folders if any(rel.startswith(f + "/adapter_model.") for rel, _p, _s in files)]
    fsdp = any(_HF_FSDP_MODEL in f for f in folders) or _HF_FSDP_MODEL + ".bin" in tops
    if not (tops.intersection(_HF_WEIGHTS) or fsdp or adapters):
        raise Invalid("no model weights the Trainer loads (%s, an FSDP %s folder or an adapter folder): "
                      "transformers' _load_from_checkpoint fails" % (", ".join(_HF_WEIGHTS), _HF_FSDP_MODEL))
    if any(f.startswith("global_step") for f in folders):
        return  # DeepSpeed's own checkpoint holds the optimizer and the schedule (checked by the Trainer's load)
    optimizer = bool(tops.intersection(_HF_OPTIMIZER)) or any("optimizer" in f for f in folders)
    scheduler = _HF_SCHEDULER in tops
    rng = any(_HF_RNG.match(t) for t in tops)
    if (optimizer or scheduler or rng) and not (optimizer and scheduler):
        missing = [name for name, there in (("the optimizer state (optimizer.pt)", optimizer),
                                            (_HF_SCHEDULER, scheduler)) if not there]
        raise Invalid("%s missing: the Trainer would resume with a fresh optimizer and a restarted schedule "
                      "(it loads them only together; a save with %s writes both)" % (
                          " and ".join(missing), "rng_state.pth" if rng and not (optimizer or scheduler) else "either"))


def _check_huggingface(ckpt: Checkpoint, level: str, base_real: str) -> None:
    files = walk_files(ckpt.path, base_real)
    if _is_accelerate(files):
        ckpt.layout = ACCELERATE
        _check_accelerate(ckpt, level, base_real, files)
        return
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "Hugging Face")
    state = read_json(os.path.join(ckpt.path, "trainer_state.json"),
                      "trainer_state.json (the Trainer writes it last)")
    if not isinstance(state, dict):
        raise Invalid("trainer_state.json is not an object")
    global_step = state.get("global_step")
    if isinstance(global_step, int) and global_step != ckpt.step:
        raise Invalid("trainer_state.json global_step %d does not match the folder name's %d" % (global_step, ckpt.step))
    if isinstance(state.get("epoch"), (int, float)) and not isinstance(state.get("epoch"), bool):
        ckpt.epoch = state["epoch"]
    _hf_trainer_parts(ckpt, files)
    check_weight_files(ckpt, files, level, required=False)


# Accelerate's save_state (accelerate 1.16.0: accelerator.py save_state, checkpointing.py
# save_accelerator_state): the models (model.safetensors or pytorch_model.bin, model_<i>...; FSDP's
# pytorch_model_fsdp_<i>/, DeepSpeed's pytorch_model/), optimizer[_<i>].bin, scheduler[_<i>].bin,
# sampler[_<i>].bin, dl_state_dict[_<i>].bin, scaler.pt, then each process's random_states_<rank>.pkl, and
# after them every registered object's custom_checkpoint_<i>.pkl (save_custom_state). Every .pkl is a
# torch.save zip. load_state (accelerator.py) loads each model, optimizer and scheduler it holds without
# asking whether the file is there, and refuses a folder whose count of custom_checkpoint_<i>.pkl is not
# the number of registered objects: a save killed among them is known by the save before it (Checkpoint.parts).
_ACCELERATE_RANDOM_STATES = re.compile(r"^random_states_([0-9]+)\.pkl\Z")
_ACCELERATE_CUSTOM = re.compile(r"^custom_checkpoint_([0-9]+)\.pkl\Z")
_ACCELERATE_FILES = re.compile(r"^(optimizer|scheduler|sampler|dl_state_dict)(?:_([0-9]+))?\.bin\Z")
_ACCELERATE_MODEL = re.compile(r"^(?:pytorch_model|model)(?:_fsdp)?(?:_[0-9]+)?(?:-[0-9]+-of-[0-9]+)?(?:\.|/|$)")
#: Files only Accelerate's save_state writes: a step_<S> or epoch_<E> folder holding one is Accelerate's.
_ACCELERATE_STATE = re.compile(r"^(?:random_states_[0-9]+\.pkl|custom_checkpoint_[0-9]+\.pkl|"
                               r"(?:optimizer|scheduler|sampler)(?:_[0-9]+)?\.bin)\Z")
#: Accelerate's model files by their exact names (torchtune's epoch_<N> holds model-0000i-of-0000n shards
#: and config.json): an epoch_<E> folder with one of them and no config.json is Accelerate's.
_ACCELERATE_MODEL_FILE = re.compile(r"^(?:model(?:_[0-9]+)?\.safetensors|pytorch_model(?:_[0-9]+)?\.bin)\Z")


def _is_accelerate(files: List[Tuple[str, str, int]], model_only: bool = False) -> bool:
    """A folder of Accelerate's save_state (not the Trainer's ``checkpoint-<S>``, the contract's ``step_<S>``
    or torchtune's ``epoch_<N>``), by the files inside. ``model_only``: a folder holding only Accelerate's
    model file so far (a save killed after it) counts too."""
    tops = set(rel.split("/", 1)[0] for rel, _path, _size in files)
    if "trainer_state.json" in tops:
        return False
    if any(_ACCELERATE_STATE.match(t) for t in tops):
        return True
    return model_only and "config.json" not in tops and any(_ACCELERATE_MODEL_FILE.match(t) for t in tops)


def _check_accelerate(ckpt: Checkpoint, level: str, base_real: str, files: Any = None) -> None:
    files = files if files is not None else walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "Accelerate")
    ranks, custom, kinds = [], [], {}  # type: List[int], List[int], Dict[str, set]
    for rel, _path, size in files:
        if "/" in rel:
            continue
        for regex, found in ((_ACCELERATE_RANDOM_STATES, ranks), (_ACCELERATE_CUSTOM, custom)):
            match = regex.match(rel)
            if match:
                found.append(int(match.group(1)))
        match = _ACCELERATE_FILES.match(rel)
        if match:
            kinds.setdefault(match.group(1), set()).add(int(match.group(2) or 0))
    if not ranks:
        raise Invalid("no random_states_<rank>.pkl: not committed (Accelerate's save_state writes them after "
                      "the models, optimizers and schedulers)")
    parts = {"random_states_<rank>.pkl": gapless(ranks, "random_states_<rank>.pkl"),
             "custom_checkpoint_<i>.pkl": gapless(custom, "custom_checkpoint_<i>.pkl (registered objects)")}
    for kind in ("optimizer", "scheduler", "sampler", "dl_state_dict"):
        parts[kind + "[_<i>].bin"] = gapless(kinds.get(kind, ()), kind + "[_<i>].bin")
    if parts["scheduler[_<i>].bin"] > parts["optimizer[_<i>].bin"]:
        raise Invalid("%d scheduler(s) and %d optimizer(s): optimizer.bin missing (load_state loads every "
                      "registered optimizer)" % (parts["scheduler[_<i>].bin"], parts["optimizer[_<i>].bin"]))
    models = [(rel, size) for rel, _path, size in files if _ACCELERATE_MODEL.match(rel)]
    if not any(size for _rel, size in models):
        raise Invalid("no model weights (model.safetensors, pytorch_model.bin, pytorch_model_fsdp_0/, ...)")
    parts["models"] = len(set(re.sub(r"(?:-[0-9]+-of-[0-9]+)?(?:\..*|/.*)$", "", rel) for rel, _size in models))
    for top in sorted(set(rel.split("/", 1)[0] for rel, _path, _size in files if rel.endswith("/.metadata"))):
        check_dcp_files(ckpt, files, level, prefix=top + "/")
    for top in sorted(set(rel.split("/", 1)[0] for rel, _path, _size in files if "/" in rel
                          and rel.endswith("model_states.pt"))):   # DeepSpeed's pytorch_model/ (its save_checkpoint)
        check_deepspeed_files([f for f in files if f[0].startswith(top + "/")], "Accelerate's DeepSpeed " + top)
    ckpt.parts = parts
    check_weight_files(ckpt, files, level, required=False)
    for rel, _path, size in files:
        if rel.endswith(".pkl") and size == 0:
            raise Invalid("%s is empty" % rel)
    # every .pkl of save_state is a torch.save zip too
    check_zip_members([f for f in files if f[0].endswith(".pkl")], level, also=(".pkl",))


def _nemo_unfinished(ckpt: Checkpoint) -> None:
    """NeMo's ``<name>-unfinished`` marker beside the checkpoint: the save has not finished."""
    stem = ckpt.name[:-len(CKPT_SUFFIX)] if ckpt.name.endswith(CKPT_SUFFIX) else ckpt.name
    stem = stem[:-len("-EMA")] if stem.endswith("-EMA") else stem
    marker = stem + NEMO_UNFINISHED
    if os.path.lexists(os.path.join(os.path.dirname(ckpt.path), marker)):
        raise Invalid("%s is beside it: NeMo has not finished this save" % marker)


def _check_nemo(ckpt: Checkpoint, level: str, base_real: str) -> None:
    _nemo_unfinished(ckpt)
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "NeMo")
    if not any(rel.startswith("weights/") for rel, _path, _size in files):
        raise Invalid("no weights/ (NeMo 2 writes the distributed checkpoint there, context/ beside it)")
    check_dcp_files(ckpt, files, level, prefix="weights/")


def _check_torchtune(ckpt: Checkpoint, level: str, base_real: str) -> None:
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    if _is_accelerate(files, model_only=True):
        # Accelerate's own examples save_state to epoch_<E> (examples/complete_nlp_example.py)
        ckpt.layout = ACCELERATE
        _check_accelerate(ckpt, level, base_real, files)
        return
    require_nonempty(files, "torchtune")
    check_weight_files(ckpt, files, level)


def _check_automodel(ckpt: Checkpoint, level: str, base_real: str) -> None:
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "NeMo Automodel")
    rels = set(rel for rel, _path, _size in files)
    if not any(rel.startswith("model/") for rel in rels):
        raise Invalid("no model/")
    if "model/.metadata" in rels:
        check_dcp_files(ckpt, files, level, prefix="model/")
    else:
        check_weight_files(ckpt, files, level, prefix="model/")
    if not any(rel.startswith("optim/") for rel in rels):
        raise Invalid("no optim/ (NeMo Automodel saves the optimizer after the model)")
    check_dcp_files(ckpt, files, level, prefix="optim/")


def _check_composer(ckpt: Checkpoint, level: str, base_real: str) -> None:
    if not ckpt.is_dir:
        _check_single_file(ckpt, level, base_real)
        return
    # a sharded save (FSDP): torch.distributed.checkpoint
    _check_dcp(ckpt, level, base_real)


#: Orbax's markers: ``_CHECKPOINT_METADATA`` of the step, ``_METADATA`` / ``manifest.ocdbt`` of
#: each item, ``commit_success.txt`` where renames are not atomic; Flax's legacy ``checkpoint``.
_ORBAX_ITEM_MARKERS = ("_METADATA", "manifest.ocdbt")


def _check_orbax(ckpt: Checkpoint, level: str, base_real: str) -> None:
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "Orbax")
    items = [rel for rel, _path, _size in files
             if rel.rsplit("/", 1)[-1] in _ORBAX_ITEM_MARKERS and rel.count("/") <= 1]
    if not items and "checkpoint" not in set(rel for rel, _path, _size in files):
        raise Invalid("no _METADATA or manifest.ocdbt of an item (not an Orbax checkpoint, or not finalized)")
    for rel, _path, size in files:
        if rel.rsplit("/", 1)[-1] in _ORBAX_ITEM_MARKERS + ("_CHECKPOINT_METADATA",) and size == 0:
            raise Invalid("%s is empty" % rel)


def _check_deepspeed(ckpt: Checkpoint, level: str, base_real: str) -> None:
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "DeepSpeed")
    check_deepspeed_files(files, "DeepSpeed")
    check_zip_members(files, level)


def _check_megatron(ckpt: Checkpoint, level: str, base_real: str) -> None:
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "Megatron")
    rels = set(rel for rel, _path, _size in files)
    if ".metadata" in rels or any(rel.endswith(".distcp") for rel in rels):
        check_dcp_files(ckpt, files, level)
        return
    grid: List[Tuple[int, ...]] = []
    for rel, _path, size in files:
        parts = rel.split("/")
        match = _MEGATRON_RANK_DIR.match(parts[0]) if len(parts) == 2 else None
        if match and parts[1] == "model_optim_rng.pt":
            if size == 0:
                raise Invalid("%s is empty" % rel)
            grid.append(tuple(int(g) for g in match.groups() if g is not None))
    if not grid:
        raise Invalid("no .metadata and no mp_rank_*/model_optim_rng.pt")
    dims = set(len(g) for g in grid)
    axes = [sorted(set(g[i] for g in grid)) for i in range(max(dims))]
    expected = 1
    for axis in axes:
        expected *= len(axis)
        if axis != list(range(len(axis))):
            raise Invalid("mp_rank_* folders incomplete: ranks %s" % axis)
    if len(dims) != 1 or len(set(grid)) != expected:
        raise Invalid("mp_rank_* folders incomplete: %d of %d tensor/pipeline ranks" % (len(set(grid)), expected))
    check_zip_members(files, level)


def _check_single_file(ckpt: Checkpoint, level: str, base_real: str) -> None:
    st = stat_regular(ckpt.path, os.path.basename(ckpt.path))
    ckpt.files, ckpt.size = 1, st.st_size
    if st.st_size == 0:
        raise Invalid("empty file")
    if level_at_least(level, SIZES):
        problem = check_torch_zip(ckpt.path, read_all=level_at_least(level, SHA256))
        if problem:
            raise Invalid(problem)


def _check_lightning(ckpt: Checkpoint, level: str, base_real: str) -> None:
    _nemo_unfinished(ckpt)
    if not ckpt.is_dir:
        _check_single_file(ckpt, level, base_real)
        return
    # A sharded Lightning checkpoint: FSDP writes torch.distributed.checkpoint, DeepSpeed its own.
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "Lightning")
    rels = set(rel for rel, _path, _size in files)
    if ".metadata" in rels:
        check_dcp_files(ckpt, files, level)
    elif any(rel.startswith("checkpoint/") for rel in rels):
        check_deepspeed_files(files, "Lightning DeepSpeed")
        check_zip_members(files, level)
    else:
        raise Invalid("sharded .ckpt folder without .metadata or checkpoint/")


_CHECKS: Dict[str, Callable[[Checkpoint, str, str], None]] = {
    CONTRACT: _check_contract,
    DCP: _check_dcp,
    TORCH_FILE: _check_single_file,
    HUGGINGFACE: _check_huggingface,
    DEEPSPEED: _check_deepspeed,
    MEGATRON: _check_megatron,
    LIGHTNING: _check_lightning,
    ACCELERATE: _check_accelerate,
    NEMO: _check_nemo,
    TORCHTUNE: _check_torchtune,
    AUTOMODEL: _check_automodel,
    COMPOSER: _check_composer,
    ORBAX: _check_orbax,
}


def torch_load(path: str, map_location: Any = "cpu", safe_globals: Sequence[Any] = LOAD_SAFE_GLOBALS, mmap: bool = False) -> Any:
    """``torch.load(path, weights_only=True)`` with ``safe_globals`` allowed: how the reference
    trainer opens its files and what the ``load`` level tries (imports torch)."""
    import torch  # pylint: disable=import-outside-toplevel
    with torch.serialization.safe_globals(list(safe_globals)):
        return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)


def load_error(exc: BaseException) -> str:
    """One line out of torch.load's error (weights_only errors are several paragraphs long)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "WeightsUnpickler error" in line or "Unsupported global" in line:
            text = line.split("WeightsUnpickler error:", 1)[-1].strip()
            return "%s: %s" % (type(exc).__name__, text.split(". ", 1)[0].rstrip("."))
    return "%s: %s" % (type(exc).__name__, lines[0] if lines else "")


def _check_loadable(ckpt: Checkpoint, base_real: str) -> None:
    """The ``load`` level: every torch.save file of the checkpoint opens with torch_load()."""
    if ckpt.is_dir:
        files = [(rel, path) for rel, path, size in walk_files(ckpt.path, base_real)
                 if rel.endswith(TORCH_SUFFIXES) and size > 0]
    else:
        files = [(ckpt.name, ckpt.path)]
    for rel, path in files:
        try:
            torch_load(path, mmap=True)
        except Exception as exc:  # pylint: disable=broad-except  # any failure is the reason
            raise Invalid("%s: torch.load(weights_only=True) fails: %s" % (rel, load_error(exc)))


def _numbers_problem(ckpt: Checkpoint) -> Optional[str]:
    """Why the step and epoch that the checkpoint's name or files say are out of range (:mod:`.bounds`: a
    user names the folder and writes the files), or None. A step of -1 is :func:`verify`'s for a Lightning
    file whose step nothing says."""
    return ((step_problem(ckpt.step) if ckpt.step != -1 else None)
            or (step_problem(ckpt.name_epoch, "epoch") if ckpt.name_epoch is not None else None)
            or (number_problem(ckpt.epoch, "epoch") if ckpt.epoch is not None else None))


def check_checkpoint(ckpt: Checkpoint, level: str, base_real: str) -> Checkpoint:
    """``ckpt`` checked at ``level`` (``valid``, ``why_invalid``, ``checked`` set): its step and epoch in range
    (:func:`_numbers_problem`), its layout's check, and at ``load`` torch's. Returns ``ckpt``."""
    ckpt.valid, ckpt.why_invalid = True, None
    try:
        if ckpt.is_dir != os.path.isdir(ckpt.path):
            raise Invalid("is a %s, the layout needs a %s" % (
                "folder" if not ckpt.is_dir else "file", "file" if not ckpt.is_dir else "folder"))
        problem = _numbers_problem(ckpt)
        if problem:
            raise Invalid(problem)
        _CHECKS[ckpt.layout](ckpt, level, base_real)
        problem = _numbers_problem(ckpt)   # the epoch a manifest or trainer_state.json says
        if problem:
            raise Invalid(problem)
        if level == LOAD:
            _check_loadable(ckpt, base_real)
    except Invalid as exc:
        ckpt.valid, ckpt.why_invalid = False, str(exc)
    except OSError as exc:
        ckpt.valid, ckpt.why_invalid = False, "cannot read: %s" % exc
    ckpt.checked = level
    return ckpt

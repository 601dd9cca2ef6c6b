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
    LEVELS,
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
from .names import CKPT_SUFFIX, NEMO_UNFINISHED, NUM
from .fsutil import hash_file, read_json, require_nonempty, stat_regular, walk_files
from .formats import check_safetensors, check_torch_zip, dcp_storage


_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_ZERO_OPTIM = re.compile(r"^(?:[a-z0-9]+_)?zero_pp_rank_%s_mp_rank_%s_optim_states\.pt$" % (NUM, NUM))
_MEGATRON_RANK_DIR = re.compile(r"^mp_rank_([0-9]+)(?:_([0-9]+))?(?:_([0-9]+))?$")
_TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
_WEIGHT_SUFFIXES = (".safetensors",) + _TORCH_SUFFIXES
_HF_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def _level_at_least(level: str, wanted: str) -> bool:
    return LEVELS.index(level) >= LEVELS.index(wanted)


def _check_contract(ckpt: Checkpoint, level: str, base_real: str) -> None:
    manifest_path = os.path.join(ckpt.path, MANIFEST)
    if not os.path.lexists(manifest_path):
        if os.path.lexists(os.path.join(ckpt.path, ".metadata")) or any(
                n.endswith(".distcp") for n in os.listdir(ckpt.path)):
            ckpt.layout = DCP
            _check_dcp(ckpt, level, base_real)
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
        if _level_at_least(level, SIZES) and st.st_size != size:
            raise Invalid("%s: %d bytes on disk, the manifest says %d" % (rel, st.st_size, size))
    if _level_at_least(level, SHA256):
        for rel, path, size, digest in checked:
            try:
                count, actual = hash_file(path)
            except OSError as exc:
                raise Invalid("%s cannot be read: %s" % (rel, exc))
            if count != size:
                raise Invalid("%s: read %d bytes, the manifest says %d" % (rel, count, size))
            if actual != digest:
                raise Invalid("%s: sha256 %s does not match the manifest's %s" % (rel, actual, digest))


def _check_zip_members(files: List[Tuple[str, str, int]], level: str) -> None:
    """torch.save files and safetensors inside a folder, at ``sizes`` and above."""
    if not _level_at_least(level, SIZES):
        return
    for rel, path, size in files:
        if rel.endswith(_TORCH_SUFFIXES) and size > 0:
            problem = check_torch_zip(path, read_all=_level_at_least(level, SHA256))
        elif rel.endswith(".safetensors") and size > 0:
            problem = check_safetensors(path, size)
        else:
            continue
        if problem:
            raise Invalid("%s: %s" % (rel, problem))


def _check_dcp_files(ckpt: Checkpoint, files: List[Tuple[str, str, int]], level: str, prefix: str = "") -> None:
    by_rel = dict((rel, (path, size)) for rel, path, size in files)
    meta = by_rel.get(prefix + ".metadata")
    if meta is None:
        raise Invalid("no %s.metadata: not committed (torch.distributed.checkpoint writes it last)" % prefix)
    if meta[1] == 0:
        raise Invalid("%s.metadata is empty" % prefix)
    data = [size for rel, (_path, size) in by_rel.items() if rel.endswith(".distcp")]
    if not data:
        raise Invalid("no .distcp data files")
    if not any(data):
        raise Invalid("every .distcp data file is empty")
    if _level_at_least(level, SIZES):
        for rel, offset, length in dcp_storage(meta[0]):
            target = by_rel.get(prefix + rel)
            if target is None:
                raise Invalid("%s.metadata names %s, which is missing" % (prefix, rel))
            if offset + length > target[1]:
                raise Invalid("%s%s: %d bytes, %s.metadata needs %d (truncated?)" % (
                    prefix, rel, target[1], prefix, offset + length))


def _check_dcp(ckpt: Checkpoint, level: str, base_real: str) -> None:
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "torch.distributed.checkpoint")
    rels = [rel for rel, _path, _size in files]
    if ".metadata" not in rels and any(rel.endswith(".safetensors") for rel in rels):
        # torchtitan's last save in Hugging Face format (checkpoint.last_save_in_hf)
        _check_weight_files(ckpt, files, level)
        return
    _check_dcp_files(ckpt, files, level)


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
    sizes = dict((rel, size) for rel, _path, size in files)
    if not any(size > 0 for rel, size in sizes.items() if rel != "trainer_state.json"):
        raise Invalid("nothing but trainer_state.json holds data")
    _check_weight_files(ckpt, files, level, required=False)


def _check_weight_files(ckpt: Checkpoint, files: List[Tuple[str, str, int]], level: str, prefix: str = "",
                        required: bool = True) -> None:
    """Weights saved as files (safetensors, torch.save): each sharded index's shards there and not
    empty, no weight file empty, at least one when ``required``; zips and safetensors headers at
    ``sizes`` and above. ``prefix``: the sub-folder they are in (``model/``)."""
    sizes = dict((rel[len(prefix):], size) for rel, _path, size in files if rel.startswith(prefix))
    for index in _HF_INDEXES:
        if index in sizes:
            index_data = read_json(os.path.join(ckpt.path, prefix + index), prefix + index)
            weight_map = index_data.get("weight_map") if isinstance(index_data, dict) else None
            if not isinstance(weight_map, dict):
                raise Invalid("%s%s has no weight_map" % (prefix, index))
            for shard in sorted(set(str(v) for v in weight_map.values())):
                if not sizes.get(shard):
                    raise Invalid("%s%s names %s, which is missing or empty" % (prefix, index, shard))
    weights = [(rel, size) for rel, size in sizes.items() if rel.endswith(_WEIGHT_SUFFIXES)]
    for rel, size in weights:
        if size == 0:
            raise Invalid("%s%s is empty" % (prefix, rel))
    if required and not weights:
        raise Invalid("no weights in %s (no %s file)" % (prefix.rstrip("/") or "the folder", ", ".join(_WEIGHT_SUFFIXES)))
    _check_zip_members([f for f in files if f[0].startswith(prefix)], level)


# Accelerate's save_state (accelerate/checkpointing.py save_accelerator_state): the models
# (model.safetensors, pytorch_model.bin, model_<i>..., or pytorch_model_fsdp_<i>/ and DeepSpeed's
# pytorch_model/ folders), optimizer.bin, scheduler.bin, sampler.bin, scaler.pt, then each
# process's random_states_<rank>.pkl: the last files of a save.
_ACCELERATE_RANDOM_STATES = re.compile(r"^random_states_([0-9]+)\.pkl$")
_ACCELERATE_FILES = re.compile(r"^(?:optimizer|scheduler|sampler)(?:_[0-9]+)?\.bin$")
_ACCELERATE_MODEL = re.compile(r"^(?:pytorch_model|model)(?:_fsdp)?(?:_[0-9]+)?(?:-[0-9]+-of-[0-9]+)?(?:\.|/|$)")


def _is_accelerate(files: List[Tuple[str, str, int]]) -> bool:
    """A ``checkpoint-<S>`` folder of Accelerate's save_state, not of the Hugging Face Trainer."""
    tops = set(rel.split("/", 1)[0] for rel, _path, _size in files)
    return "trainer_state.json" not in tops and any(
        _ACCELERATE_RANDOM_STATES.match(t) or _ACCELERATE_FILES.match(t) for t in tops)


def _check_accelerate(ckpt: Checkpoint, level: str, base_real: str, files: Any = None) -> None:
    files = files if files is not None else walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "Accelerate")
    ranks = {}
    for rel, _path, size in files:
        match = _ACCELERATE_RANDOM_STATES.match(rel)
        if match:
            ranks[int(match.group(1))] = (rel, size)
    if not ranks:
        raise Invalid("no random_states_<rank>.pkl: not committed (Accelerate's save_state writes them last)")
    if sorted(ranks) != list(range(len(ranks))):
        raise Invalid("random_states_<rank>.pkl incomplete: ranks %s" % sorted(ranks))
    for rel, size in ranks.values():
        if size == 0:
            raise Invalid("%s is empty" % rel)
    models = [(rel, size) for rel, _path, size in files if _ACCELERATE_MODEL.match(rel)]
    if not any(size for _rel, size in models):
        raise Invalid("no model weights (model.safetensors, pytorch_model.bin, pytorch_model_fsdp_0/, ...)")
    for top in sorted(set(rel.split("/", 1)[0] for rel, _path, _size in files if rel.endswith("/.metadata"))):
        _check_dcp_files(ckpt, files, level, prefix=top + "/")
    _check_weight_files(ckpt, files, level, required=False)


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
    _check_dcp_files(ckpt, files, level, prefix="weights/")


def _check_torchtune(ckpt: Checkpoint, level: str, base_real: str) -> None:
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "torchtune")
    _check_weight_files(ckpt, files, level)


def _check_automodel(ckpt: Checkpoint, level: str, base_real: str) -> None:
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "NeMo Automodel")
    rels = set(rel for rel, _path, _size in files)
    if not any(rel.startswith("model/") for rel in rels):
        raise Invalid("no model/")
    if "model/.metadata" in rels:
        _check_dcp_files(ckpt, files, level, prefix="model/")
    else:
        _check_weight_files(ckpt, files, level, prefix="model/")
    if not any(rel.startswith("optim/") for rel in rels):
        raise Invalid("no optim/ (NeMo Automodel saves the optimizer after the model)")
    _check_dcp_files(ckpt, files, level, prefix="optim/")


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


def _check_deepspeed_files(files: List[Tuple[str, str, int]], what: str) -> None:
    names = [rel.rsplit("/", 1)[-1] for rel, _path, _size in files]
    if not any(n.endswith("model_states.pt") for n in names):
        raise Invalid("no *model_states.pt (%s)" % what)
    for rel, _path, size in files:
        if rel.endswith(".pt") and size == 0:
            raise Invalid("%s is empty" % rel)
    grid: Dict[int, set] = {}
    for name in names:
        match = _ZERO_OPTIM.match(name)
        if match:
            grid.setdefault(int(match.group(2)), set()).add(int(match.group(1)))
    if grid:
        counts = set(len(ranks) for ranks in grid.values())
        for mp_rank, ranks in sorted(grid.items()):
            if ranks != set(range(len(ranks))) or len(counts) != 1:
                raise Invalid("ZeRO optimizer states incomplete for mp_rank %d: data-parallel ranks %s"
                              % (mp_rank, sorted(ranks)))


def _check_deepspeed(ckpt: Checkpoint, level: str, base_real: str) -> None:
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "DeepSpeed")
    _check_deepspeed_files(files, "DeepSpeed")
    _check_zip_members(files, level)


def _check_megatron(ckpt: Checkpoint, level: str, base_real: str) -> None:
    files = walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    require_nonempty(files, "Megatron")
    rels = set(rel for rel, _path, _size in files)
    if ".metadata" in rels or any(rel.endswith(".distcp") for rel in rels):
        _check_dcp_files(ckpt, files, level)
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
    _check_zip_members(files, level)


def _check_single_file(ckpt: Checkpoint, level: str, base_real: str) -> None:
    st = stat_regular(ckpt.path, os.path.basename(ckpt.path))
    ckpt.files, ckpt.size = 1, st.st_size
    if st.st_size == 0:
        raise Invalid("empty file")
    if _level_at_least(level, SIZES):
        problem = check_torch_zip(ckpt.path, read_all=_level_at_least(level, SHA256))
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
        _check_dcp_files(ckpt, files, level)
    elif any(rel.startswith("checkpoint/") for rel in rels):
        _check_deepspeed_files(files, "Lightning DeepSpeed")
        _check_zip_members(files, level)
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
                 if rel.endswith(_TORCH_SUFFIXES) and size > 0]
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

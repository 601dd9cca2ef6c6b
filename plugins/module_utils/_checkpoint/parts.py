# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""The parts a save is made of, checked for the layouts (:mod:`.layouts`): torch.save zips and safetensors inside
a folder, weight files and their index, torch.distributed.checkpoint saves (collective or rank-local metadata),
DeepSpeed's rank grid from its model-state file, and the count of parts compared with the save before."""

from __future__ import annotations

import os
import re

try:
    from typing import Any, Dict, List, Optional, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .bounds import ranks_problem
from .common import Checkpoint, Invalid, LEVELS, SHA256, SIZES
from .fsutil import read_json
from .formats import check_safetensors, check_torch_zip, dcp_storage, torch_pickle_root
from .names import NUM


_ZERO_OPTIM = re.compile(r"^(?:[a-z0-9]+_)?zero_pp_rank_%s_mp_rank_%s_optim_states\.pt$" % (NUM, NUM))
TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
_WEIGHT_SUFFIXES = (".safetensors",) + TORCH_SUFFIXES
_HF_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def level_at_least(level: str, wanted: str) -> bool:
    """True when validation ``level`` includes ``wanted`` (:data:`LEVELS`, in order)."""
    return LEVELS.index(level) >= LEVELS.index(wanted)


def check_zip_members(files: List[Tuple[str, str, int]], level: str, also: Tuple[str, ...] = ()) -> None:
    """torch.save files and safetensors inside a folder, at ``sizes`` and above; ``also``: more suffixes of
    torch.save files (Accelerate's ``.pkl``)."""
    if not level_at_least(level, SIZES):
        return
    for rel, path, size in files:
        if rel.endswith(TORCH_SUFFIXES + also) and size > 0:
            problem = check_torch_zip(path, read_all=level_at_least(level, SHA256))
        elif rel.endswith(".safetensors") and size > 0:
            problem = check_safetensors(path, size)
        else:
            continue
        if problem:
            raise Invalid("%s: %s" % (rel, problem))


#: torch.distributed.checkpoint's rank-local metadata (``save(..., use_collectives=False)``, torch 2.13
#: ``FileSystemWriter.finish``): each rank writes ``__<rank>.metadata`` for its ``__<rank>_<n>.distcp``.
DCP_RANK_METADATA = re.compile(r"^__([0-9]+)\.metadata\Z")
_DCP_RANK_DATA = re.compile(r"^__([0-9]+)_[0-9]+\.distcp\Z")


def check_dcp_files(ckpt: Checkpoint, files: List[Tuple[str, str, int]], level: str, prefix: str = "") -> None:
    """A torch.distributed.checkpoint save under ``prefix``: ``.metadata`` (``dcp.save`` with collectives: the
    coordinator writes it after every rank wrote), else every rank's own ``__<rank>.metadata`` (what
    ``dcp.load`` falls back to: torch/distributed/checkpoint/state_dict_loader.py ``load``); the data files
    each one names, long enough at ``sizes``."""
    by_rel = dict((rel, (path, size)) for rel, path, size in files)
    metas = [prefix + ".metadata"]
    if metas[0] not in by_rel:
        local = {}
        data_ranks = set()
        for rel in by_rel:
            name = rel[len(prefix):] if rel.startswith(prefix) else None
            match = DCP_RANK_METADATA.match(name) if name is not None and "/" not in name else None
            if match:
                local[int(match.group(1))] = rel
            match = _DCP_RANK_DATA.match(name) if name is not None and "/" not in name else None
            if match:
                data_ranks.add(int(match.group(1)))
        if not local:
            raise Invalid("no %s.metadata: not committed (torch.distributed.checkpoint writes it last)" % prefix)
        ranks = sorted(set(local) | data_ranks)
        if sorted(local) != list(range(len(ranks))):
            raise Invalid("rank-local metadata incomplete: %s__<rank>.metadata of ranks %s, data of ranks %s "
                          "(each rank writes its own last)" % (prefix, sorted(local), sorted(data_ranks)))
        metas = [local[rank] for rank in sorted(local)]
        ckpt.parts = {prefix + "__<rank>.metadata": len(metas)}
    for meta_rel in metas:
        meta = by_rel[meta_rel]
        if meta[1] == 0:
            raise Invalid("%s is empty" % meta_rel)
        data = [size for rel, (_path, size) in by_rel.items() if rel.endswith(".distcp")]
        if not data:
            raise Invalid("no .distcp data files")
        if not any(data):
            raise Invalid("every .distcp data file is empty")
        if level_at_least(level, SIZES):
            for rel, offset, length in dcp_storage(meta[0]):
                target = by_rel.get(prefix + rel)
                if target is None:
                    raise Invalid("%s names %s, which is missing" % (meta_rel, rel))
                if offset + length > target[1]:
                    raise Invalid("%s%s: %d bytes, %s needs %d (truncated?)" % (
                        prefix, rel, target[1], meta_rel, offset + length))


def check_weight_files(ckpt: Checkpoint, files: List[Tuple[str, str, int]], level: str, prefix: str = "",
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
    check_zip_members([f for f in files if f[0].startswith(prefix)], level)


def gapless(numbers: Any, what: str) -> int:
    """How many of ``numbers`` there are, when they are 0 to n-1; else Invalid (one is missing)."""
    found = sorted(numbers)
    if found != list(range(len(found))):
        raise Invalid("%s incomplete: ranks %s" % (what, found) if "<rank>" in what else "%s incomplete: %s" % (what, found))
    return len(found)


def fewer_parts(ckpt: Checkpoint, before: Checkpoint) -> Optional[str]:
    """Why ``ckpt`` holds fewer parts of a kind than ``before``, the save before it of the same layout (a save
    killed among its last files: Accelerate's registered objects, rank-local DCP metadata), or None."""
    if ckpt.parts is None or before.parts is None or ckpt.layout != before.layout:
        return None
    for kind, count in sorted(before.parts.items()):
        if ckpt.parts.get(kind, 0) < count:
            return "%d %s, the save before it (%s) has %d: a save killed before its last files" % (
                ckpt.parts.get(kind, 0), kind, before.name, count)
    return None


# DeepSpeed (deepspeed 0.19.8, runtime/engine.py): save_checkpoint has every rank write its part
# (_save_checkpoint: mp_rank_<mp>_model_states.pt, or zero_pp_rank_<dp>_mp_rank_<mp>_model_states.pt under
# ZeRO-3; _save_zero_checkpoint: [bf16_]zero_pp_rank_<dp>_mp_rank_<mp>_optim_states.pt), then rank 0 writes
# `latest` BEFORE the barrier that waits for the others: `latest` does not say every rank finished.
# load_checkpoint reads the model-state file's dp_world_size and mp_world_size and, under ZeRO (its
# ``optimizer`` None, ``param_shapes`` set), opens the optimizer state of every data-parallel rank
# (_get_all_zero_checkpoint_names): the grid those world sizes give is what a whole save holds.
_DS_MODEL_STATES = re.compile(r"^(?:zero_pp_rank_%s_)?mp_rank_%s_model_states\.pt\Z" % (NUM, NUM))


def deepspeed_world(files: List[Tuple[str, str, int]]) -> Optional[Tuple[str, int, int, bool]]:
    """``(folder, dp_world_size, mp_world_size, zero)`` from the first model-state file's own ``data.pkl``
    (read without torch), or None when it does not say (a legacy file, another shape)."""
    states = sorted((rel, path) for rel, path, _size in files if _DS_MODEL_STATES.match(rel.rsplit("/", 1)[-1]))
    if not states:
        return None
    rel, path = states[0]
    try:
        root = torch_pickle_root(path)
    except ValueError:
        return None
    except Invalid as exc:
        raise Invalid("%s: %s" % (rel, exc))
    if not isinstance(root, dict) or "dp_world_size" not in root or "mp_world_size" not in root:
        return None
    dp, mp = root.get("dp_world_size"), root.get("mp_world_size")
    problem = ranks_problem(dp, "dp_world_size") or ranks_problem(mp, "mp_world_size")
    if problem or not isinstance(dp, int) or not isinstance(mp, int):
        raise Invalid("%s says %s" % (rel, problem))
    zero = root.get("optimizer") is None and root.get("param_shapes") is not None
    return rel.rsplit("/", 1)[0] + "/" if "/" in rel else "", dp, mp, zero


def check_deepspeed_files(files: List[Tuple[str, str, int]], what: str) -> None:
    """A DeepSpeed save (``what`` names it in the reasons): a model-state file, none empty, and the full grid of
    :func:`deepspeed_world`; a legacy file that does not say it: the ZeRO files found form a full grid."""
    names = [rel.rsplit("/", 1)[-1] for rel, _path, _size in files]
    if not any(n.endswith("model_states.pt") for n in names):
        raise Invalid("no *model_states.pt (%s)" % what)
    for rel, _path, size in files:
        if rel.endswith(".pt") and size == 0:
            raise Invalid("%s is empty" % rel)
    world = deepspeed_world(files)
    if world is not None:
        folder, dp, mp, zero = world
        rels = set(rel for rel, _path, _size in files)
        zero3 = any(n.startswith("zero_pp_rank_") and n.endswith("_model_states.pt") for n in names)
        for mp_rank in range(mp):
            for dp_rank in range(dp if zero or zero3 else 1):
                needed = []
                if zero3:
                    needed.append("zero_pp_rank_%d_mp_rank_%02d_model_states.pt" % (dp_rank, mp_rank))
                elif dp_rank == 0:
                    needed.append("mp_rank_%02d_model_states.pt" % mp_rank)
                if zero:
                    needed.append("zero_pp_rank_%d_mp_rank_%02d_optim_states.pt" % (dp_rank, mp_rank))
                for name in needed:
                    if folder + name not in rels and folder + "bf16_" + name not in rels:
                        raise Invalid("%s%s missing: the model states say dp_world_size %d, mp_world_size %d "
                                      "(deepspeed's load_checkpoint opens every rank's; `latest` is written "
                                      "before the other ranks are known to have finished)" % (folder, name, dp, mp))
        return
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

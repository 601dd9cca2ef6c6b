# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""Checkpoint names: the layouts' entry names, Lightning file names and name templates, temporary entries."""

from __future__ import annotations

import re

try:
    from typing import Any, Dict, Optional, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .bounds import step_problem
from .common import (
    ACCELERATE,
    AUTOMODEL,
    COMPOSER,
    CONTRACT,
    DCP,
    DEEPSPEED,
    HUGGINGFACE,
    Invalid,
    LIGHTNING,
    MEGATRON,
    ORBAX,
    ORBAX_TMP_INFIX,
    TMP_PREFIX,
    TMP_SUFFIX,
    TORCH_FILE,
    TORCHTUNE,
)
from .formats import torch_pickle_root


NUM = "([0-9]+)"
_STEP = "(?P<step>[0-9]+)"
_EPOCH = "(?P<epoch>[0-9]+)"
# (regex, layout, entry kind): the groups ``step`` and ``epoch``; a name with an epoch and no step
# (torchtune's ``epoch_<N>``) counts its epochs as its steps.
_PATTERNS: Tuple[Tuple[Any, str, str], ...] = (
    (re.compile(r"^step_%s\Z" % _STEP), CONTRACT, "dir"),
    (re.compile(r"^step-%s\Z" % _STEP), DCP, "dir"),
    (re.compile(r"^checkpoint-%s\Z" % _STEP), HUGGINGFACE, "dir"),
    (re.compile(r"^checkpoint_%s\Z" % _STEP), ACCELERATE, "dir"),
    (re.compile(r"^global_step%s\Z" % _STEP), DEEPSPEED, "dir"),
    (re.compile(r"^iter_%s\Z" % _STEP), MEGATRON, "dir"),
    (re.compile(r"^checkpoint_epoch_%s_step_%s\.pth?\Z" % (_EPOCH, _STEP)), TORCH_FILE, "file"),
    (re.compile(r"^epoch_%s\Z" % _EPOCH), TORCHTUNE, "dir"),
    (re.compile(r"^epoch_%s_step_%s\Z" % (_EPOCH, _STEP)), AUTOMODEL, "dir"),
    (re.compile(r"^ep%s-ba%s(?:-rank0)?(?:\.pt)?\Z" % (_EPOCH, _STEP)), COMPOSER, "any"),
    (re.compile(r"^%s\Z" % _STEP), ORBAX, "dir"),
)

#: Composer's files of the ranks other than 0 (``ep<E>-ba<B>-rank<R>.pt``): parts, not checkpoints.
COMPOSER_RANK_FILE = re.compile(r"^(ep[0-9]+-ba[0-9]+)-rank([1-9][0-9]*)\.pt\Z")
#: Composer's ``latest-rank<R>.pt`` symlink to the newest save (``save_latest_filename``).
COMPOSER_LATEST = re.compile(r"^latest-rank0\.pt\Z")
#: NeMo's marker of a save that has not finished: the checkpoint's name without ``.ckpt`` and
#: ``-EMA``, and ``-unfinished`` (``ModelCheckpoint.format_checkpoint_unfinished_marker_path``).
NEMO_UNFINISHED = "-unfinished"
#: Files beside the checkpoints that tools write and that are no checkpoint of their own:
#: name -> why (listed in ``ignored``, never ``unexplained``).
SIDECARS = {
    "latest_train_state.pt": "Megatron-Bridge's train state of the newest save (each iter_<S> holds its own)",
    "recipe_state": "torchtune's optimizer and progress state of the newest epoch (recipe_state.pt)",
    "recipe_state.pt": "torchtune's optimizer and progress state of the newest epoch",
}

DEEPSPEED_LATEST = "latest"
MEGATRON_TRACKER = "latest_checkpointed_iteration.txt"
LAST_CKPT = re.compile(r"^last(?:-v[0-9]+)?\.ckpt\Z")
# Lightning ModelCheckpoint names (lightning/pytorch/callbacks/model_checkpoint.py): the filename
# template's metrics joined by "-" (CHECKPOINT_JOIN_CHAR), "name=value" with auto_insert_metric_name,
# "-v<N>" appended when the name exists already (STARTING_VERSION 1), ".ckpt" (FILE_EXTENSION).
CKPT_SUFFIX = ".ckpt"
_CKPT_VERSION = re.compile(r"^(.+)-v([0-9]+)\Z")
_CKPT_STEP = re.compile(r"(?:^|-)step=([0-9]+)(?=-|\Z)")
_CKPT_EPOCH = re.compile(r"(?:^|-)epoch=([0-9]+)(?=-|\Z)")


#: What training state looks like when no layout explains it (:func:`training_state_hint`): the
#: file suffixes of torch.save, safetensors, torch.distributed.checkpoint shards, Lightning, pickle,
#: HDF5/Keras, Flax/Orbax msgpack and NumPy archives; the metadata files frameworks write
#: (torch.distributed.checkpoint ``.metadata``, the HF Trainer's ``trainer_state.json``, Orbax's
#: ``_CHECKPOINT_METADATA``/``_METADATA``, DeepSpeed's ``latest``, torchtune's ``recipe_state``);
#: and a name that carries a progress counter (``epoch_4``, ``epoch_0_step_19``, ``step=19``,
#: ``ep3-ba1200-rank0.pt``, ``iteration-500``, ``ckpt_12``).
STATE_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors", ".distcp", ".ckpt", ".pkl", ".pickle", ".h5",
                  ".keras", ".msgpack", ".npz")
STATE_FILE_NAMES = frozenset((".metadata", "trainer_state.json", "_CHECKPOINT_METADATA", "_METADATA",
                              "latest", "recipe_state", "recipe_state.pt", "latest_checkpointed_iteration.txt"))
_PROGRESS_NAME = re.compile(r"(?:^|[^a-z])(?:global_step|step|steps|epoch|ep|iteration|iter|it|ba|batch|"
                            r"checkpoint|ckpt|ckp)[_=\-]?[0-9]+(?![a-z])", re.IGNORECASE)


def training_state_hint(name: str) -> Optional[str]:
    """Why an entry named ``name`` looks like training state (see ``STATE_SUFFIXES``), or None.

    By its name only (nothing is opened): a state file suffix, a framework's metadata file, or a
    progress counter in the name.
    """
    lower = name.lower()
    if lower.endswith(STATE_SUFFIXES):
        return "a %s file" % lower.rsplit(".", 1)[1]
    if name in STATE_FILE_NAMES:
        return "a framework's checkpoint metadata file %s" % name
    match = _PROGRESS_NAME.search(name)
    if match:
        return "a progress counter in its name (%s)" % match.group(0).lstrip("-_=.")
    return None


def checkpoint_name(step: int) -> str:
    """The contract's folder name for a step: ``step_`` and the step zero-padded to 9 digits."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError("step must be a non-negative integer, not %r" % (step,))
    return "step_%09d" % step


def is_temporary(name: str) -> bool:
    """True for names of entries still being written (``tmp-*``, ``*.tmp``, Orbax's
    ``<step>.orbax-checkpoint-tmp-<n>``): never candidates."""
    return name.startswith(TMP_PREFIX) or name.endswith(TMP_SUFFIX) or ORBAX_TMP_INFIX in name


def compile_name_template(template: str) -> Any:
    """A regex for the names a Lightning/NeMo ``ModelCheckpoint(filename=template)`` writes.

    ``template`` is the ``filename`` argument (``{epoch}-{step}``, ``{step:06d}``,
    ``run-{epoch:02d}-{val_loss:.2f}``, ``.ckpt`` optional): ``{step}`` and ``{epoch}`` capture
    numbers, any other ``{metric}`` matches any value; each field may appear with or without its
    ``name=`` prefix, so the same template fits ``auto_insert_metric_name`` true and false.

    Raises:
        ValueError: no ``{step}``, a field twice, an empty or unbalanced brace, a ``/``.
    """
    text = template[:-len(CKPT_SUFFIX)] if template.endswith(CKPT_SUFFIX) else template
    if "/" in text or not text:
        raise ValueError("name_template %r: a file name without /, such as {epoch}-{step}" % template)
    out, seen = [], set()
    for part in re.split(r"(\{[^{}]*\})", text):
        if part.startswith("{") and part.endswith("}"):
            field = part[1:-1].split(":", 1)[0].strip()
            if not field or field in seen:
                raise ValueError("name_template %r: empty or repeated field %r" % (template, part))
            seen.add(field)
            prefix = r"(?:%s=)?" % re.escape(field)
            if field in ("step", "epoch"):
                out.append(prefix + r"(?P<%s>[0-9]+)" % field)
            else:
                out.append(prefix + r"[^/]*?")
        elif "{" in part or "}" in part:
            raise ValueError("name_template %r: unbalanced brace" % template)
        else:
            out.append(re.escape(part))
    if "step" not in seen:
        raise ValueError("name_template %r has no {step}: the step could not be read from the names" % template)
    return re.compile(r"^%s\Z" % "".join(out))


def parse_lightning_name(name: str, template: Any = None) -> Optional[Dict[str, Any]]:
    """What a Lightning/NeMo ``.ckpt`` name says: ``{"step", "epoch", "version", "last", "step_from"}``.

    None when ``name`` does not end in ``.ckpt``. ``step`` and ``epoch`` are None when the name does
    not say them: ``step=<S>`` / ``epoch=<E>`` anywhere in the name (auto_insert_metric_name), or
    the ``{step}`` / ``{epoch}`` of ``template`` (:func:`compile_name_template`, a regex or a
    string). ``version`` is the ``-v<N>`` suffix (0 without); ``last`` is true for ``last.ckpt``,
    ``last-v<N>.ckpt`` and NeMo's ``...-last.ckpt``.
    """
    if not name.endswith(CKPT_SUFFIX) or len(name) == len(CKPT_SUFFIX):
        return None
    if isinstance(template, str):
        template = compile_name_template(template)
    stem = name[:-len(CKPT_SUFFIX)]
    found: Dict[str, Any] = dict(step=None, epoch=None, version=0, last=False, step_from=None)
    match = _CKPT_VERSION.match(stem)
    bare = stem
    if match:
        bare, found["version"] = match.group(1), int(match.group(2))
    if bare == "last" or bare.endswith("-last"):
        found["last"] = True
    if template is not None:
        for text in (stem, bare):
            match = template.match(text)
            if match:
                if text is stem:
                    found["version"] = 0
                found["step"] = int(match.group("step"))
                epoch = match.groupdict().get("epoch")
                found["epoch"] = int(epoch) if epoch is not None else None
                found["step_from"] = "template"
                return found
    match = _CKPT_STEP.search(bare)
    if match:
        found["step"], found["step_from"] = int(match.group(1)), "name"
    match = _CKPT_EPOCH.search(bare)
    if match:
        found["epoch"] = int(match.group(1))
    return found


def parse_name(name: str, template: Any = None) -> Optional[Tuple[str, str, int, Optional[int]]]:
    """``(layout, kind, step, epoch)`` for a name that matches a layout and carries its step, else None.

    ``kind`` is ``dir``, ``file`` or ``any``. The ``step_<S>`` layout is reported as ``clusterops``;
    a folder holding a ``.metadata`` and no manifest is a torch.distributed.checkpoint instead.
    A Lightning ``.ckpt`` name is read by :func:`parse_lightning_name` (``template``: its
    ``name_template``); one whose name has no step (``last.ckpt``, ``epoch=3-val_loss=0.12.ckpt``)
    gives None here: :func:`inspect` reads its step from the file.
    """
    for regex, layout, kind in _PATTERNS:
        match = regex.match(name)
        if match:
            found = match.groupdict()
            epoch = int(found["epoch"]) if found.get("epoch") is not None else None
            step = int(found["step"] if found.get("step") is not None else found["epoch"])
            return layout, kind, step, epoch
    lightning = parse_lightning_name(name, template)
    if lightning is not None and lightning["step"] is not None and not lightning["last"]:
        return LIGHTNING, "any", lightning["step"], lightning["epoch"]
    return None


def parse_nemo_name(name: str, template: Any = None) -> Optional[Dict[str, Any]]:
    """What a NeMo 2 checkpoint folder's name says, as :func:`parse_lightning_name` (its keys).

    NeMo 2 (NeMo Lightning, Megatron-Bridge's NeMo recipes) saves each checkpoint as a folder named
    like a Lightning ``.ckpt`` without the suffix (``ckpt_to_dir``):
    ``model_name=0--val_loss=0.00-step=19-consumed_samples=1280.0-last``. None when the name
    does not say a step (``step=<S>`` or the ``{step}`` of ``template``).
    """
    if name.endswith(CKPT_SUFFIX) or name.endswith(NEMO_UNFINISHED):
        return None
    found = parse_lightning_name(name + CKPT_SUFFIX, template)
    if found is None or found["step"] is None:
        return None
    return found


def lightning_progress(path: str) -> Tuple[int, Optional[int]]:
    """``(global_step, epoch)`` from a Lightning ``.ckpt`` file's own ``data.pkl``, without torch.

    The pickle is read with the same unpickler as a DCP ``.metadata``: every class it names becomes
    an inert stand-in and tensors are left out, so nothing is imported or run from the file.

    Raises:
        Invalid: the file is not a whole torch.save zip (it is broken whatever its step), or its step or
            epoch is out of range (:mod:`.bounds`: an integer of 0 to 2**53).
        ValueError: it is whole but does not say its step (not a Lightning checkpoint, a legacy
            pickle-format file, a ``data.pkl`` over :data:`MAX_PICKLE_BYTES`).
    """
    root = torch_pickle_root(path)
    step = root.get("global_step") if isinstance(root, dict) else None
    epoch = root.get("epoch") if isinstance(root, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError("no global_step inside (not a Lightning checkpoint?)")
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        epoch = None
    problem = step_problem(step, "global_step") or (step_problem(epoch, "epoch") if epoch is not None else None)
    if problem:   # a pickle holds integers of any length: one too long even to print stops here
        raise Invalid("data.pkl says %s" % problem)
    return step, epoch

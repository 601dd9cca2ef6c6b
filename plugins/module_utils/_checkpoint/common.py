# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""The checkpoint library's constants, errors and result objects (:class:`Checkpoint`, :class:`Report`)."""

from __future__ import annotations


try:
    from typing import Any, Dict, List, Optional, Tuple, Union  # noqa: F401
except ImportError:  # pragma: no cover
    pass


FORMAT = "clusterops.checkpoint"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
#: Run-level marker written when training completed.
FINISHED = "FINISHED"
TMP_PREFIX = "tmp-"
TMP_SUFFIX = ".tmp"
#: Orbax writes a step into ``<step>.orbax-checkpoint-tmp-<timestamp>`` and renames it when done.
ORBAX_TMP_INFIX = ".orbax-checkpoint-tmp-"
#: A checkpoint being deleted is first renamed to this prefix and its name (never a candidate).
DELETING_PREFIX = "tmp-deleting-"
#: Lock file that :func:`prune` holds in the run folder (never a candidate).
PRUNE_LOCK = ".prune.lock"
#: A replica folder's own manifest: every checkpoint copied there and verified (never a candidate).
REPLICA_INDEX = ".clusterops-replica.json"
#: Lock file that :func:`replicas.replicate` holds in the replica folder (never a candidate).
REPLICATE_LOCK = ".replicate.lock"
#: A copy being made into a replica folder (a temporary: never a candidate).
REPLICA_STAGING_PREFIX = "tmp-replica-"

STRUCTURE = "structure"
SIZES = "sizes"
SHA256 = "sha256"
#: Opt-in, needs torch: every torch.save file opened as the reference trainer opens it.
LOAD = "load"
LEVELS = (STRUCTURE, SIZES, SHA256, LOAD)

CONTRACT = "clusterops"
TORCH_FILE = "torch_file"
DCP = "torch_dcp"
HUGGINGFACE = "huggingface"
DEEPSPEED = "deepspeed"
MEGATRON = "megatron"
LIGHTNING = "lightning"
ACCELERATE = "accelerate"
NEMO = "nemo"
TORCHTUNE = "torchtune"
AUTOMODEL = "nemo_automodel"
COMPOSER = "composer"
ORBAX = "orbax"
LAYOUTS = (CONTRACT, DCP, TORCH_FILE, HUGGINGFACE, DEEPSPEED, MEGATRON, LIGHTNING, ACCELERATE, NEMO, TORCHTUNE,
           AUTOMODEL, COMPOSER, ORBAX)

#: Exit codes of the command line.
EXIT_OK = 0
EXIT_NONE = 1
EXIT_ERROR = 2
EXIT_INVALID = 3

#: Bytes read per system call when hashing (constant memory, whatever the file size).
CHUNK_SIZE = 1 << 20
#: A manifest larger than this is refused rather than read into memory.
MAX_MANIFEST_BYTES = 256 << 20


_LAYOUT_RANK = dict((name, i) for i, name in enumerate(LAYOUTS))

#: A data.pkl larger than this is not read for a Lightning checkpoint's step (the name must say it).
MAX_PICKLE_BYTES = 64 << 20
#: Globals ``torch.load(weights_only=True)`` may build beyond torch's own allowlist, at the ``load``
#: level and in the reference trainer (objects, as ``torch.serialization.safe_globals`` takes them).
#: The reference trainer saves tensors, numbers and Python containers only: none.
LOAD_SAFE_GLOBALS: Tuple[Any, ...] = ()


class CheckpointError(Exception):
    """A run folder or checkpoint that cannot be read at all (missing, not a folder, I/O error)."""


class Checkpoint(object):
    """One checkpoint candidate of a run folder.

    Attributes:
        name: the entry's name in the run folder.
        path: absolute path of the folder or file.
        layout: one of :data:`LAYOUTS`.
        step: step (or iteration) number from the name.
        epoch: epoch from the name, the manifest or ``trainer_state.json`` (Hugging Face records
            fractional epochs); None when unknown.
        valid: True or False once checked; None when not checked (see :attr:`checked`).
        why_invalid: one line saying why, when not valid.
        checked: the level it was checked at (:data:`LEVELS`), None when not checked.
        files: number of files (contract: listed in the manifest); None when not known.
        size: total bytes of those files; None when not known.
        time: the manifest's ``time`` (contract), else None.
        pointed_by: names of the pointers (``latest``, ...) that resolve to it.
        parts: for layouts whose files alone cannot say how many a whole save has (Accelerate's registered
            objects, torch.distributed.checkpoint's rank-local metadata): how many of each kind of part it
            holds, ``{kind: count}``, compared with the save before it (:func:`.parts.fewer_parts`); else None.
    """

    __slots__ = ("name", "path", "layout", "step", "epoch", "name_epoch", "is_dir", "valid",
                 "why_invalid", "checked", "files", "size", "time", "pointed_by", "version", "last",
                 "step_from", "name_layout", "parts")

    def __init__(self, name: str, path: str, layout: str, step: int, name_epoch: Optional[int] = None, is_dir: bool = True) -> None:
        self.name = name
        self.path = path
        self.layout = layout
        #: The layout its name says; ``layout`` may be refined by the checks (a ``step_<S>`` folder
        #: without manifest is torch.distributed.checkpoint, a ``checkpoint-<S>`` Accelerate's).
        self.name_layout = layout
        self.step = step
        self.name_epoch = name_epoch
        self.epoch: Optional[Union[int, float]] = name_epoch
        self.is_dir = is_dir
        self.valid: Optional[bool] = None
        self.why_invalid: Optional[str] = None
        self.checked: Optional[str] = None
        self.files: Optional[int] = None
        self.size: Optional[int] = None
        self.time: Optional[str] = None
        self.pointed_by: List[str] = []
        self.version = 0  # Lightning's -v<N>: a later save under the same name
        self.last = False  # Lightning's last.ckpt / last-v<N>.ckpt copy (save_last=True)
        self.step_from = "name"  # or "template", "metadata"
        self.parts: Optional[Dict[str, int]] = None

    @property
    def key(self) -> Tuple[int, int]:
        """``(epoch, step)`` from the name; -1 for the epoch of layouts whose names carry none."""
        return (self.name_epoch if self.name_epoch is not None else -1, self.step)

    def sort_key(self) -> Tuple[int, int, int, int, int, str]:
        # Equal numbers: a Lightning last.ckpt copy before the named checkpoint of the same step,
        # -v<N> after the unversioned name; the layout and the name only make the order total.
        return self.key + (0 if self.last else 1, self.version, -_LAYOUT_RANK.get(self.layout, 99), self.name)

    def to_dict(self) -> Dict[str, Any]:
        return dict(name=self.name, path=self.path, layout=self.layout, step=self.step, epoch=self.epoch,
                    valid=self.valid, why_invalid=self.why_invalid, checked=self.checked, files=self.files,
                    size=self.size, time=self.time, pointed_by=list(self.pointed_by), step_from=self.step_from)

    def __repr__(self):
        return "Checkpoint(%r, layout=%r, step=%r, epoch=%r, valid=%r)" % (
            self.name, self.layout, self.step, self.epoch, self.valid)


class Report(object):
    """What :func:`inspect` found in a run folder.

    Attributes:
        path: the run folder (absolute).
        validate: the level asked for.
        checkpoints: every candidate, oldest first.
        latest_valid: the newest valid one, or None.
        ignored: ``{"name", "reason"}`` for every entry that is not a candidate nor a pointer.
        pointers: ``{"name", "kind", "target", "resolves_to", "status", "message"}``; status is one of
            ``current``, ``older``, ``invalid``, ``missing``, ``escapes``, ``unrecognised``,
            ``unreadable``, ``copy``, ``release``.
        warnings: one line each: pointers that disagree with the disk, newer checkpoints skipped
            as invalid, equal numbers, mixed layouts, a finished marker that names another step.
        finished: the ``FINISHED`` marker's content (a dict; ``{}`` when it is empty or not JSON),
            or None when the run has no marker.
        unordered: ``{"name", "reason", "valid"}`` for each Lightning checkpoint whose step neither
            its name nor its own metadata tells (``valid`` False when the file is broken, else None).
            One that is not broken makes the folder unusable: nothing is chosen (``latest`` exit 3).
        unexplained: ``{"name", "reason"}`` for each entry that looks like training state (a state
            file suffix, framework metadata, a step or epoch in its name, or such files inside; see
            ``names.training_state_hint``) but that no known layout explains. With no valid
            checkpoint, the folder is "exists, none usable" (``latest`` exit 3), never "empty".
        empty: no candidate, nothing unordered, nothing unexplained: only then does a run start
            from scratch (``latest`` exit 1).
    """

    def __init__(self, path: str, validate: str) -> None:
        self.path = path
        self.validate = validate
        self.checkpoints: List[Checkpoint] = []
        self.latest_valid: Optional[Checkpoint] = None
        self.ignored: List[Dict[str, str]] = []
        self.pointers: List[Dict[str, Any]] = []
        self.warnings: List[str] = []
        self.finished: Optional[Dict[str, Any]] = None
        self.had_candidates = False
        #: ``{"name", "reason", "valid"}``: checkpoints whose step neither the name nor the file tells.
        self.unordered: List[Dict[str, Any]] = []
        #: ``{"name", "reason"}``: entries that look like training state no known layout explains.
        self.unexplained: List[Dict[str, str]] = []
        # For prune(): (name, path) of temporary entries and of symlinks; not in to_dict().
        self.temporary: List[Tuple[str, str]] = []
        self.symlinks: List[Tuple[str, str]] = []

    @property
    def empty(self) -> bool:
        return not (self.had_candidates or self.unexplained)

    def to_dict(self) -> Dict[str, Any]:
        return dict(path=self.path, validate=self.validate,
                    checkpoints=[c.to_dict() for c in self.checkpoints],
                    latest_valid=self.latest_valid.to_dict() if self.latest_valid else None,
                    ignored=list(self.ignored), pointers=list(self.pointers),
                    warnings=list(self.warnings), finished=self.finished, unordered=list(self.unordered),
                    unexplained=list(self.unexplained), empty=self.empty)


class Invalid(Exception):
    """Raised inside the checks; the message becomes ``why_invalid``."""

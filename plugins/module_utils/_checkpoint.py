# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""Training checkpoints on disk: find the newest valid one, verify, and write them safely.

Standard library only, Python 3.8+, and self-contained: the same file is the module_utils of
``clusterops.slurm.checkpoint_info`` and a command that runs on cluster hosts without Ansible or
torch (``python3 _checkpoint.py latest DIR``; see :func:`main` and docs/checkpoint-contract.md).

Layouts recognised in a run folder (names matched with anchored regexes, numbers compared as
integers, never names or mtimes):

=================  ==========================================  ====================================
layout             entry                                       complete when
=================  ==========================================  ====================================
``clusterops``     folder ``step_<S>/``                        ``manifest.json`` (written last)
``torch_dcp``      folder ``step_<S>/`` or ``step-<S>/``        ``.metadata`` (written last)
``torch_file``     file ``checkpoint_epoch_<E>_step_<S>.pt[h]``  a whole zip (torch.save)
``huggingface``    folder ``checkpoint-<S>/``                  ``trainer_state.json``
``deepspeed``      folder ``global_step<S>/`` (+ ``latest``)   model states + a full ZeRO rank grid
``megatron``       folder ``iter_<S>/`` (+ tracker file)       ``.metadata``, or a full mp_rank grid
``lightning``      any file ``*.ckpt`` (``ModelCheckpoint``)      a whole zip (torch.save)
=================  ==========================================  ====================================

Lightning/NeMo checkpoints are ordered by their global step, read from the name (``step=<S>``
anywhere, or a ``name_template``), else from the file's ``data.pkl`` (without torch, nothing run);
a whole ``.ckpt`` whose step nothing tells stops the choice (:attr:`Report.unordered`).

Candidates are ordered by ``(epoch, step)`` where the name carries an epoch, else by step (a
missing epoch counts as -1). Temporary entries (``tmp-*``, ``*.tmp``) are never candidates; names
that match no layout are reported as ignored.

Validation levels (each includes the ones before):

* ``structure``: the commit marker and the files the layout needs are there, regular, not empty;
  the manifest (contract) parses and agrees with the folder name.
* ``sizes``: every file's size equals the manifest's (contract); torch.save zips have their end of
  central directory and consistent local headers; safetensors headers cover the file exactly;
  a torch.distributed.checkpoint ``.metadata`` (read without torch) points inside its data files.
* ``sha256``: every byte is read once: sha256 of each file against the manifest (contract), and the
  CRC-32 of each zip entry (torch.save files of the other layouts).
* ``load`` (opt-in, needs torch): every torch.save file opens with ``torch.load(weights_only=True)``
  and :data:`LOAD_SAFE_GLOBALS`, as the reference trainer opens it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import binascii
import calendar
import errno
import fnmatch
import hashlib
import json
import os
import pickle
import posixpath
import re
import shutil
import stat
import struct
import sys
import time
import zipfile

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

try:
    from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union  # noqa: F401
except ImportError:  # pragma: no cover
    pass


#: The contract's manifest format and version (docs/checkpoint-contract.md).
FORMAT = "clusterops.checkpoint"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
#: Run-level marker written when training completed.
FINISHED = "FINISHED"
TMP_PREFIX = "tmp-"
TMP_SUFFIX = ".tmp"
#: A checkpoint being deleted is first renamed to this prefix and its name (never a candidate).
DELETING_PREFIX = "tmp-deleting-"
#: Lock file that :func:`prune` holds in the run folder (never a candidate).
PRUNE_LOCK = ".prune.lock"

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
LAYOUTS = (CONTRACT, DCP, TORCH_FILE, HUGGINGFACE, DEEPSPEED, MEGATRON, LIGHTNING)

#: Exit codes of the command line.
EXIT_OK = 0
EXIT_NONE = 1
EXIT_ERROR = 2
EXIT_INVALID = 3

#: Bytes read per system call when hashing (constant memory, whatever the file size).
CHUNK_SIZE = 1 << 20
#: A manifest larger than this is refused rather than read into memory.
MAX_MANIFEST_BYTES = 256 << 20

_NUM = "([0-9]+)"
# (regex, layout, entry kind, the name carries the epoch)
_PATTERNS = (
    (re.compile(r"^step_%s$" % _NUM), CONTRACT, "dir", False),
    (re.compile(r"^step-%s$" % _NUM), DCP, "dir", False),
    (re.compile(r"^checkpoint-%s$" % _NUM), HUGGINGFACE, "dir", False),
    (re.compile(r"^global_step%s$" % _NUM), DEEPSPEED, "dir", False),
    (re.compile(r"^iter_%s$" % _NUM), MEGATRON, "dir", False),
    (re.compile(r"^checkpoint_epoch_%s_step_%s\.pth?$" % (_NUM, _NUM)), TORCH_FILE, "file", True),
)  # type: Tuple[Tuple[Any, str, str, bool], ...]
_LAYOUT_RANK = dict((name, i) for i, name in enumerate(LAYOUTS))

_DEEPSPEED_LATEST = "latest"
_MEGATRON_TRACKER = "latest_checkpointed_iteration.txt"
_LAST_CKPT = re.compile(r"^last(?:-v[0-9]+)?\.ckpt$")
# Lightning ModelCheckpoint names (lightning/pytorch/callbacks/model_checkpoint.py): the filename
# template's metrics joined by "-" (CHECKPOINT_JOIN_CHAR), "name=value" with auto_insert_metric_name,
# "-v<N>" appended when the name exists already (STARTING_VERSION 1), ".ckpt" (FILE_EXTENSION).
_CKPT_SUFFIX = ".ckpt"
_CKPT_VERSION = re.compile(r"^(.+)-v([0-9]+)$")
_CKPT_STEP = re.compile(r"(?:^|-)step=([0-9]+)(?=-|$)")
_CKPT_EPOCH = re.compile(r"(?:^|-)epoch=([0-9]+)(?=-|$)")
#: A data.pkl larger than this is not read for a Lightning checkpoint's step (the name must say it).
MAX_PICKLE_BYTES = 64 << 20
#: Globals ``torch.load(weights_only=True)`` may build beyond torch's own allowlist, at the ``load``
#: level and in the reference trainer (objects, as ``torch.serialization.safe_globals`` takes them).
#: The reference trainer saves tensors, numbers and Python containers only: none.
LOAD_SAFE_GLOBALS = ()  # type: Tuple[Any, ...]
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_ZERO_OPTIM = re.compile(r"^(?:[a-z0-9]+_)?zero_pp_rank_%s_mp_rank_%s_optim_states\.pt$" % (_NUM, _NUM))
_MEGATRON_RANK_DIR = re.compile(r"^mp_rank_([0-9]+)(?:_([0-9]+))?(?:_([0-9]+))?$")
_TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
_HF_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


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
    """

    __slots__ = ("name", "path", "layout", "step", "epoch", "name_epoch", "is_dir", "valid",
                 "why_invalid", "checked", "files", "size", "time", "pointed_by", "version", "last",
                 "step_from")

    def __init__(self, name, path, layout, step, name_epoch=None, is_dir=True):
        # type: (str, str, str, int, Optional[int], bool) -> None
        self.name = name
        self.path = path
        self.layout = layout
        self.step = step
        self.name_epoch = name_epoch
        self.epoch = name_epoch  # type: Optional[Union[int, float]]
        self.is_dir = is_dir
        self.valid = None  # type: Optional[bool]
        self.why_invalid = None  # type: Optional[str]
        self.checked = None  # type: Optional[str]
        self.files = None  # type: Optional[int]
        self.size = None  # type: Optional[int]
        self.time = None  # type: Optional[str]
        self.pointed_by = []  # type: List[str]
        self.version = 0  # Lightning's -v<N>: a later save under the same name
        self.last = False  # Lightning's last.ckpt / last-v<N>.ckpt copy (save_last=True)
        self.step_from = "name"  # or "template", "metadata"

    @property
    def key(self):
        # type: () -> Tuple[int, int]
        """``(epoch, step)`` from the name; -1 for the epoch of layouts whose names carry none."""
        return (self.name_epoch if self.name_epoch is not None else -1, self.step)

    def sort_key(self):
        # type: () -> Tuple[int, int, int, int, int, str]
        # Equal numbers: a Lightning last.ckpt copy before the named checkpoint of the same step,
        # -v<N> after the unversioned name; the layout and the name only make the order total.
        return self.key + (0 if self.last else 1, self.version, -_LAYOUT_RANK.get(self.layout, 99), self.name)

    def to_dict(self):
        # type: () -> Dict[str, Any]
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
    """

    def __init__(self, path, validate):
        # type: (str, str) -> None
        self.path = path
        self.validate = validate
        self.checkpoints = []  # type: List[Checkpoint]
        self.latest_valid = None  # type: Optional[Checkpoint]
        self.ignored = []  # type: List[Dict[str, str]]
        self.pointers = []  # type: List[Dict[str, Any]]
        self.warnings = []  # type: List[str]
        self.finished = None  # type: Optional[Dict[str, Any]]
        self.had_candidates = False
        #: ``{"name", "reason", "valid"}``: checkpoints whose step neither the name nor the file tells.
        self.unordered = []  # type: List[Dict[str, Any]]
        # For prune(): (name, path) of temporary entries and of symlinks; not in to_dict().
        self.temporary = []  # type: List[Tuple[str, str]]
        self.symlinks = []  # type: List[Tuple[str, str]]

    def to_dict(self):
        # type: () -> Dict[str, Any]
        return dict(path=self.path, validate=self.validate,
                    checkpoints=[c.to_dict() for c in self.checkpoints],
                    latest_valid=self.latest_valid.to_dict() if self.latest_valid else None,
                    ignored=list(self.ignored), pointers=list(self.pointers),
                    warnings=list(self.warnings), finished=self.finished, unordered=list(self.unordered))


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------

def checkpoint_name(step):
    # type: (int) -> str
    """The contract's folder name for a step: ``step_`` and the step zero-padded to 9 digits."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError("step must be a non-negative integer, not %r" % (step,))
    return "step_%09d" % step


def is_temporary(name):
    # type: (str) -> bool
    """True for names of entries still being written (``tmp-*``, ``*.tmp``): never candidates."""
    return name.startswith(TMP_PREFIX) or name.endswith(TMP_SUFFIX)


def compile_name_template(template):
    # type: (str) -> Any
    """A regex for the names a Lightning/NeMo ``ModelCheckpoint(filename=template)`` writes.

    ``template`` is the ``filename`` argument (``{epoch}-{step}``, ``{step:06d}``,
    ``run-{epoch:02d}-{val_loss:.2f}``, ``.ckpt`` optional): ``{step}`` and ``{epoch}`` capture
    numbers, any other ``{metric}`` matches any value; each field may appear with or without its
    ``name=`` prefix, so the same template fits ``auto_insert_metric_name`` true and false.

    Raises:
        ValueError: no ``{step}``, a field twice, an empty or unbalanced brace, a ``/``.
    """
    text = template[:-len(_CKPT_SUFFIX)] if template.endswith(_CKPT_SUFFIX) else template
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
    return re.compile("^%s$" % "".join(out))


def parse_lightning_name(name, template=None):
    # type: (str, Any) -> Optional[Dict[str, Any]]
    """What a Lightning/NeMo ``.ckpt`` name says: ``{"step", "epoch", "version", "last", "step_from"}``.

    None when ``name`` does not end in ``.ckpt``. ``step`` and ``epoch`` are None when the name does
    not say them: ``step=<S>`` / ``epoch=<E>`` anywhere in the name (auto_insert_metric_name), or
    the ``{step}`` / ``{epoch}`` of ``template`` (:func:`compile_name_template`, a regex or a
    string). ``version`` is the ``-v<N>`` suffix (0 without); ``last`` is true for ``last.ckpt``,
    ``last-v<N>.ckpt`` and NeMo's ``...-last.ckpt``.
    """
    if not name.endswith(_CKPT_SUFFIX) or len(name) == len(_CKPT_SUFFIX):
        return None
    if isinstance(template, str):
        template = compile_name_template(template)
    stem = name[:-len(_CKPT_SUFFIX)]
    found = dict(step=None, epoch=None, version=0, last=False, step_from=None)  # type: Dict[str, Any]
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


def parse_name(name, template=None):
    # type: (str, Any) -> Optional[Tuple[str, str, int, Optional[int]]]
    """``(layout, kind, step, epoch)`` for a name that matches a layout and carries its step, else None.

    ``kind`` is ``dir``, ``file`` or ``any``. The ``step_<S>`` layout is reported as ``clusterops``;
    a folder holding a ``.metadata`` and no manifest is a torch.distributed.checkpoint instead.
    A Lightning ``.ckpt`` name is read by :func:`parse_lightning_name` (``template``: its
    ``name_template``); one whose name has no step (``last.ckpt``, ``epoch=3-val_loss=0.12.ckpt``)
    gives None here: :func:`inspect` reads its step from the file.
    """
    for regex, layout, kind, has_epoch in _PATTERNS:
        match = regex.match(name)
        if match:
            if has_epoch:
                return layout, kind, int(match.group(2)), int(match.group(1))
            return layout, kind, int(match.group(1)), None
    lightning = parse_lightning_name(name, template)
    if lightning is not None and lightning["step"] is not None and not lightning["last"]:
        return LIGHTNING, "any", lightning["step"], lightning["epoch"]
    return None


def lightning_progress(path):
    # type: (str) -> Tuple[int, Optional[int]]
    """``(global_step, epoch)`` from a Lightning ``.ckpt`` file's own ``data.pkl``, without torch.

    The pickle is read with the same unpickler as a DCP ``.metadata``: every class it names becomes
    an inert stand-in and tensors are left out, so nothing is imported or run from the file.

    Raises:
        _Invalid: the file is not a whole torch.save zip (it is broken whatever its step).
        ValueError: it is whole but does not say its step (not a Lightning checkpoint, a legacy
            pickle-format file, a ``data.pkl`` over :data:`MAX_PICKLE_BYTES`).
    """
    problem = check_torch_zip(path)
    if problem:
        if problem.startswith("legacy"):
            raise ValueError("a legacy torch.save file: its step cannot be read without torch")
        raise _Invalid(problem)
    with zipfile.ZipFile(path) as archive:
        infos = [i for i in archive.infolist() if i.filename == "data.pkl" or i.filename.endswith("/data.pkl")]
        if infos[0].file_size > MAX_PICKLE_BYTES:
            raise ValueError("data.pkl is %d bytes, more than the %d read for a step" % (
                infos[0].file_size, MAX_PICKLE_BYTES))
        with archive.open(infos[0]) as handle:
            try:
                root = _StubUnpickler(handle).load()
            except (EOFError, pickle.UnpicklingError, struct.error, UnicodeDecodeError) as exc:
                raise _Invalid("data.pkl is cut short or corrupt: %s: %s" % (type(exc).__name__, exc))
            except Exception as exc:  # pylint: disable=broad-except  # a shape the stand-ins cannot take
                raise ValueError("data.pkl could not be read without torch: %s: %s" % (type(exc).__name__, exc))
    step = root.get("global_step") if isinstance(root, dict) else None
    epoch = root.get("epoch") if isinstance(root, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError("no global_step inside (not a Lightning checkpoint?)")
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        epoch = None
    return step, epoch


# ---------------------------------------------------------------------------------------------
# Reading files
# ---------------------------------------------------------------------------------------------

class _Invalid(Exception):
    """Raised inside the checks; the message becomes ``why_invalid``."""


def _inside(path, base_real):
    # type: (str, str) -> bool
    real = os.path.realpath(path)
    return real == base_real or real.startswith(base_real.rstrip(os.sep) + os.sep)


def hash_file(path, chunk_size=CHUNK_SIZE, fsync=False):
    # type: (str, int, bool) -> Tuple[int, str]
    """``(bytes read, sha256 hex)`` of a file, read once in ``chunk_size`` blocks (constant memory).

    With ``fsync`` the file is also flushed to stable storage through the same descriptor.
    """
    digest = hashlib.sha256()
    buf = bytearray(chunk_size)
    view = memoryview(buf)
    total = 0
    with open(path, "rb", buffering=0) as handle:
        if hasattr(os, "posix_fadvise"):
            try:
                os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            except OSError:  # pragma: no cover - some file systems refuse hints
                pass
        while True:
            count = handle.readinto(buf)
            if not count:
                break
            digest.update(view[:count])
            total += count
        if fsync:
            os.fsync(handle.fileno())
    return total, digest.hexdigest()


def _fsync_dir(path):
    # type: (str) -> None
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_json(path, what, max_bytes=MAX_MANIFEST_BYTES):
    # type: (str, str, int) -> Any
    try:
        st = os.stat(path)
    except OSError:
        raise _Invalid("no %s" % what)
    if not stat.S_ISREG(st.st_mode):
        raise _Invalid("%s is not a regular file" % what)
    if st.st_size == 0:
        raise _Invalid("%s is empty" % what)
    if st.st_size > max_bytes:
        raise _Invalid("%s is larger than %d bytes" % (what, max_bytes))
    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise _Invalid("%s is not valid JSON: %s" % (what, exc))


def _walk_files(top, base_real):
    # type: (str, str) -> List[Tuple[str, str, int]]
    """``(relative posix path, path, size)`` of the files under ``top``, sorted.

    Symlinks are followed only while they stay inside ``base_real`` (the run folder); one that
    leaves it makes the checkpoint invalid. Symlinked folders are not descended into.
    """
    found = []  # type: List[Tuple[str, str, int]]
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, top).replace(os.sep, "/")
            if os.path.islink(path):
                if not _inside(path, base_real):
                    raise _Invalid("%s is a symlink out of the run folder (not followed)" % rel)
                if os.path.isdir(path):
                    continue
            try:
                st = os.stat(path)
            except OSError:
                raise _Invalid("%s is a dangling symlink" % rel)
            if stat.S_ISREG(st.st_mode):
                found.append((rel, path, st.st_size))
    return found


def _require_nonempty(files, names_what):
    # type: (List[Tuple[str, str, int]], str) -> None
    if not files:
        raise _Invalid("no files")
    if all(size == 0 for _rel, _path, size in files):
        raise _Invalid("every file is empty (%s)" % names_what)


# ---------------------------------------------------------------------------------------------
# torch.save zips, safetensors, torch.distributed.checkpoint metadata
# ---------------------------------------------------------------------------------------------

def check_torch_zip(path, read_all=False):
    # type: (str, bool) -> Optional[str]
    """Why a torch.save file (a zip archive) is broken, or None when it looks whole.

    Reads only the end of central directory, the central directory and each entry's local header
    (and data descriptor), so a file truncated by a few bytes or with a torn entry is caught without
    reading the data. With ``read_all`` every entry is also read once and its CRC-32 compared.
    """
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
            if head != b"PK\x03\x04":
                if not head:
                    return "empty file"
                if head[:1] == b"\x80":
                    return "legacy torch.save format (a pickle, not a zip): cannot be checked"
                return "not a zip archive (torch.save writes zip archives)"
            try:
                archive = zipfile.ZipFile(handle)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, struct.error) as exc:
                return "zip end of central directory missing or damaged (truncated?): %s" % exc
            infos = archive.infolist()
            if not any(i.filename == "data.pkl" or i.filename.endswith("/data.pkl") for i in infos):
                return "zip without data.pkl: not a torch.save file"
            problem = _check_local_headers(handle, infos, getattr(archive, "start_dir", None))
            if problem:
                return problem
            if read_all:
                for info in infos:
                    try:
                        with archive.open(info) as entry:
                            while entry.read(CHUNK_SIZE):
                                pass
                    except (zipfile.BadZipFile, EOFError, OSError, ValueError, struct.error) as exc:
                        return "zip entry %s: %s" % (info.filename, exc)
    except OSError as exc:
        return "cannot read: %s" % exc
    return None


def _check_local_headers(handle, infos, start_dir):
    # type: (Any, List[Any], Optional[int]) -> Optional[str]
    ordered = sorted(infos, key=lambda i: i.header_offset)
    end_limit = start_dir
    for index, info in enumerate(ordered):
        if info.header_offset < 0:
            # zipfile shifts every offset when the central directory is not where the end record
            # says: bytes are missing (or were added) before it.
            return "zip entry %s: bytes missing before the central directory" % info.filename
        handle.seek(info.header_offset)
        header = handle.read(30)
        if len(header) < 30 or header[:4] != b"PK\x03\x04":
            return "zip entry %s: no local header at offset %d" % (info.filename, info.header_offset)
        flags = struct.unpack("<H", header[6:8])[0]
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        raw_name = handle.read(name_len)
        try:
            name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
        except UnicodeDecodeError:
            name = None
        if name != info.orig_filename:
            return "zip entry %s: local header names %r" % (info.filename, raw_name)
        data_end = info.header_offset + 30 + name_len + extra_len + info.compress_size
        if flags & 0x08:
            handle.seek(data_end)
            desc = handle.read(24)
            if desc[:4] == b"PK\x07\x08":
                desc = desc[4:]
                data_end += 4
            zip64 = info.compress_size >= 0xFFFFFFFF or info.file_size >= 0xFFFFFFFF
            size_fmt, desc_len = ("<IQQ", 20) if zip64 else ("<III", 12)
            if len(desc) < desc_len:
                return "zip entry %s: data descriptor cut off" % info.filename
            crc, csize, _usize = struct.unpack(size_fmt, desc[:desc_len])
            if crc != info.CRC or csize != info.compress_size:
                return "zip entry %s: data descriptor disagrees with the central directory" % info.filename
            data_end += desc_len
        following = ordered[index + 1].header_offset if index + 1 < len(ordered) else end_limit
        if following is not None and data_end > following:
            return "zip entry %s: data runs past offset %d" % (info.filename, following)
    return None


def check_safetensors(path, size):
    # type: (str, int) -> Optional[str]
    """Why a safetensors file is broken (its header must describe exactly the bytes after it)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(8)
            if len(raw) < 8:
                return "safetensors file shorter than its header length"
            header_len = struct.unpack("<Q", raw)[0]
            if header_len > size - 8 or header_len > MAX_MANIFEST_BYTES:
                return "safetensors header length %d does not fit in %d bytes" % (header_len, size)
            header = json.loads(handle.read(header_len).decode("utf-8"))
    except (OSError, ValueError) as exc:
        return "safetensors header unreadable: %s" % exc
    end = 0
    for key, value in header.items() if isinstance(header, dict) else ():
        if key == "__metadata__":
            continue
        offsets = value.get("data_offsets") if isinstance(value, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            return "safetensors tensor %s has no data_offsets" % key
        end = max(end, offsets[1])
    data = size - 8 - header_len
    if end != data:
        return "safetensors tensors need %d data bytes, the file holds %d (truncated?)" % (end, data)
    return None


class _Stub(object):
    """Stands for any class named in a pickle; keeps its state, runs nothing."""

    module = ""
    qualname = ""

    def __init__(self, *args, **kwargs):
        self.__dict__["_args"] = args

    def __setstate__(self, state):
        parts = state if isinstance(state, tuple) else (state,)
        for part in parts:
            if isinstance(part, dict):
                self.__dict__.update(part)

    def __call__(self, *args, **kwargs):
        return _Stub(*args)

    # Containers pickled as subclasses of dict or list fill themselves with these.
    def __setitem__(self, key, value):
        self.__dict__.setdefault("_items", {})[key] = value

    def append(self, value):
        self.__dict__.setdefault("_list", []).append(value)

    def extend(self, values):
        self.__dict__.setdefault("_list", []).extend(values)


class _StubUnpickler(pickle.Unpickler):
    """Reads a pickle without importing or calling anything it names (torch is not needed)."""

    def find_class(self, module, name):
        # Each global becomes a class of its own name; calling it makes a stub instance.
        return type(str(name), (_Stub,), {"module": module, "qualname": name})

    def persistent_load(self, pid):
        return None


def dcp_storage(metadata_path):
    # type: (str) -> List[Tuple[str, int, int]]
    """``(relative_path, offset, length)`` of every item a torch.distributed.checkpoint ``.metadata``
    (``Metadata.storage_data``, ``_StorageInfo`` records) says is stored; [] when it names none.

    Raises _Invalid when the pickle is cut short or corrupt. A pickle that is whole but shaped in a
    way this reader does not know gives [] (the sizes are then not checked), never invalid.
    """
    with open(metadata_path, "rb") as handle:
        try:
            root = _StubUnpickler(handle).load()
        except (EOFError, pickle.UnpicklingError, struct.error, UnicodeDecodeError) as exc:
            raise _Invalid(".metadata is cut short or corrupt: %s: %s" % (type(exc).__name__, exc))
        except Exception:  # pylint: disable=broad-except  # a shape the stand-ins cannot take
            return []
    storage = getattr(root, "storage_data", None)
    if isinstance(storage, _Stub):  # a dict subclass
        storage = storage.__dict__.get("_items")
    if not isinstance(storage, dict):
        return []
    found = []
    for info in storage.values():
        rel, offset, length = (getattr(info, "relative_path", None), getattr(info, "offset", None),
                               getattr(info, "length", None))
        if isinstance(rel, str) and isinstance(offset, int) and isinstance(length, int):
            found.append((rel, offset, length))
    return found


# ---------------------------------------------------------------------------------------------
# Checks per layout
# ---------------------------------------------------------------------------------------------

def _level_at_least(level, wanted):
    # type: (str, str) -> bool
    return LEVELS.index(level) >= LEVELS.index(wanted)


def _check_contract(ckpt, level, base_real):
    # type: (Checkpoint, str, str) -> None
    manifest_path = os.path.join(ckpt.path, MANIFEST)
    if not os.path.lexists(manifest_path):
        if os.path.lexists(os.path.join(ckpt.path, ".metadata")) or any(
                n.endswith(".distcp") for n in os.listdir(ckpt.path)):
            ckpt.layout = DCP
            _check_dcp(ckpt, level, base_real)
            return
        raise _Invalid("no %s: not committed" % MANIFEST)
    if os.path.islink(manifest_path):
        raise _Invalid("%s is a symlink" % MANIFEST)
    manifest = _read_json(manifest_path, MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _Invalid("%s is not a %s manifest" % (MANIFEST, FORMAT))
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _Invalid("%s has no format_version" % MANIFEST)
    if version > FORMAT_VERSION:
        raise _Invalid("%s format_version %d is newer than this reader's %d" % (MANIFEST, version, FORMAT_VERSION))
    step, epoch = manifest.get("step"), manifest.get("epoch")
    if step != ckpt.step or isinstance(step, bool):
        raise _Invalid("%s step %r does not match the folder name's %d" % (MANIFEST, step, ckpt.step))
    if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool)):
        raise _Invalid("%s epoch %r is not an integer" % (MANIFEST, epoch))
    ckpt.epoch = epoch
    ckpt.time = manifest.get("time") if isinstance(manifest.get("time"), str) else None
    entries = manifest.get("files")
    if not isinstance(entries, list) or not entries:
        raise _Invalid("%s lists no files" % MANIFEST)
    seen = set()
    checked = []  # type: List[Tuple[str, str, int, str]]
    for entry in entries:
        rel = entry.get("path") if isinstance(entry, dict) else None
        size = entry.get("size") if isinstance(entry, dict) else None
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(rel, str) or not rel or rel.startswith("/") or "\x00" in rel or \
                posixpath.normpath(rel) != rel or rel == ".." or rel.startswith("../") or rel == MANIFEST:
            raise _Invalid("%s lists a bad path: %r" % (MANIFEST, rel))
        if rel in seen:
            raise _Invalid("%s lists %s twice" % (MANIFEST, rel))
        seen.add(rel)
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise _Invalid("%s: bad size for %s" % (MANIFEST, rel))
        if not isinstance(digest, str) or not _SHA256_HEX.match(digest):
            raise _Invalid("%s: bad sha256 for %s" % (MANIFEST, rel))
        checked.append((rel, os.path.join(ckpt.path, *rel.split("/")), size, digest))
    ckpt.files = len(checked)
    ckpt.size = sum(size for _rel, _path, size, _digest in checked)
    if ckpt.size == 0:
        raise _Invalid("every file is empty")
    for rel, path, size, _digest in checked:
        try:
            st = os.lstat(path)
        except OSError:
            raise _Invalid("%s is missing" % rel)
        if not stat.S_ISREG(st.st_mode):
            raise _Invalid("%s is not a regular file (the contract stores regular files only)" % rel)
        if _level_at_least(level, SIZES) and st.st_size != size:
            raise _Invalid("%s: %d bytes on disk, the manifest says %d" % (rel, st.st_size, size))
    if _level_at_least(level, SHA256):
        for rel, path, size, digest in checked:
            try:
                count, actual = hash_file(path)
            except OSError as exc:
                raise _Invalid("%s cannot be read: %s" % (rel, exc))
            if count != size:
                raise _Invalid("%s: read %d bytes, the manifest says %d" % (rel, count, size))
            if actual != digest:
                raise _Invalid("%s: sha256 %s does not match the manifest's %s" % (rel, actual, digest))


def _check_zip_members(files, level):
    # type: (List[Tuple[str, str, int]], str) -> None
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
            raise _Invalid("%s: %s" % (rel, problem))


def _check_dcp_files(ckpt, files, level, prefix=""):
    # type: (Checkpoint, List[Tuple[str, str, int]], str, str) -> None
    by_rel = dict((rel, (path, size)) for rel, path, size in files)
    meta = by_rel.get(prefix + ".metadata")
    if meta is None:
        raise _Invalid("no %s.metadata: not committed (torch.distributed.checkpoint writes it last)" % prefix)
    if meta[1] == 0:
        raise _Invalid("%s.metadata is empty" % prefix)
    data = [size for rel, (_path, size) in by_rel.items() if rel.endswith(".distcp")]
    if not data:
        raise _Invalid("no .distcp data files")
    if not any(data):
        raise _Invalid("every .distcp data file is empty")
    if _level_at_least(level, SIZES):
        for rel, offset, length in dcp_storage(meta[0]):
            target = by_rel.get(prefix + rel)
            if target is None:
                raise _Invalid(".metadata names %s, which is missing" % rel)
            if offset + length > target[1]:
                raise _Invalid("%s: %d bytes, .metadata needs %d (truncated?)" % (rel, target[1], offset + length))


def _check_dcp(ckpt, level, base_real):
    # type: (Checkpoint, str, str) -> None
    files = _walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    _require_nonempty(files, "torch.distributed.checkpoint")
    _check_dcp_files(ckpt, files, level)


def _check_huggingface(ckpt, level, base_real):
    # type: (Checkpoint, str, str) -> None
    files = _walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    _require_nonempty(files, "Hugging Face")
    state = _read_json(os.path.join(ckpt.path, "trainer_state.json"),
                       "trainer_state.json (the Trainer writes it last)")
    if not isinstance(state, dict):
        raise _Invalid("trainer_state.json is not an object")
    global_step = state.get("global_step")
    if isinstance(global_step, int) and global_step != ckpt.step:
        raise _Invalid("trainer_state.json global_step %d does not match the folder name's %d" % (global_step, ckpt.step))
    if isinstance(state.get("epoch"), (int, float)) and not isinstance(state.get("epoch"), bool):
        ckpt.epoch = state["epoch"]
    sizes = dict((rel, size) for rel, _path, size in files)
    if not any(size > 0 for rel, size in sizes.items() if rel != "trainer_state.json"):
        raise _Invalid("nothing but trainer_state.json holds data")
    for index in _HF_INDEXES:
        if index in sizes:
            index_data = _read_json(os.path.join(ckpt.path, index), index)
            weight_map = index_data.get("weight_map") if isinstance(index_data, dict) else None
            if not isinstance(weight_map, dict):
                raise _Invalid("%s has no weight_map" % index)
            for shard in sorted(set(str(v) for v in weight_map.values())):
                if not sizes.get(shard):
                    raise _Invalid("%s names %s, which is missing or empty" % (index, shard))
    for rel, size in sizes.items():
        if size == 0 and rel.endswith(_TORCH_SUFFIXES + (".safetensors",)):
            raise _Invalid("%s is empty" % rel)
    _check_zip_members(files, level)


def _check_deepspeed_files(files, what):
    # type: (List[Tuple[str, str, int]], str) -> None
    names = [rel.rsplit("/", 1)[-1] for rel, _path, _size in files]
    if not any(n.endswith("model_states.pt") for n in names):
        raise _Invalid("no *model_states.pt (%s)" % what)
    for rel, _path, size in files:
        if rel.endswith(".pt") and size == 0:
            raise _Invalid("%s is empty" % rel)
    grid = {}  # type: Dict[int, set]
    for name in names:
        match = _ZERO_OPTIM.match(name)
        if match:
            grid.setdefault(int(match.group(2)), set()).add(int(match.group(1)))
    if grid:
        counts = set(len(ranks) for ranks in grid.values())
        for mp_rank, ranks in sorted(grid.items()):
            if ranks != set(range(len(ranks))) or len(counts) != 1:
                raise _Invalid("ZeRO optimizer states incomplete for mp_rank %d: data-parallel ranks %s"
                               % (mp_rank, sorted(ranks)))


def _check_deepspeed(ckpt, level, base_real):
    # type: (Checkpoint, str, str) -> None
    files = _walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    _require_nonempty(files, "DeepSpeed")
    _check_deepspeed_files(files, "DeepSpeed")
    _check_zip_members(files, level)


def _check_megatron(ckpt, level, base_real):
    # type: (Checkpoint, str, str) -> None
    files = _walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    _require_nonempty(files, "Megatron")
    rels = set(rel for rel, _path, _size in files)
    if ".metadata" in rels or any(rel.endswith(".distcp") for rel in rels):
        _check_dcp_files(ckpt, files, level)
        return
    grid = []  # type: List[Tuple[int, ...]]
    for rel, _path, size in files:
        parts = rel.split("/")
        match = _MEGATRON_RANK_DIR.match(parts[0]) if len(parts) == 2 else None
        if match and parts[1] == "model_optim_rng.pt":
            if size == 0:
                raise _Invalid("%s is empty" % rel)
            grid.append(tuple(int(g) for g in match.groups() if g is not None))
    if not grid:
        raise _Invalid("no .metadata and no mp_rank_*/model_optim_rng.pt")
    dims = set(len(g) for g in grid)
    axes = [sorted(set(g[i] for g in grid)) for i in range(max(dims))]
    expected = 1
    for axis in axes:
        expected *= len(axis)
        if axis != list(range(len(axis))):
            raise _Invalid("mp_rank_* folders incomplete: ranks %s" % axis)
    if len(dims) != 1 or len(set(grid)) != expected:
        raise _Invalid("mp_rank_* folders incomplete: %d of %d tensor/pipeline ranks" % (len(set(grid)), expected))
    _check_zip_members(files, level)


def _check_single_file(ckpt, level, base_real):
    # type: (Checkpoint, str, str) -> None
    try:
        st = os.stat(ckpt.path)
    except OSError as exc:
        raise _Invalid("cannot stat: %s" % exc)
    if not stat.S_ISREG(st.st_mode):
        raise _Invalid("not a regular file")
    ckpt.files, ckpt.size = 1, st.st_size
    if st.st_size == 0:
        raise _Invalid("empty file")
    if _level_at_least(level, SIZES):
        problem = check_torch_zip(ckpt.path, read_all=_level_at_least(level, SHA256))
        if problem:
            raise _Invalid(problem)


def _check_lightning(ckpt, level, base_real):
    # type: (Checkpoint, str, str) -> None
    if not ckpt.is_dir:
        _check_single_file(ckpt, level, base_real)
        return
    # A sharded Lightning checkpoint: FSDP writes torch.distributed.checkpoint, DeepSpeed its own.
    files = _walk_files(ckpt.path, base_real)
    ckpt.files, ckpt.size = len(files), sum(s for _r, _p, s in files)
    _require_nonempty(files, "Lightning")
    rels = set(rel for rel, _path, _size in files)
    if ".metadata" in rels:
        _check_dcp_files(ckpt, files, level)
    elif any(rel.startswith("checkpoint/") for rel in rels):
        _check_deepspeed_files(files, "Lightning DeepSpeed")
        _check_zip_members(files, level)
    else:
        raise _Invalid("sharded .ckpt folder without .metadata or checkpoint/")


_CHECKS = {
    CONTRACT: _check_contract,
    DCP: _check_dcp,
    TORCH_FILE: _check_single_file,
    HUGGINGFACE: _check_huggingface,
    DEEPSPEED: _check_deepspeed,
    MEGATRON: _check_megatron,
    LIGHTNING: _check_lightning,
}  # type: Dict[str, Callable[[Checkpoint, str, str], None]]


def torch_load(path, map_location="cpu", safe_globals=LOAD_SAFE_GLOBALS, mmap=False):
    # type: (str, Any, Sequence[Any], bool) -> Any
    """``torch.load(path, weights_only=True)`` with ``safe_globals`` allowed: how the reference
    trainer opens its files and what the ``load`` level tries (imports torch)."""
    import torch  # pylint: disable=import-outside-toplevel
    with torch.serialization.safe_globals(list(safe_globals)):
        return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)


def load_error(exc):
    # type: (BaseException) -> str
    """One line out of torch.load's error (weights_only errors are several paragraphs long)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "WeightsUnpickler error" in line or "Unsupported global" in line:
            text = line.split("WeightsUnpickler error:", 1)[-1].strip()
            return "%s: %s" % (type(exc).__name__, text.split(". ", 1)[0].rstrip("."))
    return "%s: %s" % (type(exc).__name__, lines[0] if lines else "")


def _check_loadable(ckpt, base_real):
    # type: (Checkpoint, str) -> None
    """The ``load`` level: every torch.save file of the checkpoint opens with torch_load()."""
    if ckpt.is_dir:
        files = [(rel, path) for rel, path, size in _walk_files(ckpt.path, base_real)
                 if rel.endswith(_TORCH_SUFFIXES) and size > 0]
    else:
        files = [(ckpt.name, ckpt.path)]
    for rel, path in files:
        try:
            torch_load(path, mmap=True)
        except Exception as exc:  # pylint: disable=broad-except  # any failure is the reason
            raise _Invalid("%s: torch.load(weights_only=True) fails: %s" % (rel, load_error(exc)))


def _check(ckpt, level, base_real):
    # type: (Checkpoint, str, str) -> Checkpoint
    ckpt.valid, ckpt.why_invalid = True, None
    try:
        if ckpt.is_dir != os.path.isdir(ckpt.path):
            raise _Invalid("is a %s, the layout needs a %s" % (
                "folder" if not ckpt.is_dir else "file", "file" if not ckpt.is_dir else "folder"))
        _CHECKS[ckpt.layout](ckpt, level, base_real)
        if level == LOAD:
            _check_loadable(ckpt, base_real)
    except _Invalid as exc:
        ckpt.valid, ckpt.why_invalid = False, str(exc)
    except OSError as exc:
        ckpt.valid, ckpt.why_invalid = False, "cannot read: %s" % exc
    ckpt.checked = level
    return ckpt


# ---------------------------------------------------------------------------------------------
# Run folders
# ---------------------------------------------------------------------------------------------

def _check_level(validate):
    # type: (str) -> None
    if validate not in LEVELS:
        raise ValueError("validate must be one of %s, not %r" % (", ".join(LEVELS), validate))
    if validate == LOAD:
        try:
            import torch  # noqa: F401  # pylint: disable=unused-import
        except ImportError as exc:
            raise CheckpointError("validation level %s needs torch, which this Python cannot import: %s"
                                  % (LOAD, exc))


def _read_text(path, limit=4096):
    # type: (str, int) -> Optional[str]
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace").strip()
    except OSError:
        return None


def _lightning_candidate(entry, is_dir, template, report):
    # type: (Any, bool, Any, Report) -> Optional[Checkpoint]
    """A ``.ckpt`` entry as a candidate ordered by its global step, or None (then it is in
    ``report.unordered``): the step comes from the name (or ``template``), else from the file."""
    found = parse_lightning_name(entry.name, template)
    if found is None:
        return None
    step, epoch, step_from = found["step"], found["epoch"], found["step_from"]
    if step is None:
        if is_dir:
            report.unordered.append(dict(name=entry.name, valid=None, reason=(
                "a sharded .ckpt folder whose name has no step (name_template can say where it is)")))
            return None
        try:
            step, meta_epoch = lightning_progress(entry.path)
        except _Invalid as exc:
            report.unordered.append(dict(name=entry.name, valid=False, reason="broken, its step unknown: %s" % exc))
            return None
        except (ValueError, OSError) as exc:
            report.unordered.append(dict(name=entry.name, valid=None, reason=(
                "its name has no step and the file does not say it: %s" % exc)))
            return None
        epoch, step_from = meta_epoch if meta_epoch is not None else epoch, "metadata"
    # Lightning's step is the global step (it never restarts at an epoch): it alone orders them.
    ckpt = Checkpoint(entry.name, entry.path, LIGHTNING, step, None, is_dir)
    ckpt.epoch, ckpt.version, ckpt.last, ckpt.step_from = epoch, found["version"], found["last"], step_from
    return ckpt


def _list_run(root, root_real, report, template=None):
    # type: (str, str, Report, Any) -> Tuple[List[Checkpoint], List[Dict[str, Any]]]
    candidates = []  # type: List[Checkpoint]
    pointers = []  # type: List[Dict[str, Any]]
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        raise CheckpointError("cannot list %s: %s" % (root, exc))
    for entry in entries:
        name = entry.name
        is_link = entry.is_symlink()
        if name == FINISHED and entry.is_file(follow_symlinks=False):
            report.finished = _read_finished(entry.path)
            continue
        if is_temporary(name):
            report.ignored.append(dict(name=name, reason="temporary (still being written, or left by a crash)"))
            report.temporary.append((name, entry.path))
            continue
        if name == PRUNE_LOCK:
            report.ignored.append(dict(name=name, reason="lock file of checkpoint pruning"))
            continue
        if is_link:
            report.symlinks.append((name, entry.path))
        if name in (_DEEPSPEED_LATEST, _MEGATRON_TRACKER) or (_LAST_CKPT.match(name) and is_link):
            # Regular files and symlinks only: opening a FIFO would block. A regular last.ckpt is a
            # copy (save_last=True) and a candidate of its own, below.
            if is_link or entry.is_file(follow_symlinks=False):
                pointers.append(dict(name=name, is_link=is_link, path=entry.path))
                continue
        parsed = parse_name(name, template)
        if is_link:
            escapes = not _inside(entry.path, root_real)
            reason = ("symlink out of the run folder (not followed)" if escapes
                      else "symlink to %s (an alias, not a checkpoint of its own)" % os.readlink(entry.path))
            report.ignored.append(dict(name=name, reason=reason))
            continue
        is_dir = entry.is_dir(follow_symlinks=False)
        if parsed is None or parsed[0] == LIGHTNING:
            if name.endswith(_CKPT_SUFFIX) and (is_dir or entry.is_file(follow_symlinks=False)):
                ckpt = _lightning_candidate(entry, is_dir, template, report)
                if ckpt is not None:
                    candidates.append(ckpt)
                continue
            report.ignored.append(dict(name=name, reason="matches no checkpoint layout"))
            continue
        layout, kind, step, epoch = parsed
        if (kind == "dir" and not is_dir) or (kind == "file" and is_dir):
            report.ignored.append(dict(name=name, reason="a %s named like a %s checkpoint %s" % (
                "folder" if is_dir else "file", layout, kind == "dir" and "folder" or "file")))
            continue
        candidates.append(Checkpoint(name, entry.path, layout, step, epoch, is_dir))
    return candidates, pointers


def _read_finished(path):
    # type: (str) -> Dict[str, Any]
    text = _read_text(path, 1 << 16)
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        data = {}
    return data if isinstance(data, dict) else {}


def _resolve_pointers(raw_pointers, candidates, root, root_real, report):
    # type: (List[Dict[str, Any]], List[Checkpoint], str, str, Report) -> None
    by_name = dict((c.name, c) for c in candidates)
    best = report.latest_valid
    for raw in raw_pointers:
        name, path = raw["name"], raw["path"]
        pointer = dict(name=name, kind="", target=None, resolves_to=None, status="", message="")
        target = None  # type: Optional[Checkpoint]
        if raw["is_link"]:
            pointer["kind"] = "symlink"
            pointer["target"] = os.readlink(path)
            if not _inside(path, root_real):
                pointer.update(status="escapes", message="%s is a symlink out of the run folder; not followed" % name)
            elif not os.path.exists(path):
                pointer.update(status="missing", message="%s points to %s, which does not exist" % (name, pointer["target"]))
            else:
                real = os.path.realpath(path)
                if os.path.dirname(real) == root_real and os.path.basename(real) in by_name:
                    target = by_name[os.path.basename(real)]
                else:
                    pointer.update(status="unrecognised",
                                   message="%s points to %s, which is not a checkpoint of this run folder" % (name, pointer["target"]))
        elif name == _MEGATRON_TRACKER:
            pointer["kind"] = "megatron_tracker"
            text = _read_text(path)
            pointer["target"] = text
            if text is None or not (re.match(r"^[0-9]+$", text) or text == "release"):
                pointer.update(status="unreadable", message="%s holds %r, not an iteration number" % (name, text))
            elif text == "release":
                pointer.update(status="release", message="%s says release: release checkpoints have no iteration to order by" % name)
            else:
                found = [c for c in candidates if c.layout == MEGATRON and c.step == int(text)]
                if found:
                    target = found[-1]
                else:
                    pointer.update(status="missing", message="%s says iteration %s, which is not on disk" % (name, text))
        else:
            pointer["kind"] = "deepspeed_latest"
            text = _read_text(path)
            pointer["target"] = text
            if not text or "/" in text or text in (".", ".."):
                pointer.update(status="unreadable", message="%s holds %r, not a checkpoint tag" % (name, text))
            elif text in by_name:
                target = by_name[text]
            elif os.path.lexists(os.path.join(root, text)):
                pointer.update(status="unrecognised", message="%s names %s, which matches no checkpoint layout" % (name, text))
            else:
                pointer.update(status="missing", message="%s names %s, which is not on disk" % (name, text))
        if target is not None:
            pointer["resolves_to"] = target.name
            target.pointed_by.append(name)
            if best is not None and target is best:
                pointer.update(status="current", message="")
            elif target.valid is False:
                pointer.update(status="invalid", message="%s points to %s, which is invalid (%s)%s" % (
                    name, target.name, target.why_invalid, best and "; using %s" % best.name or ""))
            elif best is not None and target.sort_key() < best.sort_key():
                pointer.update(status="older", message="%s points to %s, older than the newest valid %s" % (
                    name, target.name, best.name))
            else:
                pointer.update(status="current", message="")
        if pointer["message"]:
            report.warnings.append(pointer["message"])
        report.pointers.append(pointer)


def inspect(path, validate=SIZES, validate_all=False, list_all=True, name_template=None):
    # type: (str, str, bool, bool, Optional[str]) -> Report
    """Everything about a run folder: candidates, the newest valid one, pointers, warnings.

    Args:
        path: the run folder.
        validate: level (:data:`LEVELS`) a checkpoint must pass to be chosen.
        validate_all: check every candidate at ``validate`` (a pruning job); else only the newest
            ones, down to the first valid.
        list_all: check every candidate at ``structure`` at least, so that each is listed with its
            validity. False (what :func:`latest_valid` does) touches only what choosing needs: the
            unchecked candidates are listed with ``valid`` None.
        name_template: the Lightning/NeMo ``ModelCheckpoint`` ``filename`` of this run
            (:func:`compile_name_template`), for names that carry the step without ``step=``.

    Raises:
        CheckpointError: the folder is missing, not a folder, or cannot be listed; the ``load``
            level without torch.
        ValueError: an unknown level or a bad ``name_template``.
    """
    _check_level(validate)
    template = compile_name_template(name_template) if name_template else None
    root = os.path.abspath(path)
    if not os.path.isdir(root):
        raise CheckpointError("%s is not a folder" % root if os.path.exists(root) else "%s does not exist" % root)
    root_real = os.path.realpath(root)
    report = Report(root, validate)
    candidates, raw_pointers = _list_run(root, root_real, report, template)
    candidates.sort(key=lambda c: c.sort_key())
    report.checkpoints = candidates
    report.had_candidates = bool(candidates) or bool(report.unordered)
    for item in report.unordered:
        report.warnings.append("%s cannot be ordered: %s" % (item["name"], item["reason"]))
    # One whole checkpoint whose step is unknown might be the newest: choose none rather than guess.
    blocking = [item["name"] for item in report.unordered if item["valid"] is not False]
    if blocking:
        report.warnings.append("refusing to choose a checkpoint: the order of %s is unknown (rename, move "
                               "aside, or give the name template)" % ", ".join(blocking))
    if validate_all:
        for ckpt in candidates:
            _check(ckpt, validate, root_real)
    elif list_all:
        for ckpt in candidates:
            _check(ckpt, STRUCTURE, root_real)
    for ckpt in reversed(candidates if not blocking else []):
        if ckpt.valid is False:
            continue
        if ckpt.checked != validate:
            _check(ckpt, validate, root_real)
        if ckpt.valid:
            report.latest_valid = ckpt
            break
    best = report.latest_valid
    for ckpt in reversed(candidates):
        if best is not None and ckpt is best:
            break
        if ckpt.valid is False and not blocking:
            report.warnings.append("%s is invalid (%s); %s" % (
                ckpt.name, ckpt.why_invalid, "using %s" % best.name if best else "no valid checkpoint"))
    _resolve_pointers(raw_pointers, candidates, root, root_real, report)
    _warn_ties_and_mixes(candidates, report)
    if report.finished is not None and best is not None:
        step = report.finished.get("step")
        if isinstance(step, int) and step != best.step:
            report.warnings.append("%s says step %d, the newest valid checkpoint is %s" % (FINISHED, step, best.name))
    return report


def _warn_ties_and_mixes(candidates, report):
    # type: (List[Checkpoint], Report) -> None
    by_key = {}  # type: Dict[Tuple[int, int, bool, int], List[str]]
    for ckpt in candidates:
        by_key.setdefault(ckpt.key + (ckpt.last, ckpt.version), []).append(ckpt.name)
    for key, names in sorted(by_key.items()):
        if len(names) > 1:
            report.warnings.append("%s have the same (epoch, step) %s; ties are broken by layout, then name" % (
                " and ".join(names), "(%s, %d)" % ("-" if key[0] < 0 else key[0], key[1])))
    with_epoch = set(c.layout for c in candidates if c.name_epoch is not None)
    without = set(c.layout for c in candidates if c.name_epoch is None)
    if with_epoch and without:
        report.warnings.append("layouts with and without an epoch in their names are mixed (%s): "
                               "a missing epoch counts as -1" % ", ".join(sorted(with_epoch | without)))


def scan(path, validate=STRUCTURE, name_template=None):
    # type: (str, str, Optional[str]) -> List[Checkpoint]
    """Every checkpoint candidate of a run folder, oldest first, each checked at ``validate``."""
    return inspect(path, validate, validate_all=True, name_template=name_template).checkpoints


def latest_valid(path, validate=SIZES, name_template=None):
    # type: (str, str, Optional[str]) -> Optional[Checkpoint]
    """The newest checkpoint that passes ``validate``, or None; checks only what choosing needs."""
    return inspect(path, validate, list_all=False, name_template=name_template).latest_valid


def verify(path, validate=SHA256):
    # type: (Union[str, Checkpoint], str) -> Checkpoint
    """Check one checkpoint (a folder or file named after a layout, or a :class:`Checkpoint`).

    Raises:
        CheckpointError: the path does not exist or its name matches no layout.
    """
    _check_level(validate)
    if isinstance(path, Checkpoint):
        ckpt = path
    else:
        full = os.path.abspath(path)
        name = os.path.basename(full.rstrip(os.sep))
        parsed = parse_name(name)
        if not os.path.lexists(full):
            raise CheckpointError("%s does not exist" % full)
        if parsed is None and name.endswith(_CKPT_SUFFIX):
            parsed = (LIGHTNING, "any", -1, None)  # last.ckpt, epoch=3-val_loss=0.12.ckpt: checked, not ordered
        if parsed is None:
            raise CheckpointError("%s matches no checkpoint layout" % name)
        ckpt = Checkpoint(name, full, parsed[0], parsed[2], parsed[3], os.path.isdir(full))
        if ckpt.step < 0 and not ckpt.is_dir:
            try:
                ckpt.step, ckpt.epoch = lightning_progress(full)
                ckpt.step_from = "metadata"
            except (_Invalid, ValueError, OSError):
                pass  # the check below says why when it is broken
    parent_real = os.path.realpath(os.path.dirname(ckpt.path))
    if os.path.islink(ckpt.path) and not _inside(ckpt.path, parent_real):
        ckpt.valid, ckpt.why_invalid, ckpt.checked = False, "a symlink out of its folder (not followed)", validate
        return ckpt
    return _check(ckpt, validate, parent_real)


# ---------------------------------------------------------------------------------------------
# Writing (the contract)
# ---------------------------------------------------------------------------------------------

def _utc_now():
    # type: () -> str
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _refuse_existing(final):
    # type: (str) -> bool
    """True when an invalid checkpoint folder is in the way; raise when a valid one (or a file,
    or a symlink) is; False when nothing is."""
    if not os.path.lexists(final):
        return False
    if os.path.islink(final) or not os.path.isdir(final):
        raise FileExistsError("%s already exists and is not a checkpoint folder" % final)
    if verify(final, SIZES).valid:
        raise FileExistsError("%s already exists and is valid: a committed checkpoint is never replaced" % final)
    return True


def _set_aside_invalid(final, root):
    # type: (str, str) -> Optional[str]
    """Rename an invalid ``final`` out of the way (see :func:`commit_checkpoint`); return where to."""
    if not _refuse_existing(final):
        return None
    aside = os.path.join(root, "%sinvalid-%s.%d.%s" % (
        TMP_PREFIX, os.path.basename(final), os.getpid(), binascii.hexlify(os.urandom(4)).decode("ascii")))
    os.rename(final, aside)
    return aside


def commit_checkpoint(staging, root, step, epoch=None, extra=None, fsync=True):
    # type: (str, str, int, Optional[int], Optional[Dict[str, Any]], bool) -> str
    """Commit a filled staging folder as ``root/step_<S>`` and return its path.

    Every file is read once to hash it and fsynced through the same descriptor; then
    ``manifest.json`` is written and fsynced, the staging folder fsynced, renamed into place, and
    the run folder fsynced. ``staging`` must be a ``tmp-*`` folder directly inside ``root`` (so a
    crash at any point leaves only a temporary entry, never a candidate). ``fsync`` False is for
    tests and benchmarks only.

    Raises:
        ValueError: bad step or epoch, staging outside root, a symlink or special file inside, a
            file named manifest.json.
        FileExistsError: a valid ``step_<S>`` already exists (a committed checkpoint is never
            replaced). An invalid one - left by an earlier attempt of the run that was then resumed
            from an older checkpoint - is first renamed to ``tmp-invalid-step_<S>.<pid>.<hex>``
            (from then on never a candidate; kept for a look, pruned like any old temporary entry).
    """
    final = os.path.join(root, checkpoint_name(step))
    if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0):
        raise ValueError("epoch must be a non-negative integer or None, not %r" % (epoch,))
    if os.path.realpath(os.path.dirname(os.path.abspath(staging))) != os.path.realpath(root) or \
            not is_temporary(os.path.basename(staging)):
        raise ValueError("staging folder %s must be a tmp-* folder directly inside %s" % (staging, root))
    _set_aside_invalid(final, root)
    files = []  # type: List[Dict[str, Any]]
    for dirpath, dirnames, filenames in os.walk(staging):
        dirnames.sort()
        for name in sorted(filenames) + sorted(dirnames):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, staging).replace(os.sep, "/")
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                raise ValueError("%s is not a regular file (symlinks and special files are refused)" % rel)
            if rel == MANIFEST:
                raise ValueError("%s is reserved for the manifest" % MANIFEST)
            size, digest = hash_file(path, fsync=fsync)
            files.append(dict(path=rel, size=size, sha256=digest))
        if fsync and dirpath != staging:
            _fsync_dir(dirpath)
    if not files:
        raise ValueError("nothing to commit: %s is empty" % staging)
    manifest = dict(format=FORMAT, format_version=FORMAT_VERSION, step=step, epoch=epoch, time=_utc_now(),
                    files=files)
    if extra:
        manifest["extra"] = extra
    with open(os.path.join(staging, MANIFEST), "x") as handle:
        json.dump(manifest, handle, indent=1, sort_keys=True)
        handle.write("\n")
        handle.flush()
        if fsync:
            os.fsync(handle.fileno())
    if fsync:
        _fsync_dir(staging)
    if os.path.lexists(final):
        raise FileExistsError("%s already exists" % final)
    os.rename(staging, final)
    if fsync:
        _fsync_dir(root)
    return final


class CheckpointWriter(object):
    """Write one contract checkpoint; entering gives the staging folder, leaving commits it.

    ::

        writer = CheckpointWriter(run_dir, step=1000, epoch=3)
        with writer as staging:
            torch.save(state, os.path.join(staging, "model.pt"))
        print(writer.path)   # run_dir/step_000001000

    An exception inside the block removes the staging folder and commits nothing; a crash leaves
    a ``tmp-*`` folder that no reader chooses (a pruning job may delete it).
    """

    def __init__(self, root, step, epoch=None, extra=None, fsync=True):
        # type: (str, int, Optional[int], Optional[Dict[str, Any]], bool) -> None
        self.root = os.path.abspath(root)
        self.name = checkpoint_name(step)
        self.step = step
        self.epoch = epoch
        self.extra = extra
        self.fsync = fsync
        self.staging = None  # type: Optional[str]
        self.path = None  # type: Optional[str]

    def __enter__(self):
        # type: () -> str
        if not os.path.isdir(self.root):
            os.makedirs(self.root)
            if self.fsync:
                _fsync_dir(os.path.dirname(self.root))
        _refuse_existing(os.path.join(self.root, self.name))
        self.staging = os.path.join(self.root, "%s%s.%d.%s" % (
            TMP_PREFIX, self.name, os.getpid(), binascii.hexlify(os.urandom(4)).decode("ascii")))
        os.mkdir(self.staging)
        return self.staging

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            try:
                self.path = commit_checkpoint(self.staging, self.root, self.step, self.epoch, self.extra, self.fsync)
            except BaseException:
                shutil.rmtree(self.staging, ignore_errors=True)
                raise
        else:
            shutil.rmtree(self.staging, ignore_errors=True)
        return False


def write_checkpoint(root, step, epoch, files_or_callback, extra=None, fsync=True):
    # type: (str, int, Optional[int], Union[Mapping[str, bytes], Callable[[str], Any]], Optional[Dict[str, Any]], bool) -> str
    """Write a contract checkpoint and return its path.

    ``files_or_callback`` is a mapping ``{relative posix path: bytes}``, or a callable given the
    staging folder to write into (``lambda d: torch.save(state, os.path.join(d, "model.pt"))``).
    """
    writer = CheckpointWriter(root, step, epoch, extra, fsync)
    with writer as staging:
        if callable(files_or_callback):
            files_or_callback(staging)
        else:
            for rel, data in sorted(files_or_callback.items()):
                if rel.startswith("/") or posixpath.normpath(rel) != rel or rel.split("/")[0] == "..":
                    raise ValueError("bad relative path %r" % rel)
                path = os.path.join(staging, *rel.split("/"))
                if not os.path.isdir(os.path.dirname(path)):
                    os.makedirs(os.path.dirname(path))
                with open(path, "wb") as handle:
                    handle.write(data)
    return writer.path or ""


def mark_finished(root, step=None, epoch=None, checkpoint=None, extra=None, fsync=True):
    # type: (str, Optional[int], Optional[int], Optional[str], Optional[Dict[str, Any]], bool) -> str
    """Write the run-level ``FINISHED`` marker atomically (temporary file, fsync, rename, fsync)."""
    data = dict(format=FORMAT, format_version=FORMAT_VERSION, step=step, epoch=epoch, checkpoint=checkpoint,
                time=_utc_now())
    if extra:
        data["extra"] = extra
    tmp = os.path.join(root, "%s%s.%d" % (TMP_PREFIX, FINISHED, os.getpid()))
    with open(tmp, "w") as handle:
        json.dump(data, handle, sort_keys=True)
        handle.write("\n")
        handle.flush()
        if fsync:
            os.fsync(handle.fileno())
    final = os.path.join(root, FINISHED)
    os.rename(tmp, final)
    if fsync:
        _fsync_dir(root)
    return final


# ---------------------------------------------------------------------------------------------
# Pruning (one implementation for the checkpoint_prune module and the ``prune`` command)
# ---------------------------------------------------------------------------------------------

#: Default grace period of temporary entries, in seconds: older ones are removed.
TMP_GRACE = 86400
#: Exit code of ``prune`` when another prune holds the folder's lock (nothing was done).
EXIT_LOCKED = 4

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)
_PERCENT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


class PruneLocked(CheckpointError):
    """Another prune holds the run folder's lock; nothing was done."""


def parse_min_free(value):
    # type: (Union[None, int, str]) -> Optional[Tuple[str, float]]
    """``("bytes", n)`` or ``("percent", p)`` from ``500G``, ``1.5TiB``, ``10%``, ``1048576``; None for None/empty.

    Units are binary (``1G`` is 1 GiB). Raises ValueError for anything else or a percent above 100.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ValueError("min_free must be a size or a percent, not %r" % (value,))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("min_free must not be negative")
        return ("bytes", float(value))
    match = _PERCENT.match(str(value))
    if match:
        percent = float(match.group(1))
        if percent > 100:
            raise ValueError("min_free %s is more than 100%%" % value)
        return ("percent", percent)
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError("min_free must be a size (500G, 1.5TiB, 1048576) or a percent (10%%), not %r" % (value,))
    return ("bytes", float(match.group(1)) * _UNITS[match.group(2).lower()])


def human_size(count):
    # type: (Optional[float]) -> str
    """``4.0 KiB``-style text for a byte count ("-" for None)."""
    if count is None:
        return "-"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return ("%d %s" % (value, unit)) if unit == "B" else ("%.1f %s" % (value, unit))
        value /= 1024
    return "%.1f PiB" % value  # pragma: no cover


def _free_space(path):
    # type: (str) -> Tuple[int, int]
    """``(available bytes for unprivileged users, total bytes)`` of the file system holding ``path``."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def _newest_mtime(path):
    # type: (str) -> float
    """The newest mtime of an entry and of everything under it (lstat: symlinks are not followed)."""
    st = os.lstat(path)
    newest = st.st_mtime
    if stat.S_ISDIR(st.st_mode):
        for dirpath, dirnames, filenames in os.walk(path):
            for name in dirnames + filenames:
                try:
                    newest = max(newest, os.lstat(os.path.join(dirpath, name)).st_mtime)
                except OSError:
                    pass
    return newest


def _written_at(ckpt):
    # type: (Checkpoint) -> Optional[float]
    """When a checkpoint was written: the manifest's ``time`` (contract), else the entry's mtime."""
    if ckpt.time:
        try:
            return float(calendar.timegm(time.strptime(ckpt.time, "%Y-%m-%dT%H:%M:%SZ")))
        except ValueError:
            pass
    try:
        return os.lstat(ckpt.path).st_mtime
    except OSError:
        return None


def _top_entry(path, root_real):
    # type: (str, str) -> Optional[str]
    """Name of the run-folder entry a symlink leads into, None when it leaves the folder or dangles."""
    if not _inside(path, root_real) or not os.path.exists(path):
        return None
    rel = os.path.relpath(os.path.realpath(path), root_real)
    return None if rel in (".", "") else rel.split(os.sep)[0]


def _links_into_others(ckpt, root_real):
    # type: (Checkpoint, str) -> List[str]
    """Run-folder entries that symlinks inside a checkpoint folder lead into (other than itself)."""
    found = []  # type: List[str]
    for dirpath, dirnames, filenames in os.walk(ckpt.path):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                top = _top_entry(path, root_real)
                if top is not None and top != ckpt.name:
                    found.append(top)
    return found


def _remove_tree(path):
    # type: (str) -> None
    """Delete a folder or file that is not a symlink; symlinks inside are removed, never followed."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, "refusing to delete through a symlink", path)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)  # raises on the first error; never follows a symlink inside
    else:
        os.unlink(path)


class PruneResult(object):
    """What :func:`prune` did, or would do with ``dry_run``.

    Attributes:
        path: the run folder (absolute).
        dry_run: nothing was deleted; ``deleted`` lists what would go.
        policy: the policy applied (``keep_last``, ``keep_every``, ``keep``, ``min_free``,
            ``tmp_grace``, ``validate``).
        latest_valid: name of the newest valid checkpoint (the resume point), or None.
        before: names of the checkpoints and temporary entries found, checkpoints oldest first.
        after: ``before`` less what was deleted.
        deleted: ``{"name", "kind", "step", "size", "reason"}`` in the order of deletion; ``kind`` is
            ``checkpoint`` or ``temporary``; ``size`` in bytes (files counted by the checks) or None.
        kept: ``{"name", "kind", "step", "reason"}`` for every checkpoint and temporary entry kept.
        warnings: the scan's warnings (see :class:`Report`) and the prune's own.
        error: why the run stopped (nothing more was deleted after it), or None.
        free_before, free_after: bytes available on the file system (None when not measured).
        min_free_bytes: the ``min_free`` threshold in bytes, None without one.
    """

    def __init__(self, path, dry_run, policy):
        # type: (str, bool, Dict[str, Any]) -> None
        self.path = path
        self.dry_run = dry_run
        self.policy = policy
        self.latest_valid = None  # type: Optional[str]
        self.before = []  # type: List[str]
        self.after = []  # type: List[str]
        self.deleted = []  # type: List[Dict[str, Any]]
        self.kept = []  # type: List[Dict[str, Any]]
        self.warnings = []  # type: List[str]
        self.error = None  # type: Optional[str]
        self.free_before = None  # type: Optional[int]
        self.free_after = None  # type: Optional[int]
        self.min_free_bytes = None  # type: Optional[int]

    @property
    def changed(self):
        # type: () -> bool
        return bool(self.deleted)

    def to_dict(self):
        # type: () -> Dict[str, Any]
        return dict(path=self.path, dry_run=self.dry_run, policy=dict(self.policy), latest_valid=self.latest_valid,
                    before=list(self.before), after=list(self.after), deleted=list(self.deleted),
                    kept=list(self.kept), warnings=list(self.warnings), error=self.error,
                    free_before=self.free_before, free_after=self.free_after, min_free_bytes=self.min_free_bytes)


def _lock(path):
    # type: (str) -> int
    """Open and flock ``path`` (created when missing, never through a symlink); the descriptor holds the lock."""
    if fcntl is None:  # pragma: no cover - not POSIX
        raise CheckpointError("cannot lock %s: no fcntl on this platform" % path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise CheckpointError("cannot open the lock file %s: %s" % (path, exc))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            raise PruneLocked("another prune of %s is running (it holds %s); nothing done" % (
                os.path.dirname(path) or ".", path))
        raise CheckpointError("cannot lock %s: %s (on Lustre, mount with -o flock, or pass a lock file on a "
                              "local file system)" % (path, exc))
    return fd


def _check_policy(keep_last, keep_every, keep, tmp_grace, validate):
    # type: (Any, Any, Any, Any, str) -> None
    for name, value in (("keep_last", keep_last), ("keep_every", keep_every)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("%s must be an integer, not %r" % (name, value))
    if keep_every < 0:
        raise ValueError("keep_every must be 0 (off) or more, not %d" % keep_every)
    if not all(isinstance(p, str) and p for p in keep):
        raise ValueError("keep must be a list of names or patterns, not %r" % (keep,))
    if tmp_grace is not None and (isinstance(tmp_grace, bool) or not isinstance(tmp_grace, (int, float))):
        raise ValueError("tmp_grace must be a number of seconds, not %r" % (tmp_grace,))
    _check_level(validate)


def prune(path, keep_last, keep_every=0, keep=(), min_free=None, tmp_grace=TMP_GRACE, validate=SIZES,
          dry_run=False, log=None, lock_file=None, now=None, fsync=True):
    # type: (str, int, int, Sequence[str], Any, Optional[float], str, bool, Any, Optional[str], Optional[float], bool) -> PruneResult
    """Delete old checkpoints of a run folder by policy; never one that a resume could need.

    Kept whatever the policy:

    * the newest valid checkpoint (checked at ``validate``) and every candidate newer than it
      (it may be being written); with no valid checkpoint, no checkpoint is deleted;
    * the ``keep_last`` newest valid checkpoints and everything between them;
      ``keep_last`` <= 0 keeps every checkpoint;
    * checkpoints whose step is a multiple of ``keep_every`` (> 0), whose name matches a ``keep``
      pattern (fnmatch, case-sensitive), that a pointer (``latest``, the Megatron tracker,
      ``last.ckpt``) or any symlink of the folder names, or that a kept checkpoint links into;
    * checkpoints written after the newest valid one (manifest time, else mtime) although their
      step is lower: another run writing into the same folder (a warning says so);
    * everything that is not a candidate: symlinks (never followed, never deleted through),
      names that match no layout, pointers, ``FINISHED``, the lock file;
    * temporary entries (``tmp-*``, ``*.tmp``) changed less than ``tmp_grace`` seconds ago
      (newest mtime of the entry and of anything under it); ``tmp_grace`` None or < 0 keeps them all.
      ``tmp-deleting-*`` entries left by an interrupted prune are removed at once.

    With ``min_free`` (``500G``, ``10%``), checkpoints are deleted only while the file system has
    less space available than that, oldest first, and no more once it has.

    A checkpoint is deleted by renaming it to ``tmp-deleting-<name>`` (from then on no reader chooses
    it), then removing that. Each deletion is passed to ``log`` (one line: what and why). The folder's
    lock file (``.prune.lock``, or ``lock_file``) is held with ``flock`` for the whole run; ``dry_run``
    takes no lock and deletes nothing. An error stops the run: :attr:`PruneResult.error` says why and
    nothing more is deleted.

    Raises:
        ValueError: a bad policy value.
        CheckpointError: the folder is missing, not a folder, unreadable, or cannot be locked.
        PruneLocked: another prune holds the lock.
    """
    if isinstance(keep, str):
        raise ValueError("keep must be a list of names or patterns, not the string %r" % keep)
    keep = list(keep or ())
    _check_policy(keep_last, keep_every, keep, tmp_grace, validate)
    threshold = parse_min_free(min_free)
    root = os.path.abspath(path)
    if not os.path.isdir(root):
        raise CheckpointError("%s is not a folder" % root if os.path.exists(root) else "%s does not exist" % root)
    policy = dict(keep_last=keep_last, keep_every=keep_every, keep=keep, min_free=min_free, tmp_grace=tmp_grace,
                  validate=validate)
    result = PruneResult(root, dry_run, policy)
    lock_fd = None if dry_run else _lock(lock_file or os.path.join(root, PRUNE_LOCK))
    try:
        _prune_locked(root, result, keep_last, keep_every, keep, threshold, tmp_grace, validate, dry_run,
                      log or (lambda line: None), time.time() if now is None else now, fsync)
    finally:
        if lock_fd is not None:
            os.close(lock_fd)  # releases the flock; the file stays (removing it would race)
    return result


def _prune_locked(root, result, keep_last, keep_every, keep, threshold, tmp_grace, validate, dry_run, log, now,
                  fsync):
    # type: (str, PruneResult, int, int, List[str], Optional[Tuple[str, float]], Optional[float], str, bool, Callable[[str], None], float, bool) -> None
    report = inspect(root, validate, list_all=True)
    root_real = os.path.realpath(root)
    result.warnings.extend(report.warnings)
    candidates = report.checkpoints
    best = report.latest_valid
    result.latest_valid = best.name if best else None
    result.before = [c.name for c in candidates] + [name for name, _path in report.temporary]
    by_name = dict((c.name, c) for c in candidates)
    reasons = {}  # type: Dict[str, str]

    # Checkpoints: what must stay whatever the policy, then the policy.
    linked = {}  # type: Dict[str, str]
    for name, link in report.symlinks:
        top = _top_entry(link, root_real)
        if top in by_name and top not in linked:
            linked[top] = "the symlink %s leads to it" % name
    victims = []  # type: List[Checkpoint]
    if keep_last <= 0:
        for ckpt in candidates:
            reasons[ckpt.name] = "keep_last %d: every checkpoint is kept" % keep_last
    elif best is None:
        for ckpt in candidates:
            reasons[ckpt.name] = "no valid checkpoint in the folder: nothing is deleted"
        if candidates:
            result.warnings.append("no valid checkpoint in %s: no checkpoint deleted" % root)
    else:
        best_index = candidates.index(best)
        for ckpt in candidates[best_index + 1:]:
            reasons[ckpt.name] = "newer than the newest valid %s (may be being written)" % best.name
        reasons[best.name] = "the newest valid checkpoint (the resume point)"
        found = 1
        older = list(reversed(candidates[:best_index]))
        index = 0
        while found < keep_last and index < len(older):
            ckpt = older[index]
            if ckpt.valid is not False and ckpt.checked != validate:
                _check(ckpt, validate, root_real)
            if ckpt.valid:
                found += 1
                reasons[ckpt.name] = "one of the %d newest valid checkpoints" % keep_last
            else:
                reasons[ckpt.name] = "newer than the oldest of the %d newest valid checkpoints (invalid: %s)" % (
                    keep_last, ckpt.why_invalid)
            index += 1
        best_time = _written_at(best)
        for ckpt in older[index:]:
            pinned = [p for p in keep if fnmatch.fnmatchcase(ckpt.name, p)]
            if pinned:
                reasons[ckpt.name] = "matches the keep pattern %s" % pinned[0]
            elif keep_every > 0 and ckpt.step % keep_every == 0:
                reasons[ckpt.name] = "step %d is a multiple of keep_every %d" % (ckpt.step, keep_every)
            elif ckpt.pointed_by:
                reasons[ckpt.name] = "named by the pointer %s" % ", ".join(ckpt.pointed_by)
            elif ckpt.last:
                reasons[ckpt.name] = "Lightning's last checkpoint (save_last), which a resume with ckpt_path='last' opens"
            elif ckpt.name in linked:
                reasons[ckpt.name] = linked[ckpt.name]
            else:
                written = _written_at(ckpt)
                if written is not None and best_time is not None and written > best_time:
                    reasons[ckpt.name] = "written after the newest valid %s although its step is lower" % best.name
                    result.warnings.append("%s was written after %s although its step is lower (another run in "
                                           "the same folder?): kept" % (ckpt.name, best.name))
                else:
                    victims.append(ckpt)
        # A checkpoint that a kept one links into stays too (and what that one links into).
        kept_dirs = [c for c in candidates if c.is_dir and c.layout != CONTRACT and c not in victims]
        while kept_dirs:
            ckpt = kept_dirs.pop()
            for top in _links_into_others(ckpt, root_real):
                target = by_name.get(top)
                if target is not None and target in victims:
                    victims.remove(target)
                    reasons[top] = "%s links into it" % ckpt.name
                    if target.is_dir and target.layout != CONTRACT:
                        kept_dirs.append(target)
        victims.reverse()  # oldest first
        for ckpt in victims:
            why = "older than the %d newest valid checkpoints (newest valid: %s)" % (keep_last, best.name)
            if ckpt.valid is False:
                why += "; invalid: %s" % ckpt.why_invalid
            reasons[ckpt.name] = why

    # Temporary entries.
    stale = []  # type: List[Tuple[str, str, str]]
    for name, entry in report.temporary:
        try:
            is_link = os.path.islink(entry)
            if is_link:
                why = "a symlink: never deleted"
            elif name.startswith(DELETING_PREFIX):
                stale.append((name, entry, "left by an interrupted prune"))
                continue
            elif tmp_grace is None or tmp_grace < 0:
                why = "temporary; tmp_grace %s: temporaries are kept" % tmp_grace
            else:
                age = now - _newest_mtime(entry)
                if age >= tmp_grace:
                    stale.append((name, entry, "temporary, unchanged for %d s (tmp_grace %d s)" % (age, tmp_grace)))
                    continue
                why = "temporary, changed %d s ago (tmp_grace %d s): may be being written" % (max(age, 0), tmp_grace)
        except OSError as exc:
            why = "temporary, cannot be read (%s): kept" % exc
        result.kept.append(dict(name=name, kind="temporary", step=None, reason=why))

    # Free space.
    free = total = None  # type: Optional[int]
    if threshold is not None or not dry_run:
        try:
            free, total = _free_space(root)
        except OSError as exc:
            if threshold is not None:
                raise CheckpointError("cannot read the free space of %s: %s" % (root, exc))
    result.free_before = free
    if threshold is not None:
        result.min_free_bytes = int(threshold[1] if threshold[0] == "bytes" else (total or 0) * threshold[1] / 100.0)

    def enough(freed):
        # type: (int) -> bool
        if threshold is None:
            return False
        measured = free
        if not dry_run:
            try:
                measured = _free_space(root)[0]
            except OSError:
                pass
        return max(measured or 0, (free or 0) + freed) >= (result.min_free_bytes or 0)

    # Delete: stale temporaries, then checkpoints oldest first.
    gone = set()  # type: Set[str]
    freed = 0
    verb = "would delete" if dry_run else "deleted"
    for name, entry, why in stale:
        if result.error is None:
            try:
                if not dry_run:
                    _remove_tree(entry)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    result.error = "cannot delete %s: %s" % (entry, exc)
                    log("error: %s; stopped, nothing more deleted" % result.error)
                    result.kept.append(dict(name=name, kind="temporary", step=None,
                                            reason="deletion failed: %s" % exc))
                    continue
            gone.add(name)
            result.deleted.append(dict(name=name, kind="temporary", step=None, size=None, reason=why))
            log("%s %s: %s" % (verb, name, why))
        else:
            result.kept.append(dict(name=name, kind="temporary", step=None, reason="not reached: the run stopped"))
    for ckpt in victims:
        if result.error is not None:
            reasons[ckpt.name] = "not reached: the run stopped (%s)" % result.error
            continue
        if enough(freed):
            reasons[ckpt.name] = "min_free %s reached (%s available)" % (
                result.policy["min_free"], human_size(max(free or 0, (free or 0) + freed)))
            continue
        if best is None or ckpt is best or not ckpt.sort_key() < best.sort_key():  # never: the plan excludes it
            result.error = "internal error: refusing to delete %s (not older than the newest valid)" % ckpt.name
            reasons[ckpt.name] = result.error
            continue
        try:
            if not dry_run:
                _delete_checkpoint(root, ckpt)
        except OSError as exc:
            result.error = "cannot delete %s: %s" % (ckpt.path, exc)
            reasons[ckpt.name] = "deletion failed: %s" % exc
            log("error: %s; stopped, nothing more deleted" % result.error)
            continue
        gone.add(ckpt.name)
        freed += ckpt.size or 0
        result.deleted.append(dict(name=ckpt.name, kind="checkpoint", step=ckpt.step, size=ckpt.size,
                                   reason=reasons.pop(ckpt.name)))
        log("%s %s (step %d, %s): %s" % (verb, ckpt.name, ckpt.step, human_size(ckpt.size),
                                         result.deleted[-1]["reason"]))
    if gone and fsync and not dry_run:
        try:
            _fsync_dir(root)
        except OSError:  # pragma: no cover - the deletions are done; durability is best effort here
            pass
    for ckpt in candidates:
        if ckpt.name not in gone:
            result.kept.append(dict(name=ckpt.name, kind="checkpoint", step=ckpt.step, reason=reasons[ckpt.name]))
    result.after = [name for name in result.before if name not in gone]
    if not dry_run:
        try:
            result.free_after = _free_space(root)[0]
        except OSError:  # pragma: no cover
            pass


def _delete_checkpoint(root, ckpt):
    # type: (str, Checkpoint) -> None
    """Rename ``ckpt`` to ``tmp-deleting-<name>`` (atomic: no reader chooses it any more), then remove it."""
    st = os.lstat(ckpt.path)
    if stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, "became a symlink; not deleted", ckpt.path)
    doomed = os.path.join(root, DELETING_PREFIX + ckpt.name)
    if os.path.lexists(doomed):
        _remove_tree(doomed)
    os.rename(ckpt.path, doomed)
    _remove_tree(doomed)


# ---------------------------------------------------------------------------------------------
# Command line (runs without Ansible and without torch)
# ---------------------------------------------------------------------------------------------

_EPILOG = """exit codes:
  0  latest: a valid checkpoint was found (its path is printed); list: listed;
     verify: every checkpoint is valid; finished: the run has a FINISHED marker
  1  latest: the folder holds no checkpoint at all (nothing printed): start from scratch;
     finished: no FINISHED marker
  2  usage error, or the folder is missing, not a folder or unreadable
  3  latest: checkpoints exist but none is valid, or one cannot be ordered (a .ckpt whose
     step neither its name nor its file tells): do not start from scratch blindly;
     verify: a checkpoint is invalid
  4  prune: another prune of the folder is running (it holds the lock); nothing done
prune: 0 when it ran to the end (whether or not it deleted anything); 2 when an error stopped it
(what was deleted before the error is printed and logged)
"""


def _parser():
    # type: () -> argparse.ArgumentParser
    parser = argparse.ArgumentParser(
        prog="_checkpoint.py", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG,
        description="Find, list, verify and prune training checkpoints (clusterops.slurm; stdlib only).")
    sub = parser.add_subparsers(dest="command")
    sub.required = True
    level_help = "validation level (default %(default)s; load needs torch)"
    template_help = ("Lightning ModelCheckpoint filename of the run, for names that carry the step without "
                     "step= ({epoch}-{step}); step= and epoch= names need none")
    cmd = sub.add_parser("latest", help="print the path of the newest valid checkpoint")
    cmd.add_argument("dir")
    cmd.add_argument("--validate", choices=LEVELS, default=SIZES, help=level_help)
    cmd.add_argument("--json", action="store_true", help="print the whole report as JSON")
    cmd.add_argument("--quiet", "-q", action="store_true", help="no warnings on stderr")
    cmd.add_argument("--name-template", metavar="TEMPLATE", help=template_help)
    cmd = sub.add_parser("list", help="list every checkpoint with its validity")
    cmd.add_argument("dir")
    cmd.add_argument("--validate", choices=LEVELS, default=SIZES, help=level_help)
    cmd.add_argument("--name-template", metavar="TEMPLATE", help=template_help)
    cmd.add_argument("--validate-all", action="store_true", help="check every checkpoint at --validate")
    cmd.add_argument("--json", action="store_true")
    cmd = sub.add_parser("verify", help="check checkpoints (folders or files)")
    cmd.add_argument("paths", nargs="+", metavar="path")
    cmd.add_argument("--validate", choices=LEVELS, default=SHA256, help=level_help)
    cmd.add_argument("--json", action="store_true")
    cmd = sub.add_parser("finished", help="exit 0 when the run has a FINISHED marker")
    cmd.add_argument("dir")
    cmd.add_argument("--json", action="store_true")
    cmd = sub.add_parser(
        "prune", help="delete old checkpoints by policy, never the newest valid one",
        description="Delete old checkpoints of RUN_DIR. Never deleted: the newest valid checkpoint and anything "
                    "newer, what a pointer or symlink names, anything outside the folder, temporary entries "
                    "younger than --tmp-grace. --keep-last 0 or less keeps every checkpoint.")
    cmd.add_argument("dir", metavar="RUN_DIR")
    cmd.add_argument("--keep-last", type=int, required=True, metavar="N",
                     help="keep the N newest valid checkpoints (and anything newer); N <= 0 keeps every checkpoint")
    cmd.add_argument("--keep-every", type=int, default=0, metavar="K",
                     help="also keep checkpoints whose step is a multiple of K (default 0: off)")
    cmd.add_argument("--keep", action="append", default=[], metavar="PATTERN",
                     help="also keep checkpoints whose name matches this shell pattern (repeatable)")
    cmd.add_argument("--min-free", metavar="SIZE|PERCENT",
                     help="delete only while the file system has less available than this (500G, 1.5TiB, 10%%)")
    cmd.add_argument("--tmp-grace", type=float, default=TMP_GRACE, metavar="SECONDS",
                     help="delete temporary entries unchanged for this long (default %(default)d; < 0: never)")
    cmd.add_argument("--validate", choices=LEVELS, default=SIZES, help=level_help)
    cmd.add_argument("--dry-run", "-n", action="store_true", help="delete nothing; print what would go")
    cmd.add_argument("--json", action="store_true", help="print the whole result as JSON")
    cmd.add_argument("--verbose", "-v", action="store_true", help="also print what is kept and why")
    cmd.add_argument("--quiet", "-q", action="store_true", help="print nothing on stdout (for cron)")
    cmd.add_argument("--log", metavar="FILE", help="append one line per deletion, error and run to FILE")
    cmd.add_argument("--log-max-bytes", type=int, default=10 << 20, metavar="BYTES",
                     help="rotate FILE when a run starts and it is this large (default %(default)d; 0: never)")
    cmd.add_argument("--log-backups", type=int, default=5, metavar="N",
                     help="rotated logs kept: FILE.1 ... FILE.N (default %(default)d)")
    cmd.add_argument("--lock-file", metavar="FILE", help="lock file (default RUN_DIR/%s)" % PRUNE_LOCK)
    return parser


class _LogFile(object):
    """A log file for cron runs: one line per event, rotated by size when a run starts."""

    def __init__(self, path, max_bytes, backups, run_dir):
        # type: (Optional[str], int, int, str) -> None
        self.handle = None
        self.prefix = "pid=%d %s:" % (os.getpid(), os.path.abspath(run_dir))
        if not path:
            return
        try:
            if max_bytes > 0 and os.path.getsize(path) >= max_bytes:
                for index in range(max(backups, 0), 0, -1):
                    older = "%s.%d" % (path, index - 1) if index > 1 else path
                    if index == backups and os.path.lexists("%s.%d" % (path, index)):
                        os.unlink("%s.%d" % (path, index))
                    if os.path.lexists(older):
                        os.rename(older, "%s.%d" % (path, index))
                if backups <= 0:
                    os.unlink(path)
        except OSError:
            pass  # no log yet, or rotation refused: keep appending
        self.handle = open(path, "a")

    def __call__(self, line):
        # type: (str) -> None
        if self.handle is not None:
            self.handle.write("%s %s %s\n" % (_utc_now(), self.prefix, line))
            self.handle.flush()

    def close(self):
        # type: () -> None
        if self.handle is not None:
            self.handle.close()


def _main_prune(args, out, err):
    # type: (Any, Any, Any) -> int
    try:
        log = _LogFile(args.log, args.log_max_bytes, args.log_backups, args.dir)
    except OSError as exc:
        err.write("error: cannot open the log file %s: %s\n" % (args.log, exc))
        return EXIT_ERROR
    show = not args.quiet and not args.json

    def both(line):
        # type: (str) -> None
        log(line)
        if show:
            out.write(line + "\n")

    try:
        try:
            result = prune(args.dir, args.keep_last, args.keep_every, args.keep, args.min_free,
                           None if args.tmp_grace < 0 else args.tmp_grace, args.validate, args.dry_run, both,
                           args.lock_file)
        except PruneLocked as exc:
            log("skipped: %s" % exc)
            err.write("skipped: %s\n" % exc)
            return EXIT_LOCKED
        except (CheckpointError, ValueError) as exc:
            log("error: %s" % exc)
            err.write("error: %s\n" % exc)
            return EXIT_ERROR
        for message in result.warnings:
            log("warning: %s" % message)
            if not args.quiet and not args.json:
                err.write("warning: %s\n" % message)
        if args.json:
            _print_json(result.to_dict(), out)
        elif show and args.verbose:
            for item in result.kept:
                out.write("kept %s: %s\n" % (item["name"], item["reason"]))
        summary = "%s%d deleted (%s), %d kept; newest valid %s; available %s%s" % (
            "dry run: " if args.dry_run else "", len(result.deleted),
            human_size(sum(d["size"] or 0 for d in result.deleted)), len(result.kept), result.latest_valid or "none",
            human_size(result.free_after if result.free_after is not None else result.free_before),
            "" if result.min_free_bytes is None else " (min_free %s)" % human_size(result.min_free_bytes))
        if result.error:
            log("error: %s (%s)" % (result.error, summary))
            err.write("error: %s\n" % result.error)
            return EXIT_ERROR
        log(summary)
        if show:
            out.write(summary + "\n")
        return EXIT_OK
    finally:
        log.close()


def _fmt(value):
    # type: (Any) -> str
    return "-" if value is None else str(value)


def _print_json(data, out):
    # type: (Any, Any) -> None
    out.write(json.dumps(data, indent=2, sort_keys=True) + "\n")


def main(argv=None, out=None, err=None):
    # type: (Optional[Sequence[str]], Any, Any) -> int
    """The command line; returns the exit code (see ``_checkpoint.py --help``)."""
    out = out or sys.stdout
    err = err or sys.stderr
    args = _parser().parse_args(argv)
    if args.command == "prune":
        return _main_prune(args, out, err)
    try:
        if args.command == "finished":
            if not os.path.isdir(args.dir):
                raise CheckpointError("%s is not a folder" % os.path.abspath(args.dir))
            marker = os.path.join(args.dir, FINISHED)
            finished = _read_finished(marker) if os.path.isfile(marker) else None
            if args.json:
                _print_json(finished, out)
            return EXIT_OK if finished is not None else EXIT_NONE
        if args.command == "verify":
            results = [verify(p, args.validate) for p in args.paths]
            if args.json:
                _print_json([r.to_dict() for r in results], out)
            else:
                for r in results:
                    out.write("%s\t%s\t%s\n" % ("valid" if r.valid else "INVALID", r.path, r.why_invalid or ""))
            return EXIT_OK if all(r.valid for r in results) else EXIT_INVALID
        report = inspect(args.dir, getattr(args, "validate", SIZES),
                         validate_all=getattr(args, "validate_all", False),
                         list_all=args.command == "list", name_template=getattr(args, "name_template", None))
    except (CheckpointError, ValueError) as exc:
        err.write("error: %s\n" % exc)
        return EXIT_ERROR
    if args.command == "list":
        if args.json:
            _print_json(report.to_dict(), out)
            return EXIT_OK
        out.write("%-12s %-8s %-12s %-9s %s\n" % ("STEP", "EPOCH", "LAYOUT", "VALID", "NAME"))
        for c in report.checkpoints:
            state = "-" if c.valid is None else ("yes" if c.valid else "NO")
            mark = " <- latest valid" if c is report.latest_valid else ""
            why = " (%s)" % c.why_invalid if c.why_invalid else ""
            out.write("%-12d %-8s %-12s %-9s %s%s%s\n" % (c.step, _fmt(c.epoch), c.layout, state, c.name, mark, why))
        for item in report.unordered:
            out.write("unordered: %s (%s)\n" % (item["name"], item["reason"]))
        for item in report.ignored:
            out.write("ignored: %s (%s)\n" % (item["name"], item["reason"]))
        for message in report.warnings:
            out.write("warning: %s\n" % message)
        if report.finished is not None:
            out.write("finished: %s\n" % json.dumps(report.finished, sort_keys=True))
        return EXIT_OK
    # latest
    if args.json:
        _print_json(report.to_dict(), out)
    elif report.latest_valid is not None:
        out.write(report.latest_valid.path + "\n")
    if not args.quiet and not args.json:
        for message in report.warnings:
            err.write("warning: %s\n" % message)
    if report.latest_valid is not None:
        return EXIT_OK
    return EXIT_INVALID if report.had_candidates else EXIT_NONE


if __name__ == "__main__":
    # Run as a command on a cluster host, without Ansible (modules never get here).
    sys.exit(main())  # pylint: disable=ansible-bad-function

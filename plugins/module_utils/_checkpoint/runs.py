# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""Run folders: list the candidates, resolve pointers, choose the newest valid checkpoint, verify one."""

from __future__ import annotations

import os
import re

try:
    from typing import Any, Dict, List, Optional, Tuple, Union  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .common import (
    Checkpoint,
    CheckpointError,
    FINISHED,
    Invalid,
    LEVELS,
    LIGHTNING,
    LOAD,
    MEGATRON,
    NEMO,
    PRUNE_LOCK,
    REPLICA_INDEX,
    REPLICATE_LOCK,
    Report,
    SHA256,
    SIZES,
    STRUCTURE,
)
from .names import (
    CKPT_SUFFIX,
    COMPOSER_LATEST,
    COMPOSER_RANK_FILE,
    compile_name_template,
    DEEPSPEED_LATEST,
    is_temporary,
    LAST_CKPT,
    lightning_progress,
    MEGATRON_TRACKER,
    NEMO_UNFINISHED,
    parse_lightning_name,
    parse_name,
    parse_nemo_name,
    SIDECARS,
    training_state_hint,
)
from .fsutil import is_inside, open_regular, parse_json_bytes
from .layouts import check_checkpoint
from .parts import fewer_parts


def check_level(validate: str) -> None:
    if validate not in LEVELS:
        raise ValueError("validate must be one of %s, not %r" % (", ".join(LEVELS), validate))
    if validate == LOAD:
        try:
            import torch  # noqa: F401  # pylint: disable=unused-import
        except ImportError as exc:
            raise CheckpointError("validation level %s needs torch, which this Python cannot import: %s"
                                  % (LOAD, exc))


def _read_text(path: str, limit: int = 4096) -> Optional[str]:
    """The first ``limit`` bytes of a pointer or marker file, as text; None when it cannot be read
    or is no regular file (``fsutil.open_regular``: a FIFO there never blocks the scan)."""
    try:
        fd, dummy = open_regular(path, follow=True)
    except OSError:
        return None
    try:
        return os.read(fd, limit).decode("utf-8", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def _lightning_candidate(entry: Any, is_dir: bool, template: Any, report: Report) -> Optional[Checkpoint]:
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
        except Invalid as exc:
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


#: How much of a folder no layout explains is looked into for training state: its entries and
#: those of its sub-folders (two levels), at most this many names in all; links are not followed.
UNEXPLAINED_SCAN_NAMES = 256


def _unexplained_state(path: str, name: str, is_dir: bool) -> Optional[str]:
    """Why the entry no layout explains looks like training state (names only, nothing opened but
    folders, links never followed), or None."""
    hint = training_state_hint(name)
    if hint or not is_dir:
        return hint
    budget = [UNEXPLAINED_SCAN_NAMES]

    def look(folder: str, rel: str, depth: int) -> Optional[str]:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return None
        inner = []
        for entry in entries:
            if budget[0] <= 0:
                return None
            budget[0] -= 1
            found = training_state_hint(entry.name)
            if found:
                return "%s/%s%s: %s" % (name, rel, entry.name, found)
            if depth > 1 and entry.is_dir(follow_symlinks=False):
                inner.append(entry)
        for entry in inner:
            found_inner = look(entry.path, rel + entry.name + "/", depth - 1)
            if found_inner:
                return found_inner
        return None

    return look(path, "", 2)


def _list_run(root: str, root_real: str, report: Report, template: Any = None) -> Tuple[List[Checkpoint], List[Dict[str, Any]]]:
    candidates: List[Checkpoint] = []
    pointers: List[Dict[str, Any]] = []
    parts: List[Dict[str, str]] = []  # training state beside checkpoints: alone, it is unexplained
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        raise CheckpointError("cannot list %s: %s" % (root, exc))
    for entry in entries:
        name = entry.name
        is_link = entry.is_symlink()
        if name == FINISHED and entry.is_file(follow_symlinks=False):
            report.finished = read_finished(entry.path)
            continue
        if is_temporary(name):
            report.ignored.append(dict(name=name, reason="temporary (still being written, or left by a crash)"))
            report.temporary.append((name, entry.path))
            continue
        if name in _OWN_FILES:
            report.ignored.append(dict(name=name, reason=_OWN_FILES[name]))
            continue
        if is_link:
            report.symlinks.append((name, entry.path))
        known, is_state = _known_non_checkpoint(name, is_link)
        if known:
            report.ignored.append(dict(name=name, reason=known))
            if is_state:
                parts.append(dict(name=name, reason="%s, but no checkpoint it belongs to" % known))
            continue
        if name in (DEEPSPEED_LATEST, MEGATRON_TRACKER) or (
                is_link and (LAST_CKPT.match(name) or COMPOSER_LATEST.match(name))):
            # Regular files and symlinks only: opening a FIFO would block. A regular last.ckpt is a
            # copy (save_last=True) and a candidate of its own, below.
            if is_link or entry.is_file(follow_symlinks=False):
                pointers.append(dict(name=name, is_link=is_link, path=entry.path))
                continue
        parsed = parse_name(name, template)
        if is_link:
            escapes = not is_inside(entry.path, root_real)
            reason = ("symlink out of the run folder (not followed)" if escapes
                      else "symlink to %s (an alias, not a checkpoint of its own)" % os.readlink(entry.path))
            report.ignored.append(dict(name=name, reason=reason))
            continue
        is_dir = entry.is_dir(follow_symlinks=False)
        nemo = parse_nemo_name(name, template) if parsed is None and is_dir else None
        if nemo is not None:
            folder = Checkpoint(name, entry.path, NEMO, nemo["step"], None, True)
            folder.epoch, folder.version, folder.last, folder.step_from = (
                nemo["epoch"], nemo["version"], nemo["last"], nemo["step_from"])
            candidates.append(folder)
            continue
        if parsed is None or parsed[0] == LIGHTNING:
            if name.endswith(CKPT_SUFFIX) and (is_dir or entry.is_file(follow_symlinks=False)):
                ckpt = _lightning_candidate(entry, is_dir, template, report)
                if ckpt is not None:
                    candidates.append(ckpt)
                continue
            report.ignored.append(dict(name=name, reason="matches no checkpoint layout"))
            _note_unexplained(report, entry.path, name, is_dir)
            continue
        layout, kind, step, epoch = parsed
        if (kind == "dir" and not is_dir) or (kind == "file" and is_dir):
            why = "a %s named like a %s checkpoint %s" % (
                "folder" if is_dir else "file", layout, kind == "dir" and "folder" or "file")
            report.ignored.append(dict(name=name, reason=why))
            report.unexplained.append(dict(name=name, reason=why))
            continue
        candidates.append(Checkpoint(name, entry.path, layout, step, epoch, is_dir))
    if not candidates and not report.unordered:
        report.unexplained.extend(parts)
    return candidates, pointers


#: Files this library keeps in run and replica folders: never candidates, never training state.
_OWN_FILES = {PRUNE_LOCK: "lock file of checkpoint pruning", REPLICATE_LOCK: "lock file of replication",
              REPLICA_INDEX: "the replica folder's manifest of verified copies"}


def _known_non_checkpoint(name: str, is_link: bool) -> Tuple[Optional[str], bool]:
    """``(why, is training state)`` for an entry that tools write beside their checkpoints and
    that is none of its own, else ``(None, False)``: their sidecar files (``SIDECARS``), NeMo's
    ``-unfinished`` markers (no state) and ``-EMA`` copies, Composer's files of ranks other than 0.
    Training state without any checkpoint beside it is ``unexplained``: the folder is not empty."""
    if name in SIDECARS and not is_link:
        return SIDECARS[name], True
    if name.endswith(NEMO_UNFINISHED):
        return "NeMo's marker of an unfinished save (the checkpoint it names is invalid while it exists)", False
    if name.endswith("-EMA") or name.endswith("-EMA" + CKPT_SUFFIX):
        return "NeMo's EMA weights beside a checkpoint (not resumed from)", True
    match = COMPOSER_RANK_FILE.match(name)
    if match:
        return "rank %s's part of Composer's %s (the rank 0 file is the checkpoint)" % (
            match.group(2), match.group(1)), True
    return None, False


def _note_unexplained(report: Report, path: str, name: str, is_dir: bool) -> None:
    hint = _unexplained_state(path, name, is_dir)
    if hint:
        report.unexplained.append(dict(name=name, reason="looks like training state (%s), but no known "
                                       "layout explains it" % hint))


def read_finished(path: str) -> Dict[str, Any]:
    text = _read_text(path, 1 << 16)
    try:
        data = parse_json_bytes(text.encode("utf-8")) if text else {}
    except ValueError:
        data = {}
    return data if isinstance(data, dict) else {}


def _resolve_pointers(raw_pointers: List[Dict[str, Any]], candidates: List[Checkpoint], root: str, root_real: str, report: Report) -> None:
    by_name = dict((c.name, c) for c in candidates)
    best = report.latest_valid
    for raw in raw_pointers:
        name, path = raw["name"], raw["path"]
        pointer = dict(name=name, kind="", target=None, resolves_to=None, status="", message="")
        target: Optional[Checkpoint] = None
        if raw["is_link"]:
            pointer["kind"] = "symlink"
            pointer["target"] = os.readlink(path)
            if not is_inside(path, root_real):
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
        elif name == MEGATRON_TRACKER:
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


def inspect(path: str, validate: str = SIZES, validate_all: bool = False, list_all: bool = True, name_template: Optional[str] = None) -> Report:
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
    check_level(validate)
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
    if report.unexplained:
        report.warnings.append("training state no known layout explains: %s (%s)" % (
            ", ".join(item["name"] for item in report.unexplained[:5]), report.unexplained[0]["reason"]))
    blocking = [item["name"] for item in report.unordered if item["valid"] is not False]
    if blocking:
        report.warnings.append("refusing to choose a checkpoint: the order of %s is unknown (rename, move "
                               "aside, or give the name template)" % ", ".join(blocking))
    if validate_all:
        for ckpt in candidates:
            check_checkpoint(ckpt, validate, root_real)
    elif list_all:
        for ckpt in candidates:
            check_checkpoint(ckpt, STRUCTURE, root_real)
    for ckpt in reversed(candidates if not blocking else []):
        if ckpt.valid is False:
            continue
        if ckpt.checked != validate:
            check_checkpoint(ckpt, validate, root_real)
        if ckpt.valid:
            _compare_with_save_before(ckpt, candidates, root_real)
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


def _compare_with_save_before(ckpt: Checkpoint, candidates: List[Checkpoint], root_real: str) -> None:
    """``ckpt`` invalid when it holds fewer parts than the newest whole save before it of the same layout
    (:func:`.parts.fewer_parts`: a save killed among the files that its own folder cannot tell are missing,
    Accelerate's registered objects, rank-local DCP metadata). The one before is checked at ``structure``
    when it was not checked yet."""
    if ckpt.parts is None:
        return
    for before in reversed(candidates[:candidates.index(ckpt)]):
        if before.checked is None:
            check_checkpoint(before, STRUCTURE, root_real)
        if before.valid and before.layout == ckpt.layout:
            why = fewer_parts(ckpt, before)
            if why:
                ckpt.valid, ckpt.why_invalid = False, why
            return


def _warn_ties_and_mixes(candidates: List[Checkpoint], report: Report) -> None:
    by_key: Dict[Tuple[int, int, bool, int], List[str]] = {}
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


def scan(path: str, validate: str = STRUCTURE, name_template: Optional[str] = None) -> List[Checkpoint]:
    """Every checkpoint candidate of a run folder, oldest first, each checked at ``validate``."""
    return inspect(path, validate, validate_all=True, name_template=name_template).checkpoints


def latest_valid(path: str, validate: str = SIZES, name_template: Optional[str] = None) -> Optional[Checkpoint]:
    """The newest checkpoint that passes ``validate``, or None; checks only what choosing needs."""
    return inspect(path, validate, list_all=False, name_template=name_template).latest_valid


def verify(path: Union[str, Checkpoint], validate: str = SHA256) -> Checkpoint:
    """Check one checkpoint (a folder or file named after a layout, or a :class:`Checkpoint`).

    Raises:
        CheckpointError: the path does not exist or its name matches no layout.
    """
    check_level(validate)
    if isinstance(path, Checkpoint):
        ckpt = path
    else:
        full = os.path.abspath(path)
        name = os.path.basename(full.rstrip(os.sep))
        parsed = parse_name(name)
        if not os.path.lexists(full):
            raise CheckpointError("%s does not exist" % full)
        if parsed is None and name.endswith(CKPT_SUFFIX):
            parsed = (LIGHTNING, "any", -1, None)  # last.ckpt, epoch=3-val_loss=0.12.ckpt: checked, not ordered
        nemo = parse_nemo_name(name) if parsed is None and os.path.isdir(full) else None
        if nemo is not None:
            parsed = (NEMO, "dir", nemo["step"], nemo["epoch"])
        if parsed is None:
            raise CheckpointError("%s matches no checkpoint layout" % name)
        ckpt = Checkpoint(name, full, parsed[0], parsed[2], parsed[3], os.path.isdir(full))
        if ckpt.step < 0 and not ckpt.is_dir:
            try:
                ckpt.step, ckpt.epoch = lightning_progress(full)
                ckpt.step_from = "metadata"
            except (Invalid, ValueError, OSError):
                pass  # the check below says why when it is broken
    parent_real = os.path.realpath(os.path.dirname(ckpt.path))
    if os.path.islink(ckpt.path) and not is_inside(ckpt.path, parent_real):
        ckpt.valid, ckpt.why_invalid, ckpt.checked = False, "a symlink out of its folder (not followed)", validate
        return ckpt
    return check_checkpoint(ckpt, validate, parent_real)

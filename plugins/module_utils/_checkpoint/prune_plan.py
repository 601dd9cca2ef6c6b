# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pruning plan: which checkpoints of a run folder :func:`.pruning.prune` deletes and why
each one stays (the resume point and what is newer, the newest valid ones, keep patterns,
keep_every, pointers, Lightning's last, symlinks and the checkpoints links lead into, a newer
write with a lower step), and which temporaries are stale. Reads the folder (validity, mtimes,
symlinks); deletes nothing."""

from __future__ import annotations

import calendar
import fnmatch
import os
import stat
import time

try:
    from typing import Any, Dict, List, Optional, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .common import Checkpoint, CONTRACT, DELETING_PREFIX
from .fsutil import is_inside
from .layouts import check_checkpoint


def newest_mtime(path: str) -> float:
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


def _written_at(ckpt: Checkpoint) -> Optional[float]:
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


def _top_entry(path: str, root_real: str) -> Optional[str]:
    """Name of the run-folder entry a symlink leads into, None when it leaves the folder or dangles."""
    if not is_inside(path, root_real) or not os.path.exists(path):
        return None
    rel = os.path.relpath(os.path.realpath(path), root_real)
    return None if rel in (".", "") else rel.split(os.sep)[0]


def _links_into_others(ckpt: Checkpoint, root_real: str) -> List[str]:
    """Run-folder entries that symlinks inside a checkpoint folder lead into (other than itself)."""
    found: List[str] = []
    for dirpath, dirnames, filenames in os.walk(ckpt.path):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                top = _top_entry(path, root_real)
                if top is not None and top != ckpt.name:
                    found.append(top)
    return found


def plan_checkpoints(report: Any, root: str, root_real: str, warnings: List[str], reasons: Dict[str, str],
                     keep_last: int, keep_every: int, keep: List[str], validate: str) -> List[Checkpoint]:
    """The checkpoints to delete, oldest first; ``reasons`` gets why each checkpoint of the report is
    kept or deleted: what must stay whatever the policy, then the policy."""
    candidates = report.checkpoints
    best = report.latest_valid
    if keep_last <= 0:
        for ckpt in candidates:
            reasons[ckpt.name] = "keep_last %d: every checkpoint is kept" % keep_last
        return []
    if best is None:
        for ckpt in candidates:
            reasons[ckpt.name] = "no valid checkpoint in the folder: nothing is deleted"
        if candidates:
            warnings.append("no valid checkpoint in %s: no checkpoint deleted" % root)
        return []
    by_name = dict((c.name, c) for c in candidates)
    linked: Dict[str, str] = {}
    for name, link in report.symlinks:
        top = _top_entry(link, root_real)
        if top is not None and top in by_name and top not in linked:
            linked[top] = "the symlink %s leads to it" % name
    best_index = candidates.index(best)
    for ckpt in candidates[best_index + 1:]:
        reasons[ckpt.name] = "newer than the newest valid %s (may be being written)" % best.name
    reasons[best.name] = "the newest valid checkpoint (the resume point)"
    older = list(reversed(candidates[:best_index]))
    index = _keep_newest_valid(older, keep_last, validate, root_real, reasons)
    victims: List[Checkpoint] = []
    best_time = _written_at(best)
    for ckpt in older[index:]:
        why = _kept_by_policy(ckpt, best, best_time, keep, keep_every, linked, warnings)
        if why is None:
            victims.append(ckpt)
        else:
            reasons[ckpt.name] = why
    _spare_linked_into(victims, candidates, by_name, root_real, reasons)
    victims.reverse()  # oldest first
    for ckpt in victims:
        why = "older than the %d newest valid checkpoints (newest valid: %s)" % (keep_last, best.name)
        if ckpt.valid is False:
            why += "; invalid: %s" % ckpt.why_invalid
        reasons[ckpt.name] = why
    return victims


def _keep_newest_valid(older: List[Checkpoint], keep_last: int, validate: str, root_real: str,
                       reasons: Dict[str, str]) -> int:
    """Keep, newest first, the checkpoints older than the resume point until ``keep_last`` valid ones
    (the resume point included) are kept, checking each at ``validate``; returns how many of
    ``older`` that keeps."""
    found = 1
    index = 0
    while found < keep_last and index < len(older):
        ckpt = older[index]
        if ckpt.valid is not False and ckpt.checked != validate:
            check_checkpoint(ckpt, validate, root_real)
        if ckpt.valid:
            found += 1
            reasons[ckpt.name] = "one of the %d newest valid checkpoints" % keep_last
        else:
            reasons[ckpt.name] = "newer than the oldest of the %d newest valid checkpoints (invalid: %s)" % (
                keep_last, ckpt.why_invalid)
        index += 1
    return index


def _kept_by_policy(ckpt: Checkpoint, best: Checkpoint, best_time: Optional[float], keep: List[str], keep_every: int,
                    linked: Dict[str, str], warnings: List[str]) -> Optional[str]:
    """Why a checkpoint older than those kept as the newest valid stays anyway, or None when it is
    deleted; ``best_time`` is when the newest valid ``best`` was written (:func:`_written_at`)."""
    pinned = [p for p in keep if fnmatch.fnmatchcase(ckpt.name, p)]
    if ckpt.name_layout != best.name_layout:
        return ("named like a %s checkpoint, the newest valid %s is %s: only checkpoints "
                "named like the resume point are deleted" % (ckpt.name_layout, best.name, best.name_layout))
    if pinned:
        return "matches the keep pattern %s" % pinned[0]
    if keep_every > 0 and ckpt.step % keep_every == 0:
        return "step %d is a multiple of keep_every %d" % (ckpt.step, keep_every)
    if ckpt.pointed_by:
        return "named by the pointer %s" % ", ".join(ckpt.pointed_by)
    if ckpt.last:
        return "Lightning's last checkpoint (save_last), which a resume with ckpt_path='last' opens"
    if ckpt.name in linked:
        return linked[ckpt.name]
    written = _written_at(ckpt)
    if written is not None and best_time is not None and written > best_time:
        warnings.append("%s was written after %s although its step is lower (another run in "
                        "the same folder?): kept" % (ckpt.name, best.name))
        return "written after the newest valid %s although its step is lower" % best.name
    return None


def _spare_linked_into(victims: List[Checkpoint], candidates: List[Checkpoint], by_name: Dict[str, Checkpoint],
                       root_real: str, reasons: Dict[str, str]) -> None:
    """A checkpoint that a kept one links into stays too (and what that one links into): taken out
    of ``victims``."""
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


def stale_temporaries(report: Any, kept: List[Dict[str, Any]], tmp_grace: Optional[float],
                      now: float) -> List[Tuple[str, str, str]]:
    """The temporary entries to delete, ``(name, path, why)``; the others go to ``kept``
    (``{name, kind, step, reason}``) with why they stay."""
    stale: List[Tuple[str, str, str]] = []
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
                age = now - newest_mtime(entry)
                if age >= tmp_grace:
                    stale.append((name, entry, "temporary, unchanged for %d s (tmp_grace %d s)" % (age, tmp_grace)))
                    continue
                why = "temporary, changed %d s ago (tmp_grace %d s): may be being written" % (max(age, 0), tmp_grace)
        except OSError as exc:
            why = "temporary, cannot be read (%s): kept" % exc
        kept.append(dict(name=name, kind="temporary", step=None, reason=why))
    return stale

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""Pruning by policy (one implementation for the checkpoint_prune module and the ``prune`` command).

The prune may run as another user than the run folder's owner (root, with the role's ``allow_root``),
and the folder's users may be hostile: whoever can write to a folder on its path can swap the run
folder for a symlink to someone else's, before or during a prune. So the run folder is opened once,
with no symlink allowed anywhere on its path (:func:`fsutil.open_dir_nofollow`; a path holding one is
refused), its lock file is opened in it, and every rename and deletion is made relative to that
descriptor (:func:`fsutil.remove_tree_at`): whatever happens to the path meanwhile, only the folder
opened is changed. The scan (:func:`inspect`) reads by path; before each deletion the path must still
lead to the folder opened (:func:`fsutil.names_folder`), else the run stops and nothing more is
deleted, so a plan made from a folder swapped in is not carried out in this one.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time

try:
    from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .common import Checkpoint, CheckpointError, DELETING_PREFIX, PRUNE_LOCK, SIZES
from .fsutil import FolderPathError, names_folder, open_dir_nofollow, open_lock_file, remove_tree_at, try_flock
from .copies import unreplicated_guard
from .prune_plan import plan_checkpoints, stale_temporaries
from .runs import check_level, inspect


#: Default grace period of temporary entries, in seconds: older ones are removed.
TMP_GRACE = 86400
#: Exit code of ``prune`` when another prune holds the folder's lock (nothing was done).
EXIT_LOCKED = 4

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)
_PERCENT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


class PruneLocked(CheckpointError):
    """Another prune holds the run folder's lock; nothing was done."""


def parse_min_free(value: Union[None, int, str]) -> Optional[Tuple[str, float]]:
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
    try:
        return ("bytes", parse_size(value))
    except ValueError:
        raise ValueError("min_free must be a size (500G, 1.5TiB, 1048576) or a percent (10%%), not %r" % (value,))


def parse_size(value: Union[int, str]) -> float:
    """Bytes from ``500G``, ``1.5TiB``, ``100M``, ``1048576`` (binary units: ``1G`` is 1 GiB).

    Raises:
        ValueError: anything else, or a negative number.
    """
    if isinstance(value, bool):
        raise ValueError("a size must be a number of bytes or like 500G, not %r" % (value,))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a size must not be negative")
        return float(value)
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError("a size must be a number of bytes or like 100M, 1.5TiB, not %r" % (value,))
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


def human_size(count: Optional[float]) -> str:
    """``4.0 KiB``-style text for a byte count ("-" for None)."""
    if count is None:
        return "-"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return ("%d %s" % (value, unit)) if unit == "B" else ("%.1f %s" % (value, unit))
        value /= 1024
    return "%.1f PiB" % value  # pragma: no cover


def _free_space(path: Union[int, str]) -> Tuple[int, int]:
    """``(available bytes for unprivileged users, total bytes)`` of the file system holding ``path``
    (a path, or the descriptor of an open folder)."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def _remove_tree(dir_fd: int, name: str) -> None:
    """Delete the entry ``name`` of the run folder open as ``dir_fd``, a folder or file that is not a
    symlink (a symlink of the run folder is never deleted); symlinks inside are removed, never followed
    (:func:`fsutil.remove_tree_at`).

    Raises:
        OSError: ``ELOOP`` for a symlink; the file system's error at the first failure.
    """
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, "refusing to delete through a symlink", name)
    remove_tree_at(dir_fd, name)


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

    def __init__(self, path: str, dry_run: bool, policy: Dict[str, Any]) -> None:
        self.path = path
        self.dry_run = dry_run
        self.policy = policy
        self.latest_valid: Optional[str] = None
        self.before: List[str] = []
        self.after: List[str] = []
        self.deleted: List[Dict[str, Any]] = []
        self.kept: List[Dict[str, Any]] = []
        self.warnings: List[str] = []
        self.error: Optional[str] = None
        self.free_before: Optional[int] = None
        self.free_after: Optional[int] = None
        self.min_free_bytes: Optional[int] = None

    @property
    def changed(self) -> bool:
        return bool(self.deleted)

    def to_dict(self) -> Dict[str, Any]:
        return dict(path=self.path, dry_run=self.dry_run, policy=dict(self.policy), latest_valid=self.latest_valid,
                    before=list(self.before), after=list(self.after), deleted=list(self.deleted),
                    kept=list(self.kept), warnings=list(self.warnings), error=self.error,
                    free_before=self.free_before, free_after=self.free_after, min_free_bytes=self.min_free_bytes)


def _lock(path: str, dir_fd: Optional[int] = None) -> int:
    """Open and flock ``path`` (created when missing, never through a symlink); the descriptor holds the lock.

    With ``dir_fd`` (the run folder's descriptor), the file named ``basename(path)`` is opened in
    that folder; ``path`` names it in the messages.
    """
    try:
        fd = open_lock_file(path) if dir_fd is None else open_lock_file(os.path.basename(path), dir_fd)
    except OSError as exc:
        raise CheckpointError("cannot open the lock file %s: %s" % (path, exc))
    try:
        held = try_flock(fd)
    except OSError as exc:
        os.close(fd)
        raise CheckpointError("cannot lock %s: %s (on Lustre, mount with -o flock, or pass a lock file on a "
                              "local file system)" % (path, exc))
    if not held:
        os.close(fd)
        raise PruneLocked("another prune of %s is running (it holds %s); nothing done" % (
            os.path.dirname(path) or ".", path))
    return fd


def _open_run_folder(root: str) -> int:
    """The run folder ``root`` (absolute) opened by :func:`fsutil.open_dir_nofollow`.

    Raises:
        CheckpointError: ``<root> does not exist``, ``<root> is not a folder``, a symlink on the path
            (refused, with the real path), or it cannot be opened.
    """
    try:
        return open_dir_nofollow(root)
    except FolderPathError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR) and exc.filename == root:
            raise CheckpointError(str(exc))
        if exc.errno == errno.ELOOP:
            real = os.path.realpath(root)
            raise CheckpointError(
                "refusing the run folder %s: %s. A run folder is opened only by its real path, so that no "
                "symlink can lead the prune into another folder; nothing done%s" % (
                    root, exc, "" if real == root else " (its real path now: %s)" % real))
        raise CheckpointError("cannot open the run folder %s: %s" % (root, exc))


def _check_policy(keep_last: Any, keep_every: Any, keep: Any, tmp_grace: Any, validate: str) -> None:
    for name, value in (("keep_last", keep_last), ("keep_every", keep_every)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("%s must be an integer, not %r" % (name, value))
    if keep_every < 0:
        raise ValueError("keep_every must be 0 (off) or more, not %d" % keep_every)
    if not all(isinstance(p, str) and p for p in keep):
        raise ValueError("keep must be a list of names or patterns, not %r" % (keep,))
    if tmp_grace is not None and (isinstance(tmp_grace, bool) or not isinstance(tmp_grace, (int, float))):
        raise ValueError("tmp_grace must be a number of seconds, not %r" % (tmp_grace,))
    check_level(validate)


def prune(path: str, keep_last: int, keep_every: int = 0, keep: Sequence[str] = (), min_free: Any = None,
          tmp_grace: Optional[float] = TMP_GRACE, validate: str = SIZES, dry_run: bool = False, log: Any = None,
          lock_file: Optional[str] = None, now: Optional[float] = None, fsync: bool = True,
          replicas: Sequence[str] = ()) -> PruneResult:
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
    * checkpoints whose names follow another layout than the newest valid one's (a user's
      ``2024/`` or ``epoch_3/`` folder beside ``step_<S>`` checkpoints is never pruned as an
      invalid Orbax or torchtune checkpoint);
    * everything that is not a candidate: symlinks (never followed, never deleted through),
      names that match no layout, pointers, ``FINISHED``, the lock file;
    * temporary entries (``tmp-*``, ``*.tmp``) changed less than ``tmp_grace`` seconds ago
      (newest mtime of the entry and of anything under it); ``tmp_grace`` None or < 0 keeps them all.
      ``tmp-deleting-*`` entries left by an interrupted prune are removed at once.

    With ``replicas`` (replica folders, :mod:`.replicas`), no checkpoint newer than the oldest of the
    replicas' newest verified copies is deleted: a checkpoint is deleted only once every replica holds
    it or a newer one. A replica that holds no verified copy or cannot be read keeps every checkpoint
    (a warning says so).

    With ``min_free`` (``500G``, ``10%``), checkpoints are deleted only while the file system has
    less space available than that, oldest first, and no more once it has.

    A checkpoint is deleted by renaming it to ``tmp-deleting-<name>`` (from then on no reader chooses
    it), then removing that. Each deletion is passed to ``log`` (one line: what and why). The folder's
    lock file (``.prune.lock``, or ``lock_file``) is held with ``flock`` for the whole run; ``dry_run``
    takes no lock and deletes nothing. An error stops the run: :attr:`PruneResult.error` says why and
    nothing more is deleted.

    The run folder is opened once, never through a symlink (one anywhere on ``path`` is refused), and
    the lock file (unless ``lock_file``), every rename and every deletion are relative to that
    descriptor; before each deletion ``path`` must still lead to that folder, else the run stops (an
    error: ``... no longer leads to the folder this prune opened ...``). See the module docstring.

    Raises:
        ValueError: a bad policy value.
        CheckpointError: the folder is missing, not a folder, its path holds a symlink, it is
            unreadable, or cannot be locked.
        PruneLocked: another prune holds the lock.
    """
    if isinstance(keep, str):
        raise ValueError("keep must be a list of names or patterns, not the string %r" % keep)
    keep = list(keep or ())
    _check_policy(keep_last, keep_every, keep, tmp_grace, validate)
    threshold = parse_min_free(min_free)
    root = os.path.abspath(path)
    if isinstance(replicas, str):
        raise ValueError("replicas must be a list of folders, not the string %r" % replicas)
    policy = dict(keep_last=keep_last, keep_every=keep_every, keep=keep, min_free=min_free, tmp_grace=tmp_grace,
                  validate=validate, replicas=list(replicas))
    result = PruneResult(root, dry_run, policy)
    root_fd = _open_run_folder(root)
    try:
        lock_fd = None
        if not dry_run:
            lock_fd = _lock(lock_file) if lock_file else _lock(os.path.join(root, PRUNE_LOCK), root_fd)
        try:
            _prune_locked(root, root_fd, result, keep_last, keep_every, keep, threshold, tmp_grace, validate,
                          dry_run, log or (lambda line: None), time.time() if now is None else now, fsync,
                          list(replicas))
        finally:
            if lock_fd is not None:
                os.close(lock_fd)  # releases the flock; the file stays (removing it would race)
    finally:
        os.close(root_fd)
    return result


def _fd_path(fd: int) -> Optional[str]:
    """``/proc/self/fd/<fd>``: a path that leads to the folder open as ``fd`` itself (the kernel's link, not
    a name someone can swap), or None where there is no such link (no /proc)."""
    path = "/proc/self/fd/%d" % fd
    try:
        same = os.path.samestat(os.stat(path), os.fstat(fd))
    except OSError:
        return None
    return path if same else None


def _prune_locked(root: str, root_fd: int, result: PruneResult, keep_last: int, keep_every: int, keep: List[str],
                  threshold: Optional[Tuple[str, float]], tmp_grace: Optional[float], validate: str, dry_run: bool,
                  log: Callable[[str], None], now: float, fsync: bool, replicas: List[str]) -> None:
    # The scan reads the folder that was opened, whatever the path names meanwhile: through the descriptor's
    # /proc/self/fd link (Linux) a folder swapped for another during the scan and swapped back before the
    # deletions cannot feed the plan; the path itself only where /proc is not mounted.
    scan_root = _fd_path(root_fd) or root
    report = inspect(scan_root, validate, list_all=True)
    root_real = os.path.realpath(scan_root)
    result.warnings.extend(w.replace(scan_root, root) for w in report.warnings)
    candidates = report.checkpoints
    best = report.latest_valid
    result.latest_valid = best.name if best else None
    result.before = [c.name for c in candidates] + [name for name, _path in report.temporary]
    reasons: Dict[str, str] = {}
    victims = plan_checkpoints(report, root, root_real, result.warnings, reasons, keep_last, keep_every, keep, validate)
    if replicas and victims:
        victims = _spare_unreplicated(victims, replicas, validate, reasons, result.warnings, root)
    stale = stale_temporaries(report, result.kept, tmp_grace, now)
    free = _free_before(root, root_fd, result, threshold, dry_run)
    # Delete: stale temporaries, then checkpoints oldest first.
    gone = _delete_temporaries(stale, root, root_fd, result, log, dry_run)
    gone |= _delete_checkpoints(victims, best, reasons, root, root_fd, result, log, dry_run, threshold, free)
    if gone and fsync and not dry_run:
        try:
            os.fsync(root_fd)
        except OSError:  # pragma: no cover - the deletions are done; durability is best effort here
            pass
    for ckpt in candidates:
        if ckpt.name not in gone:
            result.kept.append(dict(name=ckpt.name, kind="checkpoint", step=ckpt.step, reason=reasons[ckpt.name]))
    result.after = [name for name in result.before if name not in gone]
    if not dry_run:
        try:
            result.free_after = _free_space(root_fd)[0]
        except OSError:  # pragma: no cover
            pass


def _spare_unreplicated(victims: List[Checkpoint], replicas: List[str], validate: str, reasons: Dict[str, str],
                        warnings: List[str], root: str) -> List[Checkpoint]:
    """The victims that every replica of the run folder ``root`` already holds, or holds a newer copy than (the
    others are kept)."""
    guard, problems = unreplicated_guard(replicas, validate, primary=root)
    warnings.extend("%s: no checkpoint is deleted until it does" % p for p in problems)
    spared = [c for c in victims if guard is None or c.key > guard]
    for ckpt in spared:
        reasons[ckpt.name] = ("not yet replicated: %s" % problems[0] if guard is None else
                              "newer than the replicas' newest verified copy (step %d): not yet replicated" % guard[1])
    return [c for c in victims if c not in spared]


def _free_before(root: str, root_fd: int, result: PruneResult, threshold: Optional[Tuple[str, float]],
                 dry_run: bool) -> Optional[int]:
    """The free bytes before any deletion (None when unknown); sets ``result.free_before`` and
    ``result.min_free_bytes``.

    Raises:
        CheckpointError: min_free is set and the free space cannot be read.
    """
    free: Optional[int] = None
    total: Optional[int] = None
    if threshold is not None or not dry_run:
        try:
            free, total = _free_space(root_fd)
        except OSError as exc:
            if threshold is not None:
                raise CheckpointError("cannot read the free space of %s: %s" % (root, exc))
    result.free_before = free
    if threshold is not None:
        result.min_free_bytes = int(threshold[1] if threshold[0] == "bytes" else (total or 0) * threshold[1] / 100.0)
    return free


def _enough(freed: int, free: Optional[int], threshold: Optional[Tuple[str, float]], root_fd: int,
            result: PruneResult, dry_run: bool) -> Tuple[bool, int]:
    """``(whether min_free is reached, the bytes available)`` (never reached without min_free).

    What the file system says, never apparent sizes: the larger of what ``statvfs`` says is available
    now (not in a dry run: nothing was deleted) and ``free`` + ``freed``, ``freed`` counting only what
    the deletions gave back by the file system's own account (:func:`_unshared_blocks`: allocated
    blocks that no other link keeps). A sparse file or a hard link to another checkpoint's file frees
    less than its size, or nothing; a parallel file system may report what was freed late."""
    if threshold is None:
        return False, free or 0
    available = (free or 0) + freed
    if not dry_run:
        try:
            available = max(available, _free_space(root_fd)[0])
        except OSError:
            pass
    return available >= (result.min_free_bytes or 0), available


def _unshared_blocks(root_fd: int, name: str) -> int:
    """The bytes deleting the entry ``name`` of the run folder open as ``root_fd`` gives back, as far as
    the file system tells: the allocated blocks (``st_blocks``, 512 bytes each) of its regular files that
    no other link keeps (``st_nlink`` 1); never through a symlink; 0 for what cannot be read."""
    total = 0
    try:
        st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
    except OSError:
        return 0
    if stat.S_ISREG(st.st_mode):
        return st.st_blocks * 512 if st.st_nlink == 1 else 0
    if not stat.S_ISDIR(st.st_mode):
        return 0
    for _top, _dirs, files, top_fd in os.fwalk(name, dir_fd=root_fd, follow_symlinks=False):
        for entry in files:
            try:
                st = os.stat(entry, dir_fd=top_fd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                total += st.st_blocks * 512
    return total


def _still_opened(root: str, root_fd: int, result: PruneResult, log: Callable[[str], None]) -> bool:
    """Whether ``root`` still leads to the folder opened (the one scanned, unless it was swapped
    during the scan and back); sets the error that stops the run when not."""
    if result.error is None and not names_folder(root, root_fd):
        result.error = ("%s no longer leads to the folder this prune opened (renamed, replaced, or a "
                        "symlink on its path now); the plan may be another folder's" % root)
        log("error: %s; stopped, nothing more deleted" % result.error)
    return result.error is None


def _delete_temporaries(stale: List[Tuple[str, str, str]], root: str, root_fd: int, result: PruneResult,
                        log: Callable[[str], None], dry_run: bool) -> Set[str]:
    """Delete the stale temporaries (in a dry run, say so); returns the names gone."""
    gone: Set[str] = set()
    verb = "would delete" if dry_run else "deleted"
    for name, entry, why in stale:
        if not _still_opened(root, root_fd, result, log):
            result.kept.append(dict(name=name, kind="temporary", step=None, reason="not reached: the run stopped"))
            continue
        try:
            if not dry_run:
                _remove_tree(root_fd, name)
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
    return gone


def _delete_checkpoints(victims: List[Checkpoint], best: Optional[Checkpoint], reasons: Dict[str, str], root: str,
                        root_fd: int, result: PruneResult, log: Callable[[str], None], dry_run: bool,
                        threshold: Optional[Tuple[str, float]], free: Optional[int]) -> Set[str]:
    """Delete the planned checkpoints oldest first, until min_free is reached or an error stops
    the run (in a dry run, say so); returns the names gone."""
    gone: Set[str] = set()
    freed = 0
    verb = "would delete" if dry_run else "deleted"
    for ckpt in victims:
        if result.error is not None:
            reasons[ckpt.name] = "not reached: the run stopped (%s)" % result.error
            continue
        reached, available = _enough(freed, free, threshold, root_fd, result, dry_run)
        if reached:
            reasons[ckpt.name] = "min_free %s reached (%s available)" % (
                result.policy["min_free"], human_size(available))
            continue
        if best is None or ckpt is best or not ckpt.sort_key() < best.sort_key():  # never: the plan excludes it
            result.error = "internal error: refusing to delete %s (not older than the newest valid)" % ckpt.name
            reasons[ckpt.name] = result.error
            continue
        if not _still_opened(root, root_fd, result, log):
            reasons[ckpt.name] = "not reached: the run stopped (%s)" % result.error
            continue
        gives_back = _unshared_blocks(root_fd, ckpt.name) if threshold is not None else 0
        try:
            if not dry_run:
                _delete_checkpoint(root_fd, ckpt)
        except OSError as exc:
            result.error = "cannot delete %s: %s" % (os.path.join(root, ckpt.name), exc)
            reasons[ckpt.name] = "deletion failed: %s" % exc
            log("error: %s; stopped, nothing more deleted" % result.error)
            continue
        gone.add(ckpt.name)
        freed += gives_back
        result.deleted.append(dict(name=ckpt.name, kind="checkpoint", step=ckpt.step, size=ckpt.size,
                                   reason=reasons.pop(ckpt.name)))
        log("%s %s (step %d, %s): %s" % (verb, ckpt.name, ckpt.step, human_size(ckpt.size),
                                         result.deleted[-1]["reason"]))
    return gone


def _delete_checkpoint(root_fd: int, ckpt: Checkpoint) -> None:
    """Rename ``ckpt`` to ``tmp-deleting-<name>`` (atomic: no reader chooses it any more), then remove
    it; both in the run folder open as ``root_fd``, by name."""
    st = os.stat(ckpt.name, dir_fd=root_fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, "became a symlink; not deleted", ckpt.path)
    doomed = DELETING_PREFIX + ckpt.name
    try:
        os.stat(doomed, dir_fd=root_fd, follow_symlinks=False)
    except FileNotFoundError:
        pass
    else:
        _remove_tree(root_fd, doomed)
    os.rename(ckpt.name, doomed, src_dir_fd=root_fd, dst_dir_fd=root_fd)
    _remove_tree(root_fd, doomed)

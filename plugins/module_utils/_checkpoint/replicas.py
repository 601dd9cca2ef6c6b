# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""Replicas: a second copy of a run folder's newest checkpoints on other storage, and the choice
between the copies when a run resumes.

A **replica folder** holds copies of some checkpoints of one run folder under the same names, so the
layouts read it as they read the run folder, and its own manifest ``REPLICA_INDEX`` (:mod:`.replica_index`)
(``.clusterops-replica.json``) listing each copy that was made whole and verified:

.. code-block:: json

    {"format": "clusterops.replica", "format_version": 1, "primary": "/lustre/runs/llama",
     "checkpoints": {"step_000002000": {"layout": "clusterops", "step": 2000, "epoch": 1,
       "is_dir": true, "bytes": 20401094656, "copied": "2026-12-06T05:00:00Z", "seconds": 41.2,
       "files": [{"path": "model.pt", "size": 16106127360, "sha256": "9f86d0..."}]}}}

A copy is made in ``tmp-replica-<name>.<pid>.<random>`` (a temporary: never a candidate), every
byte hashed as it is read from the run folder, flushed (``fsync``), read back and compared, renamed
to its name, checked by its layout at the ``validate`` level, and only then entered in the index
(written atomically). A copy cut short (killed, the disk full) is a temporary that the next
:func:`replicate` removes; a copy renamed but not yet in the index is not used (:func:`newest_verified`)
and is made again. Only copies in the index count.
"""

from __future__ import annotations

import errno
import os
import stat
import time

try:
    from typing import Any, Callable, Dict, List, Optional, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .common import (
    CHUNK_SIZE,
    Checkpoint,
    CheckpointError,
    DELETING_PREFIX,
    Invalid,
    REPLICA_STAGING_PREFIX,
    REPLICATE_LOCK,
    Report,
    SHA256,
    SIZES,
    STRUCTURE,
)
from .fsutil import (
    fsync_dir,
    hash_file,
    open_lock_file,
    open_regular,
    remove_tree_at,
    try_flock,
    walk_files,
)
from .layouts import check_checkpoint
from .replica_index import read_index, readable_like, write_index
from .runs import check_level, inspect

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class ReplicaLocked(CheckpointError):
    """Another replication into the replica folder holds its lock."""


def _utc(stamp: Optional[float] = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def newest_verified(replica: str, validate: str = SIZES, name_template: Optional[str] = None,
                    newer_than: Optional[Tuple[int, int]] = None, primary: Optional[str] = None
                    ) -> Tuple[Report, Optional[Checkpoint]]:
    """The replica folder read as a run folder, and its newest checkpoint that the index lists and
    that is valid at ``validate`` (None when there is none, or none newer than the ``(epoch, step)``
    key ``newer_than``: copies that cannot win are not checked).

    A copy is counted only while its entry in the index agrees with it: the same layout, step and
    (for the files it lists) sizes at every level above ``structure``.

    Raises:
        CheckpointError: the folder is missing, unreadable, or its index is, or is another run folder's than
            ``primary`` (:func:`read_index`).
    """
    # At structure: the copies are checked at validate below, newest first, only while they can win.
    report = inspect(replica, STRUCTURE, list_all=False, name_template=name_template)
    index = read_index(report.path, primary)
    replica_real = os.path.realpath(report.path)
    for ckpt in reversed(report.checkpoints):
        if newer_than is not None and ckpt.key <= newer_than:
            break
        entry = index.get(ckpt.name)
        if entry is None or entry.get("step") != ckpt.step or entry.get("is_dir") != ckpt.is_dir:
            continue
        if ckpt.checked != validate:
            check_checkpoint(ckpt, validate, replica_real)
        if ckpt.valid and (validate == "structure" or _sizes_agree(ckpt.path, entry)):
            return report, ckpt
    return report, None


def _sizes_agree(copy: str, entry: Dict[str, Any]) -> bool:
    """Whether the copy at ``copy`` holds every file its manifest entry lists, at the listed size."""
    for item in entry.get("files") or []:
        path = os.path.join(copy, item.get("path", "")) if entry.get("is_dir") else copy
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if st.st_size != item.get("size"):
            return False
    return bool(entry.get("files"))


class _Pacer(object):
    """Sleeps so that the bytes passed to :meth:`__call__` flow at most ``rate`` bytes per second
    (None or <= 0: no limit)."""

    def __init__(self, rate: Optional[float], clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = rate if rate and rate > 0 else None
        self.clock, self.sleep = clock, sleep
        self.start = clock()
        self.done = 0

    def __call__(self, count: int) -> None:
        self.done += count
        if self.rate is None:
            return
        ahead = self.done / self.rate - (self.clock() - self.start)
        if ahead > 0:
            self.sleep(ahead)


def _copy_file(src: str, dst: str, pacer: _Pacer) -> Dict[str, Any]:
    """Copy one regular file, hashing what is read; the copy is fsynced. Returns ``{"size", "sha256"}``."""
    import hashlib  # pylint: disable=import-outside-toplevel
    fd_in, st = open_regular(src, follow=True)
    digest = hashlib.sha256()
    total = 0
    try:
        # The original's permission bits (no set-id, no write for others): the copy is no more readable.
        fd_out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW, stat.S_IMODE(st.st_mode) & 0o755)
        try:
            while True:
                chunk = os.read(fd_in, CHUNK_SIZE)
                if not chunk:
                    break
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd_out, view):]
                total += len(chunk)
                pacer(len(chunk))
            os.fsync(fd_out)
            if hasattr(os, "posix_fadvise"):  # the read-back then reads what the device holds, not the cache
                try:
                    os.posix_fadvise(fd_out, 0, 0, os.POSIX_FADV_DONTNEED)
                except OSError:  # pragma: no cover - some file systems refuse hints
                    pass
        finally:
            os.close(fd_out)
    finally:
        os.close(fd_in)
    if total != st.st_size:
        raise CheckpointError("%s changed size while it was copied (%d bytes, read %d)" % (src, st.st_size, total))
    return dict(size=total, sha256=digest.hexdigest())


def _copy_checkpoint(ckpt: Checkpoint, run_real: str, staging: str, pacer: _Pacer) -> List[Dict[str, Any]]:
    """Copy a checkpoint (folder or file) of the run folder to ``staging``; returns its files
    ``[{"path", "size", "sha256"}]`` as read from the run folder."""
    if not ckpt.is_dir:
        item = _copy_file(ckpt.path, staging, pacer)
        return [dict(path=os.path.basename(ckpt.path), **item)]
    os.mkdir(staging, readable_like(ckpt.path, 0o755))
    files = []
    made = set([""])
    for rel, path, _size in walk_files(ckpt.path, run_real):
        parent = os.path.dirname(rel)
        if parent not in made:
            os.makedirs(os.path.join(staging, parent), readable_like(os.path.join(ckpt.path, parent), 0o755),
                        exist_ok=True)
            made.add(parent)
        files.append(dict(path=rel, **_copy_file(path, os.path.join(staging, rel), pacer)))
    for folder in sorted(made, key=len, reverse=True):
        fsync_dir(os.path.join(staging, folder) if folder else staging)
    return files


def _read_back(staging: str, is_dir: bool, files: List[Dict[str, Any]]) -> Optional[str]:
    """Why the copy differs from what was read from the run folder, or None."""
    for item in files:
        path = os.path.join(staging, item["path"]) if is_dir else staging
        size, sha = hash_file(path)
        if size != item["size"] or sha != item["sha256"]:
            return "%s reads back as %d bytes sha256 %s, the run folder's as %d bytes sha256 %s" % (
                item["path"], size, sha, item["size"], item["sha256"])
    return None


class ReplicateResult(object):
    """What :func:`replicate` did. ``copied``: ``{"name", "step", "bytes", "seconds"}`` each;
    ``deleted``: ``{"name", "step", "reason"}`` of copies retention removed; ``kept``:
    ``{"name", "step", "reason"}``; ``lag``: see :func:`replica_lag`; ``error``: what stopped the run."""

    def __init__(self, run_dir: str, replica: str, dry_run: bool) -> None:
        self.run_dir, self.replica, self.dry_run = run_dir, replica, dry_run
        self.copied: List[Dict[str, Any]] = []
        self.deleted: List[Dict[str, Any]] = []
        self.kept: List[Dict[str, Any]] = []
        self.warnings: List[str] = []
        self.lag: Dict[str, Any] = {}
        self.error: Optional[str] = None

    @property
    def changed(self) -> bool:
        return bool(self.copied or self.deleted)

    def to_dict(self) -> Dict[str, Any]:
        return dict(run_dir=self.run_dir, replica=self.replica, dry_run=self.dry_run, copied=list(self.copied),
                    deleted=list(self.deleted), kept=list(self.kept), warnings=list(self.warnings),
                    lag=dict(self.lag), error=self.error, changed=self.changed)


def _retained(keys: List[Tuple[Tuple[int, int], str, int]], keep_last: int, keep_every: int) -> Dict[str, str]:
    """``{name: reason}`` of what retention keeps among ``(key, name, step)`` (any order): the
    ``keep_last`` newest (every one when ``keep_last`` <= 0) and each step a multiple of ``keep_every``."""
    ordered = sorted(keys, reverse=True)
    kept: Dict[str, str] = {}
    for i, (_key, name, step) in enumerate(ordered):
        if keep_last <= 0:
            kept[name] = "keep_last %d: every copy is kept" % keep_last
        elif i < keep_last:
            kept[name] = "one of the %d newest valid checkpoints" % keep_last
        elif keep_every > 0 and step % keep_every == 0:
            kept[name] = "step %d is a multiple of keep_every %d" % (step, keep_every)
    return kept


def replica_lag(primary: Optional[Checkpoint], replica: Optional[Checkpoint], valid_primary: List[Checkpoint],
                now: float) -> Dict[str, Any]:
    """How far a replica is behind: ``{"primary_step", "replica_step", "checkpoints_behind", "seconds_behind"}``.

    ``checkpoints_behind``: valid checkpoints of the run folder newer than the replica's newest copy;
    ``seconds_behind``: seconds since the oldest of those was written (its modification time), 0 when
    none; None when none of them can be read any more (deleted meanwhile, e.g. by the trainer's rotation).
    """
    behind = [c for c in valid_primary if replica is None or c.key > replica.key]
    seconds: Optional[float] = 0.0
    if behind:
        times = [t for t in (_mtime(c.path) for c in behind) if t is not None]
        seconds = max(0.0, round(now - min(times), 1)) if times else None
    return dict(primary_step=primary.step if primary else None, replica_step=replica.step if replica else None,
                checkpoints_behind=len(behind), seconds_behind=seconds)


def _mtime(path: str) -> Optional[float]:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return None


def _refuse_root_in_users_folders(run_dir: str, replica: str) -> None:
    """Root replicates only between folders that no one but root can change, all the way up: a copy writes,
    renames and removes by path in the replica folder, and whoever can change a folder on either path could
    swap it for a link under root's feet (into another user's folder). A user's folders are replicated as that
    user (the role checkpoint_pruning's cron entry, the module with become_user).

    Raises:
        CheckpointError: this process is root and a component of the run folder's or the replica's path (the
            replica's nearest existing part, before it is made) is owned by another user, or writable by others
            (a sticky folder, as /tmp, only above the first folder root owns)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    for path in (run_dir, replica):
        while not os.path.lexists(path) and os.path.dirname(path) != path:
            path = os.path.dirname(path)
        component = path
        while True:
            try:
                st = os.lstat(component)  # a user's link counts as the user's
            except OSError:
                break  # reported by the scan or the copy
            sticky_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and component != path
            if st.st_uid != 0 or (st.st_mode & 0o022 and not stat.S_ISLNK(st.st_mode) and not sticky_dir):
                raise CheckpointError(
                    "refusing to replicate as root: %s is owned by uid %d%s; run replicate as the folder's owner "
                    "(the role checkpoint_pruning does, the module with become_user)" % (
                        component, st.st_uid, " and writable by others" if st.st_uid == 0 else ""))
            if os.path.dirname(component) == component:
                break
            component = os.path.dirname(component)


def replicate(run_dir: str, replica: str, keep_last: int = 2, keep_every: int = 0, validate: str = SIZES,
              bwlimit: Optional[float] = None, dry_run: bool = False, log: Optional[Callable[[str], None]] = None,
              name_template: Optional[str] = None, fsync: bool = True, now: Optional[float] = None,
              time_limit: Optional[float] = None) -> ReplicateResult:
    """Copy the run folder's valid checkpoints that the replica's retention keeps and that it lacks;
    then remove the copies retention no longer keeps.

    Retention (over the run folder's valid checkpoints and the replica's verified copies together):
    the ``keep_last`` newest and every step that is a multiple of ``keep_every`` (> 0); ``keep_last``
    <= 0 keeps every copy. The replica's newest verified copy is never removed. Copies are made newest
    first at most ``bwlimit`` bytes per second (None: no limit). The replica folder is created when
    missing (mode 0755); its lock :data:`REPLICATE_LOCK` is held with ``flock`` for the run (``dry_run``
    takes none and changes nothing). Each copy (before it starts: ``copying NAME (I of N, BYTES bytes)``, and
    once made) and removal is passed to ``log``. With ``time_limit`` (seconds from the start), no copy
    starts after it: the ones left are logged and made by the next run (a copy under way is finished;
    a hard stop, such as cron's ``timeout``, leaves its temporary folder for the next run to remove).

    An error while copying (the disk full, a file that changed) removes that copy's temporary folder
    and stops the run: :attr:`ReplicateResult.error` says why; what was verified before stays.

    Raises:
        ValueError: a bad level or policy value.
        CheckpointError: the run folder or the replica cannot be read, or its index is broken.
        ReplicaLocked: another replication into ``replica`` is running.
    """
    check_level(validate)
    for name, value in (("keep_last", keep_last), ("keep_every", keep_every)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError("%s must be an integer, not %r" % (name, value))
    if keep_every < 0:
        raise ValueError("keep_every must be 0 (off) or more, not %d" % keep_every)
    log = log or (lambda line: None)
    run_dir, replica = os.path.abspath(run_dir), os.path.abspath(replica)
    if os.path.realpath(replica) == os.path.realpath(run_dir):
        raise ValueError("the replica %s is the run folder itself" % replica)
    _refuse_root_in_users_folders(run_dir, replica)
    result = ReplicateResult(run_dir, replica, dry_run)
    if not os.path.isdir(replica):
        if dry_run:
            source = inspect(run_dir, validate, list_all=True, name_template=name_template)
            result.copied = [dict(name=c.name, step=c.step, bytes=None, seconds=None)
                             for c in _to_copy(source.checkpoints, {}, keep_last, keep_every)]
            return result
        os.makedirs(replica, readable_like(run_dir, 0o755), exist_ok=True)
    lock_fd = None
    if not dry_run:
        lock_fd = open_lock_file(os.path.join(replica, REPLICATE_LOCK))
        if not try_flock(lock_fd):
            os.close(lock_fd)
            raise ReplicaLocked("another replication into %s is running (it holds %s); nothing done" % (
                replica, REPLICATE_LOCK))
    try:
        started = time.time()
        _replicate_locked(run_dir, replica, result, keep_last, keep_every, validate, bwlimit, log,
                          name_template, fsync, started if now is None else now,
                          None if time_limit is None else started + time_limit)
    finally:
        if lock_fd is not None:
            os.close(lock_fd)
    return result


def _to_copy(valid: List[Checkpoint], index: Dict[str, Dict[str, Any]], keep_last: int, keep_every: int
             ) -> List[Checkpoint]:
    """The run folder's valid checkpoints that retention keeps and the index lacks, newest first."""
    valid = [c for c in valid if c.valid is not False]
    names = set(c.name for c in valid)
    keys = [(c.key, c.name, c.step) for c in valid]
    keys += [((_entry_epoch(e), e["step"]), name, e["step"]) for name, e in index.items()
             if isinstance(e.get("step"), int) and name not in names]
    kept = _retained(keys, keep_last, keep_every)
    return sorted([c for c in valid if c.name in kept and (c.name not in index or index[c.name]["step"] != c.step)],
                  key=lambda c: c.key, reverse=True)


def _entry_epoch(entry: Dict[str, Any]) -> int:
    epoch = entry.get("name_epoch")
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else -1


def _replicate_locked(run_dir: str, replica: str, result: ReplicateResult, keep_last: int, keep_every: int,
                      validate: str, bwlimit: Optional[float], log: Callable[[str], None], name_template: Optional[str],
                      fsync: bool, now: float, deadline: Optional[float] = None) -> None:
    # Every candidate at structure, the newest down to the first valid at validate; the ones to copy are
    # checked at validate before copying (at sha256 the whole run folder is not hashed on every run).
    source = inspect(run_dir, validate, list_all=True, name_template=name_template)
    index = read_index(replica, run_dir)
    # A killed run's copies (under the lock, every tmp-replica-* is one) and removals cut short.
    if not result.dry_run:
        replica_fd = os.open(replica, os.O_RDONLY | _O_DIRECTORY)
        try:
            for name in sorted(os.listdir(replica)):
                if name.startswith(REPLICA_STAGING_PREFIX) or name.startswith(DELETING_PREFIX):
                    remove_tree_at(replica_fd, name)
                    log("removed %s (left by a replication cut short)" % name)
        finally:
            os.close(replica_fd)
    # A copy changed or lost since it was verified leaves the manifest: made again while the run folder holds it.
    for name in sorted(n for n, e in index.items() if not _sizes_agree(os.path.join(replica, n), e)):
        del index[name]
        result.warnings.append("the copy %s no longer matches the replica's manifest: not counted%s" % (
            name, "" if result.dry_run else "; taken out of the manifest"))
        if not result.dry_run:
            write_index(replica, run_dir, index, fsync)
            log("warning: %s" % result.warnings[-1])
    run_real = os.path.realpath(run_dir)
    to_copy = _to_copy(source.checkpoints, index, keep_last, keep_every)
    for number, ckpt in enumerate(to_copy, 1):
        if deadline is not None and time.time() >= deadline and not result.dry_run:
            left = [c.name for c in to_copy[number - 1:]]
            result.warnings.append("the time limit was reached: %d checkpoint(s) left for the next run (%s)"
                                   % (len(left), ", ".join(left)))
            log("warning: %s" % result.warnings[-1])
            break
        if ckpt.checked != validate:
            check_checkpoint(ckpt, validate, run_real)
        if not ckpt.valid:
            result.warnings.append("%s is not valid at %s (%s): not copied" % (ckpt.name, validate, ckpt.why_invalid))
            continue
        if result.dry_run:
            result.copied.append(dict(name=ckpt.name, step=ckpt.step, bytes=ckpt.size, seconds=None))
            continue
        log("copying %s (%d of %d, %d bytes)" % (ckpt.name, number, len(to_copy), ckpt.size or 0))
        try:
            entry = _copy_one(ckpt, run_real, replica, validate, _Pacer(bwlimit))  # paced from the copy's start
        except (OSError, CheckpointError, Invalid) as exc:
            full = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
            failure = "copying %s to %s failed%s: %s" % (
                ckpt.name, replica, " (the replica's file system is full)" if full else "", exc)
            result.error = failure if result.error is None else "%s; %s" % (result.error, failure)
            log("error: %s" % failure)
            if full:
                break  # the others would not fit either
            continue  # one checkpoint that cannot be copied stops no other
        index[ckpt.name] = entry
        try:
            write_index(replica, run_dir, index, fsync)
        except CheckpointError as exc:  # too many copies for one index: this copy stays unlisted, never counted
            del index[ckpt.name]
            result.error = str(exc) if result.error is None else "%s; %s" % (result.error, exc)
            log("error: %s" % exc)
            break
        result.copied.append(dict(name=ckpt.name, step=ckpt.step, bytes=entry["bytes"], seconds=entry["seconds"]))
        log("copied %s (%d bytes in %.1f s)" % (ckpt.name, entry["bytes"], entry["seconds"]))
    # The copies were read back as they were made: their sizes suffice here (no second full hash).
    level = STRUCTURE if validate == STRUCTURE else SIZES
    newest = None if result.dry_run and not index else newest_verified(replica, level, name_template, primary=run_dir)[1]
    _apply_retention(replica, run_dir, index, result, keep_last, keep_every, newest, log, fsync)
    valid = [c for c in source.checkpoints if c.valid is not False]
    result.lag = replica_lag(source.latest_valid, newest, valid, now)


def _copy_one(ckpt: Checkpoint, run_real: str, replica: str, validate: str, pacer: _Pacer) -> Dict[str, Any]:
    """Copy, read back, rename, check: the index entry of the new copy."""
    unique = "%d.%s" % (os.getpid(), os.urandom(4).hex())
    staging = os.path.join(replica, "%s%s.%s" % (REPLICA_STAGING_PREFIX, ckpt.name, unique))
    final = os.path.join(replica, ckpt.name)
    start = time.monotonic()
    replica_fd = os.open(replica, os.O_RDONLY | _O_DIRECTORY)
    try:
        try:
            files = _copy_checkpoint(ckpt, run_real, staging, pacer)
            differs = _read_back(staging, ckpt.is_dir, files)
            if differs:
                raise CheckpointError("the copy of %s differs: %s" % (ckpt.name, differs))
            if os.path.lexists(final):  # a copy renamed but never entered in the index: made again
                os.rename(final, os.path.join(replica, DELETING_PREFIX + ckpt.name))
                remove_tree_at(replica_fd, DELETING_PREFIX + ckpt.name)
            os.rename(staging, final)
            os.fsync(replica_fd)
        except BaseException:
            if os.path.lexists(staging):
                remove_tree_at(replica_fd, os.path.basename(staging))
            raise
        copy = Checkpoint(ckpt.name, final, ckpt.name_layout, ckpt.step, ckpt.name_epoch, ckpt.is_dir)
        # At sha256 the read-back has compared every byte already: the layout's check at sizes suffices.
        check_checkpoint(copy, SIZES if validate == SHA256 else validate, os.path.realpath(replica))
        if not copy.valid:
            os.rename(final, os.path.join(replica, DELETING_PREFIX + ckpt.name))
            remove_tree_at(replica_fd, DELETING_PREFIX + ckpt.name)
            raise CheckpointError("the copy of %s is not valid at %s: %s" % (ckpt.name, validate, copy.why_invalid))
    finally:
        os.close(replica_fd)
    return dict(layout=copy.layout, step=ckpt.step, epoch=ckpt.epoch, name_epoch=ckpt.name_epoch, is_dir=ckpt.is_dir,
                bytes=sum(f["size"] for f in files), files=files, copied=_utc(),
                seconds=round(time.monotonic() - start, 3))


def _apply_retention(replica: str, run_dir: str, index: Dict[str, Dict[str, Any]], result: ReplicateResult,
                     keep_last: int, keep_every: int, newest: Optional[Checkpoint], log: Callable[[str], None],
                     fsync: bool) -> None:
    """Remove the copies retention no longer keeps; never ``newest``, the replica's newest verified copy (an
    entry whose copy no longer checks out does not push it out). The index is written once, before any
    removal: from then on no reader counts the removed copies."""
    keys = [((_entry_epoch(e), e["step"]), name, e["step"]) for name, e in index.items()]
    kept = _retained(keys, keep_last, keep_every)
    if newest is not None:
        kept.setdefault(newest.name, "the replica's newest verified copy")
    gone = []
    for _key, name, step in sorted(keys):
        if name in kept:
            result.kept.append(dict(name=name, step=step, reason=kept[name]))
            continue
        result.deleted.append(dict(name=name, step=step, reason="older than the %d newest valid checkpoints" % keep_last))
        gone.append(name)
    if result.dry_run or not gone:
        return
    for name in gone:
        del index[name]
    write_index(replica, run_dir, index, fsync)
    replica_fd = os.open(replica, os.O_RDONLY | _O_DIRECTORY)
    try:
        for item in result.deleted:
            if os.path.lexists(os.path.join(replica, item["name"])):
                os.rename(item["name"], DELETING_PREFIX + item["name"], src_dir_fd=replica_fd, dst_dir_fd=replica_fd)
                remove_tree_at(replica_fd, DELETING_PREFIX + item["name"])
            log("deleted the copy %s: %s" % (item["name"], item["reason"]))
    finally:
        os.close(replica_fd)

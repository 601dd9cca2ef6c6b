# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""Writing checkpoints by the contract: staging, manifest, fsync, atomic rename, the FINISHED marker."""

from __future__ import annotations

import binascii
import json
import os
import posixpath
import shutil
import stat
import time

try:
    from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Union  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .common import FINISHED, FORMAT, FORMAT_VERSION, MANIFEST, SIZES, TMP_PREFIX
from .names import checkpoint_name, is_temporary
from .atomic import atomic_write_json
from .fsutil import fsync_dir, hash_file
from .runs import verify


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _refuse_existing(final: str) -> bool:
    """True when an invalid checkpoint folder is in the way; raise when a valid one (or a file,
    or a symlink) is; False when nothing is."""
    if not os.path.lexists(final):
        return False
    if os.path.islink(final) or not os.path.isdir(final):
        raise FileExistsError("%s already exists and is not a checkpoint folder" % final)
    if verify(final, SIZES).valid:
        raise FileExistsError("%s already exists and is valid: a committed checkpoint is never replaced" % final)
    return True


def _set_aside_invalid(final: str, root: str) -> Optional[str]:
    """Rename an invalid ``final`` out of the way (see :func:`commit_checkpoint`); return where to."""
    if not _refuse_existing(final):
        return None
    aside = os.path.join(root, "%sinvalid-%s.%d.%s" % (
        TMP_PREFIX, os.path.basename(final), os.getpid(), binascii.hexlify(os.urandom(4)).decode("ascii")))
    os.rename(final, aside)
    return aside


def commit_checkpoint(staging: str, root: str, step: int, epoch: Optional[int] = None, extra: Optional[Dict[str, Any]] = None, fsync: bool = True) -> str:
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
    files: List[Dict[str, Any]] = []
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
            fsync_dir(dirpath)
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
        fsync_dir(staging)
    if os.path.lexists(final):
        raise FileExistsError("%s already exists" % final)
    os.rename(staging, final)
    if fsync:
        fsync_dir(root)
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

    def __init__(self, root: str, step: int, epoch: Optional[int] = None, extra: Optional[Dict[str, Any]] = None, fsync: bool = True) -> None:
        self.root = os.path.abspath(root)
        self.name = checkpoint_name(step)
        self.step = step
        self.epoch = epoch
        self.extra = extra
        self.fsync = fsync
        self.staging: Optional[str] = None
        self.path: Optional[str] = None

    def __enter__(self) -> str:
        if not os.path.isdir(self.root):
            os.makedirs(self.root)
            if self.fsync:
                fsync_dir(os.path.dirname(self.root))
        _refuse_existing(os.path.join(self.root, self.name))
        self.staging = os.path.join(self.root, "%s%s.%d.%s" % (
            TMP_PREFIX, self.name, os.getpid(), binascii.hexlify(os.urandom(4)).decode("ascii")))
        os.mkdir(self.staging)
        return self.staging

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if self.staging is None:  # __enter__ did not run: nothing was staged
            return False
        if exc_type is None:
            try:
                self.path = commit_checkpoint(self.staging, self.root, self.step, self.epoch, self.extra, self.fsync)
            except BaseException:
                shutil.rmtree(self.staging, ignore_errors=True)
                raise
        else:
            shutil.rmtree(self.staging, ignore_errors=True)
        return False


def write_checkpoint(root: str,
                     step: int,
                     epoch: Optional[int],
                     files_or_callback: Union[Mapping[str, bytes], Callable[[str], Any]],
                     extra: Optional[Dict[str, Any]] = None,
                     fsync: bool = True) -> str:
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


def mark_finished(root: str,
                  step: Optional[int] = None,
                  epoch: Optional[int] = None,
                  checkpoint: Optional[str] = None,
                  extra: Optional[Dict[str, Any]] = None,
                  fsync: bool = True) -> str:
    """Write the run-level ``FINISHED`` marker atomically (temporary file, fsync, rename, fsync)."""
    data = dict(format=FORMAT, format_version=FORMAT_VERSION, step=step, epoch=epoch, checkpoint=checkpoint,
                time=_utc_now())
    if extra:
        data["extra"] = extra
    tmp = os.path.join(root, "%s%s.%d" % (TMP_PREFIX, FINISHED, os.getpid()))  # never a candidate
    return atomic_write_json(os.path.join(root, FINISHED), data, tmp=tmp, fsync=fsync)

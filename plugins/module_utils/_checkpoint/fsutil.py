# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""File-system helpers of the checkpoint library: hashing, directory fsync, bounded JSON reads, safe walks."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import stat

try:
    from typing import Any, List, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .common import CHUNK_SIZE, _Invalid, MAX_MANIFEST_BYTES


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

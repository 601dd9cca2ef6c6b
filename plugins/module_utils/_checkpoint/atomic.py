# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""Files replaced atomically in their own folder, the one home of that idea in the collection:
:func:`atomic_write_bytes` (a temporary ``.<name>.<random>.tmp`` beside the file, fsynced, renamed
over it, the folder fsynced), :func:`atomic_write_json` on top of it, and
:func:`remove_leftover_temporaries`, which removes the temporaries a killed writer left.

Every writer of small files in the collection uses them: the checkpoint ``FINISHED`` marker and the
replica manifest here, the training registry's ``state.json`` and ``run.json``, the heal journal, and
the Prometheus textfile of ``clusterops.slurm.prometheus_textfile`` (node_exporter reads every
``*.prom`` of its folder, never a ``.tmp``)."""

from __future__ import annotations

import json
import os
import re
import tempfile

try:
    from typing import Any, List, Optional, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .fsutil import fsync_dir, open_regular, try_flock


_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def atomic_write_json(path: str, data: Any, tmp: Optional[str] = None, indent: Optional[int] = None,
                      mode: Optional[int] = None, fsync: bool = True) -> str:
    """Replace the file ``path`` with ``data`` as JSON (sorted keys, a final newline), atomically:
    :func:`atomic_write_bytes` of its text. Returns ``path``.

    Raises:
        OSError: see :func:`atomic_write_bytes`.
        TypeError, ValueError: ``data`` is not JSON (nothing is written).
    """
    text = json.dumps(data, indent=indent, sort_keys=True) + "\n"
    return atomic_write_bytes(path, text.encode("utf-8"), tmp=tmp, mode=mode, fsync=fsync)


def atomic_write_bytes(path: str, data: bytes, tmp: Optional[str] = None, mode: Optional[int] = None,
                       owner: Optional[Tuple[int, int]] = None, fsync: bool = True, lock: bool = False) -> str:
    """Replace the file ``path`` with ``data``, atomically, in its own folder. Returns ``path``.

    Written to ``tmp`` (a path in the same folder; default a fresh ``.<name>.<random>.tmp`` from
    :func:`tempfile.mkstemp`, mode 0600: a hidden name that never ends as ``path``'s does, so a reader
    of ``*.prom`` or ``*.json`` never takes it for a file of its own), given ``owner`` (``(uid,
    gid)``) and ``mode`` (e.g. ``0o644``; None keeps the mode it was created with), fsynced, renamed
    over ``path`` (the same folder, so the same file system: the rename is atomic), then the folder
    is fsynced; ``fsync=False`` skips both fsyncs (tests, benchmarks). A reader sees the old file or
    the new one, never a part. With ``lock``, an ``flock`` on the temporary is held from its creation
    to its rename, so that :func:`remove_leftover_temporaries` of another writer leaves it alone. On
    an exception the temporary is removed.

    Raises:
        OSError: from the file system (the folder is missing or not writable, the disk is full;
            ``EPERM`` for an ``owner`` this process may not give).
    """
    folder = os.path.dirname(path) or "."
    if tmp is None:
        fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=folder)
    else:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_CLOEXEC, 0o666)
    try:
        if lock:
            _flock_if_supported(fd)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if owner is not None:
            os.fchown(fd, owner[0], owner[1])
        if mode is not None:
            os.fchmod(fd, mode)
        if fsync:
            os.fsync(fd)
        os.rename(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    finally:
        os.close(fd)  # the flock goes with it, after the rename
    if fsync:
        fsync_dir(folder)
    return path


def leftover_pattern(path: str) -> re.Pattern:
    """The names of :func:`atomic_write_bytes`'s own temporaries for ``path``: ``.<name>.<random>.tmp``."""
    return re.compile(r"\A\.%s\.[A-Za-z0-9_]+\.tmp\Z" % re.escape(os.path.basename(path)))


def remove_leftover_temporaries(path: str, check_mode: bool = False) -> List[str]:
    """Remove the temporaries of :func:`atomic_write_bytes` for ``path`` that a killed writer left.

    Those are the regular files of ``path``'s folder named as :func:`leftover_pattern` says (never a
    symlink, a folder or a file of another name) that no live writer holds an ``flock`` on (a writer
    with ``lock`` holds one until its rename; where the file system has no ``flock``, every one is
    taken for a leftover). ``check_mode``: none is removed. Returns their names, sorted.

    Raises:
        OSError: the folder cannot be listed, or a leftover cannot be removed.
    """
    folder = os.path.dirname(path) or "."
    pattern = leftover_pattern(path)
    with os.scandir(folder) as entries:
        found = sorted(entry.name for entry in entries if pattern.match(entry.name)
                       and entry.is_file(follow_symlinks=False) and not _being_written(entry.path))
    for name in [] if check_mode else found:
        try:
            os.unlink(os.path.join(folder, name))
        except FileNotFoundError:  # another run removed it meanwhile
            pass
    return found


def _flock_if_supported(fd: int) -> Optional[bool]:
    """:func:`try_flock` of ``fd``, or None where the file system has no ``flock`` (Lustre without ``-o flock``)."""
    try:
        return try_flock(fd)
    except OSError:
        return None


def _being_written(path: str) -> bool:
    """Whether a live writer holds an ``flock`` on the file ``path`` (or it is gone, or no longer a
    regular file: not one to remove either)."""
    try:
        fd, _st = open_regular(path)
    except OSError:
        return True
    try:
        return _flock_if_supported(fd) is False
    finally:
        os.close(fd)

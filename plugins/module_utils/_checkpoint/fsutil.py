# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""File-system helpers of the checkpoint library: hashing, directory fsync, flock, bounded JSON reads,
walks that stay inside a folder, folders opened without following symlinks and trees removed
relative to a descriptor (files replaced atomically: :mod:`.atomic`).

:func:`open_lock_file`, :func:`try_flock` and :class:`FileLock` are meant for every writer of small
state files in the collection (the prune lock here; the training registry's and the heal journal's
locks), with :mod:`.atomic`'s writes.

:func:`open_dir_nofollow`, :func:`names_folder` and :func:`remove_tree_at` are for code that acts in a
folder other users can write to, or whose path they can change (the prune, which may run as another
user than the folder's owner): open the folder once, with no symlink anywhere on its path, then read,
rename and delete relative to that descriptor, so that a component of the path swapped for a symlink
afterwards cannot send the work into another folder (POSIX ``openat``/``unlinkat``; Python 3.8+)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import time

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    # fcntl is a module on every POSIX host (for the type checker too); None only where there is none.
    fcntl = None  # type: ignore[assignment]

try:
    from typing import Any, List, Optional, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .common import CHUNK_SIZE, Invalid, MAX_MANIFEST_BYTES


_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: Linux: the folders above the one asked for are opened O_PATH, which needs only search (x)
#: permission on them, as a path lookup does; elsewhere O_RDONLY, which needs read permission too.
_O_PATH = getattr(os, "O_PATH", 0)


def is_inside(path: str, base_real: str) -> bool:
    real = os.path.realpath(path)
    return real == base_real or real.startswith(base_real.rstrip(os.sep) + os.sep)


def hash_file(path: str, chunk_size: int = CHUNK_SIZE, fsync: bool = False) -> Tuple[int, str]:
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


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | _O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_lock_file(path: str, dir_fd: Optional[int] = None) -> int:
    """Open (create, mode 0644) a lock file for :func:`try_flock`, never through a symlink; returns the descriptor.

    With ``dir_fd`` (a folder's descriptor, e.g. from :func:`open_dir_nofollow`), a relative ``path``
    is opened in that folder, wherever it is now.

    Raises:
        OSError: it cannot be opened (``ELOOP`` for a symlink).
    """
    return os.open(path, os.O_RDWR | os.O_CREAT | _O_NOFOLLOW | _O_CLOEXEC, 0o644, dir_fd=dir_fd)


def try_flock(fd: int) -> bool:
    """Take an exclusive ``flock`` on ``fd`` without waiting: True when held, False when another holds it.

    The kernel drops the lock when the descriptor is closed or its process dies, so a killed
    holder never leaves a stale lock.

    Raises:
        OSError: ``flock`` failed otherwise (e.g. ``ENOLCK``/``EINVAL`` on a Lustre client mounted
            without ``-o flock``), or ``ENOSYS`` where there is no ``fcntl`` (not POSIX).
    """
    if fcntl is None:  # pragma: no cover - not POSIX
        raise OSError(errno.ENOSYS, "no fcntl on this platform")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise
    return True


class FileLock(object):
    """An exclusive ``flock`` on the file ``path`` (created mode 0644, never through a symlink),
    waited for up to ``timeout`` seconds (0: try once); the holder's pid is written into it.

    The kernel drops it when the holder dies, so a killed holder never leaves a stale lock.
    """

    def __init__(self, path: str, timeout: float = 0.0, sleep: Any = time.sleep, clock: Any = time.time) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: Optional[int] = None
        self._sleep = sleep
        self._clock = clock

    def acquire(self) -> bool:
        """True when the lock is held, False when another holder kept it past ``timeout``.

        Raises:
            OSError: the file cannot be opened or locked (see :func:`open_lock_file`, :func:`try_flock`).
        """
        self._fd = open_lock_file(self.path)
        deadline = self._clock() + max(0.0, self.timeout)
        while not try_flock(self._fd):
            if self._clock() >= deadline:
                os.close(self._fd)
                self._fd = None
                return False
            self._sleep(0.5)
        os.ftruncate(self._fd, 0)
        os.write(self._fd, ("%d\n" % os.getpid()).encode("ascii"))
        return True

    def release(self) -> None:
        """Drop the lock (nothing when not held)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


#: The most a small JSON file of the collection may hold (``run.json``, ``state.json``, the ``FINISHED``
#: marker, a heartbeat), in bytes: :func:`load_json_bounded`'s default. A larger one is refused, never
#: read in part.
MAX_STATE_BYTES = 1 << 20


def open_regular(path: str, follow: bool = False, dir_fd: Optional[int] = None) -> Tuple[int, os.stat_result]:
    """Open ``path`` for reading as a regular file that no one can make the reader block on.

    Opened ``O_RDONLY | O_NONBLOCK | O_CLOEXEC`` (and ``O_NOFOLLOW`` unless ``follow``; relative to
    the folder descriptor ``dir_fd`` when given), then checked with ``fstat``: a FIFO, a device or a
    socket is refused before anything is read from it (``O_NONBLOCK`` makes the open of a FIFO
    without a writer return at once). Returns ``(descriptor, stat)``; the caller closes the
    descriptor.

    Raises:
        OSError: from ``open`` (``ENOENT``; ``ELOOP``: ``path`` is a symlink and ``follow`` is
            False), or ``EINVAL`` "not a regular file".
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _O_CLOEXEC
    if not follow:
        flags |= _O_NOFOLLOW
    fd = os.open(path, flags) if dir_fd is None else os.open(path, flags, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device, socket or folder is never read)", path)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_bounded(path: str, max_bytes: int, follow: bool = False, dir_fd: Optional[int] = None) -> bytes:
    """The whole content of the regular file ``path`` (:func:`open_regular`), at most ``max_bytes`` bytes.

    Raises:
        OSError: see :func:`read_bounded_stat`.
    """
    return read_bounded_stat(path, max_bytes, follow, dir_fd)[0]


def read_bounded_stat(path: str, max_bytes: int, follow: bool = False,
                      dir_fd: Optional[int] = None) -> Tuple[bytes, os.stat_result]:
    """:func:`read_bounded` and the ``fstat`` of the descriptor it read (owner and mode of the very
    file read, not of whatever the name leads to a moment later).

    Raises:
        OSError: see :func:`open_regular`; ``EFBIG`` when the file holds more than ``max_bytes``
            bytes (at open or while read: a file that grows is refused too).
    """
    fd, st = open_regular(path, follow, dir_fd)
    try:
        if st.st_size > max_bytes:
            raise OSError(errno.EFBIG, "larger than %d bytes" % max_bytes, path)
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, min(CHUNK_SIZE, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise OSError(errno.EFBIG, "larger than %d bytes" % max_bytes, path)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def parse_json_bytes(data: bytes) -> Any:
    """``data`` (UTF-8 JSON text) parsed.

    Raises:
        ValueError: not UTF-8, not JSON, or nested deeper than the parser goes (Python's
            ``RecursionError``, turned into this: a crafted file is bad input, not a crash).
    """
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply to be read")


def load_json_bounded(path: str, max_bytes: int = MAX_STATE_BYTES, follow: bool = False,
                      dir_fd: Optional[int] = None) -> Any:
    """The JSON value of the regular file ``path``: :func:`read_bounded` then :func:`parse_json_bytes`.

    The one reader of the collection's small JSON files in folders others can write (registry
    entries, state files, markers, heartbeats): never follows a final symlink (unless ``follow``),
    never blocks, never reads more than ``max_bytes``, never crashes on nesting.

    Raises:
        OSError: see :func:`read_bounded`.
        ValueError: see :func:`parse_json_bytes`.
    """
    return parse_json_bytes(read_bounded(path, max_bytes, follow, dir_fd))


class FolderPathError(OSError):
    """:func:`open_dir_nofollow` refused a path or could not open it.

    ``errno`` is ``ELOOP`` (a component is a symlink), ``ENOTDIR`` (a component is not a folder),
    ``ENOENT`` (a component does not exist) or the error of ``open``; ``filename`` is that component
    (an absolute path); ``str()`` is the whole sentence, e.g. ``/lustre/runs/alice is a symlink (not
    followed; in the path /lustre/runs/alice/llama)``.
    """

    def __str__(self) -> str:
        return str(self.strerror)


def _refusal(exc: OSError, name: str, parent_fd: int, here: str, full: str) -> FolderPathError:
    """The :class:`FolderPathError` for an ``open`` of ``name`` (the component ``here`` of ``full``)
    in the folder open as ``parent_fd`` that failed with ``exc``: told apart by an ``lstat``."""
    where = "" if here == full else "; in the path %s" % full
    try:
        st: Optional[os.stat_result] = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except OSError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        return FolderPathError(errno.ELOOP, "%s is a symlink (not followed%s)" % (here, where), here)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        return FolderPathError(errno.ENOTDIR, "%s is not a folder%s" % (here, where and " (%s)" % where[2:]), here)
    if exc.errno == errno.ENOENT:
        return FolderPathError(errno.ENOENT, "%s does not exist" % here, here)
    return FolderPathError(exc.errno, "cannot open %s%s: %s" % (here, where and " (%s)" % where[2:], exc.strerror),
                           here)


def open_dir_nofollow(path: str) -> int:
    """Open the folder ``path`` without following a symlink in any component of its path.

    ``path`` is made absolute (:func:`os.path.abspath`, which also drops ``.``, ``..`` and doubled
    slashes as text: with no symlink allowed on the way, the text is the path); then every component
    is opened from ``/`` down, each relative to the one above (``openat`` with ``O_DIRECTORY |
    O_NOFOLLOW | O_CLOEXEC``): a symlink is never followed, not even a trusted one such as
    ``/scratch -> /lustre/scratch`` (give the real path). A mount point is no symlink and is crossed.
    Returns an ``O_RDONLY`` descriptor of the folder (for ``os.scandir``, ``os.fstat``, ``os.fsync``
    and ``dir_fd=`` arguments); the caller closes it. It stays the folder opened whatever happens to
    the path afterwards (a rename, a symlink put in its place): :func:`names_folder` tells whether
    the path still leads to it.

    Raises:
        FolderPathError: a component is a symlink (``ELOOP``), not a folder (``ENOTDIR``), missing
            (``ENOENT``), or cannot be opened (``EACCES``, ...); the message names the component.
    """
    full = os.path.abspath(path)
    fd = os.open(os.sep, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    try:
        here = ""
        parts = [part for part in full.split(os.sep) if part]
        for index, name in enumerate(parts):
            here += os.sep + name
            last = index == len(parts) - 1
            flags = (os.O_RDONLY if last or not _O_PATH else _O_PATH) | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
            try:
                child = os.open(name, flags, dir_fd=fd)
            except OSError as exc:
                raise _refusal(exc, name, fd, here, full)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def names_folder(path: str, fd: int) -> bool:
    """Whether ``path``, opened again by :func:`open_dir_nofollow`, is the folder open as ``fd``.

    True when it opens (no symlink anywhere on the path) and has the ``st_dev`` and ``st_ino`` of
    ``fstat(fd)``; False when it is another folder now, holds a symlink, is gone or cannot be opened.
    """
    try:
        other = open_dir_nofollow(path)
    except OSError:
        return False
    try:
        mine, now = os.fstat(fd), os.fstat(other)
    finally:
        os.close(other)
    return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)


def _entry_name(name: str) -> str:
    if not name or name in (".", "..") or os.sep in name or "\0" in name:
        raise ValueError("%r is not the name of one entry of a folder" % (name,))
    return name


def remove_tree_at(dir_fd: int, name: str) -> None:
    """Delete the entry ``name`` of the folder open as ``dir_fd``, and everything under it, never
    following a symlink and never leaving that folder.

    ``lstat`` of ``name`` (``dir_fd``, ``follow_symlinks=False``): a file or a symlink is unlinked (a
    symlink itself, never its target; a hard link, so another name of the same file keeps its
    content); a folder is opened relative to ``dir_fd`` (``O_DIRECTORY | O_NOFOLLOW``), emptied depth
    first, each folder below opened, listed (``os.scandir`` on its descriptor) and emptied relative to
    its parent's descriptor the same way, then removed (``rmdir`` with ``dir_fd``). So a symlink, or a
    folder swapped for one while this runs, is removed or refused, never followed; a rename of ``dir_fd``
    or of anything above it changes nothing. A folder on another file system (a mount point) is not
    entered. Iterative: a deep tree costs one descriptor per level, not Python recursion.

    ``name`` is one entry: not empty, no ``/``, not ``.`` or ``..``.

    Raises:
        ValueError: ``name`` is not one entry's name.
        OSError: from the file system, at the first error (what was removed stays removed):
            ``ENOENT`` when ``name`` does not exist (entries below it that vanish meanwhile are
            ignored), ``EACCES``/``EPERM``/``EROFS``, ``ENOTEMPTY`` when something was added meanwhile,
            ``ELOOP`` for a folder turned into a symlink between ``lstat`` and ``open``, ``EXDEV`` for a
            mount point below ``name``.
    """
    _entry_name(name)
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    fd = _open_subfolder(dir_fd, name, st.st_dev)
    try:
        _empty_folder(fd, st.st_dev)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def _open_subfolder(dir_fd: int, name: str, dev: int) -> int:
    fd = os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=dir_fd)
    if os.fstat(fd).st_dev != dev:
        os.close(fd)
        raise OSError(errno.EXDEV, "on another file system (a mount point): not removed", name)
    return fd


def _empty_folder(top_fd: int, dev: int) -> None:
    """Remove everything in the folder open as ``top_fd`` (on the device ``dev``); see :func:`remove_tree_at`."""
    # One level per item: (descriptor, name in the parent, subfolders still to empty and remove).
    stack: List[Tuple[int, str, List[str]]] = [(top_fd, "", _unlink_files(top_fd))]
    try:
        while stack:
            fd, _name, pending = stack[-1]
            if not pending:
                stack.pop()
                if stack:
                    os.close(fd)
                    try:
                        os.rmdir(_name, dir_fd=stack[-1][0])
                    except FileNotFoundError:
                        pass
                continue
            sub = pending.pop()
            try:
                child = _open_subfolder(fd, sub, dev)
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                # No folder any more (a symlink or a file put in its place): remove that entry itself.
                try:
                    if stat.S_ISDIR(os.stat(sub, dir_fd=fd, follow_symlinks=False).st_mode):
                        raise
                    os.unlink(sub, dir_fd=fd)
                except FileNotFoundError:
                    pass
                continue
            try:
                stack.append((child, sub, _unlink_files(child)))
            except BaseException:
                os.close(child)
                raise
    finally:
        for fd, _name, _pending in stack[1:]:
            os.close(fd)


def _unlink_files(fd: int) -> List[str]:
    """Unlink every entry but folders (symlinks included, not followed) of the folder open as ``fd``;
    returns the folders' names."""
    folders: List[str] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if is_dir:
                folders.append(entry.name)
                continue
            try:
                os.unlink(entry.name, dir_fd=fd)
            except FileNotFoundError:
                pass
    return folders


def stat_regular(path: str, what: str, max_bytes: Optional[int] = None) -> os.stat_result:
    """``os.stat`` of ``path`` (symlinks followed), which must be a regular file of at most
    ``max_bytes`` bytes (any size when None). ``what`` names it in the errors.

    Raises:
        Invalid: ``no <what>`` (it does not exist), ``cannot stat <what>: <error>``, ``<what> is
            not a regular file``, ``<what> is larger than <max_bytes> bytes``.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise Invalid("no %s" % what)
        raise Invalid("cannot stat %s: %s" % (what, exc))
    if not stat.S_ISREG(st.st_mode):
        raise Invalid("%s is not a regular file" % what)
    if max_bytes is not None and st.st_size > max_bytes:
        raise Invalid("%s is larger than %d bytes" % (what, max_bytes))
    return st


def read_json(path: str, what: str, max_bytes: int = MAX_MANIFEST_BYTES) -> Any:
    """The JSON value in the regular, non-empty file ``path`` of at most ``max_bytes`` bytes.

    Raises:
        Invalid: see :func:`stat_regular`; ``<what> is empty``; ``<what> is not valid JSON``.
    """
    if stat_regular(path, what, max_bytes).st_size == 0:
        raise Invalid("%s is empty" % what)
    try:
        return load_json_bounded(path, max_bytes, follow=True)
    except (OSError, ValueError) as exc:
        raise Invalid("%s is not valid JSON: %s" % (what, exc))


def walk_files(top: str, base_real: str) -> List[Tuple[str, str, int]]:
    """``(relative posix path, path, size)`` of the files under ``top``, sorted.

    Symlinks are followed only while they stay inside ``base_real`` (the run folder); one that
    leaves it makes the checkpoint invalid. Symlinked folders are not descended into.
    """
    found: List[Tuple[str, str, int]] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, top).replace(os.sep, "/")
            if os.path.islink(path):
                if not is_inside(path, base_real):
                    raise Invalid("%s is a symlink out of the run folder (not followed)" % rel)
                if os.path.isdir(path):
                    continue
            try:
                st = os.stat(path)
            except OSError:
                raise Invalid("%s is a dangling symlink" % rel)
            if stat.S_ISREG(st.st_mode):
                found.append((rel, path, st.st_size))
    return found


def require_nonempty(files: List[Tuple[str, str, int]], names_what: str) -> None:
    if not files:
        raise Invalid("no files")
    if all(size == 0 for _rel, _path, size in files):
        raise Invalid("every file is empty (%s)" % names_what)

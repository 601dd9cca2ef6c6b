# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Privilege separation: run a function in a forked child as another user, under a time limit.

Private to the collection (the leading underscore of the file): no API promise outside it.

Root (or the operator) reads and writes in folders that cluster users own: a run's checkpoint
folder, its heartbeat, its logs, the hang evidence. Done as root, every symlink, hard link, FIFO or
swapped folder the user left there makes root act for them. :func:`call_as` does that work in a
child process that has the user's uid, gid and groups, so the kernel allows it exactly what the
user may do themselves; a child that blocks (a FIFO, a hung file system) is killed after
``timeout`` seconds and only that call fails. The child shares the parent's code (``fork``,
no ``exec``): nothing has to be installed where the user could read or change it.

Where the process is not root, ids are not changed (a non-root process cannot take another
user's): the child still runs under the time limit and the caller's own rights.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import select
import signal
import time
from typing import Any, Callable, List, Optional, Tuple


#: Seconds a call may take before its child is killed (:func:`call_as`'s default): a checkpoint scan
#: at validation level ``sizes`` of thousands of checkpoints takes a few seconds; a blocked read never ends.
DEFAULT_TIMEOUT = 120.0
#: The most a child's result may hold, in bytes of JSON; more is an error.
MAX_RESULT_BYTES = 16 << 20


class PrivsepError(Exception):
    """The call could not be made or did not return: an unknown user, a child that raised, timed
    out, died or answered too much. The message says which, for the report."""


def user_ids(user: str) -> Tuple[int, int, List[int]]:
    """``(uid, gid, groups)`` of ``user`` from the passwd and group databases.

    Raises:
        PrivsepError: no such user.
    """
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise PrivsepError("no user %s on this host" % user)
    try:
        groups = os.getgrouplist(user, entry.pw_gid)
    except OSError:
        groups = [entry.pw_gid]
    return entry.pw_uid, entry.pw_gid, groups


def switch_user(uid: int, gid: int, groups: List[int]) -> None:
    """Become ``uid``/``gid`` with ``groups`` for good (real, effective and saved ids), in a child.

    Raises:
        OSError: an id could not be set; or the ids did not change (then the child must not go on).
    """
    os.setgroups(groups)
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise OSError(errno.EPERM, "the user ids did not change")


def _child(write_fd: int, ids: Optional[Tuple[int, int, List[int]]], func: Callable[..., Any], args: Tuple[Any, ...]) -> None:
    """The child's whole life: drop to ``ids``, run ``func``, write ``{"ok": value}`` or
    ``{"error": text}`` as JSON, exit without running the parent's exit handlers."""
    status = 0
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir("/")   # the parent's folder may be one the user cannot enter
        if ids is not None:
            switch_user(*ids)
        data = json.dumps({"ok": func(*args)})
    # Everything goes back to the parent as text.
    except BaseException as exc:  # pylint: disable=broad-except
        data = json.dumps({"error": "%s: %s" % (type(exc).__name__, exc)})
        status = 1
    try:
        view = memoryview(data.encode("utf-8"))
        while view:
            view = view[os.write(write_fd, view):]
    finally:
        os._exit(status)


def _reap(pid: int, wait: float = 2.0) -> None:
    """Collect the killed child; give up after ``wait`` s (a child in uninterruptible sleep)."""
    deadline = time.time() + wait
    while True:
        try:
            done, dummy = os.waitpid(pid, os.WNOHANG)
        except OSError:
            return
        if done or time.time() >= deadline:
            return
        time.sleep(0.05)


def call_as(user: Optional[str], func: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """``func(*args)`` run in a forked child as ``user``; its JSON-able return value.

    ``user`` None, the process's own user, or a process that is not root: no id is changed.
    Keyword ``timeout`` (seconds, default :data:`DEFAULT_TIMEOUT`): the child is killed
    (``SIGKILL``) when it has not answered by then. ``func`` must return what ``json.dumps``
    takes (dicts, lists, strings, numbers, None); it runs in the child, so what it changes in
    memory is lost; only its return value comes back.

    Raises:
        PrivsepError: ``user`` unknown; the child raised (message ``<type>: <text>``), timed out,
            died without answering or answered more than :data:`MAX_RESULT_BYTES`.
    """
    timeout = float(kw.pop("timeout", DEFAULT_TIMEOUT))
    if kw:
        raise TypeError("call_as: unexpected keyword(s) %s" % ", ".join(sorted(kw)))
    ids = None
    if user is not None and os.geteuid() == 0:
        ids = user_ids(user)
        if ids[0] == os.geteuid():
            ids = None
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe, never returns
        os.close(read_fd)
        _child(write_fd, ids, func, args)
    os.close(write_fd)
    chunks: List[bytes] = []
    size = 0
    deadline = time.time() + max(timeout, 0.0)
    try:
        while True:
            left = deadline - time.time()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                _reap(pid)
                raise PrivsepError("no answer within %d s (a blocked read? the child was killed)" % timeout)
            ready = select.select([read_fd], [], [], left)[0]
            if not ready:
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_RESULT_BYTES:
                os.kill(pid, signal.SIGKILL)
                _reap(pid)
                raise PrivsepError("answer larger than %d bytes" % MAX_RESULT_BYTES)
    finally:
        os.close(read_fd)
    status = os.waitpid(pid, 0)[1]
    try:
        answer = json.loads(b"".join(chunks).decode("utf-8")) if chunks else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not ("ok" in answer or "error" in answer):
        raise PrivsepError("the child died without answering (wait status %d)" % status)
    if "error" in answer:
        raise PrivsepError(str(answer["error"]))
    return answer["ok"]

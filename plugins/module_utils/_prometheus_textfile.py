# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A Prometheus textfile for node_exporter's textfile collector, replaced atomically in its own folder:
:func:`plan_textfile` reads what is there (the file, its mode and owner, leftovers of a killed run)
and says what would change, :func:`apply_textfile` does it. The module
``clusterops.slurm.prometheus_textfile`` is the one caller; the write itself is
``_checkpoint.atomic.atomic_write_bytes`` (a ``.<name>.<random>.tmp`` beside the file, never a
``*.prom`` that the collector would read half-written).

Private to the collection (the leading underscore): no API promise outside it.
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import stat
from typing import Any, Dict, List, NamedTuple, Optional, Tuple  # noqa: F401

from ansible_collections.clusterops.slurm.plugins.module_utils import _causes as causes
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.atomic import (
    atomic_write_bytes,
    remove_leftover_temporaries,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.fsutil import open_regular, read_bounded_stat
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import effective_user
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure

#: The largest textfile read back to compare (bytes): node_exporter reads whole files into memory too.
MAX_TEXTFILE_BYTES = 64 << 20


class TextfilePlan(NamedTuple):
    """What :func:`plan_textfile` found and decided (an immutable answer).

    ``before``: the file's bytes (None: there is none); ``write``: its content differs (or it is
    missing), so it is replaced; ``attributes``: only its mode or owner differ, changed in place;
    ``owner``: the ``(uid, gid)`` the file gets (None: the writer's own); ``leftovers``: names of
    temporaries a killed run left in the folder, removed first.
    """

    path: str
    content: bytes
    mode: int
    before: Optional[bytes]
    write: bool
    attributes: bool
    owner: Optional[Tuple[int, int]]
    leftovers: List[str]

    @property
    def changed(self) -> bool:
        return self.write or self.attributes or bool(self.leftovers)


def parse_mode(value: Any) -> int:
    """An octal mode: a string (``"0644"``, ``"644"``) read as octal, an integer taken as it is (YAML's
    ``0644`` is already 420).

    Raises:
        TaskFailure: not an octal mode between 0 and 07777.
    """
    try:
        mode = value if isinstance(value, int) else int(str(value), 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o7777:
        raise TaskFailure("mode %r is not an octal file mode (e.g. \"0644\")" % (value,))
    return mode


def resolve_id(name: Optional[str], what: str) -> Optional[int]:
    """The uid (``what`` ``"owner"``) or gid (``"group"``) of a name or number (None for None).

    Raises:
        TaskFailure: no such user or group on this host.
    """
    if name is None:
        return None
    if name.isdigit():
        return int(name)
    try:
        return pwd.getpwnam(name).pw_uid if what == "owner" else grp.getgrnam(name).gr_gid
    except KeyError:
        raise TaskFailure("%s %s does not exist on this host" % (what, name))


def plan_textfile(path: str, content: bytes, mode: int, uid: Optional[int] = None,
                  gid: Optional[int] = None) -> TextfilePlan:
    """What writing ``content`` to ``path`` with ``mode`` (and ``uid``/``gid``, None: unchanged for
    an existing file when this process runs as root, as ``ansible.builtin.template`` keeps them; the
    writer's own otherwise) would change. Reads only.

    Raises:
        TaskFailure: the folder is missing (cause configuration) or the account may not write it
            (cause permission: what the write would meet, said in check mode too), ``path`` is not a
            regular file (a symlink, a folder, a FIFO: never followed nor replaced) or cannot be read.
    """
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise TaskFailure("the textfile's folder %s does not exist" % folder)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise TaskFailure("the textfile's folder %s: %s may not write it (the temporary and the rename happen "
                          "there)" % (folder, effective_user()), failed_cause=causes.PERMISSION)
    try:
        before, st = read_bounded_stat(path, MAX_TEXTFILE_BYTES)
    except FileNotFoundError:
        before, st = None, None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TaskFailure("the textfile %s is a symlink (neither followed nor replaced)" % path)
        raise TaskFailure("cannot read the textfile %s: %s" % (path, exc))
    keep = (st.st_uid, st.st_gid) if st is not None and os.geteuid() == 0 else (-1, -1)
    owner = (keep[0] if uid is None else uid, keep[1] if gid is None else gid)
    attributes = st is not None and before == content and (
        stat.S_IMODE(st.st_mode) != mode or owner[0] not in (-1, st.st_uid) or owner[1] not in (-1, st.st_gid))
    try:
        leftovers = remove_leftover_temporaries(path, check_mode=True)
    except OSError as exc:
        raise TaskFailure("cannot list the textfile's folder %s: %s" % (folder, exc))
    return TextfilePlan(path=path, content=content, mode=mode, before=before, write=before != content,
                        attributes=attributes, owner=None if owner == (-1, -1) else owner, leftovers=leftovers)


def apply_textfile(plan: TextfilePlan, fsync: bool = True) -> List[str]:
    """Do what ``plan`` says: remove the leftovers, then replace the file (``atomic_write_bytes``, its
    temporary under an ``flock`` so that a concurrent run leaves it alone) or change its mode and
    owner in place. Returns the leftovers removed.

    Raises:
        TaskFailure: from the file system (the message names the file).
    """
    try:
        removed = remove_leftover_temporaries(plan.path) if plan.leftovers else []
        if plan.write:
            atomic_write_bytes(plan.path, plan.content, mode=plan.mode, owner=plan.owner, fsync=fsync, lock=True)
        elif plan.attributes:
            fd, _st = open_regular(plan.path)  # never through a symlink put there meanwhile
            try:
                if plan.owner is not None:
                    os.fchown(fd, plan.owner[0], plan.owner[1])
                os.fchmod(fd, plan.mode)
            finally:
                os.close(fd)
    except OSError as exc:
        raise TaskFailure("cannot write the textfile %s: %s" % (plan.path, exc))
    return removed


def result(plan: TextfilePlan, removed: List[str], diff: bool) -> Dict[str, Any]:
    """The module's result (RETURN): ``removed``, the leftovers removed (in check mode, those that
    would be); ``diff``: with the text before and after."""
    answer: Dict[str, Any] = dict(changed=plan.changed, textfile=plan.path, written=plan.write,
                                  mode="%04o" % plan.mode, size=len(plan.content), leftovers_removed=removed)
    if diff:
        answer["diff"] = {"before": (plan.before or b"").decode("utf-8", "replace"),
                          "after": plan.content.decode("utf-8", "replace"),
                          "before_header": plan.path, "after_header": plan.path}
    return answer

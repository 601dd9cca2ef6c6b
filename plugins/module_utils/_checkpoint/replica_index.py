# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""A replica folder's manifest, ``.clusterops-replica.json`` (:mod:`.replicas`): read and checked entry by entry,
written atomically, never larger than its reader accepts; and the permission bits a copy may have."""

from __future__ import annotations

import errno
import json
import os

try:
    from typing import Any, Dict, Optional  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .bounds import bytes_problem, number_problem, step_problem
from .common import CheckpointError, REPLICA_INDEX
from .atomic import atomic_write_json
from .fsutil import load_json_bounded

REPLICA_FORMAT = "clusterops.replica"
REPLICA_FORMAT_VERSION = 1
#: The most the index may hold (bytes); a larger one is refused, never read in part.
MAX_INDEX_BYTES = 64 << 20


def read_index(replica: str, primary: Optional[str] = None) -> Dict[str, Dict[str, Any]]:
    """The verified copies of a replica folder: ``{name: entry}`` (see the module docstring); ``{}``
    when the folder has no index yet. With ``primary`` (a run folder), the index must be that run
    folder's: a replica shared by two runs would mix their checkpoints.

    Every entry is checked: ``step`` an integer of 0 to 2**53 (``name_epoch`` too, ``epoch`` a number of 0
    to 2**53, ``bytes`` an integer of 0 to 2**63-1, each when present: :mod:`.bounds`), ``is_dir`` a boolean,
    ``files`` a non-empty list of ``{"path", "size", "sha256"}`` whose sizes are integers of 0 to 2**63-1
    and whose paths are relative, normalised, without NUL (a file checkpoint's one path its own name).
    The index is written by replication alone (as the folder's owner, who may also write it by hand):
    anything else in it makes the whole replica unreadable, never partly trusted.

    Raises:
        CheckpointError: the index cannot be read, is larger than :data:`MAX_INDEX_BYTES`, is no JSON,
            not of :data:`REPLICA_FORMAT`, of a newer format version, has a malformed entry, or is the
            replica of another run folder than ``primary``.
    """
    path = os.path.join(replica, REPLICA_INDEX)
    try:
        data = load_json_bounded(path, MAX_INDEX_BYTES)
    except (OSError, IOError) as exc:
        if getattr(exc, "errno", None) == errno.ENOENT:
            return {}
        raise CheckpointError("cannot read the replica index %s: %s" % (path, exc))
    except ValueError as exc:
        raise CheckpointError("the replica index %s is not valid JSON: %s" % (path, exc))
    if not isinstance(data, dict) or data.get("format") != REPLICA_FORMAT:
        raise CheckpointError("%s is not a replica index (format %r)" % (path, REPLICA_FORMAT))
    version = data.get("format_version")
    if not isinstance(version, int) or version > REPLICA_FORMAT_VERSION:
        raise CheckpointError("%s has format_version %r; this reader knows %d" % (path, version, REPLICA_FORMAT_VERSION))
    entries = data.get("checkpoints")
    if not isinstance(entries, dict):
        raise CheckpointError("%s has no checkpoints object" % path)
    if primary is not None and data.get("primary") not in (None, primary) and not (
            isinstance(data.get("primary"), str) and os.path.realpath(data["primary"]) == os.path.realpath(primary)):
        raise CheckpointError("%s is the replica of %r, not of %s: one replica folder per run folder" % (
            path, data.get("primary"), primary))
    for name, entry in entries.items():
        problem = entry_problem(name, entry)
        if problem:
            raise CheckpointError("%s: the entry %r %s" % (path, name, problem))
    return dict(entries)


def entry_problem(name: str, entry: Any) -> Optional[str]:
    """What is wrong with one index entry, or None."""
    if not isinstance(entry, dict):
        return "is no object"
    problem = step_problem(entry.get("step")) or (
        entry.get("name_epoch") is not None and step_problem(entry["name_epoch"], "name_epoch")) or (
        entry.get("epoch") is not None and number_problem(entry["epoch"], "epoch")) or (
        entry.get("bytes") is not None and bytes_problem(entry["bytes"], "bytes"))
    if problem:
        return "says %s" % problem
    if not isinstance(entry.get("is_dir"), bool):
        return "has no boolean is_dir"
    files = entry.get("files")
    if not isinstance(files, list) or not files:
        return "lists no files"
    for item in files:
        if not isinstance(item, dict) or not isinstance(item.get("path"), str) or not isinstance(item.get("sha256"), str):
            return "lists a file without path or sha256"
        size, rel = item.get("size"), item["path"]
        if bytes_problem(size):
            return "lists %r with %s" % (rel[:200], bytes_problem(size))
        if ("\0" in rel or rel.startswith("/") or rel != os.path.normpath(rel) or rel.split("/")[0] == ".."
                or (not entry["is_dir"] and rel != name)):
            return "lists the path %r, not one inside the copy" % rel
    return None


def write_index(replica: str, primary: str, entries: Dict[str, Dict[str, Any]], fsync: bool) -> None:
    """Write the index atomically, readable by those who can read the run folder.

    Raises:
        CheckpointError: it would be larger than :data:`MAX_INDEX_BYTES` (the reader would refuse it).
    """
    doc = dict(format=REPLICA_FORMAT, format_version=REPLICA_FORMAT_VERSION, primary=primary, checkpoints=entries)
    if len(json.dumps(doc)) > MAX_INDEX_BYTES - 4096:
        raise CheckpointError("the replica index would exceed %d bytes (%d copies): keep fewer copies" % (
            MAX_INDEX_BYTES, len(entries)))
    atomic_write_json(os.path.join(replica, REPLICA_INDEX), doc, mode=readable_like(primary, 0o644), fsync=fsync)


def readable_like(source: str, mode: int) -> int:
    """``mode`` without the read bits that ``source`` (a file or folder of the run folder) denies its group and
    others: a copy is never readable by more users than its original."""
    try:
        st = os.stat(source)
    except OSError:
        return mode & ~0o077
    return mode & ~(0o044 & ~st.st_mode) & ~(0o011 & ~st.st_mode) & ~0o022

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Slurm's event triggers (strigger(1)): what ``strigger --get`` lists, and SlurmUser from
``scontrol show config``; the trigger program's checks (a path SlurmUser runs and no one else
can change).

Private to the collection (the leading underscore): no API promise outside it.

``strigger --get`` prints a header, then one trigger a line (src/strigger/strigger.c, the same in
22.05, 24.11 and 26.05: recorded in tests/unit/fixtures/slurm-*/strigger-get*.txt):

.. code-block:: text

    TRIG_ID RES_TYPE   RES_ID  TYPE OFFSET USER     FLAGS PROGRAM
          3     node        *  down      0 root      PERM /usr/local/libexec/clusterops/clusterops-slurm-event-node_down

FLAGS is empty for a trigger without flags; PROGRAM (with the arguments it was given) is the rest
of the line.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any, Dict, List, Optional, Tuple


HEADER = re.compile(r"^\s*TRIG_ID\s+RES_TYPE\s+RES_ID\s+TYPE\s+OFFSET\s+USER\s+FLAGS\s+PROGRAM\s*$")
ROW = re.compile(r"^\s*(?P<id>[0-9]+)\s+(?P<res_type>\S+)\s+(?P<res_id>\S+)\s+(?P<type>\S+)\s+(?P<offset>-?[0-9]+)\s+"
                 r"(?P<user>\S+)\s+(?P<rest>\S.*?)\s*$")
SLURM_USER = re.compile(r"^SlurmUser\s*=\s*(?P<name>[^\s(]+)(?:\((?P<uid>[0-9]+)\))?\s*$", re.MULTILINE)


class TriggerAnswerError(ValueError):
    """An answer of strigger or scontrol that cannot be read: nothing is decided from it."""


def parse_triggers(text: str) -> List[Dict[str, Any]]:
    """The triggers of ``strigger --get``: ``[{"id": int, "res_type": str ("node", "job", ...),
    "res_id": str ("*" for every node), "type": str ("down", "drained", "fail", "fini", ...), "offset":
    int (seconds), "user": str, "flags": [str] ("PERM"), "program": str}]``, in the order listed.

    Raises:
        TriggerAnswerError: a line that is neither the header nor a trigger (a partial or unknown answer).
    """
    out: List[Dict[str, Any]] = []
    for line in text.splitlines():
        if not line.strip() or HEADER.match(line):
            continue
        match = ROW.match(line)
        if not match:
            raise TriggerAnswerError("strigger --get printed a line that is no trigger: %r" % line[:200])
        rest = match.group("rest")
        first, dummy, after = rest.partition(" ")
        # A program is an absolute path; a word before it is the flags (PERM), absent for none.
        flags, program = ([], rest) if first.startswith("/") else (first.split(","), after.strip())
        out.append(dict(id=int(match.group("id")), res_type=match.group("res_type"), res_id=match.group("res_id"),
                        type=match.group("type"), offset=int(match.group("offset")), user=match.group("user"),
                        flags=[f for f in flags if f], program=program))
    return out


def slurm_user(config_text: str) -> Tuple[str, Optional[int]]:
    """SlurmUser's name and uid from ``scontrol show config`` (``SlurmUser = slurm(64030)``).

    Raises:
        TriggerAnswerError: the configuration names no SlurmUser.
    """
    match = SLURM_USER.search(config_text)
    if not match:
        raise TriggerAnswerError("scontrol show config names no SlurmUser")
    return match.group("name"), int(match.group("uid")) if match.group("uid") else None


def program_problem(path: str, uid: int, gid: int, groups: Tuple[int, ...] = ()) -> Optional[str]:
    """Why slurmctld's SlurmUser (``uid``, ``gid``, ``groups``) must not get ``path`` as a trigger program,
    or None: not absolute, white space (strigger splits ``--program`` at spaces), missing, not a regular
    file, not executable by that user, or writable by anyone but root and SlurmUser (whoever can change
    it runs code as SlurmUser), the file or any folder above it."""
    if not os.path.isabs(path):
        return "%s is not an absolute path" % path
    if re.search(r"\s", path):
        return "%r holds white space, which strigger splits --program at" % path
    try:
        st = os.stat(path)
    except OSError as exc:
        return "%s cannot be read: %s" % (path, exc.strerror)
    if not stat.S_ISREG(st.st_mode):
        return "%s is not a regular file" % path
    if st.st_uid == uid:
        runs = bool(st.st_mode & stat.S_IXUSR)
    elif st.st_gid == gid or st.st_gid in groups:
        runs = bool(st.st_mode & stat.S_IXGRP)
    else:
        runs = bool(st.st_mode & stat.S_IXOTH)
    if not runs:
        return "%s is not executable by SlurmUser (uid %d)" % (path, uid)
    folder = path
    while True:
        st = os.stat(folder)
        if st.st_uid not in (0, uid) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (
                stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and folder != path):
            return "%s can be changed by others than root and SlurmUser (%s, owner uid %d, mode %o)" % (
                path, folder, st.st_uid, stat.S_IMODE(st.st_mode))
        if folder == os.path.dirname(folder):
            return None
        folder = os.path.dirname(folder)

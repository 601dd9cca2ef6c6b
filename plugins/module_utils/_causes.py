# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Why a task failed, in one word of a small set: the ``failed_cause`` of every module's failure
(``_task.run_task``), which the role ``remediate`` carries into its summary, AWX artifacts and
textfile, so that a failure pages the team that can fix it:

- ``configuration``: a setting of this collection or of its host is wrong (an option's value, a
  path that is not there, a Slurm client that is not installed, a Python library missing);
- ``permission``: the account the task runs as may not do what it needs (a file, a lock, a Slurm
  command that needs SlurmUser, root or an operator);
- ``accounting``: slurmdbd does not answer or the cluster has no accounting storage
  (``AccountingStorageType``), which the heal budget and job history read;
- ``slurm_unreadable``: the controller did not answer (in time) or answered in part;
- ``slurm_refused``: Slurm read fine but refused a change;
- ``unexpected``: none of these (a module crashed): the message and task say where.

Only ``slurm_unreadable`` means that Slurm could not be read.

Private to the collection (the leading underscore): no API promise outside it.
"""

from __future__ import annotations

import errno
import os
import re
from typing import Sequence


CONFIGURATION = "configuration"
PERMISSION = "permission"
ACCOUNTING = "accounting"
SLURM_UNREADABLE = "slurm_unreadable"
SLURM_REFUSED = "slurm_refused"
UNEXPECTED = "unexpected"
#: Every cause, in the order the summary and the textfile list them.
CAUSES = (CONFIGURATION, PERMISSION, ACCOUNTING, SLURM_UNREADABLE, SLURM_REFUSED, UNEXPECTED)

#: rc of coreutils timeout(1) when it stopped the command; rc of a command that could not be run.
_TIMEOUT_RC = 124
_NOT_RUN_RC = (126, 127)

#: Slurm's words for a change the account may not make. slurmctld's answer to an RPC its sender may not make
#: is "Invalid user id" (ESLURM_USER_ID_MISSING) at the end of the line; "Invalid user id: <name>" (sacct -u)
#: names a user that is not there instead.
_PERMISSION_WORDS = re.compile(r"access/permission denied|permission denied|operation not permitted"
                               r"|invalid user id\s*$|user not authorized|only root|must be (?:root|slurmuser)"
                               r"|requires (?:operator|administrator|admin)", re.I | re.M)

#: Slurm's own words (every release's clients) for each cause, matched in stdout and stderr, first
#: match wins: accounting before the rest (sacct's "Unable to contact slurm controller" is not said
#: for slurmdbd, but "slurmdbd" is, whatever else the line holds).
_WORDS = (
    # (the persistent connection is slurmdbd's protocol: 22.05's sacctmgr names no slurmdbd when it is down)
    (ACCOUNTING, re.compile(r"slurmdbd|accounting[_ ]storage|accounting is disabled|database is busy"
                            r"|problem talking to the database|persist_conn|persistinit|persistent connection", re.I)),
    (PERMISSION, _PERMISSION_WORDS),
    (SLURM_UNREADABLE, re.compile(r"unable to contact slurm controller|connection refused|socket timed out"
                                  r"|zero bytes were transmitted|communication connection failure"
                                  r"|slurm_load_\w+ error|unable to establish|network is unreachable"
                                  r"|no route to host|slurmctld.*not responding", re.I)),
)

#: The Slurm commands (with the sub-commands) that only read.
_READERS = ("sinfo", "squeue", "sacct", "sdiag", "sshare", "sprio")


def is_read(cmd: "Sequence[str]") -> bool:
    """Whether the Slurm command ``cmd`` (an argument list, any wrapper such as runuser first) only
    reads: sinfo, squeue, sacct...; ``scontrol show``/``ping``; ``sacctmgr show``/``list``."""
    names = [os.path.basename(str(arg)) for arg in cmd]
    for index, name in enumerate(names):
        if name in _READERS:
            return True
        if name in ("scontrol", "sacctmgr"):
            words = [str(arg).lower() for arg in cmd[index + 1:index + 4]]
            return any(word in ("show", "list", "ping", "listpids") for word in words)
    return False


def of_slurm_command(cmd: "Sequence[str]", rc: int, out: str, err: str) -> str:
    """The cause of a Slurm command that failed with ``rc``: its own words first (:data:`_WORDS`),
    then a timeout (``slurm_unreadable``), a command that could not be run (``configuration``), and
    otherwise a read that failed (``slurm_unreadable``) or a change Slurm refused (``slurm_refused``)."""
    text = "%s\n%s" % (err or "", out or "")
    for cause, words in _WORDS:
        if words.search(text):
            return cause
    if rc == _TIMEOUT_RC:
        return SLURM_UNREADABLE
    if rc in _NOT_RUN_RC:
        return CONFIGURATION
    return SLURM_UNREADABLE if is_read(cmd) else SLURM_REFUSED


def refused_cause(words: "Sequence[str]") -> str:
    """The cause of changes Slurm did not make, from its words for each (``failed_nodes``' values):
    ``permission`` when any says so, else ``slurm_refused``."""
    return PERMISSION if any(_PERMISSION_WORDS.search(str(word)) for word in words) else SLURM_REFUSED


def of_os_error(exc: OSError) -> str:
    """``permission`` for an OSError the account's rights caused (EACCES, EPERM, EROFS), else
    ``configuration`` (a path that is not there or not what it should be)."""
    return PERMISSION if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else CONFIGURATION

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Evidence of a hung training job: the Python stacks of its ranks, saved next to its logs.

Private to the collection (the leading underscore of the package): no API promise outside it.

``srun --overlap --jobid <id>`` runs :data:`EVIDENCE_SCRIPT` on every node of the job as the
run's owner: ``py-spy dump`` of each rank, and where py-spy fails a ``SIGUSR2`` (the reference
trainer's ``faulthandler`` dump, in the job's log, whose tail is then copied).
"""

from __future__ import annotations

import errno
import os
import re
import time
from typing import Any, Dict, List, Optional

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.fsutil import open_dir_nofollow, open_regular
from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import expand_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._privsep import PrivsepError
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SlurmCommandError
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import stack_collection
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.observe import owner_call

#: Run on each node of a hung job (one task per node, as the run's owner): every process of the
#: job on this node with torchrun's RANK in its environment (a training rank), its Python stacks
#: with py-spy; when py-spy fails, SIGUSR2 (the reference trainer's faulthandler dump goes to the
#: job's log). $1 job id, $2 py-spy command.
EVIDENCE_SCRIPT = r"""job=$1 pyspy=$2 node=${SLURMD_NODENAME:-$(hostname)} found=0
for dir in /proc/[0-9]*; do
  env=$( { tr '\0' '\n' < "$dir/environ"; } 2>/dev/null) || continue
  grep -qx "SLURM_JOB_ID=$job" <<<"$env" || continue
  rank=$(sed -n 's/^RANK=//p' <<<"$env")
  [ -n "$rank" ] || continue
  wnode=$(sed -n 's/^SLURMD_NODENAME=//p' <<<"$env")
  [ -z "$wnode" ] || [ "$wnode" = "$node" ] || continue
  pid=${dir#/proc/} found=$((found + 1))
  echo "=== node $node rank $rank pid $pid: py-spy dump"
  if ! timeout 30 "$pyspy" dump --pid "$pid" 2>&1; then
    echo "=== node $node rank $rank pid $pid: py-spy failed; SIGUSR2 (faulthandler stacks in the job's log)"
    kill -USR2 "$pid" 2>&1
  fi
done
echo "=== node $node: $found rank(s)"
"""


def evidence_form(run, decision):
    """The srun form (``_slurm_commands.stack_collection``) that collects the ranks' stacks of
    the hung job: one task on each of its nodes."""
    last = decision["last_job"]
    nodes = len(expand_hostlist(last["node_list"])) if last.get("node_list") else 1
    return stack_collection(last["job_id_raw"], nodes, EVIDENCE_SCRIPT,
                            ["clusterops-evidence", str(last["job_id_raw"]), run["py_spy"]])


def evidence_commands(cli, run, decision):
    """The srun command (as the run's owner) that collects the ranks' stacks of the hung job."""
    return cli.command(*evidence_form(run, decision))


#: A line of ``srun --label`` output: the task number (padded with blanks to the widest), ": ", the line.
#: At most 9 digits: the owner's py-spy command writes what follows the label, and a line that starts
#: with a longer number is kept as a line without a label, never read as an integer too long to print.
_TASK_LINE = re.compile(r"^ *(\d{1,9}): ?(.*)$")


def group_by_task(text):
    """``srun --label`` output (the tasks' lines interleave as they arrive) regrouped: every line
    of task 0, then of task 1 ..., each task's lines in their order, labels removed; lines without
    a label (srun's own) first. One task per node here, so one block per node."""
    tasks: Dict[int, List[str]] = {}
    other: List[str] = []
    for line in text.splitlines():
        match = _TASK_LINE.match(line)
        if match:
            tasks.setdefault(int(match.group(1)), []).append(match.group(2))
        else:
            other.append(line)
    return "\n".join(other + [line for task in sorted(tasks) for line in tasks[task]])


#: The tail of each job log copied into the evidence file when py-spy or srun failed, in bytes.
LOG_TAIL_BYTES = 64 << 10


def _log_tails(log_dir: str, prefix: str) -> str:
    """The tails of the job's logs ``<log_dir>/<prefix>*`` (run as the owner): regular files only,
    never through a symlink, never a FIFO (``fsutil.open_regular``), each its last
    :data:`LOG_TAIL_BYTES` bytes."""
    text = ""
    try:
        names = sorted(n for n in os.listdir(log_dir) if n.startswith(prefix))
    except OSError:
        return text
    for name in names:
        path = os.path.join(log_dir, name)
        try:
            fd, st = open_regular(path)
        except OSError:
            continue
        try:
            os.lseek(fd, max(0, st.st_size - LOG_TAIL_BYTES), os.SEEK_SET)
            tail = os.read(fd, LOG_TAIL_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        finally:
            os.close(fd)
        text += "\n=== tail of %s\n%s" % (path, tail)
    return text


def write_evidence(folder: str, name: str, text: str, log_dir: Optional[str], log_prefix: Optional[str]) -> str:
    """Write the evidence file ``<folder>/<name>`` (run as the run's owner, ``observe.owner_call``):
    ``text``, then, when ``log_dir`` is given, the tails of its logs ``<log_prefix>*``. Returns its path.

    The file is new: created ``O_CREAT | O_EXCL | O_NOFOLLOW`` relative to the folder, which is opened
    without following a symlink in any component of its path (``fsutil.open_dir_nofollow``). A name
    taken already, a symlink or a hard link planted there, is never written through: the next free
    name ``<name>.1`` ... is used. Then ``fchmod`` 0644.

    Raises:
        OSError: the folder cannot be opened (``fsutil.FolderPathError``: a symlink on its path), or ten
            names are taken.
    """
    if log_dir:
        text += _log_tails(log_dir, log_prefix or "")
    dir_fd = open_dir_nofollow(folder)
    try:
        for attempt in range(10):
            candidate = name if attempt == 0 else "%s.%d" % (name, attempt)
            try:
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o644, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno == errno.EEXIST:
                    continue
                raise
            try:
                os.fchmod(fd, 0o644)
                data = memoryview((text + "\n").encode("utf-8", "replace"))
                while data:
                    data = data[os.write(fd, data):]
            finally:
                os.close(fd)
            return os.path.join(folder, candidate)
    finally:
        os.close(dir_fd)
    raise OSError(errno.EEXIST, "ten evidence file names are taken", os.path.join(folder, name))


def collect_evidence(module: Any, cli: Any, me: str, run: Any, decision: Any, command: List[str], now: float) -> Optional[str]:
    """Save the hung job's stacks next to the run's logs; the file's path, or None when it could not
    be written (a warning says why; never raises for a failed collection: the file then says why).

    ``srun`` runs as the owner (``cli.as_user``); the file is written and the logs are read as the
    owner too (``owner_call(run, write_evidence, ...)``): nothing the owner left in their folders
    makes root write or read a file the owner could not. ``command``: :func:`evidence_commands`'
    (said in the file's header)."""
    last = decision["last_job"]
    folder = run.get("log_dir") or run.get("workdir") or run["checkpoint_dir"]
    name = "hang-%s-%s.txt" % (last["job_id_raw"], time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)))
    owner = run["owner"]
    runner = cli if owner == me else cli.as_user(owner)
    lines = ["# clusterops.slurm training_remediation: run %s, job %s hung: %s" % (
        run["name"], last["job_id"], decision["reason"]),
        "# command: %s" % " ".join(runner.prefix + command)]
    try:
        rc, out, err = runner.run(*evidence_form(run, decision), check=False,
                                  what="collect the hung job's stacks")
        lines += ["# rc %s" % rc, group_by_task(out), group_by_task(err)]
    except SlurmCommandError as exc:
        rc = None
        lines += ["# %s" % exc, group_by_task(exc.stdout or ""), group_by_task(exc.stderr or "")]
    text = "\n".join(lines)
    tails = "py-spy failed" in text or rc != 0
    if tails:
        # The faulthandler dumps land in the job's logs: wait for them, then copy their tails.
        time.sleep(3)
    try:
        return owner_call(run, write_evidence, folder, name, text,
                          (run.get("log_dir") or folder) if tails else None,
                          "%s-%s" % (run["name"], last["job_id_raw"]))
    except PrivsepError as exc:
        module.warn("cannot write the hang evidence into %s as %s: %s" % (folder, owner, exc))
        return None

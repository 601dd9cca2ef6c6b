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

import glob
import os
import re
import time

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import expand_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SlurmCommandError

try:
    from typing import Dict, List  # noqa: F401 pylint: disable=unused-import
except ImportError:  # pragma: no cover
    pass

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


def evidence_commands(cli, run, decision):
    """The srun command (as the run's owner) that collects the ranks' stacks of the hung job."""
    last = decision["last_job"]
    nodes = len(expand_hostlist(last["node_list"])) if last.get("node_list") else 1
    return cli.command("srun", ["--overlap", "--jobid=%s" % last["job_id_raw"], "--nodes=%d" % nodes,
                                "--ntasks=%d" % nodes, "--ntasks-per-node=1", "--immediate=30",
                                "--quiet", "--label",
                                "bash", "-c", EVIDENCE_SCRIPT, "clusterops-evidence",
                                str(last["job_id_raw"]), run["py_spy"]])


#: A line of ``srun --label`` output: the task number (padded with blanks to the widest), ": ", the line.
_TASK_LINE = re.compile(r"^ *(\d+): ?(.*)$")


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


def collect_evidence(module, cli, me, run, decision, now):
    """Save the hung job's stacks next to the run's logs; the file's path (never raises for a
    failed collection: the evidence file then says why)."""
    last = decision["last_job"]
    folder = run.get("log_dir") or run.get("workdir") or run["checkpoint_dir"]
    path = os.path.join(folder, "hang-%s-%s.txt" % (last["job_id_raw"], time.strftime(
        "%Y%m%dT%H%M%SZ", time.gmtime(now))))
    owner = run["owner"]
    runner = cli if owner == me else cli.as_user(owner)
    args = decision["evidence_command"][1:]
    lines = ["# clusterops.slurm training_remediation: run %s, job %s hung: %s" % (
        run["name"], last["job_id"], decision["reason"]),
        "# command: %s" % " ".join(runner.prefix + decision["evidence_command"])]
    try:
        rc, out, err = runner.run("srun", args, check=False, what="collect the hung job's stacks")
        lines += ["# rc %s" % rc, group_by_task(out), group_by_task(err)]
    except SlurmCommandError as exc:
        rc = None
        lines += ["# %s" % exc, group_by_task(exc.stdout or ""), group_by_task(exc.stderr or "")]
    text = "\n".join(lines)
    if "py-spy failed" in text or rc != 0:
        # The faulthandler dumps land in the job's logs: wait for them, then copy their tails.
        time.sleep(3)
        for log in sorted(glob.glob(os.path.join(run.get("log_dir") or folder, "%s-%s*" % (
                run["name"], last["job_id_raw"])))):
            try:
                with open(log, "rb") as handle:
                    handle.seek(max(0, os.path.getsize(log) - 64 * 1024))
                    tail = handle.read().decode("utf-8", "replace")
            except (OSError, IOError):
                continue
            text += "\n=== tail of %s\n%s" % (log, tail)
    try:
        with open(path, "w") as handle:
            handle.write(text + "\n")
        os.chmod(path, 0o644)
    except (OSError, IOError) as exc:
        module.warn("cannot write the hang evidence %s: %s" % (path, exc))
        return None
    return path

# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the integration tests and the benchmarks read back from the dev cluster and from the
reference trainer, parsed once for both (imported with dev/cluster on ``sys.path``).

* :func:`rpc_counts` and :func:`agent_queues`: slurmctld's RPC counts and its outgoing message
  queues, from ``sdiag``'s text; :func:`thread_count`: its threads (a ping round of the nodes that
  run no slurmd is one thread each, which sdiag does not show);
* :func:`read_events` and :func:`attempts`: the reference trainer's event log (``--events PATH``,
  roles/torchrun_launcher/files/reference_trainer.py), one JSON object a line;
* :func:`until`: polls for what they wait on.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any, Callable, Dict, List, TypeVar

T = TypeVar("T")

# A line of sdiag's "Remote Procedure Call statistics by message type":
#   "	REQUEST_NODE_INFO                       ( 2007) count:12     ave_time:301 ..."
_RPC_LINE = re.compile(r"\s+(\S+)\s+\(\s*\d+\)\s+count:(\d+)")
# "Agent queue size:     0" (to the slurmd) and "DBD Agent queue size: 0" (to slurmdbd).
_AGENT_QUEUE = re.compile(r"^\s*(?:DBD )?Agent queue size:\s*(\d+)", re.MULTILINE)


def rpc_counts(sdiag_text: str) -> Dict[str, int]:
    """``{message type: count}`` from ``sdiag``'s output: the section "Remote Procedure Call
    statistics by message type", up to "... by user". Empty when sdiag printed no such section."""
    counts = {}
    section = False
    for line in sdiag_text.splitlines():
        if "by message type" in line:
            section = True
        elif section and "by user" in line:
            break
        elif section:
            match = _RPC_LINE.match(line)
            if match:
                counts[match.group(1)] = int(match.group(2))
    return counts


def agent_queues(sdiag_text: str) -> List[int]:
    """The lengths of slurmctld's outgoing message queues from ``sdiag``'s output: the agent queue
    (messages to the slurmd) and the DBD agent queue (to slurmdbd), in sdiag's order; empty when
    sdiag printed neither."""
    return [int(n) for n in _AGENT_QUEUE.findall(sdiag_text)]


def thread_count(pid_file: str) -> int | None:
    """How many threads the process whose pid ``pid_file`` holds runs now (``/proc/PID/task``);
    None when the file or the process is gone, or the pid is of another PID namespace (a
    containerised release's slurmctld writes its pid as seen inside the container)."""
    try:
        with open(pid_file, encoding="ascii") as handle:
            pid = int(handle.read().strip())
        return len(os.listdir("/proc/%d/task" % pid))
    except (OSError, ValueError):
        return None


def read_events(run_dir: str, name: str = "events.jsonl") -> List[Dict[str, Any]]:
    """The events the reference trainer wrote to ``run_dir``/``name``, in order; ``[]`` before the
    file exists. Each is a dict with at least ``event`` (``start``, ``step``, ``save``, ``signal``,
    ``finished``) and ``time`` (Unix seconds)."""
    path = os.path.join(run_dir, name)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def attempts(events: List[Dict[str, Any]]) -> List[List[Dict[str, Any]]]:
    """``events`` split at each ``start`` event: one list per job that ran the trainer (an
    attempt), in order; events before the first ``start`` are left out."""
    out: List[List[Dict[str, Any]]] = []
    for event in events:
        if event["event"] == "start":
            out.append([])
        if out:
            out[-1].append(event)
    return out


def until(predicate: Callable[[], T], what: str, timeout: float = 180, interval: float = 0.5) -> T:
    """``predicate()``'s first true value, asked every ``interval`` seconds.

    Raises:
        TimeoutError: none within ``timeout`` seconds; the message names ``what``.
    """
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("timed out after %ss waiting for %s" % (timeout, what))

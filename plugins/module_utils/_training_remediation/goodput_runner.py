# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The task of the module ``training_goodput_info``: read the registered runs, their jobs with one
sacct and one squeue call, each run's folders as its owner, and report :func:`.goodput.goodput`;
with ``failed_nodes``, also one ``sacctmgr show event`` of the nodes of the jobs that ended by a
node failure (none when no job did), which names the failed node of each.

Private to the collection (the leading underscore of the package): no API promise outside it.

It reads, never writes: no lock is taken (a remediation running meanwhile may add a
resubmission a moment later; the next read has it).
"""

from __future__ import annotations

import json
import os
import time

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import CheckpointError, STRUCTURE, inspect
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.bounds import record_value_problem
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.fsutil import read_bounded
from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import read_jobs
from ansible_collections.clusterops.slurm.plugins.module_utils._node_events import read_node_events
from ansible_collections.clusterops.slurm.plugins.module_utils._privsep import PrivsepError
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.goodput import (
    CAUSES,
    NODE_CAUSES,
    STEP_EVENTS,
    goodput,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.goodput_timeline import timeline
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.policy import run_jobs
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry import (
    RegistryError,
    empty_state,
    read_state,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry_options import registered_runs
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.observe import (
    folder_progress,
    owner_call,
    read_folders,
)

try:
    from typing import Any, Dict, List, Optional, Set, Tuple  # noqa: F401 pylint: disable=unused-import
except ImportError:  # pragma: no cover
    pass

#: The most the trainer's event log may hold, in bytes; a larger one is not read (its figures are unknown).
EVENT_LOG_MAX_BYTES = 64 << 20


def checkpoint_times(run: Dict[str, Any]) -> Optional[List[Dict[str, Any]]]:
    """``[{"step", "time"}]`` of every checkpoint of the run folder that is not invalid (checked
    at ``structure``, the checkpoint library's ``inspect``), ``time`` its entry's mtime (``lstat``:
    the commit rename keeps the folder's mtime of its last entry written, the manifest or the
    framework's marker); None when the folder cannot be read."""
    try:
        report = inspect(run["checkpoint_dir"], STRUCTURE, list_all=True, name_template=run.get("checkpoint_name_template"))
    except (CheckpointError, ValueError):
        return None
    out = []
    for ckpt in report.checkpoints:
        if ckpt.valid is False:
            continue
        try:
            out.append({"step": ckpt.step, "time": os.lstat(ckpt.path).st_mtime})
        except OSError:
            continue
    return out


def read_events(run: Dict[str, Any], event_log: Optional[str]) -> Optional[List[List[Any]]]:
    """The step records of the trainer's event log (JSONL, one object a line: ``event``, ``step``,
    ``time``), as ``[event, step, time]`` lists (small enough to come back from the owner's
    child); None when the run has none (``event_log`` unset, or no such file). ``event_log``: a
    path, relative to the run's ``checkpoint_dir`` unless absolute. Never through a symlink, at
    most :data:`EVENT_LOG_MAX_BYTES`; a line that is not a JSON object is skipped (a line cut
    short by a crash).

    Raises:
        OSError: the file exists but cannot be read, or is too large.
        ValueError: a step record's step or time is out of range (``_checkpoint.bounds.record_value_problem``):
            the user's numbers are not read in part, the run's figures from the log are unknown.
    """
    if not event_log:
        return None
    path = event_log if os.path.isabs(event_log) else os.path.join(run["checkpoint_dir"], event_log)
    if not os.path.lexists(path):
        return None
    found = []
    for number, line in enumerate(read_bounded(path, EVENT_LOG_MAX_BYTES).decode("utf-8", "replace").splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") in STEP_EVENTS:
            problem = record_value_problem(record.get("step"), record.get("time"))
            if problem:
                raise ValueError("%s line %d: %s" % (path, number, problem))
            found.append([record["event"], record.get("step"), record.get("time")])
    return found


def read_goodput_folders(run: Dict[str, Any], job_id_raw: Optional[Any], event_log: Optional[str]) -> Dict[str, Any]:
    """What goodput needs from the run's folders, read as its owner (through
    ``observe.owner_call``): ``observe.read_folders`` (``ckpt``), ``progress``
    (``observe.folder_progress``; None with ``progress_error`` when it cannot be used: a folder that
    resolves elsewhere, a heartbeat step out of range), ``checkpoints`` (:func:`checkpoint_times`) and
    ``events`` (:func:`read_events`; None with ``events_error``)."""
    out = read_folders(run, job_id_raw, progress=False)
    try:
        out["progress"] = folder_progress(run, job_id_raw)
    except ValueError as exc:
        out["progress"], out["progress_error"] = None, str(exc)
    out["checkpoints"] = checkpoint_times(run) if out["ckpt"]["status"] not in ("missing", "error") else None
    try:
        out["events"] = read_events(run, event_log)
    except ValueError as exc:
        out["events"], out["events_error"] = None, str(exc)
    return out


def _folders(run: Dict[str, Any], job_id_raw: Optional[Any], event_log: Optional[str]) -> Dict[str, Any]:
    """:func:`read_goodput_folders` as the owner, or ``{"error": reason}`` (as ``observe.folders_or_failure``)."""
    try:
        return owner_call(run, read_goodput_folders, run, job_id_raw, event_log)
    except PrivsepError as exc:
        return {"error": "cannot read the run's folders as %s: %s" % (run["owner"], exc)}


def node_failures(runs: List[Dict[str, Any]], jobs: List[Dict[str, Any]]) -> Tuple[Optional[float], List[str]]:
    """``(earliest start, node names)`` of the runs' jobs (each run of a job, its ``history``
    too) that ended by a node failure (sacct ``State`` of :data:`.goodput.NODE_CAUSES`: NODE_FAIL,
    BOOT_FAIL): what to read Slurm's node events of. ``(None, [])`` when none did."""
    starts: List[float] = []
    nodes: Set[str] = set()
    for run in runs:
        for job in run_jobs(run, jobs):
            for entry in list(job.get("history") or []) + [job]:
                if CAUSES.get(entry.get("state") or "") in NODE_CAUSES and entry.get("start_time") is not None:
                    starts.append(entry["start_time"])
                    nodes.update(entry.get("nodes") or [])
    return (min(starts) if starts else None), sorted(nodes)


def run_goodput(run: Dict[str, Any], jobs: List[Dict[str, Any]], accounting: bool, event_log: Optional[str],
                now: float, node_events: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
    """One run's entry: ``{"name", "owner", "finished"}``, :func:`.goodput.goodput`'s keys and
    ``timeline`` (:func:`.goodput_timeline.timeline`: the progress curve of the event log, the
    checkpoints, remediation's actions of ``state.json``, each bounded); a folder or
    ``state.json`` that cannot be read leaves its figures unknown (said in ``unknown``).
    ``node_events``: :func:`node_failures`' nodes' events, None when not read."""
    mine = run_jobs(run, jobs)
    folders = _folders(run, mine[-1]["job_id_raw"] if mine else None, event_log)
    problems = []
    if "error" in folders:
        problems.append({"figure": "folders", "why": folders["error"]})
        folders = {"ckpt": {}, "progress": None, "checkpoints": None, "events": None}
    try:
        state = read_state(run["folder"])
    except RegistryError as exc:
        problems.append({"figure": "state", "why": str(exc)})
        state = empty_state()
    if folders.get("progress_error"):
        problems.append({"figure": "progress", "why": "the run's progress is not used: %s" % folders["progress_error"]})
    if folders.get("events_error"):
        problems.append({"figure": "events", "why": "the trainer's event log is not used: %s" % folders["events_error"]})
    events = None
    if folders["events"] is not None:
        events = [{"event": e, "step": s, "time": t} for e, s, t in folders["events"]]
    result = goodput(mine, state, now, checkpoints=folders["checkpoints"], progress=folders["progress"],
                     events=events, accounting=accounting, finished=bool(folders["ckpt"].get("finished")),
                     node_events=node_events)
    result["unknown"] = problems + result["unknown"]
    result["timeline"] = timeline(events, folders["checkpoints"], state)
    return dict({"name": run["name"], "owner": run["owner"], "finished": bool(folders["ckpt"].get("finished"))},
                **result)


def goodput_info(module: Any, cli: Any) -> Dict[str, Any]:
    """The task of ``training_goodput_info``, for ``_slurm_cli.run_module``: the registered runs
    (``registry_options.registered_runs``), their jobs since ``history`` read once for all, each run's goodput.

    Raises:
        TaskFailure: a bad ``history``.
        RegistryError: the registry folder cannot be listed.
    """
    params = module.params
    runs, errors, start = registered_runs(params)
    result: Dict[str, Any] = {"changed": False, "runs": [], "errors": errors, "accounting": None}
    if not runs:
        return result
    names = sorted(set(r["name"] for r in runs))
    users = sorted(set(r["owner"] for r in runs))
    jobs, accounting = read_jobs(cli, names=names, users=users, start=start)
    result["accounting"] = accounting
    node_events = None
    if params.get("failed_nodes") and accounting:
        since, nodes = node_failures(runs, jobs)
        if since is not None and nodes:
            node_events = read_node_events(cli, since, nodes)
    now = time.time()
    for run in runs:
        try:
            entry = run_goodput(run, jobs, accounting, params["event_log"], now, node_events)
        # One run's fault stays that run's (as in remediation): its figures are unknown, with the reason.
        except Exception as exc:  # pylint: disable=broad-except
            entry = unknown_run(run, accounting, now, "%s: %s" % (type(exc).__name__, exc))
        result["runs"].append(entry)
    return result


def unknown_run(run: Dict[str, Any], accounting: Optional[bool], now: float, why: str) -> Dict[str, Any]:
    """The entry of a run whose goodput could not be computed (``why``): every figure unknown, the
    reason first in ``unknown`` (``{"figure": "run", "why": ...}``), the same keys as any run's."""
    state = empty_state()
    result = goodput([], state, now, accounting=bool(accounting))
    result["unknown"] = [{"figure": "run", "why": "cannot compute the run's goodput: %s" % why}] + result["unknown"]
    result["timeline"] = timeline(None, None, state)
    return dict({"name": run["name"], "owner": run["owner"], "finished": False}, **result)

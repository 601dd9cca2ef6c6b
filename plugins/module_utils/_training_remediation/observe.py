# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Observe: what the training runs are, read before anything is decided: their jobs (one ``sacct``
and one ``squeue`` for every run, ``_jobs.read_jobs``), each run's folders read as its owner
(:func:`owner_call`: the checkpoint status of its run folder and replicas, its progress, heartbeat
and logs) and its ``state.json``; one :class:`.records.Observation` per run.

Private to the collection (the leading underscore of the package): no API promise outside it.

Everything here reads; nothing writes or decides. :mod:`.policy` decides from what it returns,
:mod:`.act` acts, :mod:`.goodput_runner` and :mod:`.evidence` read the folders through it too.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, cast

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import CheckpointError, best_copy
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.bounds import record_value_problem, time_problem
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.fsutil import load_json_bounded
from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import JobParseError, read_jobs, read_queue
from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import read_nodes
from ansible_collections.clusterops.slurm.plugins.module_utils._privsep import PrivsepError, call_as
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SlurmCommandError
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.records import (
    CheckpointStatus,
    Observation,
    Progress,
    Run,
    run_jobs,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry import RegistryError, read_state


# ---------------------------------------------------------------------------------------------
# What a run's folders say (file system, as the run's owner)
# ---------------------------------------------------------------------------------------------

def real_path_problem(path: Optional[str], what: str) -> Optional[str]:
    """Why ``path`` (absolute, from the registry) is refused as a run folder, or None: its real path
    (every symlink resolved) is not the path itself. A run folder or a folder above it replaced by a
    symlink would make remediation read (and the hang evidence land) somewhere the registry does
    not name."""
    if not path:
        return None
    real = os.path.realpath(path)
    if real != os.path.normpath(path):
        return "%s %s resolves to %s (a symlink on the way): refused; register the real path" % (what, path, real)
    return None


def checkpoint_status(checkpoint_dir: str, validate: str, name_template: Optional[str] = None,
                      replicas: Sequence[str] = ()) -> CheckpointStatus:
    """What the run folder says (the checkpoint library's ``inspect``), and with ``replicas`` its
    replica folders too (``best_copy``): finished, and the newest valid checkpoint at level
    ``validate`` (``name_template``: the run's Lightning filename template).

    Returns:
        ``{"finished": bool, "status": "valid"|"none"|"invalid"|"missing"|"error", "step": int|None,
        "checkpoint": str|None, "copy": "primary"|<replica folder>|None, "detail": str, "warnings": [str]}``:
        ``valid`` a checkpoint to resume from (in the run folder or a replica, ``copy`` says which);
        ``none`` nothing that looks like training state (start from scratch); ``invalid`` checkpoints
        exist but none is valid, or one cannot be ordered, or entries look like training state that no
        known layout explains (a human decides); ``missing`` the folder does not exist yet and no
        replica holds a copy; ``error`` it cannot be read.
    """
    result: CheckpointStatus = {"finished": False, "status": "none", "step": None, "checkpoint": None, "copy": None,
                                "detail": "", "warnings": []}
    problem = real_path_problem(checkpoint_dir, "checkpoint_dir")
    if problem:
        result.update({"status": "error", "detail": problem})
        return result
    if not os.path.exists(checkpoint_dir) and not replicas:
        result.update({"status": "missing", "detail": "%s does not exist yet" % checkpoint_dir})
        return result
    try:
        choice = best_copy(checkpoint_dir, replicas, validate, name_template)
    except (CheckpointError, ValueError) as exc:
        result.update({"status": "error", "detail": str(exc)})
        return result
    report = choice.report
    result["warnings"] = list(choice.warnings)
    result["finished"] = report is not None and report.finished is not None
    best = choice.checkpoint
    if best is not None:
        result.update({"status": "valid", "step": best.step, "checkpoint": best.path, "copy": choice.copy,
                       "detail": "newest valid checkpoint %s (step %d)%s" % (
                           best.name, best.step, "" if choice.copy == "primary" else ": " + choice.why)})
    elif report is None and choice.empty:
        result.update({"status": "missing", "detail": "%s does not exist yet and no replica holds a verified copy"
                       % checkpoint_dir})
    elif report is None:
        result.update({"status": "invalid", "detail": "%s does not exist and a replica cannot be read (%s): not starting "
                       "from scratch; a human decides" % (checkpoint_dir, "; ".join(choice.warnings))})
    else:
        _why_none(result, report, checkpoint_dir, validate)
    return result


def _why_none(result: CheckpointStatus, report: Any, checkpoint_dir: str, validate: str) -> None:
    """``result``'s status and detail when no copy holds a valid checkpoint: the run folder's ``report`` says why."""
    if [u for u in report.unordered if u["valid"] is not False]:
        result.update({"status": "invalid", "detail": "checkpoints exist in %s but they cannot be ordered (%s): "
                       "none is chosen" % (checkpoint_dir, "; ".join(
                           "%s: %s" % (u["name"], u["reason"]) for u in report.unordered if u["valid"] is not False))})
    elif report.had_candidates:
        result.update({"status": "invalid", "detail": "checkpoints exist in %s but none is valid at level %s"
                       % (checkpoint_dir, validate)})
    elif report.unexplained:
        result.update({"status": "invalid", "detail": "%s holds training state that no known checkpoint layout "
                       "explains (%s: %s): not starting from scratch; a human decides (or the run declares "
                       "its checkpoint_name_template)" % (checkpoint_dir, report.unexplained[0]["name"],
                                                          report.unexplained[0]["reason"])})
    else:
        result["detail"] = "no checkpoint in %s" % checkpoint_dir


def _mtime(path: str) -> Optional[float]:
    """``path``'s mtime, None when it cannot be stat'ed.

    Raises:
        ValueError: the mtime is out of range (``_checkpoint.bounds.time_problem``: a user sets it with
            ``touch -d``), naming the file.
    """
    try:
        when = os.stat(path).st_mtime
    except OSError:
        return None
    problem = time_problem(when, "mtime")
    if problem:
        raise ValueError("%s: %s" % (path, problem))
    return when


def read_heartbeat(path: str) -> Optional[int]:
    """The ``step`` of the heartbeat file (JSON ``{"step", "time"}``, at most :data:`HEARTBEAT_MAX_BYTES`,
    the owner's: followed as the owner), None when it says none: it is missing, unreadable, not JSON, not
    an object, or has no ``step``.

    Raises:
        ValueError: its ``step`` or ``time`` is out of range (``_checkpoint.bounds.record_value_problem``:
            not an integer of 0 to 2**53, not a number of seconds of 0 to 2100-01-01), naming the file
            and the field: the user's number is never used in part.
    """
    try:
        beat = load_json_bounded(path, HEARTBEAT_MAX_BYTES, follow=True)
    except (OSError, IOError, ValueError):
        return None
    if not isinstance(beat, dict):
        return None
    problem = record_value_problem(beat.get("step"), beat.get("time"))
    if problem:
        raise ValueError("heartbeat %s: %s" % (path, problem))
    return beat.get("step")


def read_progress(run: Mapping[str, Any], job_id_raw: Optional[Any] = None) -> Progress:
    """The run's last sign of progress, by its ``progress`` source (file system only).

    Returns:
        ``{"source", "path", "time": float|None (Unix seconds; None: nothing yet), "step":
        int|None}``. ``heartbeat``: the mtime of ``heartbeat_file`` and the ``step`` it holds
        (:func:`read_heartbeat`); ``checkpoint``: the newest mtime of ``checkpoint_dir`` and its
        entries (a staging folder being written counts); ``log``: the newest mtime of ``<log_dir>/<name>-<job
        id>*`` (the launcher's batch log and its per-node logs).

    Raises:
        ValueError: a number the user wrote is out of range: the heartbeat's ``step`` or ``time``, an
            mtime before 1970 or after 2100 (the message names the file and the field).
    """
    source = run.get("progress") or "log"
    out: Progress = {"source": source, "path": None, "time": None, "step": None}
    if source == "heartbeat":
        path = run.get("heartbeat_file")
        out["path"] = path
        if path:
            out["time"] = _mtime(path)
            out["step"] = read_heartbeat(path)
        return out
    folder: Optional[str] = None
    if source == "checkpoint":
        folder = run["checkpoint_dir"]
        paths = [folder]
    else:
        folder = run.get("log_dir")
        paths = []
        prefix = "%s-%s" % (run["name"], job_id_raw)
    out["path"] = folder
    try:
        names = os.listdir(folder) if folder else []
    except OSError:
        names = []
    for name in names:
        if source == "checkpoint" or name == prefix + ".out" or name.startswith(prefix + "-"):
            paths.append(os.path.join(folder or "", name))
    times = [t for t in (_mtime(p) for p in paths) if t is not None]
    out["time"] = max(times) if times else None
    return out


#: The most a heartbeat file may hold, in bytes (``{"step", "time"}``); a larger one gives no step.
HEARTBEAT_MAX_BYTES = 64 << 10


def folder_progress(run: Mapping[str, Any], job_id_raw: Optional[Any]) -> Progress:
    """:func:`read_progress`, once the log folder and the heartbeat's folder are known to be where the
    registry says (:func:`real_path_problem`).

    Raises:
        ValueError: one of them resolves elsewhere, or :func:`read_progress`'s.
    """
    beat = run.get("heartbeat_file")
    problem = real_path_problem(run.get("log_dir"), "log_dir") or real_path_problem(
        os.path.dirname(beat) if beat else None, "the folder of heartbeat_file")
    if problem:
        raise ValueError(problem)
    return read_progress(run, job_id_raw)


def read_folders(run: Mapping[str, Any], job_id_raw: Optional[Any], progress: bool = True) -> Dict[str, Any]:
    """What the run's own folders say, read as the run's owner (:func:`owner_call`):
    ``{"ckpt": checkpoint_status(...), "progress": folder_progress(...) | None}``.

    Raises:
        ValueError: :func:`folder_progress`'s (a folder that resolves elsewhere, a number out of range):
            the run gets no decision but a human's.
    """
    out: Dict[str, Any] = {"ckpt": checkpoint_status(run["checkpoint_dir"], run["checkpoint_validate"],
                                                     run.get("checkpoint_name_template"),
                                                     run.get("checkpoint_replicas") or ()), "progress": None}
    if progress:
        out["progress"] = folder_progress(run, job_id_raw)
    return out


def owner_call(run: Mapping[str, Any], func: Any, *args: Any) -> Any:
    """``func(*args)`` as the run's owner (``_privsep.call_as``: a forked child with the owner's
    uid, gid and groups, killed after ``_privsep.DEFAULT_TIMEOUT`` s): every read and write in
    the run's folders (checkpoints, heartbeat, logs, hang evidence) goes through here, so a link,
    FIFO or swapped folder the owner left there gets no more than the owner's own rights.

    Raises:
        PrivsepError: the call failed, raised or timed out (the message says which).
    """
    return call_as(run["owner"], func, *args)


def folders_or_failure(run: Mapping[str, Any], job_id_raw: Optional[Any], progress: bool = True) -> Dict[str, Any]:
    """:func:`read_folders` as the owner; on failure ``{"error": reason}`` instead (never raises)."""
    try:
        return owner_call(run, read_folders, run, job_id_raw, progress)
    except PrivsepError as exc:
        return {"error": "cannot read the run's folders as %s: %s" % (run["owner"], exc)}


# ---------------------------------------------------------------------------------------------
# Every run, read once (Slurm, then each run's folders and state)
# ---------------------------------------------------------------------------------------------

def observe_runs(cli: Any, runs: List[Dict[str, Any]],
                 start: Optional[int]) -> Tuple[List[Dict[str, Any]], List[Observation]]:
    """The runs' jobs read once (``_jobs.read_jobs``: their names and owners, since ``start``), then
    each run's folders and state (:func:`observe_run`), in the runs' order. ``runs``: the registry's
    (``registry_options.registered_runs``), each a :class:`.records.Run` from here on.

    Raises:
        SlurmCommandError, SlurmAnswerError: Slurm gave no complete answer (the task fails).
    """
    names = sorted(set(r["name"] for r in runs))
    users = sorted(set(r["owner"] for r in runs))
    jobs, _accounting = read_jobs(cli, names=names, users=users, start=start)
    return jobs, [observe_run(cast(Run, run), jobs) for run in runs]


def observe_run(run: Run, jobs: List[Dict[str, Any]]) -> Observation:
    """One run's folders, read as its owner (progress by its newest job), and its ``state.json``;
    never raises: what could not be read, or raised, is the observation's ``problem`` (that run
    gets no decision but a human's)."""
    try:
        mine = run_jobs(run, jobs)
        folders = folders_or_failure(run, mine[-1]["job_id_raw"] if mine else None)
        if "error" in folders:
            return Observation(run, problem=folders["error"])
        try:
            state = read_state(run["folder"])
        except RegistryError as exc:
            return Observation(run, problem=str(exc))
        return Observation(run, folders["ckpt"], folders["progress"], state, now=time.time())
    # One run's fault is reported for that run.
    except Exception as exc:  # pylint: disable=broad-except
        return Observation(run, problem=cannot_decide(exc))


def cannot_decide(exc: BaseException) -> str:
    """The reason of a run whose reading or deciding raised ``exc``."""
    return "cannot decide: %s: %s" % (type(exc).__name__, exc)


def observe_after_cancel(cli: Any, run: Run, start: Optional[int],
                         state: Dict[str, Any]) -> Tuple[List[Dict[str, Any]], Observation]:
    """The run again once its hung job was cancelled and ended: its jobs (one ``read_jobs`` of its
    name and owner) and its run folder (no progress: nothing runs); ``state`` is its state after
    the cancel (already written). ``problem`` set when the folder could not be read."""
    jobs, dummy = read_jobs(cli, names=[run["name"]], users=[run["owner"]], start=start)
    folders = folders_or_failure(run, None, progress=False)
    if "error" in folders:
        return jobs, Observation(run, problem=folders["error"])
    return jobs, Observation(run, folders["ckpt"], None, state, now=time.time())


def job_ended(cli: Any, job_id_raw: Any) -> bool:
    """True when squeue lists no active record of job ``job_id_raw`` (none at all once it left
    the controller); False while it is active (COMPLETING included) or squeue gives no complete
    answer."""
    try:
        return not any(j["active"] for j in read_queue(cli, job_ids=[str(job_id_raw)]))
    except (SlurmCommandError, JobParseError):
        return False


def observe_nodes(cli: Any) -> List[Dict[str, Any]]:
    """Every node, read once (``_nodes.read_nodes``): what the suspect nodes' plan needs."""
    nodes, dummy = read_nodes(cli)
    return nodes

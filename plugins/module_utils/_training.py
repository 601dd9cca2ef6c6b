# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training-run remediation: the run registry, its bookkeeping and the decision for each run.

Private to the collection (the leading underscore): no API promise outside it.

The run registry is a folder with one sub-folder per training run, written by the role
``clusterops.slurm.torchrun_launcher``::

    <registry>/<run>/run.json        the run spec (below), written by the role
    <registry>/<run>/launcher.sbatch the sbatch launcher, written by the role
    <registry>/<run>/state.json      remediation's bookkeeping, written by remediation only
    <registry>/.remediate.lock       held (flock) while a remediation reads and submits

``run.json``: ``{"format": "clusterops.training_run", "format_version": 1, "name", "owner",
"launcher", "checkpoint_dir", "workdir", "nodes", "requeue", "checkpoint_validate", "checkpoint_name_template",
"max_resubmissions", "no_progress_limit", "enabled", "log_dir", "hang_timeout", "progress", "heartbeat_file",
"py_spy", "suspect_nodes", "suspect_after"}``. The hang watchdog's fields: ``hang_timeout`` seconds without progress after which a
RUNNING job is hung (0: no watchdog); ``progress`` what progress is: ``heartbeat`` (the mtime of
``heartbeat_file``, which the trainer replaces every step, JSON ``{"step", "time"}``),
``checkpoint`` (the newest mtime in ``checkpoint_dir``, for a trainer that writes no heartbeat)
or ``log`` (the newest mtime of the job's log files ``<log_dir>/<name>-<job id>*``); ``py_spy``
the py-spy command on the nodes, for the hung ranks' stacks. Suspect nodes (:func:`run_suspects`):
``suspect_nodes`` false opts the run out; ``suspect_after`` the run's ``k`` (0: the remediation's,
:data:`SUSPECT_AFTER` unless the task says otherwise).

``state.json``: ``{"format": "clusterops.training_state", "format_version": 1,
"resubmissions": [{"time", "job_id", "after_job", "after_state", "step"}, ...],
"stopped": null | {"time", "after_job", "reason"},
"hang_cancels": [{"time", "job_id", "step", "idle", "evidence"}, ...]}``; ``time`` in Unix seconds, ``step`` the
newest valid checkpoint step at the resubmission (None: none, the run started from scratch);
a resubmission after a hang also has ``hang_step``. ``hang_cancels`` lists the jobs remediation
cancelled because they hung (written *before* ``scancel``): such a job's CANCELLED is
remediation's, not a user's, and it is resubmitted; a job in this list is never cancelled again.

Everything here but :func:`read_registry`, :func:`read_state`, :func:`write_state`,
:func:`checkpoint_status` and :class:`RegistryLock` is pure: jobs, checkpoint status and state
in, a decision out.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import re
import tempfile
import time

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import (
    LEVELS, CheckpointError, compile_name_template, inspect)
from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._node_actions import plan_node_changes
from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import node_state

try:
    from typing import Any, Dict, List, Optional, Tuple  # noqa: F401 pylint: disable=unused-import
except ImportError:  # pragma: no cover
    pass

RUN_FILE = "run.json"
STATE_FILE = "state.json"
LOCK_FILE = ".remediate.lock"
RUN_FORMAT = "clusterops.training_run"
STATE_FORMAT = "clusterops.training_state"
FORMAT_VERSION = 1

RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

#: Last-job states after which the run is resubmitted (within its budget).
RESUBMIT_STATES = ("NODE_FAIL", "FAILED", "TIMEOUT", "PREEMPTED", "BOOT_FAIL")
#: Last-job states reported for a human, never resubmitted; the value says why.
HUMAN_STATES = {
    "OUT_OF_MEMORY": "ran out of memory; the same job would fail again",
    "DEADLINE": "missed its deadline (--deadline)",
    "COMPLETED": "ended COMPLETED but the run has no FINISHED marker: the program stopped early "
                 "without saying why",
}

#: Actions of a decision.
NONE = "none"
RESUBMIT = "resubmit"
STOP = "stop"
#: The job is hung: collect evidence, cancel it (then resubmit it, decided anew).
CANCEL_HUNG = "cancel_hung"

#: Job states that count as "failed on its nodes" for suspect nodes (:func:`run_suspects`): the
#: program or a node failed. TIMEOUT, CANCELLED, PREEMPTED, OUT_OF_MEMORY... say nothing about a node.
SUSPECT_STATES = ("FAILED", "NODE_FAIL")
#: ``k``: when the last ``k`` failed jobs of a run share a node, the node is suspect. The one home
#: of this default: training_restart's ``suspect_after`` and the role remediate_training's
#: defaults and argument spec repeat it (a unit test keeps them equal).
SUSPECT_AFTER = 2
#: The drain reason of a suspect node; the reason class ``clusterops_hold`` of the node healing
#: (``_remediation.DEFAULT_REASON_CLASSES``) maps it to ``human``: no healing rule resumes it.
SUSPECT_REASON_PREFIX = "clusterops: suspect: "

#: What a run's progress is, for the hang watchdog (``run.json`` ``progress``).
PROGRESS_SOURCES = ("heartbeat", "checkpoint", "log")

_RUN_FIELDS = {
    "name": str, "owner": str, "launcher": str, "checkpoint_dir": str,
}
_RUN_DEFAULTS = {
    "workdir": None, "nodes": None, "requeue": False, "checkpoint_validate": "sizes", "checkpoint_name_template": None,
    "max_resubmissions": 5, "no_progress_limit": 2, "enabled": True,
    "log_dir": None, "hang_timeout": 0, "progress": "log", "heartbeat_file": None, "py_spy": "py-spy",
    "suspect_nodes": True, "suspect_after": 0,
}


class RegistryError(Exception):
    """A registry entry or state file that cannot be used."""


# ---------------------------------------------------------------------------------------------
# Registry and bookkeeping (file system)
# ---------------------------------------------------------------------------------------------

def _validate_run(spec, folder):
    # type: (Any, str) -> Dict[str, Any]
    if not isinstance(spec, dict):
        raise RegistryError("%s: not a JSON object" % folder)
    if spec.get("format") != RUN_FORMAT:
        raise RegistryError("%s: format is %r, expected %r" % (folder, spec.get("format"), RUN_FORMAT))
    if not isinstance(spec.get("format_version"), int) or spec["format_version"] > FORMAT_VERSION:
        raise RegistryError("%s: format_version %r is not supported (this reader knows %d)"
                            % (folder, spec.get("format_version"), FORMAT_VERSION))
    run = dict(_RUN_DEFAULTS)
    run.update(spec)
    for field, kind in _RUN_FIELDS.items():
        if not isinstance(run.get(field), kind) or not run[field]:
            raise RegistryError("%s: %s is missing or not a %s" % (folder, field, kind.__name__))
    if not RUN_NAME.match(run["name"]):
        raise RegistryError("%s: run name %r has characters other than letters, digits, . _ -"
                            % (folder, run["name"]))
    if run["name"] != os.path.basename(folder):
        raise RegistryError("%s: run name %r differs from its folder's name" % (folder, run["name"]))
    for field in ("launcher", "checkpoint_dir"):
        if not os.path.isabs(run[field]):
            raise RegistryError("%s: %s %r is not an absolute path" % (folder, field, run[field]))
    for field in ("max_resubmissions", "no_progress_limit", "hang_timeout", "suspect_after"):
        if not isinstance(run[field], int) or isinstance(run[field], bool) or run[field] < 0:
            raise RegistryError("%s: %s must be an integer, 0 or more" % (folder, field))
    for field in ("enabled", "suspect_nodes"):
        if not isinstance(run[field], bool):
            raise RegistryError("%s: %s must be true or false" % (folder, field))
    if run["progress"] not in PROGRESS_SOURCES:
        raise RegistryError("%s: progress %r is not one of %s" % (folder, run["progress"], ", ".join(PROGRESS_SOURCES)))
    for field in ("log_dir", "heartbeat_file"):
        if run[field] == "":
            run[field] = None  # the role writes "" for none
        if run[field] is not None and (not isinstance(run[field], str) or not os.path.isabs(run[field])):
            raise RegistryError("%s: %s %r is not an absolute path" % (folder, field, run[field]))
    if run["progress"] == "heartbeat" and not run["heartbeat_file"]:
        raise RegistryError("%s: progress is heartbeat but heartbeat_file is not set" % folder)
    if run["progress"] == "log" and run["hang_timeout"] and not run["log_dir"]:
        raise RegistryError("%s: progress is log but log_dir is not set" % folder)
    if not isinstance(run["py_spy"], str) or not run["py_spy"]:
        raise RegistryError("%s: py_spy must be a command name or path" % folder)
    if run["checkpoint_validate"] not in LEVELS:
        raise RegistryError("%s: checkpoint_validate %r is not a validation level (%s)"
                            % (folder, run["checkpoint_validate"], ", ".join(LEVELS)))
    template = run["checkpoint_name_template"]
    if template == "":
        run["checkpoint_name_template"] = template = None  # the role writes "" for none
    if template is not None:
        try:
            if not isinstance(template, str):
                raise ValueError("not a string")
            compile_name_template(template)
        except ValueError as exc:
            raise RegistryError("%s: checkpoint_name_template: %s" % (folder, exc))
    return run


def read_registry(path, names=None):
    # type: (str, Optional[List[str]]) -> Tuple[List[Dict[str, Any]], List[Dict[str, str]]]
    """Every run of the registry folder ``path``: ``(runs, errors)``, runs sorted by name.

    A run whose ``run.json`` is unreadable or wrong is not returned; it is an error entry
    ``{"name", "error"}`` so that one bad entry never hides the other runs. ``names`` keeps only
    these runs (a name not in the registry is an error entry). A missing registry folder is no
    run at all (nothing registered yet).

    Raises:
        RegistryError: ``path`` exists but is not a readable folder.
    """
    runs = []  # type: List[Dict[str, Any]]
    errors = []  # type: List[Dict[str, str]]
    if not os.path.exists(path):
        entries = []  # type: List[str]
    else:
        try:
            entries = sorted(os.listdir(path))
        except OSError as exc:
            raise RegistryError("cannot list the run registry %s: %s" % (path, exc.strerror))
    wanted = set(names) if names else None
    for entry in entries:
        folder = os.path.join(path, entry)
        if entry.startswith(".") or not os.path.isdir(folder) or os.path.islink(folder):
            continue
        if wanted is not None and entry not in wanted:
            continue
        spec_path = os.path.join(folder, RUN_FILE)
        try:
            with open(spec_path, "rb") as handle:
                spec = json.loads(handle.read(1 << 20).decode("utf-8"))
            runs.append(_validate_run(spec, folder))
        except (OSError, IOError) as exc:
            errors.append({"name": entry, "error": "%s: %s" % (spec_path, exc.strerror or exc)})
        except ValueError as exc:
            errors.append({"name": entry, "error": "%s is not valid JSON: %s" % (spec_path, exc)})
        except RegistryError as exc:
            errors.append({"name": entry, "error": str(exc)})
    if wanted is not None:
        found = set(r["name"] for r in runs) | set(e["name"] for e in errors)
        for name in sorted(wanted - found):
            errors.append({"name": name, "error": "no run %s in the registry %s" % (name, path)})
    return runs, errors


def empty_state():
    # type: () -> Dict[str, Any]
    return {"format": STATE_FORMAT, "format_version": FORMAT_VERSION, "resubmissions": [], "stopped": None,
            "hang_cancels": []}


def read_state(run_folder):
    # type: (str) -> Dict[str, Any]
    """Remediation's bookkeeping of one run (an empty one when there is no ``state.json``).

    Raises:
        RegistryError: the file exists but cannot be read or is not ours. Never guessed: a lost
        count would let a run be resubmitted past its budget.
    """
    path = os.path.join(run_folder, STATE_FILE)
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read(16 << 20).decode("utf-8"))
    except (OSError, IOError) as exc:
        if getattr(exc, "errno", None) == errno.ENOENT:
            return empty_state()
        raise RegistryError("cannot read %s: %s" % (path, exc.strerror or exc))
    except ValueError as exc:
        raise RegistryError("%s is not valid JSON (%s); fix or remove it to reset the run's budget"
                            % (path, exc))
    if not isinstance(data, dict) or data.get("format") != STATE_FORMAT \
            or not isinstance(data.get("resubmissions"), list):
        raise RegistryError("%s is not a clusterops.training_state file" % path)
    state = empty_state()
    state.update(data)
    return state


def write_state(run_folder, state):
    # type: (str, Dict[str, Any]) -> None
    """Replace ``state.json`` atomically (temporary file, fsync, rename, fsync of the folder)."""
    fd, tmp = tempfile.mkstemp(prefix=".state.", suffix=".tmp", dir=run_folder)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(state, handle, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.rename(tmp, os.path.join(run_folder, STATE_FILE))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(run_folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class RegistryLock(object):
    """An exclusive ``flock`` on ``<registry>/.remediate.lock``.

    The kernel drops it when the holder dies, so a killed remediation never leaves a stale lock.

    Args:
        registry: the registry folder (must exist).
        timeout: seconds to wait for another holder (0: try once).
    """

    def __init__(self, registry, timeout=0.0, sleep=time.sleep, clock=time.time):
        self.path = os.path.join(registry, LOCK_FILE)
        self.timeout = timeout
        self._fd = None  # type: Optional[int]
        self._sleep = sleep
        self._clock = clock

    def acquire(self):
        # type: () -> bool
        """True when the lock is held, False when another holder kept it past ``timeout``."""
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = self._clock() + max(0.0, self.timeout)
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except (OSError, IOError) as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if self._clock() >= deadline:
                    os.close(self._fd)
                    self._fd = None
                    return False
                self._sleep(0.5)
                continue
            os.ftruncate(self._fd, 0)
            os.write(self._fd, ("%d\n" % os.getpid()).encode("ascii"))
            return True

    def release(self):
        # type: () -> None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def checkpoint_status(checkpoint_dir, validate, name_template=None):
    # type: (str, str, Optional[str]) -> Dict[str, Any]
    """What the run folder says (the checkpoint library's ``inspect``): finished, and the newest
    valid checkpoint at level ``validate`` (``name_template``: the run's Lightning filename template).

    Returns:
        ``{"finished": bool, "status": "valid"|"none"|"invalid"|"missing"|"error", "step": int|None,
        "checkpoint": str|None, "detail": str, "warnings": [str]}``: ``valid`` a checkpoint to
        resume from; ``none`` no checkpoint at all (start from scratch); ``invalid`` checkpoints
        exist but none is valid, or one cannot be ordered (a human decides); ``missing`` the folder does not exist yet; ``error`` it cannot
        be read.
    """
    result = {"finished": False, "status": "none", "step": None, "checkpoint": None,
              "detail": "", "warnings": []}  # type: Dict[str, Any]
    if not os.path.exists(checkpoint_dir):
        result.update(status="missing", detail="%s does not exist yet" % checkpoint_dir)
        return result
    try:
        report = inspect(checkpoint_dir, validate, list_all=False, name_template=name_template)
    except (CheckpointError, ValueError) as exc:
        result.update(status="error", detail=str(exc))
        return result
    result["warnings"] = list(report.warnings)
    result["finished"] = report.finished is not None
    best = report.latest_valid
    if best is not None:
        result.update(status="valid", step=best.step, checkpoint=best.path,
                      detail="newest valid checkpoint %s (step %d)" % (best.name, best.step))
    elif [u for u in report.unordered if u["valid"] is not False]:
        result.update(status="invalid", detail="checkpoints exist in %s but they cannot be ordered (%s): "
                      "none is chosen" % (checkpoint_dir, "; ".join(
                          "%s: %s" % (u["name"], u["reason"]) for u in report.unordered if u["valid"] is not False)))
    elif report.had_candidates:
        result.update(status="invalid", detail="checkpoints exist in %s but none is valid at level %s"
                      % (checkpoint_dir, validate))
    else:
        result["detail"] = "no checkpoint in %s" % checkpoint_dir
    return result


def _mtime(path):
    # type: (str) -> Optional[float]
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def read_progress(run, job_id_raw=None):
    # type: (Dict[str, Any], Optional[Any]) -> Dict[str, Any]
    """The run's last sign of progress, by its ``progress`` source (file system only).

    Returns:
        ``{"source", "path", "time": float|None (Unix seconds; None: nothing yet), "step":
        int|None}``. ``heartbeat``: the mtime of ``heartbeat_file`` and the ``step`` it holds;
        ``checkpoint``: the newest mtime of ``checkpoint_dir`` and its entries (a staging
        folder being written counts); ``log``: the newest mtime of ``<log_dir>/<name>-<job
        id>*`` (the launcher's batch log and its per-node logs).
    """
    source = run.get("progress") or "log"
    out = {"source": source, "path": None, "time": None, "step": None}  # type: Dict[str, Any]
    if source == "heartbeat":
        path = run.get("heartbeat_file")
        out["path"] = path
        if path:
            out["time"] = _mtime(path)
            try:
                with open(path, "rb") as handle:
                    step = json.loads(handle.read(4096).decode("utf-8")).get("step")
                if isinstance(step, int) and not isinstance(step, bool):
                    out["step"] = step
            except (OSError, IOError, ValueError, AttributeError):
                pass
        return out
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
            paths.append(os.path.join(folder, name))
    times = [t for t in (_mtime(p) for p in paths) if t is not None]
    out["time"] = max(times) if times else None
    return out


# ---------------------------------------------------------------------------------------------
# The decision (pure)
# ---------------------------------------------------------------------------------------------

def run_jobs(run, jobs):
    # type: (Dict[str, Any], List[Dict[str, Any]]) -> List[Dict[str, Any]]
    """The jobs of one run (its job name and its owner), oldest submission first."""
    mine = [j for j in jobs if j["name"] == run["name"] and j["user"] == run["owner"]]
    return sorted(mine, key=lambda j: (j.get("submit_time") or 0, j["job_id_raw"]))


def _job_brief(job):
    # type: (Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]
    if job is None:
        return None
    return {"job_id": job["job_id"], "job_id_raw": job["job_id_raw"], "state": job["state"],
            "flags": job.get("flags", []), "state_raw": job.get("state_raw"),
            "held": job.get("held", False), "held_by": job.get("held_by"),
            "exit_code": job.get("exit_code"),
            "signal": job.get("signal"), "cancelled_by": job.get("cancelled_by"),
            "requeued": job.get("requeued", False), "reason": job.get("reason"),
            "node_list": job.get("node_list"), "submit_time": job.get("submit_time"),
            "start_time": job.get("start_time"), "end_time": job.get("end_time")}


def hang_cancelled(state, job_id_raw):
    # type: (Dict[str, Any], Any) -> Optional[Dict[str, Any]]
    """The ``hang_cancels`` entry of job ``job_id_raw``: remediation cancelled it because it hung."""
    for entry in state.get("hang_cancels") or []:
        if str(entry.get("job_id")) == str(job_id_raw):
            return entry
    return None


def hang_check(run, job, progress, now):
    # type: (Dict[str, Any], Dict[str, Any], Optional[Dict[str, Any]], float) -> Optional[Dict[str, Any]]
    """Whether the RUNNING ``job`` of ``run`` is hung: None, or ``{"idle", "since", "step"}``.

    Hung: the run has a watchdog (``hang_timeout`` > 0), the job is RUNNING and neither its last
    progress (``progress["time"]``, see :func:`read_progress`) nor its start is newer than
    ``hang_timeout`` seconds. Progress older than the job's start (a heartbeat left by the job
    before) does not count: a job gets ``hang_timeout`` from its start to show progress. A job
    with no start time is never hung (nothing to count from).
    """
    timeout = run.get("hang_timeout") or 0
    if timeout <= 0 or job.get("state") != "RUNNING" or job.get("held"):
        return None
    start = job.get("start_time")
    if not start:
        return None
    last = (progress or {}).get("time")
    since = max(start, last) if last is not None else start
    idle = now - since
    if idle <= timeout:
        return None
    step = (progress or {}).get("step") if last is not None and last >= start else None
    return {"idle": int(idle), "since": since, "step": step}


def decide(run, jobs, ckpt, state, progress=None, now=None):
    # type: (Dict[str, Any], List[Dict[str, Any]], Dict[str, Any], Dict[str, Any], Optional[Dict[str, Any]], Optional[float]) -> Dict[str, Any]
    """What to do for one run.

    ``progress`` (:func:`read_progress`) and ``now`` (Unix seconds) feed the hang watchdog: a
    RUNNING job that is hung (:func:`hang_check`) gets the action ``cancel_hung`` (status
    ``hung``), unless remediation cancelled it already (then it waits for the job to end:
    nothing is cancelled twice). A job that remediation cancelled because it hung and that ended
    CANCELLED is resubmitted like a FAILED one, within the budgets; when it hung at the same
    step as the hangs before the last ``no_progress_limit`` resubmissions, that is no progress.

    Args:
        run: its registry spec (:func:`read_registry`).
        jobs: every job read (``_jobs.read_jobs``); those of other runs are ignored.
        ckpt: :func:`checkpoint_status` of its checkpoint folder.
        state: its bookkeeping (:func:`read_state`).

    Returns:
        ``{"name", "owner", "action": "none"|"resubmit"|"stop", "status", "needs_human": bool,
        "reason": str, "last_job": dict|None, "step": int|None, "checkpoint": str|None,
        "resubmissions": int, "max_resubmissions": int}``. ``status`` is one word: ``disabled``,
        ``finished``, ``active``, ``held``, ``unknown``, ``not_started``, ``stopped``,
        ``cancelled``, ``failed``, ``lost`` (our resubmission is not visible), ``ended``
        (another final state).

    Jobs that are neither running nor ended are never resubmitted and never waited on forever:

    - ``unknown``: a job of the run is in a state this collection does not know (``state_known``
      false, a later Slurm release's word): it may be active; needs a human.
    - ``held``: the run's active job waits for a release: Slurm held it itself (``launch failed
      requeued held`` after a launch or prolog failure, ``job requeued in held state``,
      ``JobHoldMaxRequeue``...) or a user or admin held it. Remediation does not release it (the
      cause, often a node or prolog fault, must be fixed first, and a hold by a person is
      deliberate) and does not submit a copy next to it; needs a human, who releases it
      (``slurm_job state=released`` or ``scontrol release <id>``) or cancels it.
    """
    resubmissions = state.get("resubmissions") or []
    mine = run_jobs(run, jobs)
    last = mine[-1] if mine else None
    out = {"name": run["name"], "owner": run["owner"], "action": NONE, "status": "",
           "needs_human": False, "reason": "", "last_job": _job_brief(last),
           "step": ckpt.get("step"), "checkpoint": ckpt.get("checkpoint"),
           "resubmissions": len(resubmissions), "max_resubmissions": run["max_resubmissions"]}

    def result(status, reason, action=NONE, human=False):
        out.update(status=status, reason=reason, action=action, needs_human=human)
        return out

    if not run["enabled"]:
        return result("disabled", "disabled in the registry (enabled: false)")
    if ckpt.get("finished"):
        return result("finished", "finished (FINISHED marker in %s)" % run["checkpoint_dir"])
    unknown = [j for j in mine if not j.get("state_known", True)]
    if unknown:
        return result("unknown", "job %s is in state %s, which this collection does not know (a "
                      "later Slurm release?): it may still be active; not resubmitting" % (
                          unknown[-1]["job_id"], unknown[-1].get("state_raw")), human=True)
    active = [j for j in mine if j.get("active")]
    if active:
        job = active[-1]
        if len(active) > 1:
            return result("active", "%d jobs of this run are active (%s): more than one needs a "
                          "human" % (len(active), ", ".join(j["job_id"] for j in active)), human=True)
        if job.get("held"):
            who = {"user": "its owner", "admin": "an administrator"}.get(
                job.get("held_by") or "", "Slurm itself")
            return result("held", "job %s is held by %s (%s): it will not run until released; fix "
                          "the cause, then release it (clusterops.slurm.slurm_job state=released, "
                          "or scontrol release %s) or cancel it" % (
                              job["job_id"], who, job.get("reason") or job.get("state_raw"),
                              job["job_id"]), human=True)
        cancelled = hang_cancelled(state, job["job_id_raw"])
        if cancelled:
            return result("hung", "job %s is %s: remediation cancelled it at %s because it hung; waiting "
                          "for it to end (it is not cancelled again)" % (
                              job["job_id"], job["state"], time.strftime(
                                  "%Y-%m-%dT%H:%M:%SZ", time.gmtime(cancelled.get("time") or 0))))
        hung = hang_check(run, job, progress, time.time() if now is None else now)
        if hung:
            out["hang"] = hung
            return result("hung", "job %s is RUNNING but its progress (%s) has not moved for %d s (hang_timeout "
                          "%d s)%s: hung" % (
                              job["job_id"], (progress or {}).get("source"), hung["idle"], run["hang_timeout"],
                              ", last step %d" % hung["step"] if hung["step"] is not None else ""),
                          action=CANCEL_HUNG)
        why = "job %s is %s" % (job["job_id"], job["state"])
        if job.get("requeued"):
            why += " (Slurm requeued it itself after %s)" % (
                (job.get("history") or [{}])[-1].get("state") or "a failure")
        return result("active", why + ": nothing to do")
    stopped = state.get("stopped")
    if stopped:
        return result("stopped", "remediation stopped this run earlier: %s. Remove %s from the "
                      "run's registry folder to let remediation resubmit it again"
                      % (stopped.get("reason"), STATE_FILE), human=True)
    if last is None:
        if resubmissions:
            return result("lost", "job %s, resubmitted by remediation, is not visible in squeue "
                          "or sacct" % resubmissions[-1].get("job_id"), human=True)
        return result("not_started", "no job of this run found: submit its launcher (%s) first"
                      % run["launcher"])
    if resubmissions and resubmissions[-1].get("after_job") == last["job_id_raw"]:
        return result("lost", "job %s was already resubmitted (as job %s) but that job is not "
                      "visible in squeue or sacct" % (last["job_id"], resubmissions[-1].get("job_id")),
                      human=True)
    state_name = last["state"]
    ended = "job %s ended %s" % (last["job_id"], state_name)
    hang = hang_cancelled(state, last["job_id_raw"]) if state_name == "CANCELLED" else None
    if hang:
        out["hang_step"] = hang.get("step")
        ended = "job %s hung%s and remediation cancelled it" % (
            last["job_id"], " at step %d" % hang["step"] if hang.get("step") is not None else "")
    elif state_name == "CANCELLED":
        who = last.get("cancelled_by")
        return result("cancelled", "%s%s: a cancelled run is never resubmitted" % (
            ended, " by uid %s" % who if who is not None else ""))
    if state_name in HUMAN_STATES:
        return result("ended", "%s: %s" % (ended, HUMAN_STATES[state_name]), human=True)
    if state_name not in RESUBMIT_STATES and not hang:
        return result("ended", "%s, not a state remediation resubmits after" % ended, human=True)
    if ckpt.get("status") in ("invalid", "error"):
        return result("failed", "%s, but %s" % (ended, ckpt.get("detail")), human=True)
    limit = run["max_resubmissions"]
    if len(resubmissions) >= limit:
        return result("failed", "%s; the budget of %d resubmission(s) is used up" % (ended, limit),
                      action=STOP, human=True)
    window = run["no_progress_limit"]
    step = ckpt.get("step")
    recent = resubmissions[-window:] if window > 0 else []
    if hang and hang.get("step") is not None and window > 0 and len(recent) == window \
            and all(r.get("hang_step") == hang["step"] for r in recent):
        return result("failed", "%s; no progress: it hung at step %d again, as before each of the last %d "
                      "resubmission(s)" % (ended, hang["step"], window), action=STOP, human=True)
    if window > 0 and len(recent) == window and all(r.get("step") == step for r in recent):
        return result("failed", "%s; no progress: the newest valid checkpoint is still %s after "
                      "%d consecutive resubmission(s)" % (
                          ended, "step %d" % step if step is not None else "none", window),
                      action=STOP, human=True)
    start = "resume from step %d" % step if step is not None else "start from scratch (no checkpoint yet)"
    return result("failed", "%s; resubmission %d of %d, %s" % (ended, len(resubmissions) + 1, limit, start),
                  action=RESUBMIT)


# ---------------------------------------------------------------------------------------------
# Suspect nodes (pure)
# ---------------------------------------------------------------------------------------------

def failed_attempts(run, jobs):
    # type: (Dict[str, Any], List[Dict[str, Any]]) -> List[Dict[str, Any]]
    """The run's job runs that ended FAILED or NODE_FAIL (:data:`SUSPECT_STATES`), oldest first:
    ``[{"job_id": str, "state": str, "nodes": [str, ...]}]``.

    A job Slurm requeued by itself counts once per run of it: its ``history`` entries (the
    earlier runs of the same id, ``_jobs.merge_jobs``) come before the job itself. ``nodes`` is
    the expanded allocation (sacct ``NodeList``, a compressed hostlist read by
    ``_hostlist.expand_hostlist``); a job whose node list could not be read has none.
    """
    out = []  # type: List[Dict[str, Any]]
    for job in run_jobs(run, jobs):
        for entry in list(job.get("history") or []) + [job]:
            if entry.get("state") in SUSPECT_STATES:
                out.append({"job_id": str(job["job_id"]), "state": entry["state"],
                            "nodes": list(entry.get("nodes") or [])})
    return out


def run_suspects(run, jobs, suspect_after=SUSPECT_AFTER):
    # type: (Dict[str, Any], List[Dict[str, Any]], int) -> List[Dict[str, Any]]
    """The nodes the run's last ``k`` failed jobs all ran on: ``[{"node", "jobs": [job id, ...]}]``
    by node name (empty when there is none).

    ``k`` is the run's ``suspect_after`` (``run.json``), or ``suspect_after`` when the run's is
    0. Failed means FAILED or NODE_FAIL (:func:`failed_attempts`); jobs that ended otherwise in
    between (TIMEOUT, CANCELLED, PREEMPTED, COMPLETED...) are passed over, neither counted nor
    breaking the sequence. A run with ``suspect_nodes`` false (opt-out), ``k`` 0, or fewer than
    ``k`` failed jobs has no suspect.

    When the jobs ran on the very same nodes each time and those are more than one, nothing
    tells which of them is bad (or whether the program is): none is suspect, rather than every
    node of the allocation being drained. One node that every failed job of a one-node run ran
    on is suspect.
    """
    k = run.get("suspect_after") or suspect_after
    if not run.get("suspect_nodes", True) or not k or k < 1:
        return []
    attempts = failed_attempts(run, jobs)
    if len(attempts) < k:
        return []
    last = attempts[-k:]
    common = set(last[0]["nodes"])
    for attempt in last[1:]:
        common &= set(attempt["nodes"])
    if len(common) > 1 and all(set(a["nodes"]) == common for a in last):
        return []
    job_ids = []  # type: List[str]
    for attempt in last:
        if attempt["job_id"] not in job_ids:
            job_ids.append(attempt["job_id"])
    return [{"node": name, "jobs": list(job_ids)} for name in sorted(common)]


def suspect_reason(runs, job_ids):
    # type: (List[str], List[str]) -> str
    """``clusterops: suspect: runs A,B failed on it (jobs 12,15)`` (``run A`` for one run)."""
    return "%s%s %s failed on it (job%s %s)" % (
        SUSPECT_REASON_PREFIX, "runs" if len(runs) > 1 else "run", ",".join(runs),
        "s" if len(job_ids) > 1 else "", ",".join(job_ids))


def _job_order(job_id):
    # type: (str) -> Tuple[int, str]
    digits = re.match(r"\d+", job_id)
    return (int(digits.group(0)) if digits else 0, job_id)


def plan_suspects(by_run, nodes, limit):
    # type: (Dict[str, List[Dict[str, Any]]], List[Dict[str, Any]], int) -> Dict[str, Any]
    """Which suspect nodes to drain now, within ``limit``, grouped into scontrol calls.

    Args:
        by_run: ``{run name: run_suspects(...)}``.
        nodes: every node as read once (``_nodes.read_nodes``).
        limit: most nodes to drain now: what the node blast radius leaves (remediate_nodes'
            ``max_nodes``/``max_percent``, less the nodes in flight and acted on this run).

    Returns:
        ``{"suspects": [{"node", "runs", "jobs", "reason", "action", "state", "current_reason"}],
        "changes": [_node_actions.Change], "exclude": {run name: [node, ...]}, "limit": int}``.
        ``action``: ``drain`` (now), ``already`` (drained, down, failing or rebooting for
        whatever reason: left as it is, its reason kept), ``overflow`` (over ``limit``: not
        drained, reported), ``unknown`` (Slurm has no such node any more). Nodes to drain go
        most runs, then most jobs, then name first; one Change (one ``scontrol update`` on a
        hostlist) per distinct reason. ``exclude`` lists, per run, its suspect nodes Slurm knows
        (``sbatch --exclude`` refuses a name it does not know), drained or not.
    """
    merged = {}  # type: Dict[str, Dict[str, Any]]
    for run_name in sorted(by_run):
        for entry in by_run[run_name]:
            item = merged.setdefault(entry["node"], {"node": entry["node"], "runs": [], "jobs": []})
            if run_name not in item["runs"]:
                item["runs"].append(run_name)
            for job_id in entry["jobs"]:
                if job_id not in item["jobs"]:
                    item["jobs"].append(job_id)
    by_name = dict((n["name"], n) for n in nodes)
    ordered = sorted(merged.values(), key=lambda i: (-len(i["runs"]), -len(i["jobs"]), i["node"]))
    room = max(0, int(limit))
    groups = {}  # type: Dict[str, List[str]]
    for item in ordered:
        item["jobs"].sort(key=_job_order)
        item["reason"] = suspect_reason(item["runs"], item["jobs"])
        node = by_name.get(item["node"])
        if node is None:
            item.update(action="unknown", state=None, current_reason=None)
            continue
        state = node_state(node)
        item.update(state=state.compound(), current_reason=node.get("reason") or "")
        if state.drained or state.down or "FAIL" in state.flags \
                or state.flags & frozenset(("REBOOT_REQUESTED", "REBOOT_ISSUED")):
            item["action"] = "already"
        elif room > 0:
            item["action"] = "drain"
            room -= 1
            groups.setdefault(item["reason"], []).append(item["node"])
        else:
            item["action"] = "overflow"
    changes = []
    for reason in sorted(groups):
        changes += plan_node_changes(nodes, groups[reason], "drain", reason=reason,
                                     reason_policy="replace")["changes"]
    exclude = {}  # type: Dict[str, List[str]]
    for run_name in sorted(by_run):
        known = sorted(set(e["node"] for e in by_run[run_name] if e["node"] in by_name))
        if known:
            exclude[run_name] = known
    suspects = sorted(ordered, key=lambda i: i["node"])
    return {"suspects": suspects, "changes": changes, "exclude": exclude, "limit": max(0, int(limit))}


def exclude_option(names):
    # type: (List[str]) -> List[str]
    """sbatch's ``--exclude=<hostlist>`` for ``names`` (none: no option)."""
    return ["--exclude=%s" % compress_hostlist(sorted(names))] if names else []


def record_resubmission(state, decision, job_id, now):
    # type: (Dict[str, Any], Dict[str, Any], Any, float) -> Dict[str, Any]
    """The state after resubmitting ``decision``'s run as ``job_id`` (a new dict)."""
    new = dict(state)
    last = decision["last_job"] or {}
    entry = {"time": int(now), "job_id": job_id, "after_job": last.get("job_id_raw"),
             "after_state": last.get("state"), "step": decision["step"]}
    if "hang_step" in decision:
        entry["after_state"] = "HUNG"
        entry["hang_step"] = decision["hang_step"]
    new["resubmissions"] = list(state.get("resubmissions") or []) + [entry]
    return new


def record_hang_cancel(state, decision, now, evidence):
    # type: (Dict[str, Any], Dict[str, Any], float, Optional[str]) -> Dict[str, Any]
    """The state after deciding to cancel ``decision``'s hung job (a new dict; written before scancel)."""
    new = dict(state)
    last = decision["last_job"] or {}
    hang = decision.get("hang") or {}
    new["hang_cancels"] = list(state.get("hang_cancels") or []) + [{
        "time": int(now), "job_id": last.get("job_id_raw"), "step": hang.get("step"),
        "idle": hang.get("idle"), "evidence": evidence}]
    return new


def record_stop(state, decision, now):
    # type: (Dict[str, Any], Dict[str, Any], float) -> Dict[str, Any]
    """The state after remediation stopped ``decision``'s run (a new dict)."""
    new = dict(state)
    last = decision["last_job"] or {}
    new["stopped"] = {"time": int(now), "after_job": last.get("job_id_raw"), "reason": decision["reason"]}
    return new

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run registry: ``run.json`` and ``state.json``, their one schema, validation, atomic writes and the lock.

Private to the collection (the leading underscore of the package): no API promise outside it.

The run registry is a folder with one sub-folder per training run::

    <registry>/<run>/run.json        the run spec (below), written by the module training_run
    <registry>/<run>/launcher.sbatch the sbatch launcher, written by the role torchrun_launcher
    <registry>/<run>/state.json      remediation's bookkeeping, written by training_remediation only
    <registry>/.remediate.lock       held (flock) while a remediation reads and submits

``run.json``: ``{"format": "clusterops.training_run", "format_version": 1, "name", "owner",
"launcher", "checkpoint_dir"}`` (required) and the fields of :data:`RUN_DEFAULTS` (optional; this
is the one home of their defaults: the reader fills them in, the module ``training_run`` takes
them as its option defaults). The hang watchdog's fields: ``hang_timeout`` seconds without
progress after which a RUNNING job is hung (0: no watchdog); ``progress`` what progress is:
``heartbeat`` (the mtime of ``heartbeat_file``, which the trainer replaces every step, JSON
``{"step", "time"}``), ``checkpoint`` (the newest mtime in ``checkpoint_dir``, for a trainer that
writes no heartbeat) or ``log`` (the newest mtime of the job's log files ``<log_dir>/<name>-<job
id>*``); ``py_spy`` the py-spy command on the nodes, for the hung ranks' stacks. Suspect nodes:
``suspect_nodes`` false opts the run out; ``suspect_after`` the run's ``k`` (0: the
remediation's).

``state.json``: ``{"format": "clusterops.training_state", "format_version": 1,
"resubmissions": [{"time", "job_id", "after_job", "after_state", "step"}, ...],
"stopped": null | {"time", "after_job", "reason"},
"hang_cancels": [{"time", "job_id", "step", "idle", "evidence"}, ...]}``; ``time`` in Unix seconds, ``step`` the
newest valid checkpoint step at the resubmission (None: none, the run started from scratch);
a resubmission after a hang also has ``hang_step``. ``hang_cancels`` lists the jobs remediation
cancelled because they hung (written *before* ``scancel``): such a job's CANCELLED is
remediation's, not a user's, and it is resubmitted; a job in this list is never cancelled again.
The entries are made by ``policy.record_*``.
"""

from __future__ import annotations

import errno
import os
import pwd
import re
import shutil
import stat
import time
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import LEVELS, compile_name_template
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.atomic import atomic_write_json
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.bounds import STEP_BOUND, shown, step_problem, time_problem
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.fsutil import (
    MAX_STATE_BYTES,
    FileLock,
    load_json_bounded,
    parse_json_bytes,
    read_bounded_stat,
)


#: Where the registry is unless a task says otherwise (training_remediation's and training_run's
#: ``registry``, the roles' ``*_registry``/``*_registry_dir``).
DEFAULT_REGISTRY = "/var/lib/clusterops/runs"
RUN_FILE = "run.json"
STATE_FILE = "state.json"
LAUNCHER_FILE = "launcher.sbatch"
LOCK_FILE = ".remediate.lock"
RUN_FORMAT = "clusterops.training_run"
STATE_FORMAT = "clusterops.training_state"
FORMAT_VERSION = 1

#: The most ``state.json`` may hold, in bytes (it grows by one entry per resubmission or hang).
STATE_MAX_BYTES = 16 << 20

RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

#: What a run's progress is, for the hang watchdog (``run.json`` ``progress``).
PROGRESS_SOURCES = ("heartbeat", "checkpoint", "log")

#: The required fields of ``run.json`` and their type.
RUN_REQUIRED = {
    "name": str, "owner": str, "launcher": str, "checkpoint_dir": str,
}
#: The optional fields of ``run.json`` and their defaults: the one home of these defaults.
RUN_DEFAULTS: Dict[str, Any] = {
    "workdir": None, "nodes": None, "requeue": False, "checkpoint_validate": "sizes", "checkpoint_name_template": None,
    "max_resubmissions": 5, "no_progress_limit": 2, "enabled": True,
    "log_dir": None, "hang_timeout": 0, "progress": "log", "heartbeat_file": None, "py_spy": "py-spy",
    "suspect_nodes": True, "suspect_after": 0, "checkpoint_replicas": [],
}


class RegistryError(Exception):
    """A registry entry or state file that cannot be used, or a run spec that is not valid."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_run(spec: Any, folder: str) -> Dict[str, Any]:
    """``spec`` (a parsed ``run.json``) checked and completed with :data:`RUN_DEFAULTS`: a new dict.

    ``folder`` is the run's registry folder (its base name must be the run's name); it starts
    every error message. ``""`` for ``log_dir``, ``heartbeat_file`` and
    ``checkpoint_name_template`` means none (what older launcher roles wrote).

    Raises:
        RegistryError: a wrong format or version, a missing required field, a field of another
        type, a value outside its choices (an unknown ``checkpoint_validate`` level or
        ``progress`` source) or contradicting fields. Nothing is replaced. Fields this version
        does not know are kept, not refused (a later writer of the same ``format_version``).
    """
    if not isinstance(spec, dict):
        raise RegistryError("%s: not a JSON object" % folder)
    if spec.get("format") != RUN_FORMAT:
        raise RegistryError("%s: format is %r, expected %r" % (folder, spec.get("format"), RUN_FORMAT))
    if not _is_int(spec.get("format_version")) or spec["format_version"] > FORMAT_VERSION:
        raise RegistryError("%s: format_version %r is not supported (this reader knows %d)"
                            % (folder, spec.get("format_version"), FORMAT_VERSION))
    run = dict(RUN_DEFAULTS)
    run.update(spec)
    for field, kind in RUN_REQUIRED.items():
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
        if step_problem(run[field]):   # the owner may write run.json: bounded (_checkpoint.bounds)
            raise RegistryError("%s: %s must be %s, not %s" % (folder, field, STEP_BOUND, shown(run[field])))
    if run["nodes"] is not None and (step_problem(run["nodes"]) or run["nodes"] < 1):
        raise RegistryError("%s: nodes must be an integer of 1 to 2**53, not %s" % (folder, shown(run["nodes"])))
    for field in ("enabled", "suspect_nodes", "requeue"):
        if not isinstance(run[field], bool):
            raise RegistryError("%s: %s must be true or false" % (folder, field))
    if run["progress"] not in PROGRESS_SOURCES:
        raise RegistryError("%s: progress %r is not one of %s" % (folder, run["progress"], ", ".join(PROGRESS_SOURCES)))
    for field in ("log_dir", "heartbeat_file", "workdir"):
        if run[field] == "":
            run[field] = None
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
    replicas = run["checkpoint_replicas"]
    if not isinstance(replicas, list) or not all(isinstance(r, str) and os.path.isabs(r) for r in replicas):
        raise RegistryError("%s: checkpoint_replicas must be a list of absolute paths" % folder)
    normal = [os.path.normpath(r) for r in replicas]
    if os.path.normpath(run["checkpoint_dir"]) in normal or len(set(normal)) != len(normal):
        raise RegistryError("%s: checkpoint_replicas names checkpoint_dir or one folder twice" % folder)
    run["checkpoint_replicas"] = list(replicas)
    template = run["checkpoint_name_template"]
    if template == "":
        run["checkpoint_name_template"] = template = None
    if template is not None:
        try:
            if not isinstance(template, str):
                raise ValueError("not a string")
            compile_name_template(template)
        except ValueError as exc:
            raise RegistryError("%s: checkpoint_name_template: %s" % (folder, exc))
    return run


def run_document(run: Dict[str, Any]) -> Dict[str, Any]:
    """What ``run.json`` holds for the validated ``run`` (:func:`validate_run`): format, version,
    the required fields and every optional one, defaults written out."""
    doc = {"format": RUN_FORMAT, "format_version": FORMAT_VERSION}
    for field in sorted(set(RUN_REQUIRED) | set(RUN_DEFAULTS)):
        doc[field] = run[field]
    return doc


#: Write bits for the group and for others: a file or folder with one of them can be changed by
#: users other than its owner.
_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def _writable_by_others(st: os.stat_result) -> bool:
    return bool(st.st_mode & _WRITABLE_BY_OTHERS)


def owner_uid(owner: str, folder: str) -> int:
    """The uid of a run's ``owner``: a user of this host other than root.

    Raises:
        RegistryError: no such user, or root (a job of root that resumes from a folder users can
            write runs their code as root): the message starts with ``folder``.
    """
    try:
        uid = pwd.getpwnam(owner).pw_uid
    except KeyError:
        raise RegistryError("%s: owner %s is no user on this host" % (folder, owner))
    if uid == 0:
        raise RegistryError("%s: owner %s is root: training runs as root are refused (a job of root "
                            "resumes from a folder users can write); register the run as its user"
                            % (folder, owner))
    return uid


def check_trust(run: Dict[str, Any], folder: str, entry: os.stat_result, folder_st: os.stat_result,
                trusted: Tuple[int, ...]) -> None:
    """Whether ``run`` (read from ``<folder>/run.json``, whose ``fstat`` is ``entry``; ``folder_st``
    the folder's ``lstat``) may be acted on, and as whom: its ``owner``.

    ``trusted`` are the uids whose entries speak for anyone (root and the user remediation runs
    as: the operator). An entry is bound to its ``owner`` when ``run.json`` and its folder are
    owned by a trusted uid (the module ``training_run`` wrote it), or, in a registry users may
    write, when ``run.json`` is owned by the ``owner`` itself (and the folder by a trusted uid or
    the owner): nobody can name another user as ``owner``. Neither ``run.json`` nor its folder
    may be writable by the group or others. The ``launcher`` (submitted as the owner) must be a
    regular file, not a symlink, owned by a trusted uid or the owner, in a folder owned by one of
    them, neither of them writable by the group or others: no one else can change what the
    owner's job runs.

    Raises:
        RegistryError: ``owner`` is root or no user here (:func:`owner_uid`); any rule above
            broken. The message names the file.
    """
    uid = owner_uid(run["owner"], folder)
    spec_path = os.path.join(folder, RUN_FILE)
    for what, st in ((spec_path, entry), (folder, folder_st)):
        if _writable_by_others(st):
            raise RegistryError("%s is writable by its group or others (mode %04o): anyone could change "
                                "the run; chmod go-w it" % (what, stat.S_IMODE(st.st_mode)))
    if entry.st_uid in trusted and folder_st.st_uid in trusted:
        pass
    elif entry.st_uid == uid and folder_st.st_uid in trusted + (uid,):
        pass
    else:
        raise RegistryError("%s is owned by uid %d (folder uid %d): only root, the operator (uid %s) or "
                            "the run's owner %s (uid %d) may register it" % (
                                spec_path, entry.st_uid, folder_st.st_uid,
                                "/".join(str(t) for t in trusted), run["owner"], uid))
    launcher = run["launcher"]
    allowed = trusted + (uid,)
    for what, follow in ((launcher, False), (os.path.dirname(launcher), True)):
        try:
            st = os.stat(what) if follow else os.lstat(what)
        except OSError as exc:
            raise RegistryError("%s: launcher %s: %s" % (folder, what, exc.strerror or exc))
        if what == launcher and not stat.S_ISREG(st.st_mode):
            raise RegistryError("%s: launcher %s is not a regular file (a symlink is refused)" % (folder, launcher))
        if st.st_uid not in allowed or _writable_by_others(st):
            raise RegistryError("%s: launcher %s: %s is owned by uid %d with mode %04o: only root, the "
                                "operator or %s may own it and no one else may write it" % (
                                    folder, launcher, what, st.st_uid, stat.S_IMODE(st.st_mode), run["owner"]))


def trusted_uids() -> Tuple[int, ...]:
    """The uids whose registry entries are trusted: root and the user this process runs as."""
    return tuple(sorted(set((0, os.geteuid()))))


def read_run(folder: str, trusted: Optional[Tuple[int, ...]] = None) -> Dict[str, Any]:
    """The validated run of one registry folder (:func:`validate_run`), bound to its owner
    (:func:`check_trust` with ``trusted``, default :func:`trusted_uids`).

    ``run.json`` is read with ``_checkpoint.fsutil.load_json_bounded``: never through a symlink,
    never a FIFO or device, at most ``MAX_STATE_BYTES`` (1 MiB), nesting that the parser cannot
    take is bad JSON.

    Raises:
        RegistryError: ``run.json`` is missing, unreadable, not a regular file, too large, not JSON,
            not valid, or not bound to its owner.
    """
    spec_path = os.path.join(folder, RUN_FILE)
    try:
        data, entry = read_bounded_stat(spec_path, MAX_STATE_BYTES)
        folder_st = os.lstat(folder)
    except (OSError, IOError) as exc:
        raise RegistryError("%s: %s" % (spec_path, exc.strerror or exc))
    try:
        spec = parse_json_bytes(data)
    except ValueError as exc:
        raise RegistryError("%s is not valid JSON: %s" % (spec_path, exc))
    run = validate_run(spec, folder)
    check_trust(run, folder, entry, folder_st, trusted_uids() if trusted is None else trusted)
    return run


def read_registry(path: str, names: Optional[List[str]] = None) -> Tuple[List[Dict[str, Any]], List[Dict[str, str]]]:
    """Every run of the registry folder ``path``: ``(runs, errors)``, runs sorted by name.

    A run whose ``run.json`` is unreadable, wrong or not bound to its owner (:func:`read_run`) is
    not returned; it is an error entry ``{"name", "error"}`` so that one bad entry never hides the
    other runs. ``names`` keeps only
    these runs (a name not in the registry is an error entry). A missing registry folder is no
    run at all (nothing registered yet).

    Raises:
        RegistryError: ``path`` exists but is not a readable folder, or it is writable by its
            group or others without the sticky bit (anyone could swap any entry).
    """
    runs: List[Dict[str, Any]] = []
    errors: List[Dict[str, str]] = []
    if not os.path.exists(path):
        entries: List[str] = []
    else:
        try:
            st = os.stat(path)
            entries = sorted(os.listdir(path))
        except OSError as exc:
            raise RegistryError("cannot list the run registry %s: %s" % (path, exc.strerror))
        if _writable_by_others(st) and not st.st_mode & stat.S_ISVTX:
            raise RegistryError("the run registry %s is writable by its group or others without the sticky bit "
                                "(mode %04o): anyone could replace any run's entry; chmod go-w (or +t) it"
                                % (path, stat.S_IMODE(st.st_mode)))
    trusted = trusted_uids()
    wanted = set(names) if names else None
    for entry in entries:
        folder = os.path.join(path, entry)
        if entry.startswith(".") or not os.path.isdir(folder) or os.path.islink(folder):
            continue
        if wanted is not None and entry not in wanted:
            continue
        try:
            runs.append(read_run(folder, trusted))
        except RegistryError as exc:
            errors.append({"name": entry, "error": str(exc)})
    if wanted is not None:
        found = set(r["name"] for r in runs) | set(e["name"] for e in errors)
        for name in sorted(wanted - found):
            errors.append({"name": name, "error": "no run %s in the registry %s" % (name, path)})
    return runs, errors


def empty_state() -> Dict[str, Any]:
    """The bookkeeping of a run remediation has not touched yet."""
    return {"format": STATE_FORMAT, "format_version": FORMAT_VERSION, "resubmissions": [], "stopped": None,
            "hang_cancels": []}


def read_state(entry: str) -> Dict[str, Any]:
    """Remediation's bookkeeping of one run (an empty one when there is no ``state.json``), from
    ``entry``, the run's folder in the registry (``<registry>/<name>``, not its run folder).

    Raises:
        RegistryError: the file exists but cannot be read or is not ours. Never guessed: a lost
        count would let a run be resubmitted past its budget.
    """
    path = os.path.join(entry, STATE_FILE)
    try:
        data = load_json_bounded(path, STATE_MAX_BYTES)
    except (OSError, IOError) as exc:
        if getattr(exc, "errno", None) == errno.ENOENT:
            return empty_state()
        raise RegistryError("cannot read %s: %s" % (path, exc.strerror or exc))
    except ValueError as exc:
        raise RegistryError("%s is not valid JSON (%s); fix or remove it to reset the run's budget"
                            % (path, exc))
    problem = state_problem(data)
    if problem:
        raise RegistryError("%s is not a clusterops.training_state file: %s; fix or remove it to reset the "
                            "run's budget" % (path, problem))
    state = empty_state()
    state.update(data)
    return state


def _time(value: Any, what: str) -> Optional[str]:
    return None if value is None else time_problem(value, what)


def _step(value: Any, what: str) -> Optional[str]:
    return None if value is None else step_problem(value, what)


def _job_id(value: Any, what: str) -> Optional[str]:
    if value is None or (isinstance(value, str) and len(value) < 64):
        return None
    return step_problem(value, what)


#: The fields of each list entry of ``state.json`` and the check of each (``_checkpoint.bounds``: a time
#: or ``idle`` a number of seconds of 0 to 2100-01-01, a step an integer of 0 to 2**53, a job id such an
#: integer or a string of under 64 characters). None is allowed everywhere: older writers left some out.
_STATE_ENTRY_FIELDS = {
    "resubmissions": {"time": _time, "job_id": _job_id, "after_job": _job_id, "step": _step, "hang_step": _step},
    "hang_cancels": {"time": _time, "job_id": _job_id, "step": _step, "idle": _time},
}


def state_problem(data: Any) -> Optional[str]:
    """Why ``data`` (a parsed ``state.json``) is not a state this reader can act on, or None.

    The shape the policy reads: a JSON object of format ``clusterops.training_state``;
    ``resubmissions`` and ``hang_cancels`` lists of objects whose ids, times and steps are in range
    (:data:`_STATE_ENTRY_FIELDS`); ``stopped`` null or an object. ``state.json`` is remediation's, but in
    a registry users may write, a run's owner can change it: every number the policy and goodput read is
    bounded here, so that a value out of range (``1e999``, ``NaN``, ``10**400``) makes this run need a
    human, never an exception further on.
    """
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("format") != STATE_FORMAT:
        return "format is %r" % (data.get("format"),)
    if not isinstance(data.get("resubmissions"), list):
        return "resubmissions is not a list"
    if data.get("stopped") is not None and not isinstance(data.get("stopped"), dict):
        return "stopped is neither null nor an object"
    for field, checks in _STATE_ENTRY_FIELDS.items():
        entries = data.get(field) or []
        if not isinstance(entries, list):
            return "%s is not a list" % field
        for index, item in enumerate(entries):
            if not isinstance(item, dict):
                return "%s[%d] is not an object" % (field, index)
            for key, check in checks.items():
                problem = check(item.get(key), "%s[%d].%s" % (field, index, key))
                if problem:
                    return problem
    return None


def write_state(entry: str, state: Dict[str, Any]) -> None:
    """Replace the run's ``state.json`` in ``entry`` (its folder in the registry) atomically (``_checkpoint.atomic.atomic_write_json``: a
    temporary file in the folder, fsync, mode 0644, rename, fsync of the folder)."""
    atomic_write_json(os.path.join(entry, STATE_FILE), state, indent=1, mode=0o644)


def write_run(folder: str, run: Dict[str, Any]) -> None:
    """Write the validated ``run`` as the folder's ``run.json`` atomically (:func:`run_document`,
    as :func:`write_state` writes), creating the folder (mode 0755) when missing."""
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    atomic_write_json(os.path.join(folder, RUN_FILE), run_document(run), indent=1, mode=0o644)


def remove_run(folder: str) -> None:
    """Remove a run's registry folder: ``run.json``, its ``state.json`` and whatever else it holds."""
    shutil.rmtree(folder)


class RegistryLock(FileLock):
    """An exclusive ``flock`` on ``<registry>/.remediate.lock`` (``_checkpoint.fsutil.FileLock``).

    Args:
        registry: the registry folder (must exist).
        timeout: seconds to wait for another holder (0: try once).
    """

    def __init__(self, registry, timeout=0.0, sleep=time.sleep, clock=time.time):
        super(RegistryLock, self).__init__(os.path.join(registry, LOCK_FILE), timeout, sleep, clock)


def unregister_run(registry: str, folder: str, lock_timeout: float = 60) -> None:
    """Remove a run's registry folder (:func:`remove_run`) under the registry's lock, so that no
    remediation reads it half removed.

    Args:
        registry: the registry folder.
        folder: the run's folder in it.
        lock_timeout: seconds to wait for a remediation that holds the lock (0 or less: try once).

    Raises:
        RegistryError: the lock stayed held past ``lock_timeout``, or the folder could not be removed.
    """
    lock = RegistryLock(registry, timeout=max(lock_timeout, 0))
    if not lock.acquire():
        raise RegistryError("another remediation holds %s: run %s was not removed"
                            % (lock.path, os.path.basename(folder)))
    try:
        remove_run(folder)
    except OSError as exc:
        raise RegistryError("cannot remove %s: %s" % (folder, exc))
    finally:
        lock.release()

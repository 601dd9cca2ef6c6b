# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The training-run remediation loop (the module ``training_remediation``): lock the registry, read
it, ask Slurm, decide (:mod:`.policy`), act (sbatch, scancel, scontrol drain, evidence) and write
each run's state (:mod:`.registry`).

Private to the collection (the leading underscore of the package): no API promise outside it.

:func:`checkpoint_status` and :func:`read_progress` read a run's folders; :func:`remediate` is
the whole task, run by ``_slurm_cli.run_module`` (one failure path with every module).
"""

from __future__ import annotations

import os
import time

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import CheckpointError, best_copy
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.bounds import record_value_problem, time_problem
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.fsutil import load_json_bounded
from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._job_actions import SubmitError, submit
from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import JobParseError, read_jobs, read_queue
from ansible_collections.clusterops.slurm.plugins.module_utils._node_actions import apply_node_changes
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import SUSPECT_PREFIX
from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import read_nodes
from ansible_collections.clusterops.slurm.plugins.module_utils._privsep import PrivsepError, call_as
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SlurmAnswerError,
    SlurmCommandError,
    effective_user,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import job_action, resubmission
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.evidence import (
    collect_evidence,
    evidence_commands,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.policy import (
    CANCEL_HUNG,
    RESUBMIT,
    STOP,
    brief,
    decide,
    needs_human,
    plan_suspects,
    record_hang_cancel,
    record_resubmission,
    record_stop,
    report_line,
    run_jobs,
    run_suspects,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry import (
    RegistryError,
    RegistryLock,
    read_state,
    write_state,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry_options import registered_runs

try:
    from typing import Any, Dict, List, Optional, Sequence  # noqa: F401 pylint: disable=unused-import
except ImportError:  # pragma: no cover
    pass


# ---------------------------------------------------------------------------------------------
# What a run's folders say (file system)
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
                      replicas: Sequence[str] = ()) -> Dict[str, Any]:
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
    result: Dict[str, Any] = {"finished": False, "status": "none", "step": None, "checkpoint": None, "copy": None,
                              "detail": "", "warnings": []}
    problem = real_path_problem(checkpoint_dir, "checkpoint_dir")
    if problem:
        result.update(status="error", detail=problem)
        return result
    if not os.path.exists(checkpoint_dir) and not replicas:
        result.update(status="missing", detail="%s does not exist yet" % checkpoint_dir)
        return result
    try:
        choice = best_copy(checkpoint_dir, replicas, validate, name_template)
    except (CheckpointError, ValueError) as exc:
        result.update(status="error", detail=str(exc))
        return result
    report = choice.report
    result["warnings"] = list(choice.warnings)
    result["finished"] = report is not None and report.finished is not None
    best = choice.checkpoint
    if best is not None:
        result.update(status="valid", step=best.step, checkpoint=best.path, copy=choice.copy,
                      detail="newest valid checkpoint %s (step %d)%s" % (
                          best.name, best.step, "" if choice.copy == "primary" else ": " + choice.why))
    elif report is None and choice.empty:
        result.update(status="missing", detail="%s does not exist yet and no replica holds a verified copy"
                      % checkpoint_dir)
    elif report is None:
        result.update(status="invalid", detail="%s does not exist and a replica cannot be read (%s): not starting "
                      "from scratch; a human decides" % (checkpoint_dir, "; ".join(choice.warnings)))
    else:
        _why_none(result, report, checkpoint_dir, validate)
    return result


def _why_none(result: Dict[str, Any], report: Any, checkpoint_dir: str, validate: str) -> None:
    """``result``'s status and detail when no copy holds a valid checkpoint: the run folder's ``report`` says why."""
    if [u for u in report.unordered if u["valid"] is not False]:
        result.update(status="invalid", detail="checkpoints exist in %s but they cannot be ordered (%s): "
                      "none is chosen" % (checkpoint_dir, "; ".join(
                          "%s: %s" % (u["name"], u["reason"]) for u in report.unordered if u["valid"] is not False)))
    elif report.had_candidates:
        result.update(status="invalid", detail="checkpoints exist in %s but none is valid at level %s"
                      % (checkpoint_dir, validate))
    elif report.unexplained:
        result.update(status="invalid", detail="%s holds training state that no known checkpoint layout "
                      "explains (%s: %s): not starting from scratch; a human decides (or the run declares "
                      "its checkpoint_name_template)" % (checkpoint_dir, report.unexplained[0]["name"],
                                                         report.unexplained[0]["reason"]))
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


def read_progress(run: Dict[str, Any], job_id_raw: Optional[Any] = None) -> Dict[str, Any]:
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
    out: Dict[str, Any] = {"source": source, "path": None, "time": None, "step": None}
    if source == "heartbeat":
        path = run.get("heartbeat_file")
        out["path"] = path
        if path:
            out["time"] = _mtime(path)
            out["step"] = read_heartbeat(path)
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


#: The most a heartbeat file may hold, in bytes (``{"step", "time"}``); a larger one gives no step.
HEARTBEAT_MAX_BYTES = 64 << 10


def folder_progress(run: Dict[str, Any], job_id_raw: Optional[Any]) -> Dict[str, Any]:
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


def read_folders(run: Dict[str, Any], job_id_raw: Optional[Any], progress: bool = True) -> Dict[str, Any]:
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


def owner_call(run: Dict[str, Any], func, *args: Any) -> Any:
    """``func(*args)`` as the run's owner (``_privsep.call_as``: a forked child with the owner's
    uid, gid and groups, killed after ``_privsep.DEFAULT_TIMEOUT`` s): every read and write in
    the run's folders (checkpoints, heartbeat, logs, hang evidence) goes through here, so a link,
    FIFO or swapped folder the owner left there gets no more than the owner's own rights.

    Raises:
        PrivsepError: the call failed, raised or timed out (the message says which).
    """
    return call_as(run["owner"], func, *args)


def folders_or_failure(run: Dict[str, Any], job_id_raw: Optional[Any], progress: bool = True) -> Dict[str, Any]:
    """:func:`read_folders` as the owner; on failure ``{"error": reason}`` instead (never raises)."""
    try:
        return owner_call(run, read_folders, run, job_id_raw, progress)
    except PrivsepError as exc:
        return {"error": "cannot read the run's folders as %s: %s" % (run["owner"], exc)}


# ---------------------------------------------------------------------------------------------
# Acting on a decision
# ---------------------------------------------------------------------------------------------

def resubmit(module, cli, me, run, decision, jobs, state):
    """Submit ``run``'s launcher as its owner; update ``decision`` and the run's state file."""
    params = module.params
    owner = run["owner"]
    runner = cli if owner == me else cli.as_user(owner)
    sbatch = resubmission(run["launcher"], decision.get("suspects") if decision.get("exclude") else [])
    decision["command"] = runner.prefix + cli.command(*sbatch)
    if module.check_mode:
        return
    if owner != me and os.geteuid() != 0:
        decision.update(needs_human=True, error="cannot submit as %s: this task runs as %s; run it as root "
                        "(become: true)" % (owner, me))
        return
    identity = {"name": run["name"], "user": owner, "key": run["name"]}
    known = [j["job_id_raw"] for j in run_jobs(run, jobs)]
    try:
        done = submit(runner, sbatch, identity, known,
                      retries=max(params["submit_retries"], 0), delay=max(params["retry_delay"], 0))
    except SubmitError as exc:
        decision.update(needs_human=True, error=exc.msg + (
            " (the job may have been submitted: check squeue before submitting it by hand)"
            if exc.maybe_accepted else ""))
        return
    decision["job_id"] = done["job_id"]
    decision["changed"] = True
    write_state(run["folder"],
                record_resubmission(state, decision, done["job_id"], time.time()))


def _ended(cli, job_id_raw):
    """True when squeue lists no active record of job ``job_id_raw`` (none at all once it left
    the controller); False while it is active (COMPLETING included) or squeue gives no complete
    answer."""
    try:
        return not any(j["active"] for j in read_queue(cli, job_ids=[str(job_id_raw)]))
    except (SlurmCommandError, JobParseError):
        return False


def cancel_hung(module, cli, me, run, decision, state, start):
    """Evidence, record, scancel, wait for the end, then decide again (and resubmit)."""
    last = decision["last_job"]
    cancel = job_action("absent", [str(last["job_id_raw"])])
    decision["command"] = cli.command(*cancel)
    if module.check_mode:
        return
    now = time.time()
    decision["evidence"] = collect_evidence(module, cli, me, run, decision, now, owner_call)
    state = record_hang_cancel(state, decision, now, decision["evidence"])
    write_state(run["folder"], state)
    decision["changed"] = True
    try:
        cli.run(*cancel, what="cancel the hung job %s" % last["job_id"])
    except SlurmCommandError as exc:
        decision.update(needs_human=True, error=str(exc))
        return
    deadline = time.time() + max(module.params["hang_cancel_wait"], 0)
    while not _ended(cli, last["job_id_raw"]):
        if time.time() >= deadline:
            return
        time.sleep(2)
    jobs, dummy = read_jobs(cli, names=[run["name"]], users=[run["owner"]], start=start)
    folders = folders_or_failure(run, None, progress=False)
    if "error" in folders:
        decision.update(needs_human=True, error=folders["error"])
        return
    ckpt = folders["ckpt"]
    then = decide(run, jobs, ckpt, state)
    then.update(job_id=None, command=None, error=None, warnings=ckpt["warnings"], changed=False)
    if then["action"] == RESUBMIT:
        resubmit(module, cli, me, run, then, jobs, state)
    elif then["action"] == STOP:
        write_state(run["folder"], record_stop(state, then, time.time()))
    then.pop("changed", None)
    decision["then"] = then
    decision["step"] = then["step"]
    if then["needs_human"]:
        decision["needs_human"] = True


def suspect_nodes(module, cli, planned, jobs):
    """Suspect nodes of the runs failing now (action resubmit or stop): read the nodes once,
    drain the new ones within the blast radius (``_node_actions.apply_node_changes``: one scontrol
    call per reason, none in check mode; a node a refused call did not reach is ``drain_failed``)
    and set each run's ``suspects``/``exclude``. The result keys ``suspects``, ``suspect_commands``
    and ``suspect_report``."""
    params = module.params
    out: Dict[str, Any] = {"suspects": [], "suspect_commands": [], "suspect_report": []}
    if not params["suspect_nodes"]:
        return out
    by_run = {}
    for run, decision, state in planned:
        if state is None or decision["action"] not in (RESUBMIT, STOP):
            continue
        found = run_suspects(run, jobs, params["suspect_after"])
        if found:
            by_run[run["name"]] = found
    if not by_run:
        return out
    nodes, dummy = read_nodes(cli)
    plan = plan_suspects(by_run, nodes, params["suspect_drain_limit"])
    for run, decision, state in planned:
        names = plan["exclude"].get(run["name"])
        if names:
            decision["suspects"] = names
            decision["exclude"] = compress_hostlist(names)
    applied = apply_node_changes(cli, {"changes": plan["changes"], "refused": {}, "unchanged": []},
                                 module.check_mode)
    out["suspect_commands"] = [entry["command"] for entry in applied["changes"]]
    failed = applied["failed_nodes"]
    words = {"drain": "would drain it" if module.check_mode else "drained",
             "already": "already out of service, left as it is",
             "overflow": "over the suspect drain limit of %d node(s) now (suspect_drain_limit, within what the "
                         "node blast radius left), not drained" % plan["limit"],
             "unknown": "not a node of this cluster, neither drained nor excluded"}
    for item in plan["suspects"]:
        if item["node"] in failed:
            item.update(action="drain_failed", error=failed[item["node"]])
        what = words.get(item["action"]) or "drain FAILED: %s" % item.get("error")
        if item["action"] != "unknown":
            what += " (was %s%s)%s" % (item["state"], ", reason %r" % item["current_reason"] if item["current_reason"]
                                       else "", ", excluded" if item["action"] != "drain" else "")
        out["suspect_report"].append("suspect node %s: %s -> %s - next: test the node (run a job on it alone, or "
                                     "its health check), repair, then scontrol update NodeName=%s State=RESUME "
                                     "(docs/training-remediation.md#suspect-nodes) [needs a human]" % (
                                         item["node"], item["reason"][len(SUSPECT_PREFIX):], what, item["node"]))
    out["suspects"] = plan["suspects"]
    if applied["changed_nodes"] and not module.check_mode:
        out["changed_nodes"] = True
    return out


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------

def _decide_all(cli, runs, start):
    """Read the runs' jobs once, then each run's checkpoint, progress and state, and decide.

    Returns ``(planned, jobs, before)``: ``planned`` ``[(run, decision, state)]`` (``state`` None
    when its ``state.json`` is unusable: that run is reported, never acted on), ``before`` the
    diff's ``{name: brief}``."""
    names = sorted(set(r["name"] for r in runs))
    users = sorted(set(r["owner"] for r in runs))
    jobs, _accounting = read_jobs(cli, names=names, users=users, start=start)
    planned = []
    before = {}
    for run in runs:
        try:
            decision, state = _decide_one(run, jobs)
        # One run's fault is reported for that run.
        except Exception as exc:  # pylint: disable=broad-except
            decision, state = _unusable(run, jobs, "cannot decide: %s: %s" % (type(exc).__name__, exc)), None
        decision.update(job_id=None, command=None, error=None, changed=False, suspects=[], exclude=None)
        decision.setdefault("warnings", [])
        before[run["name"]] = brief(decision)
        planned.append((run, decision, state))
    return planned, jobs, before


def _unusable(run, jobs, reason):
    """The decision for a run that cannot be decided: nothing is done, a human looks."""
    decision = decide(run, jobs, {"status": "error"}, {"resubmissions": []})
    decision.update(action="none", needs_human=True, status="ended", reason=reason, warnings=[])
    return decision


def _decide_one(run, jobs):
    """``(decision, state)`` of one run: its folders read as its owner, its state, the policy.
    ``state`` None: the run is reported, never acted on (its folders or state could not be read)."""
    mine = run_jobs(run, jobs)
    folders = folders_or_failure(run, mine[-1]["job_id_raw"] if mine else None)
    if "error" in folders:
        return _unusable(run, jobs, folders["error"]), None
    ckpt = folders["ckpt"]
    try:
        state = read_state(run["folder"])
    except RegistryError as exc:
        return _unusable(run, jobs, str(exc)), None
    decision = decide(run, jobs, ckpt, state, folders["progress"], time.time())
    decision["warnings"] = ckpt["warnings"]
    return decision, state


def _act(module, cli, me, run, decision, state, jobs, start):
    """Carry out one decision (nothing in check mode but the commands); the diff's ``after``."""
    if state is not None and decision["action"] == CANCEL_HUNG:
        decision["evidence_command"] = evidence_commands(cli, run, decision)
        cancel_hung(module, cli, me, run, decision, state, start)
    elif state is not None and decision["action"] == RESUBMIT:
        resubmit(module, cli, me, run, decision, jobs, state)
    elif state is not None and decision["action"] == STOP and not module.check_mode:
        write_state(run["folder"], record_stop(state, decision, time.time()))
        decision["changed"] = True
    after = decision["action"]
    if decision["action"] == RESUBMIT:
        after = "resubmitted as job %s" % decision["job_id"] if decision["job_id"] else (
            "would resubmit" if module.check_mode else "resubmission failed")
    elif decision["action"] == CANCEL_HUNG:
        after = "would collect stacks and cancel the hung job" if module.check_mode else (
            "cancelled the hung job; %s" % ((decision.get("then") or {}).get("action") or "not ended yet"))
    if decision["exclude"] and decision["action"] == RESUBMIT:
        after += " excluding %s" % decision["exclude"]
    return after if after != "none" else brief(decision)


def remediate(module, cli):
    """The task of ``training_remediation``, for ``_slurm_cli.run_module``: ``module`` holds its
    parameters (see its DOCUMENTATION), ``cli`` runs the Slurm commands. Returns the result keys of
    its RETURN but ``commands``.

    Raises:
        TaskFailure: a bad option, or a Slurm read that is not a complete answer (with the
            ``runs`` decided so far).
        RegistryError: the registry folder cannot be listed.
    """
    params = module.params
    registry = params["registry"]
    result: Dict[str, Any] = dict(changed=False, runs=[], resubmitted=[], hung=[], needs_human=[], errors=[], locked=False,
                                  report=[], suspects=[], suspect_commands=[], suspect_report=[])
    if params["suspect_after"] < 1 or params["suspect_drain_limit"] < 0:
        raise TaskFailure("suspect_after must be 1 or more and suspect_drain_limit 0 or more "
                          "(suspect_nodes: false turns suspect nodes off)")
    runs, errors, start = registered_runs(params)
    result["errors"] = errors
    result["needs_human"] = needs_human([], errors)
    if not os.path.isdir(registry):
        # An HA backup host without the shared mount would restart nothing, silently: say so.
        missing = ("the run registry %s does not exist on this host: no training run is restarted from it (a shared "
                   "registry not mounted?)" % registry)
        module.warn(missing)
        result["report"].append(missing)
    if not runs:
        return result

    lock = None
    if not module.check_mode:
        lock = RegistryLock(registry, timeout=max(params["lock_timeout"], 0))
        if not lock.acquire():
            result["locked"] = True
            module.warn("another remediation holds %s: training runs were left alone this time" % lock.path)
            return result
    diff: Dict[str, Dict[str, Any]] = {"before": {}, "after": {}}
    try:
        planned, jobs, diff["before"] = _decide_all(cli, runs, start)
        result.update(suspect_nodes(module, cli, planned, jobs))
        me = effective_user()
        for run, decision, state in planned:
            try:
                diff["after"][run["name"]] = _act(module, cli, me, run, decision, state, jobs, start)
            except (SlurmCommandError, SlurmAnswerError):
                raise   # Slurm itself failed: the whole task fails, as for any partial read
            # One run's fault stays that run's.
            except Exception as exc:  # pylint: disable=broad-except
                decision.update(needs_human=True, error="%s: %s" % (type(exc).__name__, exc))
                diff["after"][run["name"]] = "failed: %s" % decision["error"]
            result["runs"].append(decision)
    except SlurmCommandError as exc:
        raise TaskFailure(exc.msg, runs=result["runs"], **exc.result())
    except (SlurmAnswerError, RegistryError) as exc:
        raise TaskFailure(str(exc), runs=result["runs"])
    finally:
        if lock is not None:
            lock.release()

    for decision in result["runs"]:
        if decision["action"] == RESUBMIT and (decision["job_id"] or module.check_mode):
            result["resubmitted"].append(decision["name"])
        if (decision.get("then") or {}).get("job_id"):
            result["resubmitted"].append(decision["name"])
        if decision["action"] == CANCEL_HUNG and (module.check_mode or not decision["error"]):
            result["hung"].append(decision["name"])
    result["needs_human"] = needs_human(result["runs"], result["errors"])
    result["report"] = [report_line(d) for d in result["runs"]] + [
        "%s: registry entry unusable -> none: %s [needs a human]" % (e["name"], e["error"])
        for e in result["errors"]] + result["suspect_report"]
    changed_nodes = result.pop("changed_nodes", False) or (
        module.check_mode and bool(result["suspect_commands"]))
    # A list, not a generator: every run's "changed" is popped, none is left to any()'s short circuit.
    runs_changed = [d.pop("changed") for d in result["runs"]]
    result["changed"] = any(runs_changed) or changed_nodes or (
        module.check_mode and any(d["action"] in (RESUBMIT, STOP, CANCEL_HUNG) for d in result["runs"]))
    if module._diff:
        result["diff"] = diff
    return result

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The task of ``training_remediation``: lock the registry, read every run first (:mod:`.observe`),
decide (:mod:`.policy`), act (:mod:`.act`), and build the result once (:mod:`.records`,
:mod:`.report`). Run by ``_slurm_cli.run_module`` (one failure path with every module).

Private to the collection (the leading underscore of the package): no API promise outside it.

One way through: observe -> decide -> act -> report. Two steps come back to Slurm after acting,
each in its own function here: the suspect nodes (the nodes are read once a run fails now, then
planned and drained before any resubmission excludes them), and a hung job's end (cancelled, then
read, decided and acted on again: the decision ``then``).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SlurmAnswerError,
    SlurmCommandError,
    effective_user,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.act import (
    Actor,
    act,
    act_then,
    after,
    drain_suspects,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.observe import (
    cannot_decide,
    observe_after_cancel,
    observe_nodes,
    observe_runs,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.policy import (
    decide,
    decide_observed,
    plan_suspects,
    suspects_by_run,
    unusable,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.records import (
    Decision,
    Observation,
    Outcome,
    Run,
    run_entry,
    then_entry,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry import RegistryError, RegistryLock
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry_options import registered_runs
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.report import brief, needs_human, summarise

#: One run on its way through: what was read, what was decided, what acting did.
Step = Tuple[Observation, Decision, Outcome]


def decide_all(observations: List[Observation], jobs: List[Dict[str, Any]]) -> List[Tuple[Observation, Decision]]:
    """Each run with its decision (``policy.decide_observed``). A run whose deciding raises is that
    run's fault: it gets no decision but a human's, and its state is dropped (never acted on)."""
    decided = []
    for observation in observations:
        try:
            decided.append((observation, decide_observed(observation, jobs)))
        # One run's fault is reported for that run.
        except Exception as exc:  # pylint: disable=broad-except
            reason = cannot_decide(exc)
            decided.append((replace(observation, state=None, problem=reason), unusable(observation.run, jobs, reason)))
    return decided


def suspects(module: Any, cli: Any, steps: List[Step], jobs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The suspect nodes of the runs failing now: the nodes read once (only when there is one),
    planned within ``suspect_drain_limit`` (``policy.plan_suspects``) and drained
    (``act.drain_suspects``); each run's outcome gets its ``suspects`` and ``exclude``. The result
    keys ``suspects``, ``suspect_commands``, ``suspect_report`` (and ``changed_nodes``)."""
    params = module.params
    out: Dict[str, Any] = {"suspects": [], "suspect_commands": [], "suspect_report": []}
    if not params["suspect_nodes"]:
        return out
    by_run = suspects_by_run([s[0] for s in steps], [s[1] for s in steps], jobs, params["suspect_after"])
    if not by_run:
        return out
    plan = plan_suspects(by_run, observe_nodes(cli), params["suspect_drain_limit"])
    for observation, dummy, outcome in steps:
        names = plan["exclude"].get(observation.run["name"])
        if names:
            outcome.suspects = names
            outcome.exclude = compress_hostlist(names)
    return drain_suspects(module, cli, plan)


def after_hang(actor: Actor, run: Run, outcome: Outcome, start: Optional[int]) -> None:
    """Once a cancelled hung job ended: read the run again, decide anew and act (resubmit, or
    record the stop); that decision and what was done become ``outcome.then``."""
    jobs, observation = observe_after_cancel(actor.cli, run, start, outcome.state or {})
    if observation.problem is not None or observation.checkpoint is None:
        outcome.fail(observation.problem or "")
        return
    then = decide(run, jobs, observation.checkpoint, outcome.state or {})
    done = Outcome()
    act_then(actor, run, then, outcome.state or {}, jobs, done)
    outcome.then = then_entry(then, done, observation.warnings)


def act_all(module: Any, cli: Any, steps: List[Step], jobs: List[Dict[str, Any]], start: Optional[int],
            diff: Dict[str, Dict[str, Any]]) -> None:
    """Act on each run's decision, in the runs' order, and the diff's ``after``. A Slurm command that
    fails the task raises; any other fault stays that run's (its ``error``)."""
    actor = Actor(module, cli, effective_user())
    for observation, decision, outcome in steps:
        run = observation.run
        try:
            act(actor, run, decision, observation.state, jobs, outcome)
            if outcome.ended:
                after_hang(actor, run, outcome, start)
            diff["after"][run["name"]] = after(module.check_mode, decision, outcome)
        except (SlurmCommandError, SlurmAnswerError):
            raise   # Slurm itself failed: the whole task fails, as for any partial read
        # One run's fault stays that run's.
        except Exception as exc:  # pylint: disable=broad-except
            outcome.fail("%s: %s" % (type(exc).__name__, exc))
            diff["after"][run["name"]] = "failed: %s" % outcome.error
        outcome.done = True


def entries(steps: List[Step], with_changed: bool = False) -> List[Dict[str, Any]]:
    """The module's ``runs``: one entry per run acted on (``records.run_entry``)."""
    return [run_entry(d, o, obs.warnings, with_changed) for obs, d, o in steps if o.done]


def remediate(module: Any, cli: Any) -> Dict[str, Any]:
    """The task of ``training_remediation``, for ``_slurm_cli.run_module``: ``module`` holds its
    parameters (see its DOCUMENTATION), ``cli`` runs the Slurm commands. Returns the result keys of
    its RETURN but ``commands``.

    Raises:
        TaskFailure: a bad option, or a Slurm read that is not a complete answer (with the
            ``runs`` acted on so far).
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
    steps: List[Step] = []
    try:
        jobs, observations = observe_runs(cli, runs, start)
        steps = [(o, d, Outcome()) for o, d in decide_all(observations, jobs)]
        diff["before"] = dict((o.run["name"], brief(d)) for o, d, dummy in steps)
        result.update(suspects(module, cli, steps, jobs))
        act_all(module, cli, steps, jobs, start, diff)
    except SlurmCommandError as exc:
        raise TaskFailure(exc.msg, runs=entries(steps, with_changed=True), **exc.result())
    except (SlurmAnswerError, RegistryError) as exc:
        raise TaskFailure(str(exc), runs=entries(steps, with_changed=True))
    finally:
        if lock is not None:
            lock.release()

    result["runs"] = entries(steps)
    summarise(result, [o.changed for dummy, d, o in steps], module.check_mode)
    if module._diff:
        result["diff"] = diff
    return result

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The records that cross the training wing's modules: what :mod:`.observe` reads (the run, its
checkpoint status, its progress, one :class:`Observation` per run), what :mod:`.policy` answers
(a frozen :class:`Decision`), what :mod:`.act` did (an :class:`Outcome`), and :func:`run_entry`, the
one place where a decision and its outcome become the dict of the module's ``runs``; :func:`run_jobs`,
the jobs of one run, which every step selects.

Private to the collection (the leading underscore of the package): no API promise outside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Iterator, List, Mapping as MappingType, Optional, TypedDict


class Run(TypedDict, total=False):
    """A registered run: ``run.json`` as ``registry.validate_run`` checked it (``registry.RUN_REQUIRED``
    and ``registry.RUN_DEFAULTS``: their one home), with ``folder``, its entry in the registry."""

    name: str
    owner: str
    launcher: str
    checkpoint_dir: str
    folder: str
    workdir: Optional[str]
    nodes: Optional[int]
    requeue: bool
    checkpoint_validate: str
    checkpoint_name_template: Optional[str]
    checkpoint_replicas: List[str]
    max_resubmissions: int
    no_progress_limit: int
    enabled: bool
    log_dir: Optional[str]
    hang_timeout: int
    progress: str
    heartbeat_file: Optional[str]
    py_spy: str
    suspect_nodes: bool
    suspect_after: int


class CheckpointStatus(TypedDict):
    """What a run folder (and its replicas) say, :func:`.observe.checkpoint_status`.

    ``status``: ``valid`` (a checkpoint to resume from, in the run folder or the replica ``copy``
    names), ``none`` (no training state: start from scratch), ``invalid`` (a human decides),
    ``missing`` (the folder does not exist yet), ``error`` (it cannot be read); ``step`` and
    ``checkpoint`` (its path) of the newest valid one; ``detail`` says why, for people.
    """

    finished: bool
    status: str
    step: Optional[int]
    checkpoint: Optional[str]
    copy: Optional[str]
    detail: str
    warnings: List[str]


class Progress(TypedDict):
    """A run's last sign of progress, :func:`.observe.read_progress`: ``source`` (``heartbeat``,
    ``checkpoint`` or ``log``), the file or folder read (``path``), ``time`` (Unix seconds, None:
    nothing yet) and ``step`` (a heartbeat's, else None)."""

    source: str
    path: Optional[str]
    time: Optional[float]
    step: Optional[int]


@dataclass(frozen=True)
class Observation:
    """One run as :mod:`.observe` read it, before anything is decided.

    ``problem`` set: the run's folders or ``state.json`` could not be read (or reading raised): it
    gets no decision but a human's and is never acted on (``checkpoint``, ``progress`` and ``state``
    are then None). ``now``: the clock when its folders were read (the hang watchdog's now).
    """

    run: Run
    checkpoint: Optional[CheckpointStatus] = None
    progress: Optional[Progress] = None
    state: Optional[Dict[str, Any]] = None
    problem: Optional[str] = None
    now: float = 0.0

    @property
    def warnings(self) -> List[str]:
        """The checkpoint library's warnings (a replica that could not be read...), [] without a status."""
        return list(self.checkpoint["warnings"]) if self.checkpoint else []


def run_jobs(run: MappingType[str, Any], jobs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The jobs of one run (its job name and its owner), oldest submission first."""
    mine = [j for j in jobs if j["name"] == run["name"] and j["user"] == run["owner"]]
    return sorted(mine, key=lambda j: (j.get("submit_time") or 0, j["job_id_raw"]))


#: ``Decision.hang_step`` of a decision about a job that remediation did not cancel for hanging.
NOT_HUNG = object()


@dataclass(frozen=True)
class Decision(Mapping):
    """What :func:`.policy.decide` answers for one run: immutable; also read as a mapping (its
    :meth:`as_dict` keys, in the module result's order).

    ``action``: ``none``, ``resubmit``, ``stop`` or ``cancel_hung``; ``status`` one word (see
    ``policy.decide``); ``last_job`` the brief of the run's newest job (``policy.job_brief``);
    ``step``/``checkpoint`` the newest valid checkpoint's; ``hang`` (``{"idle", "since", "step"}``)
    only for a job found hung now; ``hang_step`` only for a job remediation cancelled because it
    hung (:data:`NOT_HUNG` otherwise; the step may be None).
    """

    name: str
    owner: str
    action: str
    status: str
    needs_human: bool
    reason: str
    last_job: Optional[Dict[str, Any]]
    step: Optional[int]
    checkpoint: Optional[str]
    resubmissions: int
    max_resubmissions: int
    hang: Optional[Dict[str, Any]] = None
    hang_step: Any = NOT_HUNG

    def as_dict(self) -> Dict[str, Any]:
        """The decision's keys as the module returns them: ``hang`` and ``hang_step`` only when set."""
        out: Dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if (item.name == "hang" and value is None) or (item.name == "hang_step" and value is NOT_HUNG):
                continue
            out[item.name] = value
        return out

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())


#: ``Outcome.evidence`` before any evidence was collected (check mode, or not a hung job).
NO_EVIDENCE = object()


@dataclass
class Outcome:
    """What acting on one decision did (:mod:`.act`): filled in while acting, read once by :func:`run_entry`.

    ``command``: the sbatch or scancel command run (or that would run); ``job_id`` the job
    submitted; ``error`` what failed (then ``needs_human``); ``changed`` whether anything changed;
    ``suspects``/``exclude`` the run's suspect nodes and their hostlist (``sbatch --exclude``);
    ``evidence_command``/``evidence`` the stack collection's srun command and file of a hung job;
    ``ended``: the cancelled hung job ended within ``hang_cancel_wait``; ``then`` the entry of the
    decision taken after it ended (:func:`then_entry`), and ``state`` the run's state after acting;
    ``done``: acting on it came to an end (the run is in the module's ``runs``).
    """

    job_id: Any = None
    command: Optional[List[str]] = None
    error: Optional[str] = None
    changed: bool = False
    needs_human: bool = False
    suspects: List[str] = field(default_factory=list)
    exclude: Optional[str] = None
    evidence_command: Optional[List[str]] = None
    evidence: Any = NO_EVIDENCE
    ended: bool = False
    then: Optional[Dict[str, Any]] = None
    state: Optional[Dict[str, Any]] = None
    done: bool = False

    def fail(self, error: str) -> None:
        """The action failed: a human looks."""
        self.needs_human = True
        self.error = error


def run_entry(decision: Decision, outcome: Outcome, warnings: List[str], with_changed: bool = False) -> Dict[str, Any]:
    """One item of the module's ``runs``: the decision's keys, ``warnings``, then what acting did
    (``job_id``, ``command``, ``error``, ``suspects``, ``exclude``; ``evidence_command``,
    ``evidence`` and ``then`` for a hung job); a failed action or a decision after it that needs a
    human sets ``needs_human``, and ``step`` is the newest valid step the later decision saw.
    ``with_changed``: ``changed`` too, after ``error`` (the ``runs`` of a task that failed on the way)."""
    entry = decision.as_dict()
    then = outcome.then
    if outcome.needs_human or (then is not None and then["needs_human"]):
        entry["needs_human"] = True
    if then is not None:
        entry["step"] = then["step"]
    entry["warnings"] = warnings
    entry.update(job_id=outcome.job_id, command=outcome.command, error=outcome.error)
    if with_changed:    # the runs of a failed task: each says whether it changed something
        entry["changed"] = outcome.changed
    entry.update(suspects=outcome.suspects, exclude=outcome.exclude)
    if outcome.evidence_command is not None:
        entry["evidence_command"] = outcome.evidence_command
    if outcome.evidence is not NO_EVIDENCE:
        entry["evidence"] = outcome.evidence
    if then is not None:
        entry["then"] = then
    return entry


def then_entry(decision: Decision, outcome: Outcome, warnings: List[str]) -> Dict[str, Any]:
    """The ``then`` of a hung job's entry: the decision taken once the cancelled job ended, and what
    acting on it did (``job_id``, ``command``, ``error``, ``warnings``)."""
    entry = decision.as_dict()
    if outcome.needs_human:
        entry["needs_human"] = True
    entry.update(job_id=outcome.job_id, command=outcome.command, error=outcome.error, warnings=warnings)
    return entry

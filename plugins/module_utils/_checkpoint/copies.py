# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""The run folder and its replicas together (:mod:`.replicas`): which copy a run resumes from
(:func:`best_copy`), and up to where pruning may delete (:func:`unreplicated_guard`)."""

from __future__ import annotations

import os

try:
    from typing import Any, Dict, List, Optional, Sequence, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .common import Checkpoint, Report, SIZES
from .replicas import newest_verified
from .runs import check_level, inspect


def unreplicated_guard(replicas: Sequence[str], validate: str = SIZES, name_template: Optional[str] = None,
                       primary: Optional[str] = None) -> Tuple[Optional[Tuple[int, int]], List[str]]:
    """For pruning: the ``(epoch, step)`` key up to which every replica holds a verified copy (the
    oldest of the replicas' newest verified copies), and one line per replica that has none or
    cannot be read. A key of None means some replica has no verified copy: a prune that honours it
    deletes no checkpoint. ``primary``: the run folder, whose replicas they must be."""
    guard: Optional[Tuple[int, int]] = None
    problems: List[str] = []
    for i, replica in enumerate(replicas):
        try:
            newest = newest_verified(replica, validate, name_template, primary=primary)[1]
        except Exception as exc:  # pylint: disable=broad-exception-caught  # whatever it is: delete nothing
            newest = None
            problems.append("the replica %s cannot be read (%s)" % (replica, exc))
        else:
            if newest is None:
                problems.append("the replica %s holds no verified copy yet" % replica)
        if newest is None:
            return None, problems
        guard = newest.key if i == 0 or guard is None or newest.key < guard else guard
    return guard, problems


class CopyChoice(object):
    """Which copy a run resumes from (:func:`best_copy`).

    Attributes:
        checkpoint: the chosen :class:`Checkpoint` (its ``path`` in the run folder or a replica), or None.
        copy: ``"primary"`` or the replica folder's path it came from; None when nothing was chosen.
        why: one line saying why this copy.
        copies: ``{"copy", "path", "step", "name", "error"}`` for the run folder and each replica: the
            newest valid checkpoint of each, for a replica only one newer than the copies before it
            (``step`` None otherwise), or why it could not be read.
        report: the run folder's :class:`Report` (None when the folder does not exist).
        empty: no copy holds a checkpoint or training state, and every replica could be read (or does not exist
            yet, its parent folder there): start from scratch. A replica that cannot be read (unmounted, no
            access, a broken index) makes nothing empty: its copies may be the newest.
        blocked: the run folder holds a checkpoint whose order is unknown: none is chosen.
        warnings: the run folder's warnings, then one per replica that could not be read.
    """

    def __init__(self) -> None:
        self.checkpoint: Optional[Checkpoint] = None
        self.copy: Optional[str] = None
        self.why = ""
        self.copies: List[Dict[str, Any]] = []
        self.report: Optional[Report] = None
        self.empty = True
        self.blocked = False
        self.warnings: List[str] = []

    def to_dict(self) -> Dict[str, Any]:
        return dict(checkpoint=self.checkpoint.to_dict() if self.checkpoint else None, copy=self.copy, why=self.why,
                    copies=list(self.copies), empty=self.empty, blocked=self.blocked, warnings=list(self.warnings),
                    report=self.report.to_dict() if self.report else None)


def best_copy(run_dir: str, replicas: Sequence[str], validate: str = SIZES, name_template: Optional[str] = None
              ) -> CopyChoice:
    """The newest valid checkpoint among the run folder and its replicas.

    The run folder's newest valid checkpoint (:func:`runs.inspect`) against each replica's newest
    verified copy (:func:`newest_verified`): the highest ``(epoch, step)`` wins, the run folder on a tie.
    A run folder that does not exist counts as empty (lost whole); one whose checkpoints cannot be
    ordered chooses nothing (``blocked``), whatever the replicas hold. A replica that cannot be read
    is a warning and takes no part.

    Raises:
        CheckpointError: the run folder exists but cannot be read (not a folder, unreadable).
        ValueError: a bad level or name template.
    """
    check_level(validate)
    choice = CopyChoice()
    run_dir = os.path.abspath(run_dir)
    primary: Optional[Checkpoint] = None
    if os.path.lexists(run_dir):
        choice.report = inspect(run_dir, validate, list_all=False, name_template=name_template)
        primary = choice.report.latest_valid
        choice.warnings.extend(choice.report.warnings)
        choice.empty = choice.report.empty
        choice.blocked = primary is None and any(u["valid"] is not False for u in choice.report.unordered)
        choice.copies.append(dict(copy="primary", path=run_dir, step=primary.step if primary else None,
                                  name=primary.name if primary else None, error=None))
    else:
        choice.copies.append(dict(copy="primary", path=run_dir, step=None, name=None, error="does not exist"))
    best, best_copy_name = primary, "primary" if primary else None
    for replica in replicas:
        replica = os.path.abspath(replica)
        if not os.path.lexists(replica) and os.path.isdir(os.path.dirname(replica)):
            # Not made yet (no replication ran): nothing there, nothing unknown.
            choice.copies.append(dict(copy=replica, path=replica, step=None, name=None, error="does not exist yet"))
            continue
        try:
            report, newest = newest_verified(replica, validate, name_template, best.key if best else None, run_dir)
        except Exception as exc:  # pylint: disable=broad-exception-caught  # unreadable, whatever the cause
            choice.warnings.append("replica %s not used: %s" % (replica, exc))
            choice.copies.append(dict(copy=replica, path=replica, step=None, name=None, error=str(exc)))
            choice.empty = False  # its copies may be the newest: never "start from scratch" because of it
            continue
        choice.empty = choice.empty and report.empty
        choice.copies.append(dict(copy=replica, path=replica, step=newest.step if newest else None,
                                  name=newest.name if newest else None, error=None))
        if newest is not None and (best is None or newest.key > best.key):
            best, best_copy_name = newest, replica
    if choice.blocked:
        choice.why = "the run folder holds checkpoints whose order is unknown: none is chosen"
        return choice
    choice.checkpoint, choice.copy = best, best_copy_name
    if best is None:
        choice.why = "no valid checkpoint in the run folder nor a verified copy in a replica"
    elif best_copy_name == "primary":
        choice.why = "the run folder's newest valid checkpoint %s (step %d)%s" % (
            best.name, best.step, " is as new as every replica's" if replicas else "")
    else:
        choice.empty = False
        choice.why = "the replica %s holds a verified copy %s (step %d) newer than the run folder's %s" % (
            best_copy_name, best.name, best.step,
            "newest valid (step %d)" % primary.step if primary else
            "(none valid)" if choice.report is not None else "(the folder does not exist)")
    return choice

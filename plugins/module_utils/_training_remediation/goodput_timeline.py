# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The timeline of a training run, pure and bounded: what the goodput report draws besides
:func:`.goodput.goodput`'s figures.

Private to the collection (the leading underscore of the package): no API promise outside it.

Three lists, each with a bound on its length so that a run of months stays a small result:
the progress curve (step over time, from the trainer's event log), the checkpoints (step and
time written) and remediation's actions (``state.json`` ``resubmissions`` and ``hang_cancels``).
Times are Unix seconds, steps the trainer's.
"""

from __future__ import annotations

try:
    from typing import Any, Dict, List, Optional  # noqa: F401 pylint: disable=unused-import
except ImportError:  # pragma: no cover
    pass

#: The most points of the progress curve (:func:`progress_curve`).
MAX_PROGRESS_POINTS = 400
#: The most checkpoints (:func:`checkpoint_marks`) and remediation actions (:func:`remediation_actions`) listed.
MAX_MARKS = 200


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _spread(indices: List[int], limit: int) -> List[int]:
    """At most ``limit`` of ``indices`` (sorted), evenly spaced, the first and last kept."""
    if len(indices) <= limit:
        return indices
    if limit <= 1:
        return indices[-1:]
    step = (len(indices) - 1) / float(limit - 1)
    return sorted(set(indices[int(round(i * step))] for i in range(limit)))


def progress_curve(events: Optional[List[Dict[str, Any]]],
                   max_points: int = MAX_PROGRESS_POINTS) -> Optional[List[List[float]]]:
    """The trainer's progress as ``[[time, step], ...]`` in time order, at most ``max_points``.

    Source: the event log (``[{"event", "step", "time"}]``, the reference trainer's ``--events``):
    every record with a numeric ``step`` and ``time``. Downsampled evenly when longer, always
    keeping the first and last point and, around each drop of the step (a restart that resumed
    from an older checkpoint), the point before it (the step reached) and the one after (the
    step resumed from), so the lost work stays where it was. None when the run has no event log.
    """
    if events is None:
        return None
    points = sorted([float(e["time"]), e["step"]] for e in events
                    if _number(e.get("step")) and _number(e.get("time")))
    if len(points) <= max_points:
        return points
    keep = set([0, len(points) - 1])
    for index in range(1, len(points)):
        if points[index][1] < points[index - 1][1]:
            keep.update((index - 1, index))
    kept = _spread(sorted(keep), max_points // 2)
    rest = [i for i in range(len(points)) if i not in set(kept)]
    chosen = sorted(set(kept) | set(_spread(rest, max_points - len(kept))))
    return [points[i] for i in chosen]


def checkpoint_marks(checkpoints: Optional[List[Dict[str, Any]]],
                     limit: int = MAX_MARKS) -> Optional[List[Dict[str, Any]]]:
    """The run's checkpoints ``[{"step", "time"}]`` (``time``: when written, the entry's mtime),
    oldest first, the newest ``limit`` when there are more. Source: ``goodput_runner.checkpoint_times``.
    None when the run folder could not be read."""
    if checkpoints is None:
        return None
    marks: List[Dict[str, Any]] = [{"step": c.get("step"), "time": float(c["time"])} for c in checkpoints
                                   if _number(c.get("time"))]
    marks.sort(key=lambda c: float(c["time"]))
    return marks[-limit:]


def remediation_actions(state: Dict[str, Any], limit: int = MAX_MARKS) -> List[Dict[str, Any]]:
    """Remediation's actions on the run, oldest first, the newest ``limit`` when there are more.

    Source: ``state.json`` (:mod:`.registry`). Each ``{"action", "time", "job_id", "step",
    "after_job", "after_state", "idle"}``: ``action`` ``resubmit`` (a ``resubmissions`` entry:
    ``job_id`` the job submitted, ``after_job`` and ``after_state`` the job that ended, ``step`` the
    checkpoint it resumes from, None from scratch) or ``hang_cancel`` (a ``hang_cancels`` entry:
    ``job_id`` the hung job cancelled, ``step`` its step, ``idle`` seconds without progress);
    fields an entry lacks are None.
    """
    out: List[Dict[str, Any]] = []
    for key, action in (("resubmissions", "resubmit"), ("hang_cancels", "hang_cancel")):
        for entry in state.get(key) or []:
            if isinstance(entry, dict) and _number(entry.get("time")):
                out.append({"action": action, "time": float(entry["time"]), "job_id": entry.get("job_id"),
                            "step": entry.get("step"), "after_job": entry.get("after_job"),
                            "after_state": entry.get("after_state"), "idle": entry.get("idle")})
    out.sort(key=lambda a: float(a["time"]))
    return out[-limit:]


def timeline(events: Optional[List[Dict[str, Any]]], checkpoints: Optional[List[Dict[str, Any]]],
             state: Dict[str, Any]) -> Dict[str, Any]:
    """``{"progress": progress_curve, "checkpoints": checkpoint_marks, "actions": remediation_actions}``."""
    return {"progress": progress_curve(events), "checkpoints": checkpoint_marks(checkpoints),
            "actions": remediation_actions(state)}

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""The bounds of every number a cluster user can write, and the checks that name what is out of them.

Users write run folders, checkpoints (names, manifests, a Lightning ``data.pkl``, a DCP ``.metadata``),
replica manifests, heartbeat files, event logs and, in a registry they may write, ``run.json`` and
``state.json``. Python's ``json`` reads ``1e999`` and ``Infinity`` as ``inf``, ``NaN`` as ``nan`` and
``10**400`` as an exact integer that no float holds; a pickle can hold an integer too long to print.
Every reader checks each number it uses against one of these bounds where it reads it, so that an
out-of-range value is that file's problem (a checkpoint not valid, a run that needs a human, figures
unknown), with the file, the field and the value, never an ``OverflowError``, ``ValueError`` or
``TypeError`` further on that stops the other runs. This file is their one home (the checkpoint
library's, the training remediation's and the goodput readers' alike).

Each ``*_problem`` returns None for a value in range, else one line: ``<what> <value> is not <bound>``.
Booleans are never numbers (JSON ``true`` is Python's ``True``, an ``int``).
"""

from __future__ import annotations

try:
    from typing import Any, Optional  # noqa: F401
except ImportError:  # pragma: no cover
    pass

#: The largest step (an iteration or epoch count, a job id, a count) a file may say: every integer up to
#: it is exact as a float (2**53), so sums and differences of them never overflow nor round.
MAX_STEP = 1 << 53
#: The latest time a file may say (Unix seconds): 2100-01-01. A time is never negative either.
MAX_TIME = 4102444800.0
#: The largest size in bytes a file may say: the largest ``off_t`` (2**63 - 1), the most a file can hold.
MAX_BYTES = (1 << 63) - 1

STEP_BOUND = "an integer of 0 to 2**53"
TIME_BOUND = "a number of seconds of 0 to %d (2100-01-01)" % MAX_TIME
BYTES_BOUND = "an integer of 0 to 2**63-1 (bytes)"
#: The most ranks a world size may say (a DeepSpeed model-state file's ``dp_world_size``, ``mp_world_size``).
MAX_RANKS = 1 << 20
RANKS_BOUND = "an integer of 1 to 2**20 (ranks)"


def shown(value: Any) -> str:
    """``value`` as a message shows it, short whatever it is: an integer too long to print (a pickle's)
    by its bits, a string cut at 40 characters, a list or object by its kind."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return str(value) if abs(value) < 10 ** 40 else "<a %d-bit integer>" % value.bit_length()
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value[:40]) + ("..." if len(value) > 40 else "")
    if isinstance(value, list):
        return "<a list>"
    if isinstance(value, dict):
        return "<an object>"
    return "<a %s>" % type(value).__name__


def integer_problem(value: Any, what: str, high: int = MAX_STEP, bound: str = STEP_BOUND) -> Optional[str]:
    """Why ``value`` is not an integer of 0 to ``high`` (``bound`` says it in words), or None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= high:
        return None
    return "%s %s is not %s" % (what, shown(value), bound)


def step_problem(value: Any, what: str = "step") -> Optional[str]:
    """Why ``value`` is not a step (or epoch, job id, count): an integer of 0 to :data:`MAX_STEP`; or None."""
    return integer_problem(value, what)


def bytes_problem(value: Any, what: str = "size") -> Optional[str]:
    """Why ``value`` is not a size: an integer of 0 to :data:`MAX_BYTES`; or None."""
    return integer_problem(value, what, MAX_BYTES, BYTES_BOUND)


def ranks_problem(value: Any, what: str = "world size") -> Optional[str]:
    """Why ``value`` is not a world size: an integer of 1 to :data:`MAX_RANKS`; or None."""
    if value == 0 and not isinstance(value, bool):
        return "%s 0 is not %s" % (what, RANKS_BOUND)
    return integer_problem(value, what, MAX_RANKS, RANKS_BOUND)


def time_problem(value: Any, what: str = "time") -> Optional[str]:
    """Why ``value`` is not a time (Unix seconds) or a duration: a finite number of 0 to :data:`MAX_TIME`; or
    None. NaN compares false with everything: refused too."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= MAX_TIME:
        return None
    return "%s %s is not %s" % (what, shown(value), TIME_BOUND)


def number_problem(value: Any, what: str, high: float = MAX_STEP) -> Optional[str]:
    """Why ``value`` is not a finite number (an integer or a float, a fractional epoch) of 0 to ``high``; or None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= high:  # NaN: refused
        return None
    return "%s %s is not a number of 0 to %s" % (what, shown(value), "2**53" if high == MAX_STEP else high)


def record_value_problem(step: Any, when: Any) -> Optional[str]:
    """Why a trainer record's ``step`` and ``time`` (an event log line, a heartbeat) cannot be used, or None
    when they can; each may be absent (None)."""
    if step is not None:
        problem = step_problem(step)
        if problem:
            return problem
    if when is not None:
        return time_problem(when)
    return None

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""One model of a Slurm job state: a base state, flags, and who cancelled it.

Slurm keeps a job's state as a base (``JOB_STATE_BASE`` in slurm.h: PENDING, RUNNING, ...,
OUT_OF_MEMORY) plus flags (COMPLETING, CONFIGURING, REQUEUE_HOLD, ...). Its commands print ONE
word for it (``job_state_string()``): the first flag that is set, in a fixed order, else the
base. So ``squeue`` says ``COMPLETING`` for a job whose base may be COMPLETED, NODE_FAIL or
(while Slurm requeues it) PENDING, and ``REQUEUE_HOLD`` for a PENDING job. ``sacct`` prints
``CANCELLED by 1234`` (the uid that cancelled it) and, for the record of a run that Slurm
requeued by hand (``scontrol requeue``), ``REQUEUED``.

:func:`parse_job_state` turns any of these spellings, long (``%T``, sacct ``State``) or compact
(``%t``: ``PD``, ``CG``, ``OOM``...), into a :class:`JobState`: ``base`` (one of
:data:`BASE_STATES`, or ``None`` when the word does not say it, as for ``COMPLETING``), ``flags``
(the flag words) and ``cancelled_by`` (int uid or ``None``). Words are matched whole, never by
prefix, and an unknown word raises :class:`JobStateError`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

try:
    from typing import Any, Iterable, Optional  # noqa: F401
except ImportError:  # pragma: no cover
    pass


#: Base states (``JOB_STATE_BASE``), as sacct/squeue name them.
BASE_STATES = (
    "PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
    "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
)

#: Flag words that Slurm prints instead of the base, with the base they imply (``None``:
#: the word does not say it). REQUEUED/REQUEUE_*, SPECIAL_EXIT and RESV_DEL_HOLD are set on
#: a job that is PENDING again; CONFIGURING, RESIZING and STOPPED on one that holds its
#: allocation (RUNNING); COMPLETING, STAGE_OUT, SIGNALING and REVOKED on any base.
FLAG_STATES = {
    "COMPLETING": None,
    "CONFIGURING": "RUNNING",
    "RESIZING": "RUNNING",
    "STOPPED": "RUNNING",
    "REQUEUED": "PENDING",
    "REQUEUE_FED": "PENDING",
    "REQUEUE_HOLD": "PENDING",
    "SPECIAL_EXIT": "PENDING",
    "RESV_DEL_HOLD": "PENDING",
    "SIGNALING": None,
    "STAGE_OUT": None,
    "REVOKED": None,
}

#: Compact codes (squeue ``%t``, sacct(1) "JOB STATE CODES").
COMPACT_CODES = {
    "PD": "PENDING", "R": "RUNNING", "S": "SUSPENDED", "CD": "COMPLETED", "CA": "CANCELLED",
    "F": "FAILED", "TO": "TIMEOUT", "NF": "NODE_FAIL", "PR": "PREEMPTED", "BF": "BOOT_FAIL",
    "DL": "DEADLINE", "OOM": "OUT_OF_MEMORY", "CG": "COMPLETING", "CF": "CONFIGURING",
    "RS": "RESIZING", "ST": "STOPPED", "RQ": "REQUEUED", "RF": "REQUEUE_FED",
    "RH": "REQUEUE_HOLD", "SE": "SPECIAL_EXIT", "RD": "RESV_DEL_HOLD", "SI": "SIGNALING",
    "SO": "STAGE_OUT", "RV": "REVOKED",
}

#: States in which a job still counts as existing for idempotency (``slurm_job`` state
#: present): it is queued, runs, or may still run or be requeued. COMPLETING is one of them on
#: purpose: Slurm shows a job it is requeueing (after NODE_FAIL, or ``scontrol requeue``) as
#: COMPLETING before it is PENDING again, and a second copy must never be submitted in that
#: window; a job that really ended leaves COMPLETING within seconds.
ACTIVE_STATES = frozenset((
    "PENDING", "CONFIGURING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD",
    "REQUEUE_FED", "SPECIAL_EXIT", "STOPPED", "RESV_DEL_HOLD", "SIGNALING", "COMPLETING",
    "STAGE_OUT",
))

#: Words that say a pending job is held (squeue ``Reason``, or the state itself).
HOLD_REASONS = frozenset(("JobHeldUser", "JobHeldAdmin"))
HOLD_STATES = frozenset(("REQUEUE_HOLD", "SPECIAL_EXIT", "RESV_DEL_HOLD"))

_CANCELLED_BY = re.compile(r"^CANCELLED\s+by\s+(\d+)$", re.IGNORECASE)
_WORD = re.compile(r"^[A-Za-z_]+$")


class JobStateError(ValueError):
    """A string that is not a Slurm job state."""


class JobState(object):
    """A job state as base + flags; immutable.

    Attributes:
        base: one of :data:`BASE_STATES`, or ``None`` when the word does not say it.
        flags: frozenset of flag words (:data:`FLAG_STATES` keys).
        word: the one word Slurm printed, long form (``COMPLETING``, ``CANCELLED``).
        raw: the text it was parsed from (``CANCELLED by 1234``).
        cancelled_by: uid from ``CANCELLED by <uid>``, else ``None``.
    """

    __slots__ = ("base", "flags", "word", "raw", "cancelled_by")

    def __init__(self, base, flags, word, raw, cancelled_by=None):
        # type: (Optional[str], Iterable[str], str, str, Optional[int]) -> None
        self.base = base
        self.flags = frozenset(flags)
        self.word = word
        self.raw = raw
        self.cancelled_by = cancelled_by

    @property
    def active(self):
        # type: () -> bool
        """True while the job is queued, runs or may still run (:data:`ACTIVE_STATES`)."""
        return self.word in ACTIVE_STATES

    def __eq__(self, other):
        return isinstance(other, JobState) and (self.base, self.flags, self.cancelled_by) == (
            other.base, other.flags, other.cancelled_by)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash((self.base, self.flags, self.cancelled_by))

    def __repr__(self):
        return "JobState(%r, %r)" % (self.base, sorted(self.flags))


def _long_word(token):
    # type: (str) -> str
    word = token.strip().upper()
    if word in COMPACT_CODES:
        return COMPACT_CODES[word]
    if word in BASE_STATES or word in FLAG_STATES:
        return word
    raise JobStateError("not a Slurm job state: %r" % token)


def parse_job_state(text):
    # type: (Any) -> JobState
    """A :class:`JobState` from any spelling of a job state.

    Accepts long words (``RUNNING``, ``OUT_OF_MEMORY``, ``REQUEUE_HOLD``), compact codes
    (``PD``, ``CG``, ``OOM``), ``CANCELLED by <uid>`` (sacct), any case, and a ``+``-joined list
    (``PENDING+REQUEUED``, as some tools write base and flags).

    Raises:
        JobStateError: empty, or a word that is no job state (matched whole, never by prefix).
    """
    if text is None:
        raise JobStateError("empty job state")
    raw = str(text).strip()
    if not raw:
        raise JobStateError("empty job state")
    cancelled = _CANCELLED_BY.match(raw)
    if cancelled:
        return JobState("CANCELLED", (), "CANCELLED", raw, int(cancelled.group(1)))
    base = None  # type: Optional[str]
    flags = set()
    words = []
    for token in raw.split("+"):
        if not token.strip():
            continue  # "CANCELLED+" is sacct's mark for a cut-off field
        if not _WORD.match(token.strip()):
            raise JobStateError("not a Slurm job state: %r" % raw)
        word = _long_word(token)
        words.append(word)
        if word in BASE_STATES:
            if base is not None and base != word:
                raise JobStateError("two base states in %r" % raw)
            base = word
        else:
            flags.add(word)
    if not words:
        raise JobStateError("empty job state: %r" % raw)
    if base is None:
        implied = set(FLAG_STATES[f] for f in flags) - set([None])
        if len(implied) == 1:
            base = implied.pop()
    return JobState(base, flags, words[0], raw)


def state_matches(state, names):
    # type: (JobState, Iterable[str]) -> bool
    """True when ``state``'s base, a flag or its printed word is one of ``names`` (long or
    compact, any case), compared whole.

    Raises:
        JobStateError: a name that is no job state.
    """
    wanted = set(_long_word(n) for n in names)
    have = set(state.flags)
    have.add(state.word)
    if state.base:
        have.add(state.base)
    return bool(wanted & have)


def is_held(state, reason):
    # type: (JobState, str) -> bool
    """True for a job that will not start (again) until released: reason ``JobHeldUser`` /
    ``JobHeldAdmin`` (``scontrol hold``; on a RUNNING job it keeps running, and the hold keeps it
    from starting again if it is requeued), or a REQUEUE_HOLD / SPECIAL_EXIT / RESV_DEL_HOLD job."""
    if state.word in HOLD_STATES or state.flags & HOLD_STATES:
        return True
    return state.active and (reason or "").strip() in HOLD_REASONS

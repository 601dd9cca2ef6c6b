# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One model of a Slurm job state: a base state, flags, and who cancelled it.

Private to the collection (the leading underscore): no API promise outside it.

Slurm keeps a job's state as a base (``JOB_STATE_BASE`` in slurm.h: PENDING, RUNNING, ...,
OUT_OF_MEMORY) plus flags (COMPLETING, CONFIGURING, REQUEUE_HOLD, EXPEDITING...). Its commands
print ONE word for it (``job_state_string()`` in src/common/slurm_protocol_defs.c): the first
flag that is set, in a fixed order, else the base. So ``squeue`` says ``COMPLETING`` for a job
whose base may be COMPLETED, NODE_FAIL or (while Slurm requeues it) PENDING, ``REQUEUE_HOLD``
for a PENDING job, and since Slurm 25.11 ``EXPEDITING`` for a PENDING job that Slurm is
requeueing with ``--requeue=expedite`` (the compact form has no code of its own for it: ``PD``).
``sacct`` prints ``CANCELLED by 1234`` (the uid that cancelled it) and, for the record of a run
that Slurm requeued by hand (``scontrol requeue``), ``REQUEUED``. squeue ``-O StateComplete``
(``job_state_string_complete()``) prints the base and every flag, comma-separated
(``PENDING,EXPEDITING``); the JSON of 23.02+ (``job_state``) is a list of the same words, with
flags that only these two forms show (LAUNCH_FAILED, RECONFIG_FAIL, POWER_UP_NODE; UPDATE_DB
in 22.05's ``StateComplete``).

:func:`parse_job_state` turns any of these spellings, long (``%T``, sacct ``State``), compact
(``%t``: ``PD``, ``CG``, ``OOM``...), ``+``/``,``-joined or a JSON list, into a
:class:`JobState`: ``base`` (one of :data:`BASE_STATES`, or ``None`` when the words do not say
it, as for ``COMPLETING``), ``flags`` (the flag words), ``cancelled_by`` (int uid or ``None``)
and ``unknown`` (words this module does not know). Words are matched whole, never by prefix.
A word Slurm may add in a later release does not fail a listing: it is kept (``word``,
``raw``), ``known`` is False and the job is neither active nor ended for the callers, who must
treat it as "ask a human" (see ``_training_remediation.policy.decide``). Only an empty state raises
:class:`JobStateError`.

:func:`is_held` and :func:`hold_kind` say whether a job will not start until someone releases
it: a user or admin hold (reason ``JobHeldUser`` / ``JobHeldAdmin``), or a hold Slurm put on it
itself (``launch failed requeued held`` after a launch or prolog failure, ``job requeued in held
state``, ``job requeued in special exit state``, ``JobHoldMaxRequeue``, the REQUEUE_HOLD /
SPECIAL_EXIT / RESV_DEL_HOLD flags).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Optional


#: Base states (``JOB_STATE_BASE``), as sacct/squeue name them.
BASE_STATES = (
    "PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
    "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
)

#: Flag words (``JOB_STATE_FLAGS``; the data parsers' ``JOB_STATE`` flag table of 22.05-26.05),
#: with the base they imply (``None``: the word does not say it). REQUEUED/REQUEUE_*,
#: SPECIAL_EXIT, RESV_DEL_HOLD and EXPEDITING (25.11+: an expedited requeue is being checked)
#: are set on a job that is PENDING again; CONFIGURING, RESIZING and STOPPED on one that holds its
#: allocation (RUNNING); COMPLETING, STAGE_OUT, SIGNALING and REVOKED on any base.
#: LAUNCH_FAILED, RECONFIG_FAIL and POWER_UP_NODE only appear in JSON lists and squeue
#: ``StateComplete``, next to the base they go with; UPDATE_DB in 22.05's ``StateComplete``.
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
    "EXPEDITING": "PENDING",
    "SIGNALING": None,
    "STAGE_OUT": None,
    "REVOKED": None,
    "LAUNCH_FAILED": None,
    "RECONFIG_FAIL": None,
    "POWER_UP_NODE": None,
    "UPDATE_DB": None,
}

#: Compact codes (squeue ``%t``, sacct(1) "JOB STATE CODES"). EXPEDITING has none: Slurm prints
#: the base (``PD``).
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
#: window; a job that really ended leaves COMPLETING within seconds. EXPEDITING is a job Slurm
#: is requeueing by itself (it ends PENDING or held with REQUEUE_HOLD).
ACTIVE_STATES = frozenset((
    "PENDING", "CONFIGURING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD",
    "REQUEUE_FED", "SPECIAL_EXIT", "STOPPED", "RESV_DEL_HOLD", "SIGNALING", "COMPLETING",
    "STAGE_OUT", "EXPEDITING",
))

#: squeue ``Reason`` words of a user or admin hold (``scontrol hold``, ``sbatch -H``), and of
#: the hold Slurm puts on a job requeued more than MaxBatchRequeue times.
HOLD_REASONS = {"JobHeldUser": "user", "JobHeldAdmin": "admin", "JobHoldMaxRequeue": "slurm"}
#: Flags of a job that waits for a release.
HOLD_STATES = frozenset(("REQUEUE_HOLD", "SPECIAL_EXIT", "RESV_DEL_HOLD"))
#: The texts slurmctld writes into a job's ``state_desc`` when it holds the job itself (squeue
#: prints ``state_desc`` as the reason when there is one; src/slurmctld/job_mgr.c:
#: ``launch failed requeued held`` after a launch or prolog failure, ``user env retrieval failed
#: requeued held``, ``job requeued in held state``, ``job requeued in special exit state``):
#: matched as the word "held" or "special exit", so a reworded text of a later release still
#: reads as held.
_SLURM_HOLD_TEXT = re.compile(r"\bheld\b|\bspecial exit\b", re.IGNORECASE)

_CANCELLED_BY = re.compile(r"^CANCELLED\s+by\s+(\d+)$", re.IGNORECASE)
_SEPARATORS = re.compile(r"[+,]")


class JobStateError(ValueError):
    """A string that is not a Slurm job state."""


class JobState(object):
    """A job state as base + flags; immutable.

    Attributes:
        base: one of :data:`BASE_STATES`, or ``None`` when the words do not say it.
        flags: frozenset of flag words (:data:`FLAG_STATES` keys).
        word: the one word Slurm printed, long form (``COMPLETING``, ``CANCELLED``); for a word
            this module does not know, that word as Slurm wrote it (upper case).
        raw: the text it was parsed from (``CANCELLED by 1234``).
        cancelled_by: uid from ``CANCELLED by <uid>``, else ``None``.
        unknown: frozenset of the words that are no state this module knows (a later release's).
    """

    __slots__ = ("base", "flags", "word", "raw", "cancelled_by", "unknown")

    def __init__(self,
                 base: Optional[str],
                 flags: Iterable[str],
                 word: str,
                 raw: str,
                 cancelled_by: Optional[int] = None,
                 unknown: Iterable[str] = ()) -> None:
        self.base = base
        self.flags = frozenset(flags)
        self.word = word
        self.raw = raw
        self.cancelled_by = cancelled_by
        self.unknown = frozenset(unknown)

    @property
    def known(self) -> bool:
        """False when a word of the state is unknown (never guess what it means)."""
        return not self.unknown

    @property
    def active(self) -> bool:
        """True while the job is queued, runs or may still run (:data:`ACTIVE_STATES`, or a
        PENDING/RUNNING/SUSPENDED base with any flags); False for an unknown state."""
        if self.unknown:
            return False
        return (self.word in ACTIVE_STATES or self.base in ("PENDING", "RUNNING", "SUSPENDED")
                or bool(self.flags & ACTIVE_STATES))

    def __eq__(self, other):
        return isinstance(other, JobState) and (
            self.base, self.flags, self.cancelled_by, self.unknown) == (
            other.base, other.flags, other.cancelled_by, other.unknown)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash((self.base, self.flags, self.cancelled_by, self.unknown))

    def __repr__(self):
        return "JobState(%r, %r%s)" % (self.base, sorted(self.flags),
                                       ", unknown=%r" % sorted(self.unknown) if self.unknown else "")


def _known_word(token: str) -> Optional[str]:
    word = token.strip().upper()
    if word in COMPACT_CODES:
        return COMPACT_CODES[word]
    if word in BASE_STATES or word in FLAG_STATES:
        return word
    return None


def _long_word(token: str) -> str:
    word = _known_word(token)
    if word is None:
        raise JobStateError("not a Slurm job state: %r" % token)
    return word


def parse_job_state(text: Any) -> JobState:
    """A :class:`JobState` from any spelling of a job state.

    Accepts long words (``RUNNING``, ``OUT_OF_MEMORY``, ``REQUEUE_HOLD``, ``EXPEDITING``),
    compact codes (``PD``, ``CG``, ``OOM``), ``CANCELLED by <uid>`` (sacct), any case, a ``+`` or
    ``,``-joined list (``PENDING+REQUEUED``; squeue ``StateComplete``: ``PENDING,EXPEDITING``)
    and a list of words (JSON ``job_state``: ``["PENDING", "REQUEUED"]``). The first word is
    the one Slurm "printed" (``word``). Words this module does not know (a later release's, or
    Slurm's ``?`` for a base it cannot name) are kept in ``unknown``, never guessed.

    Raises:
        JobStateError: an empty state, or two different base states.
    """
    if text is None:
        raise JobStateError("empty job state")
    if isinstance(text, (list, tuple)):
        tokens = [str(t) for t in text]
        raw = "+".join(t.strip() for t in tokens)
    else:
        raw = str(text).strip()
        cancelled = _CANCELLED_BY.match(raw)
        if cancelled:
            return JobState("CANCELLED", (), "CANCELLED", raw, int(cancelled.group(1)))
        tokens = _SEPARATORS.split(raw)
    base: Optional[str] = None
    flags = set()
    unknown = set()
    words = []
    for token in tokens:
        token = token.strip()
        if not token:
            continue  # "CANCELLED+" is sacct's mark for a cut-off field
        word = _known_word(token)
        if word is None:
            word = token.upper()
            unknown.add(word)
        elif word in BASE_STATES:
            if base is not None and base != word:
                raise JobStateError("two base states in %r" % raw)
            base = word
        else:
            flags.add(word)
        words.append(word)
    if not words:
        raise JobStateError("empty job state: %r" % raw)
    if base is None:
        implied = set(FLAG_STATES[f] for f in flags) - set([None])
        if len(implied) == 1:
            base = implied.pop()
    return JobState(base, flags, words[0], raw, unknown=unknown)


def state_matches(state: JobState, names: Iterable[str]) -> bool:
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


def hold_kind(state: JobState, reason: Optional[str]) -> Optional[str]:
    """Who holds the job: ``"user"`` (reason ``JobHeldUser``: ``scontrol hold`` by its owner,
    ``sbatch -H``), ``"admin"`` (``JobHeldAdmin``), ``"slurm"`` (Slurm held it itself: a
    REQUEUE_HOLD / SPECIAL_EXIT / RESV_DEL_HOLD flag, ``JobHoldMaxRequeue``, or a reason text
    slurmctld writes when it holds a job, e.g. ``launch failed requeued held`` after a launch or
    prolog failure); ``None`` when the job is not held or not active. A RUNNING job can be held
    too (it keeps running and will not start again if it is requeued)."""
    if not state.active:
        return None
    text = (reason or "").strip()
    if text in HOLD_REASONS:
        return HOLD_REASONS[text]
    if state.word in HOLD_STATES or state.flags & HOLD_STATES:
        return "slurm"
    if state.base == "PENDING" and _SLURM_HOLD_TEXT.search(text):
        return "slurm"
    return None


def is_held(state: JobState, reason: Optional[str]) -> bool:
    """True for a job that will not start (again) until released (:func:`hold_kind`): what
    ``scontrol release`` acts on."""
    return hold_kind(state, reason) is not None

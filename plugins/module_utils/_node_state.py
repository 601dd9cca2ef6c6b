# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One model of a Slurm node state: every spelling becomes a base state plus a set of flags.

Private to the collection (the leading underscore): no API promise outside it.

Slurm writes a node's state in several ways, and a remediation tool that matches on one
of them (or worse, on a prefix of one) gets the others wrong:

* ``sinfo -o %t`` / ``%T`` words with suffix symbols (sinfo(1), "NODE STATE CODES"):
  ``allocated+`` (COMPLETING), ``idle*``, ``drained*``, ``drng``, ``mixed-``, ``down~``, ``alloc#``, ``reboot^``, ``maint$``,
  ``planned``, ``inval``, ``comp``, ``fail``, ``unk``.
* compound states from ``scontrol show node`` and ``sinfo -O StateComplete``:
  ``IDLE+DRAIN``, ``DOWN+DRAIN+NOT_RESPONDING``, ``MIXED+CLOUD+NOT_RESPONDING+POWERING_UP``.
* JSON: Slurm 22.05 (``sinfo --json``, data_parser v0.0.38) gives ``"state": "idle"`` and
  ``"state_flags": ["DRAIN"]``; later releases give ``"state": ["IDLE", "DRAIN"]``.

The result is a :class:`NodeState`: ``base`` is one of :data:`BASE_STATES` or ``None`` and
``flags`` is a frozenset of Slurm's flag names (:data:`KNOWN_FLAGS`, spelled as ``scontrol``
prints them). ``base`` is ``None`` when the spelling does not say it: sinfo prints
``drained`` for both ``IDLE+DRAIN`` and ``DOWN+DRAIN``, and ``draining`` for ``ALLOCATED+DRAIN``
and ``MIXED+DRAIN``. A node is drained whenever the DRAIN flag is set, whatever its base.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union


#: Base states as Slurm names them (``NODE_STATE_BASE`` values in slurm.h).
BASE_STATES = ("UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE")

#: Flag names as ``scontrol show node`` prints them after ``+``.
KNOWN_FLAGS = frozenset((
    "BLOCKED", "CLOUD", "COMPLETING", "DRAIN", "DYNAMIC_FUTURE", "DYNAMIC_NORM", "FAIL",
    "INVALID_REG", "MAINTENANCE", "NET", "NOT_RESPONDING", "PLANNED", "POWER_DOWN",
    "POWER_UP", "POWERED_DOWN", "POWERING_DOWN", "POWERING_UP", "REBOOT_CANCELED",
    "REBOOT_ISSUED", "REBOOT_REQUESTED", "RESERVED",
))

#: sinfo(1) "NODE STATE CODES": a symbol after the state word sets a flag.
SUFFIX_FLAGS = {
    "*": "NOT_RESPONDING",
    "~": "POWERED_DOWN",
    "#": "POWERING_UP",
    "!": "POWER_DOWN",
    "%": "POWERING_DOWN",
    "$": "MAINTENANCE",
    "@": "REBOOT_REQUESTED",
    "^": "REBOOT_ISSUED",
    "-": "PLANNED",
}

# Every word Slurm uses for a node state, long (%T, scontrol) and short (%t), lower case,
# mapped to (base or None, flags). Compact words that stand for a flag leave the base
# unknown, because Slurm prints them whatever the base is.
_WORDS = {
    "idle": ("IDLE", ()),
    "alloc": ("ALLOCATED", ()),
    "allocated": ("ALLOCATED", ()),
    "mix": ("MIXED", ()),
    "mixed": ("MIXED", ()),
    "down": ("DOWN", ()),
    "unk": ("UNKNOWN", ()),
    "unknown": ("UNKNOWN", ()),
    "futr": ("FUTURE", ()),
    "future": ("FUTURE", ()),
    "error": ("ERROR", ()),
    "drain": (None, ("DRAIN",)),
    "drained": (None, ("DRAIN",)),
    "drng": (None, ("DRAIN",)),
    "draining": (None, ("DRAIN",)),
    "comp": (None, ("COMPLETING",)),
    "completing": (None, ("COMPLETING",)),
    "fail": (None, ("FAIL",)),
    "failg": (None, ("FAIL",)),
    "failing": (None, ("FAIL",)),
    "maint": (None, ("MAINTENANCE",)),
    "maintenance": (None, ("MAINTENANCE",)),
    "plnd": ("IDLE", ("PLANNED",)),
    "planned": ("IDLE", ("PLANNED",)),
    # Slurm drains a node whose registration is invalid (low RealMemory, fewer CPUs than
    # configured); sinfo's word hides the DRAIN flag that scontrol shows.
    "inval": (None, ("DRAIN", "INVALID_REG")),
    "invalid": (None, ("DRAIN", "INVALID_REG")),
    "invalid_reg": (None, ("INVALID_REG",)),
    "npc": (None, ("NET",)),
    "perfctrs": (None, ("NET",)),
    "resv": (None, ("RESERVED",)),
    "reserved": (None, ("RESERVED",)),
    "boot": (None, ("REBOOT_ISSUED",)),
    "reboot": (None, ("REBOOT_REQUESTED",)),
    "reboot_requested": (None, ("REBOOT_REQUESTED",)),
    "reboot_issued": (None, ("REBOOT_ISSUED",)),
    "reboot_canceled": (None, ("REBOOT_CANCELED",)),
    "no_respond": (None, ("NOT_RESPONDING",)),
    "not_responding": (None, ("NOT_RESPONDING",)),
    "pow_dn": (None, ("POWER_DOWN",)),
    "power_down": (None, ("POWER_DOWN",)),
    "powered_down": (None, ("POWERED_DOWN",)),
    "powering_down": (None, ("POWERING_DOWN",)),
    "pow_up": (None, ("POWERING_UP",)),
    "powering_up": (None, ("POWERING_UP",)),
    "power_up": (None, ("POWER_UP",)),
    "cloud": (None, ("CLOUD",)),
    "blocked": (None, ("BLOCKED",)),
    "dynamic_future": (None, ("DYNAMIC_FUTURE",)),
    "dynamic_norm": (None, ("DYNAMIC_NORM",)),
}

# Flag spellings that differ between the long words and scontrol's flag names.
_FLAG_ALIASES = {
    "MAINT": "MAINTENANCE",
    "NO_RESPOND": "NOT_RESPONDING",
    "PERFCTRS": "NET",
    "INVAL": "INVALID_REG",
    "RESV": "RESERVED",
    "POWER_SAVE": "POWERED_DOWN",
    "POWER": "POWERED_DOWN",
}

#: A trailing ``+`` (``allocated+``, ``ALLOCATED+``, ``alloc+``): node_state_string() in Slurm's
#: slurm_protocol_defs.c writes it for an allocated node that is also COMPLETING, and only
#: for ALLOCATED; any other word followed by a lone ``+`` is no state.
COMPLETING_SUFFIX = "+"

_WORD_RE = re.compile(r"^[A-Za-z][A-Za-z_]*$")
_SUFFIX_RE = re.compile(r"^(?P<word>[A-Za-z][A-Za-z_]*)(?P<suffix>[*~#!%$@^-]*)$")


class SlurmStateError(ValueError):
    """A string (or JSON value) that is not a Slurm node state."""


class NodeState(object):
    """A node state as base + flags; immutable.

    Attributes:
        base: one of :data:`BASE_STATES`, or ``None`` when the spelling does not say it.
        flags: frozenset of flag names, e.g. ``{"DRAIN", "NOT_RESPONDING"}``.
        raw: the spelling it was parsed from (JSON values are rendered ``IDLE+DRAIN``).
    """

    __slots__ = ("base", "flags", "raw")

    def __init__(self, base: Optional[str], flags: Iterable[str], raw: str) -> None:
        self.base = base
        self.flags = frozenset(flags)
        self.raw = raw

    @property
    def drained(self) -> bool:
        """True when the DRAIN flag is set (drained or draining, whatever the base), or
        INVALID_REG: Slurm drains a node whose registration it refused."""
        return "DRAIN" in self.flags or "INVALID_REG" in self.flags

    @property
    def responding(self) -> bool:
        """False when slurmctld marks the node NOT_RESPONDING (``*`` in sinfo)."""
        return "NOT_RESPONDING" not in self.flags

    @property
    def down(self) -> bool:
        return self.base == "DOWN"

    def compound(self) -> str:
        """The state as scontrol writes it: ``BASE+FLAG+FLAG`` (flags sorted)."""
        parts = [self.base or "UNKNOWN"] + sorted(self.flags)
        return "+".join(parts)

    def to_dict(self) -> Dict[str, Any]:
        """``{"base": str|None, "flags": [str, ...] sorted, "raw": str}``."""
        return {"base": self.base, "flags": sorted(self.flags), "raw": self.raw}

    def __eq__(self, other):
        return isinstance(other, NodeState) and (self.base, self.flags) == (other.base, other.flags)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash((self.base, self.flags))

    def __repr__(self):
        return "NodeState(%r, %r)" % (self.base, sorted(self.flags))


def _flag_name(token: str, strict: bool) -> str:
    name = token.strip().upper()
    if not _WORD_RE.match(name):
        raise SlurmStateError("%r is not a Slurm node state flag" % token)
    name = _FLAG_ALIASES.get(name, name)
    if strict and name not in KNOWN_FLAGS:
        raise SlurmStateError("unknown Slurm node state flag %r" % token)
    return name


def _parse_word(text: str) -> Tuple[Optional[str], set]:
    """One sinfo word with optional suffix symbols, e.g. ``drained*`` or ``reboot^``."""
    match = _SUFFIX_RE.match(text)
    if not match:
        raise SlurmStateError("%r is not a Slurm node state" % text)
    word = match.group("word").lower()
    if word not in _WORDS:
        raise SlurmStateError(
            "unknown Slurm node state %r (known: %s)" % (text, ", ".join(sorted(_WORDS))))
    base, word_flags = _WORDS[word]
    flags = set(word_flags)
    for symbol in match.group("suffix"):
        flags.add(SUFFIX_FLAGS[symbol])
    if "REBOOT_ISSUED" in flags and word == "reboot":
        # "reboot^": the reboot was requested and has now been issued; Slurm clears
        # REBOOT_REQUESTED when it sets REBOOT_ISSUED.
        flags.discard("REBOOT_REQUESTED")
    return base, flags


def parse_state(value: Union[str, List[str], Tuple[str, ...], None], flags: Optional[Iterable[str]] = None) -> NodeState:
    """Parse any spelling of a Slurm node state.

    Args:
        value: a sinfo word (``drained*``), a compound state (``DOWN+DRAIN+NOT_RESPONDING``),
            or a JSON ``state`` value: a string (22.05) or a list of names (23.02 and later).
        flags: the 22.05 JSON ``state_flags`` list, if any.

    Returns:
        :class:`NodeState`.

    Raises:
        SlurmStateError: empty input, an unknown state word, or stray characters. Flags
        after the first ``+`` (and in JSON lists) that this version does not know are kept
        as they are, so a newer Slurm's new flags do not break the parse.
    """
    extra = [_flag_name(f, strict=False) for f in (flags or ())]
    if isinstance(value, (list, tuple)):
        names = [str(v) for v in value]
        if not names:
            raise SlurmStateError("empty Slurm node state list")
        base, first_flags = _parse_word(names[0].strip())
        all_flags = set(first_flags)
        all_flags.update(_flag_name(n, strict=False) for n in names[1:])
        all_flags.update(extra)
        raw = "+".join(n.upper() for n in names + list(flags or ()))
        return NodeState(base, all_flags, raw)
    if not isinstance(value, str):
        raise SlurmStateError("a Slurm node state must be a string or a list, not %s"
                              % type(value).__name__)
    text = value.strip()
    if not text:
        raise SlurmStateError("empty Slurm node state")
    completing = text.lower() in ("allocated" + COMPLETING_SUFFIX, "alloc" + COMPLETING_SUFFIX)
    parts = (text[:-1] if completing else text).split("+")
    base, all_flags = _parse_word(parts[0])
    if completing:
        all_flags.add("COMPLETING")
    for part in parts[1:]:
        if not part:
            raise SlurmStateError("%r is not a Slurm node state (empty part)" % value)
        # scontrol may print a flag with a suffix symbol too ("DOWN*+DRAIN").
        match = _SUFFIX_RE.match(part)
        if not match:
            raise SlurmStateError("%r is not a Slurm node state" % value)
        all_flags.add(_flag_name(match.group("word"), strict=False))
        for symbol in match.group("suffix"):
            all_flags.add(SUFFIX_FLAGS[symbol])
    all_flags.update(extra)
    raw = text if not flags else "+".join([text] + [str(f).upper() for f in flags])
    return NodeState(base, all_flags, raw)


def state_matches(state: NodeState, wanted: Iterable[str]) -> bool:
    """True when ``state`` has any of the ``wanted`` names as its base or among its flags.

    ``wanted`` holds base or flag names in any case (``DRAIN``, ``down``, ``NOT_RESPONDING``);
    sinfo words are accepted too and mean what they mean in :func:`parse_state`
    (``drained`` means the DRAIN flag). Matching is by whole name, never by prefix.

    Raises:
        SlurmStateError: for a name that is no base, flag or sinfo word.
    """
    for name in wanted:
        upper = str(name).strip().upper()
        upper = _FLAG_ALIASES.get(upper, upper)
        if upper in BASE_STATES:
            if state.base == upper:
                return True
        elif upper in KNOWN_FLAGS:
            if upper in state.flags:
                return True
        else:
            other = parse_state(str(name))
            if other.base is not None and other.base != state.base:
                continue
            if other.flags <= state.flags:
                return True
    return False


def node_state(node: Dict[str, Any]) -> NodeState:
    """The :class:`NodeState` of a node dict made by ``_nodes``' parsers (``state``, ``flags``, ``state_raw``)."""
    return NodeState(node["state"], node["flags"], node["state_raw"])

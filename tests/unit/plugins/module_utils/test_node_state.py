# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node-state model: every spelling Slurm uses maps to base + flags."""

from __future__ import annotations

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import (
    SlurmStateError,
    parse_state,
    state_matches,
)

# (spelling, state_flags or None, expected base, expected flags)
CASES = [
    # sinfo words with suffix symbols (sinfo(1) NODE STATE CODES)
    ("idle*", None, "IDLE", {"NOT_RESPONDING"}),
    ("drained*", None, None, {"DRAIN", "NOT_RESPONDING"}),
    ("drng", None, None, {"DRAIN"}),
    ("draining", None, None, {"DRAIN"}),
    ("drain", None, None, {"DRAIN"}),
    ("mixed-", None, "MIXED", {"PLANNED"}),
    ("mix", None, "MIXED", set()),
    ("down~", None, "DOWN", {"POWERED_DOWN"}),
    ("idle~", None, "IDLE", {"POWERED_DOWN"}),
    ("alloc#", None, "ALLOCATED", {"POWERING_UP"}),
    ("reboot^", None, None, {"REBOOT_ISSUED"}),
    ("reboot", None, None, {"REBOOT_REQUESTED"}),
    ("idle@", None, "IDLE", {"REBOOT_REQUESTED"}),
    ("maint$", None, None, {"MAINTENANCE"}),
    ("idle$", None, "IDLE", {"MAINTENANCE"}),
    ("idle!", None, "IDLE", {"POWER_DOWN"}),
    ("idle%", None, "IDLE", {"POWERING_DOWN"}),
    ("planned", None, "IDLE", {"PLANNED"}),
    ("inval", None, None, {"DRAIN", "INVALID_REG"}),
    ("invalid", None, None, {"DRAIN", "INVALID_REG"}),
    ("allocated+", None, "ALLOCATED", {"COMPLETING"}),
    ("ALLOCATED+", None, "ALLOCATED", {"COMPLETING"}),
    ("alloc+", None, "ALLOCATED", {"COMPLETING"}),
    ("comp", None, None, {"COMPLETING"}),
    ("fail", None, None, {"FAIL"}),
    ("failg", None, None, {"FAIL"}),
    ("unk", None, "UNKNOWN", set()),
    ("unk*", None, "UNKNOWN", {"NOT_RESPONDING"}),
    ("down*", None, "DOWN", {"NOT_RESPONDING"}),
    ("IDLE", None, "IDLE", set()),
    ("  idle  ", None, "IDLE", set()),
    # compound states (scontrol show node, sinfo -O StateComplete)
    ("IDLE+DRAIN", None, "IDLE", {"DRAIN"}),
    ("DOWN+DRAIN+NOT_RESPONDING", None, "DOWN", {"DRAIN", "NOT_RESPONDING"}),
    ("MIXED+CLOUD+NOT_RESPONDING+POWERING_UP", None, "MIXED",
     {"CLOUD", "NOT_RESPONDING", "POWERING_UP"}),
    ("DOWN*+DRAIN", None, "DOWN", {"NOT_RESPONDING", "DRAIN"}),
    ("IDLE+REBOOT_ISSUED", None, "IDLE", {"REBOOT_ISSUED"}),
    ("ALLOCATED+DRAIN+MAINT", None, "ALLOCATED", {"DRAIN", "MAINTENANCE"}),
    ("IDLE+SOME_FUTURE_FLAG", None, "IDLE", {"SOME_FUTURE_FLAG"}),
    # JSON: 22.05 state + state_flags, later releases a list
    ("idle", ["DRAIN"], "IDLE", {"DRAIN"}),
    ("down", ["DRAIN", "NOT_RESPONDING"], "DOWN", {"DRAIN", "NOT_RESPONDING"}),
    ("mixed", [], "MIXED", set()),
    (["IDLE", "DRAIN"], None, "IDLE", {"DRAIN"}),
    (["DOWN", "NOT_RESPONDING", "REBOOT_REQUESTED"], None, "DOWN",
     {"NOT_RESPONDING", "REBOOT_REQUESTED"}),
]


@pytest.mark.parametrize("spelling, state_flags, base, flags", CASES)
def test_parse_state(spelling, state_flags, base, flags):
    state = parse_state(spelling, state_flags)
    assert state.base == base
    assert state.flags == frozenset(flags)
    assert state.drained == ("DRAIN" in flags)
    assert state.responding == ("NOT_RESPONDING" not in flags)


@pytest.mark.parametrize("spelling", [
    "", "   ", "bogus", "idle?", "IDLE++DRAIN", "IDLE+", "mixed+", "allocated++", "+", "+DRAIN", "idle drain", 42, None, [],
])
def test_parse_state_rejects(spelling):
    with pytest.raises(SlurmStateError):
        parse_state(spelling)


def test_drained_whatever_the_base():
    for spelling in ("IDLE+DRAIN", "DOWN+DRAIN", "MIXED+DRAIN", "ALLOCATED+DRAIN", "drng", "drained*"):
        assert parse_state(spelling).drained, spelling


@pytest.mark.parametrize("spelling, wanted, expected", [
    ("IDLE+DRAIN", ["DRAIN"], True),
    ("IDLE+DRAIN", ["drained"], True),
    ("IDLE+DRAIN", ["DOWN"], False),
    ("drng", ["DRAIN"], True),
    ("down*", ["NOT_RESPONDING"], True),
    ("down*", ["no_respond"], True),
    ("idle", ["DRAIN", "DOWN"], False),
    ("idle", ["idle"], True),
    ("mixed", ["MIX"], True),
    # whole names, never a prefix: DRAIN does not match a state called "drained" by prefix
    ("IDLE+REBOOT_REQUESTED", ["REBOOT"], True),
    ("IDLE+REBOOT_ISSUED", ["REBOOT_REQUESTED"], False),
])
def test_state_matches(spelling, wanted, expected):
    assert state_matches(parse_state(spelling), wanted) is expected


def test_state_matches_rejects_unknown_name():
    with pytest.raises(SlurmStateError):
        state_matches(parse_state("idle"), ["sleepy"])


def test_compound_round_trip():
    state = parse_state("down", ["NOT_RESPONDING", "DRAIN"])
    assert state.compound() == "DOWN+DRAIN+NOT_RESPONDING"
    assert parse_state(state.compound()) == state

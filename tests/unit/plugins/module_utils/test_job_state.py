# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Job states: every spelling to base + flags, matched whole, never by prefix."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import (
    JobStateError,
    is_held,
    parse_job_state,
    state_matches,
)


@pytest.mark.parametrize("text, base, flags, cancelled_by, active", [
    ("PENDING", "PENDING", [], None, True),
    ("RUNNING", "RUNNING", [], None, True),
    ("SUSPENDED", "SUSPENDED", [], None, True),
    ("COMPLETED", "COMPLETED", [], None, False),
    ("CANCELLED by 1234", "CANCELLED", [], 1234, False),
    ("CANCELLED by 0", "CANCELLED", [], 0, False),
    ("CANCELLED", "CANCELLED", [], None, False),
    ("CANCELLED+", "CANCELLED", [], None, False),  # sacct's cut-off mark
    ("FAILED", "FAILED", [], None, False),
    ("TIMEOUT", "TIMEOUT", [], None, False),
    ("NODE_FAIL", "NODE_FAIL", [], None, False),
    ("PREEMPTED", "PREEMPTED", [], None, False),
    ("BOOT_FAIL", "BOOT_FAIL", [], None, False),
    ("DEADLINE", "DEADLINE", [], None, False),
    ("OUT_OF_MEMORY", "OUT_OF_MEMORY", [], None, False),
    # flags squeue prints instead of the base
    ("COMPLETING", None, ["COMPLETING"], None, True),
    ("CONFIGURING", "RUNNING", ["CONFIGURING"], None, True),
    ("RESIZING", "RUNNING", ["RESIZING"], None, True),
    ("REQUEUED", "PENDING", ["REQUEUED"], None, True),
    ("REQUEUE_HOLD", "PENDING", ["REQUEUE_HOLD"], None, True),
    ("REQUEUE_FED", "PENDING", ["REQUEUE_FED"], None, True),
    ("SPECIAL_EXIT", "PENDING", ["SPECIAL_EXIT"], None, True),
    ("RESV_DEL_HOLD", "PENDING", ["RESV_DEL_HOLD"], None, True),
    ("STOPPED", "RUNNING", ["STOPPED"], None, True),
    ("SIGNALING", None, ["SIGNALING"], None, True),
    ("STAGE_OUT", None, ["STAGE_OUT"], None, True),
    ("REVOKED", None, ["REVOKED"], None, False),
    # compact codes (squeue %t)
    ("PD", "PENDING", [], None, True),
    ("R", "RUNNING", [], None, True),
    ("CG", None, ["COMPLETING"], None, True),
    ("OOM", "OUT_OF_MEMORY", [], None, False),
    ("NF", "NODE_FAIL", [], None, False),
    ("RH", "PENDING", ["REQUEUE_HOLD"], None, True),
    # any case, base and flags joined
    ("running", "RUNNING", [], None, True),
    ("PENDING+REQUEUED", "PENDING", ["REQUEUED"], None, True),
])
def test_parse_job_state(text, base, flags, cancelled_by, active):
    state = parse_job_state(text)
    assert state.base == base
    assert sorted(state.flags) == flags
    assert state.cancelled_by == cancelled_by
    assert state.active is active
    assert state.raw == text


@pytest.mark.parametrize("text", ["", None, "RUN", "PEND", "NODE", "CANCELLED by", "CANCELLED by x",
                                  "RUNNING+COMPLETED", "DONE", "R U N"])
def test_not_a_state(text):
    with pytest.raises(JobStateError):
        parse_job_state(text)


@pytest.mark.parametrize("text, names, expected", [
    ("CANCELLED by 1234", ["CANCELLED"], True),
    ("CANCELLED by 1234", ["CA"], True),
    ("COMPLETING", ["COMPLETING"], True),
    ("COMPLETING", ["COMPLETED"], False),  # whole words, never prefixes
    ("REQUEUE_HOLD", ["PENDING"], True),
    ("REQUEUE_HOLD", ["REQUEUED"], False),
    ("NODE_FAIL", ["nf"], True),
    ("OUT_OF_MEMORY", ["FAILED"], False),
])
def test_state_matches(text, names, expected):
    assert state_matches(parse_job_state(text), names) is expected


def test_state_matches_rejects_unknown_names():
    with pytest.raises(JobStateError):
        state_matches(parse_job_state("PENDING"), ["PEND"])


@pytest.mark.parametrize("text, reason, held", [
    ("PENDING", "JobHeldAdmin", True),
    ("PENDING", "JobHeldUser", True),
    ("PENDING", "Priority", False),
    ("PENDING", "BeginTime", False),
    ("REQUEUE_HOLD", "JobHeldAdmin", True),
    ("SPECIAL_EXIT", "", True),
    # scontrol hold on a RUNNING job: it keeps running, reason JobHeldAdmin (recorded on 22.05)
    ("RUNNING", "JobHeldAdmin", True),
    ("RUNNING", "None", False),
    ("COMPLETED", "JobHeldAdmin", False),
])
def test_is_held(text, reason, held):
    assert is_held(parse_job_state(text), reason) is held

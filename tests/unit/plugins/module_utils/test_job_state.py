# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Job states: every spelling to base + flags, matched whole, never by prefix."""

from __future__ import annotations

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import (
    BASE_STATES,
    COMPACT_CODES,
    FLAG_STATES,
    JobStateError,
    hold_kind,
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
    # 25.11+: an expedited requeue (sbatch --requeue=expedite) is being checked; the job is
    # PENDING again (job_state_string prints EXPEDITING, the compact form PD)
    ("EXPEDITING", "PENDING", ["EXPEDITING"], None, True),
    # squeue -O StateComplete (job_state_string_complete): base, then every flag, with commas
    ("PENDING,EXPEDITING", "PENDING", ["EXPEDITING"], None, True),
    ("PENDING,LAUNCH_FAILED,REQUEUE_HOLD", "PENDING", ["LAUNCH_FAILED", "REQUEUE_HOLD"], None, True),
    ("CANCELLED,COMPLETING", "CANCELLED", ["COMPLETING"], None, True),
    ("RUNNING,CONFIGURING,POWER_UP_NODE", "RUNNING", ["CONFIGURING", "POWER_UP_NODE"], None, True),
    ("COMPLETED,RECONFIG_FAIL", "COMPLETED", ["RECONFIG_FAIL"], None, False),
])
def test_parse_job_state(text, base, flags, cancelled_by, active):
    state = parse_job_state(text)
    assert state.base == base
    assert sorted(state.flags) == flags
    assert state.cancelled_by == cancelled_by
    assert state.active is active
    assert state.raw == text


@pytest.mark.parametrize("words, base, flags", [
    # squeue/sacct --json job_state lists (data_parser v0.0.38-v0.0.44 flag table)
    (["PENDING"], "PENDING", []),
    (["PENDING", "REQUEUED"], "PENDING", ["REQUEUED"]),
    (["PENDING", "EXPEDITING"], "PENDING", ["EXPEDITING"]),
    (["PENDING", "LAUNCH_FAILED", "REQUEUE_HOLD"], "PENDING", ["LAUNCH_FAILED", "REQUEUE_HOLD"]),
    (["PENDING", "SPECIAL_EXIT"], "PENDING", ["SPECIAL_EXIT"]),
    (["PENDING", "RESV_DEL_HOLD"], "PENDING", ["RESV_DEL_HOLD"]),
    (["PENDING", "REQUEUE_FED"], "PENDING", ["REQUEUE_FED"]),
    (["RUNNING", "RESIZING"], "RUNNING", ["RESIZING"]),
    (["RUNNING", "SIGNALING"], "RUNNING", ["SIGNALING"]),
    (["RUNNING", "STAGE_OUT"], "RUNNING", ["STAGE_OUT"]),
    (["COMPLETED", "COMPLETING"], "COMPLETED", ["COMPLETING"]),
    (["NODE_FAIL", "UPDATE_DB"], "NODE_FAIL", ["UPDATE_DB"]),
    (["CANCELLED", "REVOKED"], "CANCELLED", ["REVOKED"]),
])
def test_parse_json_state_lists(words, base, flags):
    state = parse_job_state(words)
    assert (state.base, sorted(state.flags), state.known) == (base, flags, True)
    assert state.word == words[0]


def test_every_word_of_slurm_is_known():
    """Every base, flag and compact code of job_state_string()/job_state_string_compact() and
    the data parsers' JOB_STATE table (22.05-26.05) parses as a known state."""
    for word in list(BASE_STATES) + list(FLAG_STATES) + list(COMPACT_CODES):
        assert parse_job_state(word).known, word
    assert "EXPEDITING" in FLAG_STATES and "EX" not in COMPACT_CODES


@pytest.mark.parametrize("text, word", [
    # a later release's word, Slurm's "?" for a base it cannot name, prefixes of real words:
    # kept as Slurm wrote them, never guessed, never "active", never "ended"
    ("WARPING", "WARPING"),
    ("?", "?"),
    ("RUN", "RUN"),
    ("PEND", "PEND"),
    ("NODE", "NODE"),
    ("DONE", "DONE"),
    ("R U N", "R U N"),
    ("PENDING,FUTURE_FLAG", "PENDING"),
    (["RUNNING", "FUTURE_FLAG"], "RUNNING"),
    ("CANCELLED by x", "CANCELLED BY X"),
    ("PENDING\ufffd", "PENDING\ufffd"),   # a byte that was no UTF-8, decoded as U+FFFD
])
def test_unknown_words_are_kept_not_guessed(text, word):
    state = parse_job_state(text)
    assert state.word == word
    assert not state.known and not state.active
    assert state.unknown


@pytest.mark.parametrize("text", ["", None, "  ", "+", [], "RUNNING+COMPLETED", ["PENDING", "FAILED"]])
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
    ("EXPEDITING", ["PENDING"], True),
    ("EXPEDITING", ["REQUEUED"], False),
    ("FUTURE", ["PENDING"], False),
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


@pytest.mark.parametrize("text, reason, kind", [
    ("PENDING", "JobHeldUser", "user"),
    ("PENDING", "JobHeldAdmin", "admin"),
    ("RUNNING", "JobHeldAdmin", "admin"),
    # holds slurmctld puts on a job itself (state_desc texts of src/slurmctld/job_mgr.c, which
    # squeue prints as the reason)
    ("PENDING", "launch failed requeued held", "slurm"),        # launch or prolog failure
    ("PENDING", "user env retrieval failed requeued held", "slurm"),
    ("PENDING", "job requeued in held state", "slurm"),         # requeuehold, expedited requeue
    ("REQUEUE_HOLD", "job requeued in held state", "slurm"),
    ("SPECIAL_EXIT", "job requeued in special exit state", "slurm"),
    ("PENDING", "JobHoldMaxRequeue", "slurm"),                  # requeued MaxBatchRequeue times
    ("RESV_DEL_HOLD", "ReservationDeleted", "slurm"),
    (["PENDING", "LAUNCH_FAILED", "REQUEUE_HOLD"], "None", "slurm"),
    ("PENDING", "Launch Failed Requeued HELD", "slurm"),
    # not held
    ("PENDING", "Priority", None),
    ("PENDING", "Resources", None),
    ("PENDING", "ReqNodeNotAvail, UnavailableNodes:n[1-2]", None),
    ("PENDING", "JobLaunchFailure", None),      # the reason of a job that failed, not held
    ("EXPEDITING", "None", None),               # Slurm requeues it by itself
    ("RUNNING", "launch failed requeued held", None),
    ("FAILED", "launch failed requeued held", None),
    ("FUTURE_STATE", "JobHeldAdmin", None),     # unknown: nothing is acted on
    ("PENDING", "\ufffd held \ufffd", "slurm"),
])
def test_hold_kind(text, reason, kind):
    assert hold_kind(parse_job_state(text), reason) == kind
    assert is_held(parse_job_state(text), reason) is (kind is not None)


# squeue(1) "JOB STATE CODES" of 22.05, 24.11 and 26.05 (the same 24 pairs in each man page;
# EXPEDITING, 25.11+, is only in the code: job_state_string(), no compact code of its own).
MAN_PAGE_CODES = (
    "BF BOOT_FAIL", "CA CANCELLED", "CD COMPLETED", "CF CONFIGURING", "CG COMPLETING",
    "DL DEADLINE", "F FAILED", "NF NODE_FAIL", "OOM OUT_OF_MEMORY", "PD PENDING", "PR PREEMPTED",
    "R RUNNING", "RD RESV_DEL_HOLD", "RF REQUEUE_FED", "RH REQUEUE_HOLD", "RQ REQUEUED",
    "RS RESIZING", "RV REVOKED", "SI SIGNALING", "SE SPECIAL_EXIT", "SO STAGE_OUT", "ST STOPPED",
    "S SUSPENDED", "TO TIMEOUT",
)


@pytest.mark.parametrize("pair", MAN_PAGE_CODES)
def test_every_code_of_the_man_page(pair):
    code, word = pair.split()
    assert parse_job_state(code) == parse_job_state(word)
    assert parse_job_state(code).known and parse_job_state(word).word == word

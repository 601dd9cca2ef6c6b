# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The module options (_options): ArgumentSpec merged from shared parts, and the readers of option
values every module shares (hostlists, state names, times), from tables of cases."""

from __future__ import annotations

import time

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint_options import CHECKPOINT_OPTIONS
from ansible_collections.clusterops.slurm.plugins.module_utils._job_actions import SUBMIT_RETRY_OPTIONS
from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import parse_job_state
from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import state_matches as job_state_matches
from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import parse_state, state_matches
from ansible_collections.clusterops.slurm.plugins.module_utils._options import (
    ArgumentSpec,
    hostlist_option,
    option_value,
    parse_time_option,
    state_names_option,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SLURM_COMMAND_OPTIONS
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure


def test_merge_joins_options_and_rules_and_copies():
    own = ArgumentSpec(dict(name=dict(type="str")), mutually_exclusive=[("a", "b")])
    merged = own.merge(SLURM_COMMAND_OPTIONS, SUBMIT_RETRY_OPTIONS)
    assert sorted(merged.argument_spec) == ["command_timeout", "name", "retry_delay", "slurm_bin_dir",
                                            "slurm_conf", "submit_retries"]
    kwargs = merged.module_kwargs()
    assert kwargs["mutually_exclusive"] == [("a", "b")] and kwargs["supports_check_mode"] is True
    assert "required_if" not in kwargs   # an empty rule is left out
    merged.argument_spec["command_timeout"]["default"] = 1
    assert SLURM_COMMAND_OPTIONS.argument_spec["command_timeout"]["default"] == 60
    assert own.argument_spec == dict(name=dict(type="str"))


def test_an_option_has_one_home():
    with pytest.raises(ValueError, match="options defined twice: run_folder"):
        ArgumentSpec(dict(run_folder=dict(type="str"))).merge(CHECKPOINT_OPTIONS)
    with pytest.raises(ValueError, match="options defined twice: path"):   # an alias is a name too
        ArgumentSpec(dict(path=dict(type="str"))).merge(CHECKPOINT_OPTIONS)
    with pytest.raises(ValueError, match="not a rule between options: required_by_magic"):
        ArgumentSpec({}, required_by_magic=[])


OPTIONS = [
    dict(id="a hostlist split by Ansible on its commas is joined back",
         check=lambda p: hostlist_option(p, "nodes"), params={"nodes": ["n[1", "3]", "m2"]},
         value=["n1", "n3", "m2"]),
    dict(id="no nodes", check=lambda p: hostlist_option(p, "nodes"), params={"nodes": []}, value=[]),
    dict(id="a suffix after the brackets, by 22.05's rules",
         check=lambda p: hostlist_option(p, "nodes", (22, 5, 8)), params={"nodes": ["n[1-2]-ib"]},
         error="nodes: "),
    dict(id="node state names, whole", params={"states": ["idle", "DRAIN", "drained"]},
         check=lambda p: state_names_option(p, "states", state_matches, parse_state("idle")),
         value=["idle", "DRAIN", "drained"]),
    dict(id="a node state name after a match is still checked", params={"states": ["IDLE", "DRAINY"]},
         check=lambda p: state_names_option(p, "states", state_matches, parse_state("idle")),
         error="states: "),
    dict(id="job state names, long or compact", params={"states": ["PD", "NODE_FAIL"]},
         check=lambda p: state_names_option(p, "states", job_state_matches, parse_job_state("PENDING")),
         value=["PD", "NODE_FAIL"]),
    dict(id="not a job state", params={"states": ["PENDING", "RUN"]},
         check=lambda p: state_names_option(p, "states", job_state_matches, parse_job_state("PENDING")),
         error="states: not a Slurm job state"),
    dict(id="any parser's ValueError names the option", params={"start": "yesterday"},
         check=lambda p: option_value(p, "start", int), error="start: invalid literal"),
]


@pytest.mark.parametrize("case", OPTIONS, ids=[c["id"] for c in OPTIONS])
def test_option_checks(case):
    if "error" in case:
        with pytest.raises(TaskFailure) as failure:
            case["check"](case["params"])
        assert failure.value.msg.startswith(case["error"]) and failure.value.result == {}
    else:
        assert case["check"](case["params"]) == case["value"]


@pytest.mark.parametrize("value, expected", [
    (None, None), ("", None), ("1700000000", 1700000000), (1700000000, 1700000000),
    ("now", 1700000000), ("now-2hours", 1700000000 - 7200), ("now-7days", 1700000000 - 7 * 86400),
    ("now+30", 1700000030), ("now-1weeks", 1700000000 - 604800),
    ("2026-03-01", int(time.mktime((2026, 3, 1, 0, 0, 0, 0, 0, -1)))),
    ("2026-03-01T12:30", int(time.mktime((2026, 3, 1, 12, 30, 0, 0, 0, -1)))),
])
def test_parse_time_option(value, expected):
    assert parse_time_option(value, now=1700000000) == expected


@pytest.mark.parametrize("value", ["yesterday", "now-2fortnights", "2026-13-01", "12:00"])
def test_parse_time_option_rejects(value):
    with pytest.raises(ValueError):
        parse_time_option(value)

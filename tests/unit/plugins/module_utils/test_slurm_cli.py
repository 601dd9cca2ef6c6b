# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one summary of a failed Slurm command (slurm_words) and the option checks every module
shares, from tables of cases; stderr texts as the dev clusters printed them."""

from __future__ import annotations

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import parse_job_state
from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import state_matches as job_state_matches
from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import parse_state, state_matches
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SlurmCommandError,
    TaskFailure,
    failure_words,
    hostlist_option,
    option_value,
    slurm_words,
    state_names_option,
)

SLURMDBD_DOWN = ("sacct: error: Sending PersistInit msg: Connection refused\n"
                 "sacct: error: Problem talking to the database: Connection refused\n")

WORDS = [
    dict(id="one error line", rc=1, out="", err="slurm_update error: Invalid node state specified\n",
         words="slurm_update error: Invalid node state specified"),
    dict(id="every error line: the last one says the most", rc=1, out="", err=SLURMDBD_DOWN,
         words="sacct: error: Sending PersistInit msg: Connection refused; "
               "sacct: error: Problem talking to the database: Connection refused"),
    dict(id="a warning before the error is left out", rc=1, out="",
         err="sbatch: Warning: can't honor --ntasks-per-node\nsbatch: error: invalid partition specified: nosuch\n",
         words="sbatch: error: invalid partition specified: nosuch"),
    dict(id="no error word: every line of stderr", rc=1, out="", err="Invalid job id specified\n  two\n",
         words="Invalid job id specified; two"),
    dict(id="nothing on stderr: the first line of stdout only", rc=2, out="first\nsecond\n", err="",
         words="first"),
    dict(id="no output at all", rc=137, out="", err=None, words="rc=137, no output"),
]


@pytest.mark.parametrize("case", WORDS, ids=[c["id"] for c in WORDS])
def test_slurm_words(case):
    assert slurm_words(case["rc"], case["out"], case["err"]) == case["words"]
    exc = SlurmCommandError("msg", ["sacct"], case["rc"], case["out"], case["err"])
    assert failure_words(exc) == case["words"]
    assert exc.result() == dict(cmd=["sacct"], rc=case["rc"], stdout=case["out"], stderr=case["err"])


def test_failure_words_of_an_answer_that_could_not_be_read():
    assert failure_words(ValueError("squeue line 3 has 2 fields")) == "squeue line 3 has 2 fields"


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

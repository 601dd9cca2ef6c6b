# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one summary of a failed Slurm command (slurm_words), from a table of cases; stderr texts as
the dev clusters printed them."""

from __future__ import annotations

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SlurmCommandError,
    failure_words,
    slurm_words,
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
    assert exc.result() == dict(cmd=["sacct"], rc=case["rc"], stdout=case["out"], stderr=case["err"],
                                failed_cause=exc.cause)


def test_failure_words_of_an_answer_that_could_not_be_read():
    assert failure_words(ValueError("squeue line 3 has 2 fields")) == "squeue line 3 has 2 fields"

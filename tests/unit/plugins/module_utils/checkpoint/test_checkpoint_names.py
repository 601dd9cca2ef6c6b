# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_checkpoint.names: the entry names of each layout, temporary entries, checkpoint_name."""

from __future__ import annotations


import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------

NAME_CASES = [
    ("step_000001000", (ck.CONTRACT, "dir", 1000, None)),
    ("step_0900000", (ck.CONTRACT, "dir", 900000, None)),
    ("step-42", (ck.DCP, "dir", 42, None)),
    ("checkpoint-500", (ck.HUGGINGFACE, "dir", 500, None)),
    ("global_step7", (ck.DEEPSPEED, "dir", 7, None)),
    ("iter_0001000", (ck.MEGATRON, "dir", 1000, None)),
    ("checkpoint_epoch_10_step_5.pth", (ck.TORCH_FILE, "file", 5, 10)),
    ("checkpoint_epoch_2_step_100.pt", (ck.TORCH_FILE, "file", 100, 2)),
    ("epoch=3-step=1200.ckpt", (ck.LIGHTNING, "any", 1200, 3)),
    ("epoch=3-step=1200-v1.ckpt", (ck.LIGHTNING, "any", 1200, 3)),
    ("epoch=3-step=1200-val_loss=0.12.ckpt", (ck.LIGHTNING, "any", 1200, 3)),
    ("step_", None),
    ("step_12a", None),
    ("xstep_12", None),
    ("step_12.bak", None),
    ("checkpoint_epoch_2_step_100.pth.tmp", None),
    ("checkpoint-\u0661\u0662", None),  # Arabic-Indic digits are not step numbers
    ("handpicked", None),
    ("last.ckpt", None),
    ("global_step7_universal", None),
]


@pytest.mark.parametrize("name, expected", NAME_CASES, ids=[c[0] for c in NAME_CASES])
def test_parse_name(name, expected):
    assert ck.parse_name(name) == expected


# A user's folder may be named with a newline at its end; a shell's $(...) strips it, so the launcher would be
# given a path that does not exist. No layout takes such a name (the patterns end at \Z, not $).
@pytest.mark.parametrize("name", ["step_000000300\n", "step-300\n", "checkpoint-300\n", "global_step300\n",
                                  "iter_0000300\n", "checkpoint_epoch_1_step_300.pt\n", "epoch_3\n", "ep1-ba300\n",
                                  "300\n", "epoch=1-step=300\n.ckpt", "step=300\n-last.ckpt"])
def test_a_name_with_a_trailing_newline_is_no_checkpoint(name):
    assert ck.parse_name(name) is None
    assert ck.parse_name(name.replace("\n", "")) is not None or "last" in name


@pytest.mark.parametrize("name, temporary", [
    ("tmp-step_000000001.12.ab", True), ("ckpt.pt.tmp", True), ("tmp-checkpoint-10", True),
    ("step_1", False), ("tmpstep_1", False), ("FINISHED", False)])
def test_is_temporary(name, temporary):
    assert ck.is_temporary(name) is temporary


def test_checkpoint_name_pads_to_nine_digits():
    assert ck.checkpoint_name(1000) == "step_000001000"
    assert ck.checkpoint_name(12345678901) == "step_12345678901"
    for bad in (-1, 1.0, True, "1"):
        with pytest.raises(ValueError):
            ck.checkpoint_name(bad)

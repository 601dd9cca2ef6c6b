# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Newer invalid checkpoints set aside before a resubmission (issue 39 part 3, ``_checkpoint/aside.py``): renamed
to ``tmp-0-invalid-<name>``, never deleted; older ones, valid ones and what no layout reads stay; the folder then
chooses the same checkpoint and lists no training state nobody explains. tests/trainers/test_accelerate.py shows
the real Accelerate's next save succeeding after it."""

from __future__ import annotations

import os

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck

from checkpoint_builders import hf_folder, truncate  # noqa: E402 pylint: disable=import-error


def test_newer_invalid_checkpoints_are_renamed_aside_and_nothing_else(tmp_path):
    for step in (100, 200, 300, 400):
        hf_folder(tmp_path, step)
    truncate(str(tmp_path / "checkpoint-400" / "model.safetensors"), 9)
    os.remove(str(tmp_path / "checkpoint-300" / "trainer_state.json"))
    truncate(str(tmp_path / "checkpoint-100" / "optimizer.pt"), 9)   # older than the choice: left alone
    os.makedirs(str(tmp_path / "handpicked"))
    before = ck.inspect(str(tmp_path)).latest_valid.name
    moved = ck.set_aside_newer_invalid(str(tmp_path))
    assert moved == [("checkpoint-300", "tmp-0-invalid-checkpoint-300"),
                     ("checkpoint-400", "tmp-0-invalid-checkpoint-400")]
    assert sorted(os.listdir(str(tmp_path))) == ["checkpoint-100", "checkpoint-200", "handpicked",
                                                 "tmp-0-invalid-checkpoint-300", "tmp-0-invalid-checkpoint-400"]
    assert os.path.getsize(str(tmp_path / "tmp-0-invalid-checkpoint-400" / "optimizer.pt")) > 0  # moved whole
    report = ck.inspect(str(tmp_path))
    assert report.latest_valid.name == before == "checkpoint-200"
    assert report.unexplained == [] and report.warnings == []
    assert ck.set_aside_newer_invalid(str(tmp_path)) == []


def test_set_aside_twice_under_the_same_name_and_nothing_valid(tmp_path):
    os.makedirs(str(tmp_path / "tmp-0-invalid-checkpoint-200"))
    hf_folder(tmp_path, 200, state=False)   # no valid checkpoint at all (a replica holds the one resumed from)
    assert ck.set_aside_newer_invalid(str(tmp_path)) == [("checkpoint-200", "tmp-0-invalid-checkpoint-200-2")]
    assert ck.set_aside_newer_invalid(str(tmp_path / "absent")) == []


def test_the_resubmission_sets_them_aside_as_the_owner_and_says_so(tmp_path):
    """act.set_aside, called by act.resubmit before sbatch: the renames as the run's owner, each a warning."""
    import pwd  # pylint: disable=import-outside-toplevel
    from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import act  # noqa: E402

    class Module(object):
        def __init__(self):
            self.warnings = []

        def warn(self, text):
            self.warnings.append(text)

    for step in (100, 200):
        hf_folder(tmp_path, step)
    os.remove(str(tmp_path / "checkpoint-200" / "optimizer.pt"))
    run = {"name": "llm", "owner": pwd.getpwuid(os.geteuid()).pw_name, "checkpoint_dir": str(tmp_path),
           "checkpoint_validate": "sizes", "checkpoint_name_template": None}
    module = Module()
    act.set_aside(module, run)
    assert module.warnings == ["llm: newer invalid checkpoint checkpoint-200 renamed tmp-0-invalid-checkpoint-200 "
                               "before the resubmission"]
    assert sorted(os.listdir(str(tmp_path))) == ["checkpoint-100", "tmp-0-invalid-checkpoint-200"]
    module = Module()
    act.set_aside(module, dict(run, owner="no-such-user-of-this-host"))
    assert module.warnings and "not set aside before the resubmission" in module.warnings[0]

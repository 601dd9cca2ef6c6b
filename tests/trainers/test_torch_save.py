# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The plain torch.save loop: ``checkpoint_epoch_<E>_step_<S>.pth`` holding model, optimizer, schedule and step
(torch 2.13.0); a save killed, the newest file missing or cut; ``torch.load`` of the collection's answer must give
that save's state."""

from __future__ import annotations

import os

import pytest
import torch

from conftest import adamw_and_schedule, assert_right, damage, fresh_copy, kill_at, Killed, snapshot_of, tiny_gpt2  # pylint: disable=import-error

transformers = pytest.importorskip("transformers")


def _setup():
    torch.manual_seed(0)
    model = tiny_gpt2()
    return (model,) + adamw_and_schedule(model)


state = snapshot_of


def train(root, saved=None):
    os.makedirs(str(root), exist_ok=True)
    model, optimizer, schedule = _setup()
    data = torch.randint(0, 32, (16, 8), generator=torch.Generator().manual_seed(0))
    for step in range(1, 5):
        batch = data[step:step + 4]
        model(input_ids=batch, labels=batch).loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % 2 == 0:
            name = "checkpoint_epoch_0_step_%d.pth" % step
            torch.save(state(step, model, optimizer, schedule), os.path.join(str(root), name))
            if saved is not None:
                saved[name] = state(step, model, optimizer, schedule)


def resume(path):
    model, optimizer, schedule = _setup()
    loaded = torch.load(path, weights_only=True)
    model.load_state_dict(loaded["model"])
    optimizer.load_state_dict(loaded["optimizer"])
    schedule.load_state_dict(loaded["scheduler"])
    return state(loaded["step"], model, optimizer, schedule)


def test_killed_missing_or_cut(tmp_path):
    root, saved = tmp_path / "run", {}
    train(root, saved)
    run = tmp_path / "killed"
    with pytest.raises(Killed), kill_at(run, 1):
        train(run)
    cases = [("killed before the second save", run)]
    for kind in ("missing", "cut"):
        copy_ = fresh_copy(root, tmp_path / kind)
        damage(copy_, kind, "checkpoint_epoch_0_step_4.pth")
        cases.append(("the newest %s" % kind, copy_))
    assert assert_right(cases, resume, saved) == 3

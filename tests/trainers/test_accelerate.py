# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Accelerate (1.16.0) ``save_state``: a tiny Llama built from its config, AdamW and a LambdaLR schedule, saved
every 2 steps under the names Accelerate's own examples use (``step_<S>``, ``epoch_<E>``) and under automatic
naming (``checkpoints/checkpoint_<N>``), with and without a registered object (``register_for_checkpointing``:
``custom_checkpoint_0.pkl``, written after everything else). Each save killed at each file of save_state's order,
each file of a whole save missing or cut; ``load_state`` from the collection's answer must give the weights,
optimizer state, schedule and registered object of that save."""

from __future__ import annotations

import copy
import os

import pytest
import torch

from conftest import adamw_and_schedule, assert_right, damage, damages, fresh_copy, kill_at, Killed  # pylint: disable=import-error

accelerate = pytest.importorskip("accelerate")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SAVES = 2   # saves of each run, 2 steps apart


class Progress(object):
    """A registered object: the training loop's own counters (what custom_checkpoint_0.pkl holds)."""

    def __init__(self):
        self.step = 0

    def state_dict(self):
        return {"step": self.step}

    def load_state_dict(self, state):
        self.step = state["step"]


def _setup(project_dir=None, objects=True):
    accelerate.state.AcceleratorState._reset_state(True)  # pylint: disable=protected-access
    torch.manual_seed(0)
    config = accelerate.utils.ProjectConfiguration(project_dir=str(project_dir), automatic_checkpoint_naming=True) \
        if project_dir is not None else None
    acc = accelerate.Accelerator(cpu=True, project_config=config)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=16))
    optimizer, schedule = adamw_and_schedule(model)
    model, optimizer, schedule = acc.prepare(model, optimizer, schedule)
    progress = Progress()
    if objects:
        acc.register_for_checkpointing(progress)
    return acc, model, optimizer, schedule, progress


def snapshot(model, optimizer, schedule, progress):
    return {"step": progress.step, "model": copy.deepcopy(model.state_dict()),
            "optimizer": copy.deepcopy(optimizer.state_dict()), "scheduler": copy.deepcopy(schedule.state_dict())}


def train(root, naming, objects, saved=None):
    """Two saves, 2 steps apart, into ``root`` (the run folder); ``saved`` gets each save's snapshot by name."""
    acc, model, optimizer, schedule, progress = _setup(os.path.dirname(str(root)) if naming == "checkpoint_<N>"
                                                       else None, objects)
    data = torch.randint(0, 32, (16, 8), generator=torch.Generator().manual_seed(0))
    for index in range(SAVES):
        for _micro in range(2):
            batch = data[progress.step % 16:progress.step % 16 + 4]
            loss = model(input_ids=batch, labels=batch).loss
            acc.backward(loss)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            progress.step += 1
        name = {"step_<S>": "step_%d" % progress.step, "epoch_<E>": "epoch_%d" % index,
                "checkpoint_<N>": "checkpoint_%d" % index}[naming]
        if naming == "checkpoint_<N>":
            acc.save_state()
        else:
            acc.save_state(os.path.join(str(root), name))
        if saved is not None:
            saved[name] = snapshot(model, optimizer, schedule, progress)


def resumer(objects):
    def resume(path):
        acc, model, optimizer, schedule, progress = _setup(None, objects)
        acc.load_state(path)
        got = snapshot(model, optimizer, schedule, progress)
        if not objects:
            got["step"] = None
        return got
    return resume


KINDS = [("step_<S>", False), ("step_<S>", True), ("epoch_<E>", False), ("checkpoint_<N>", True),
         ("checkpoint_<N>", False)]


def _run_dir(base, naming):
    return base / "project" / "checkpoints" if naming == "checkpoint_<N>" else base / "run"


@pytest.fixture(scope="module", params=KINDS, ids=["%s%s" % (n, " objects" if o else "") for n, o in KINDS])
def whole(request, tmp_path_factory):
    naming, objects = request.param
    base = tmp_path_factory.mktemp("accelerate")
    root = _run_dir(base, naming)
    root.mkdir(parents=True)
    saved, order = {}, []
    with kill_at(root, None, order):
        train(root, naming, objects, saved)
    if not objects:
        for snap in saved.values():
            snap["step"] = None
    return naming, objects, root, saved, order


def test_the_save_order_is_the_one_the_checks_follow(whole):
    _naming, objects, _root, saved, order = whole
    newest = sorted(saved)[-1]
    last = [rel.split("/", 1)[1] for rel in order if rel.startswith(newest + "/")]
    assert last[:3] == ["model.safetensors", "optimizer.bin", "scheduler.bin"]
    assert last[3:] == ["random_states_0.pkl"] + (["custom_checkpoint_0.pkl"] if objects else [])


def test_a_save_killed_at_each_file(whole, tmp_path):
    naming, objects, _root, saved, order = whole
    newest = sorted(saved)[-1]
    first = len([rel for rel in order if not rel.startswith(newest + "/")])
    cases = []
    for n in range(first, len(order)):
        run = _run_dir(tmp_path / ("killed-%d" % n), naming)
        run.mkdir(parents=True)
        with pytest.raises(Killed), kill_at(run, n):
            train(run, naming, objects)
        cases.append(("killed before %s" % order[n], run))
    assert_right(cases, resumer(objects), saved)


def test_each_file_missing_or_cut(whole, tmp_path):
    _naming, objects, root, saved, _order = whole
    newest = sorted(saved)[-1]
    cases = []
    for kind, rel in damages(root / newest):
        run = fresh_copy(root, tmp_path / ("%s-%s" % (kind, rel.replace("/", "_"))))
        damage(run / newest, kind, rel)
        cases.append(("%s/%s %s" % (newest, rel, kind), run))
    assert_right(cases, resumer(objects), saved)


def test_after_a_fall_back_the_invalid_newer_save_is_set_aside_and_the_next_save_succeeds(tmp_path):
    """Automatic naming numbers its saves: resumed from checkpoint_0 past an invalid checkpoint_1, its next save
    is checkpoint_1 again, which save_state refuses ("already exists") while the invalid one stays (issue 39,
    part 3). set_aside_newer_invalid (what remediation runs before the resubmission) renames it aside; the
    resumed run's next save succeeds and is the collection's next answer."""
    from conftest import ask, ck  # pylint: disable=import-error,import-outside-toplevel
    run = _run_dir(tmp_path, "checkpoint_<N>")
    run.mkdir(parents=True)
    with pytest.raises(Killed), kill_at(run, 8):   # checkpoint_1 killed before custom_checkpoint_0.pkl
        train(run, "checkpoint_<N>", True)
    answer, _report = ask(run)
    assert os.path.basename(answer) == "checkpoint_0"
    assert ck.set_aside_newer_invalid(str(run)) == [("checkpoint_1", "tmp-0-invalid-checkpoint_1")]
    acc, _model, _optimizer, _schedule, _progress = _setup(run.parent, True)
    acc.load_state(answer)
    acc.project_configuration.iteration = 1   # the resumed run's next save number, as its script sets it
    acc.save_state()
    answer, report = ask(run)
    assert os.path.basename(answer) == "checkpoint_1", report.warnings
    assert "tmp-0-invalid-checkpoint_1" in [item["name"] for item in report.ignored]
    # Accelerate's own listing (load_state() under automatic naming) orders by the first number of each name
    acc.load_state()

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Hugging Face Trainer (transformers 5.25.0): checkpoint-<S> folders of a tiny GPT-2, a save killed at each
file of _save_checkpoint's order, each file of a whole save missing or cut; the Trainer resumes
(``train(resume_from_checkpoint=...)``) from the collection's answer with the step, weights, optimizer state and
schedule it had when that checkpoint was saved."""

from __future__ import annotations

import copy
import os

import pytest
import torch

from conftest import assert_right, damage, damages, fresh_copy, kill_at, Killed, tiny_gpt2  # pylint: disable=import-error

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

STEPS, EVERY = 4, 2


class _Data(torch.utils.data.Dataset):
    def __init__(self):
        self.x = torch.randint(0, 32, (64, 8), generator=torch.Generator().manual_seed(0))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


class _Resumed(Exception):
    pass


def snapshot(trainer, model):
    return {"step": trainer.state.global_step,
            "model": copy.deepcopy(model.state_dict()),
            "optimizer": copy.deepcopy(trainer.optimizer.state_dict()),
            "scheduler": copy.deepcopy(trainer.lr_scheduler.state_dict())}


class _Recorder(transformers.TrainerCallback):
    """Snapshots at each save (after it: what it wrote), or at the start of a resumed run (after the load)."""

    def __init__(self, stop=False):
        self.trainer, self.saved, self.resumed, self.stop = None, {}, None, stop

    def on_save(self, args, state, control, **kwargs):
        self.saved["checkpoint-%d" % state.global_step] = snapshot(self.trainer, kwargs["model"])

    def on_train_begin(self, args, state, control, **kwargs):
        if self.stop:
            self.resumed = snapshot(self.trainer, kwargs["model"])
            raise _Resumed()


def trainer(out, stop=False):
    torch.manual_seed(0)
    model = tiny_gpt2()
    args = transformers.TrainingArguments(
        output_dir=str(out), max_steps=STEPS, per_device_train_batch_size=4, save_strategy="steps",
        save_steps=EVERY, learning_rate=1e-2, lr_scheduler_type="linear", warmup_steps=1, report_to=[],
        use_cpu=True, logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=0)
    recorder = _Recorder(stop)
    made = transformers.Trainer(model=model, args=args, train_dataset=_Data(), callbacks=[recorder])
    recorder.trainer = made
    return made, recorder


def resume(path):
    made, recorder = trainer(os.path.dirname(path) + "-resumed", stop=True)
    try:
        made.train(resume_from_checkpoint=path)
    except _Resumed:
        return recorder.resumed
    raise AssertionError("the resumed run did not start")


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """One run with both saves whole: the run folder, the snapshots, the order of every file written."""
    root = tmp_path_factory.mktemp("hf") / "run"
    order = []
    made, recorder = trainer(root)
    with kill_at(root, None, order):
        made.train()
    assert sorted(recorder.saved) == ["checkpoint-2", "checkpoint-4"]
    return root, recorder.saved, order


def test_the_save_order_is_the_one_the_checks_follow(whole):
    _root, _saved, order = whole
    last = [rel.split("/", 1)[1] for rel in order if rel.startswith("checkpoint-4/")]
    assert last[-1] == "trainer_state.json" and "model.safetensors" in last
    assert last.index("optimizer.pt") < last.index("scheduler.pt") < last.index("rng_state.pth")


def test_a_save_killed_at_each_file(whole, tmp_path):
    _root, saved, order = whole
    first = len([rel for rel in order if rel.startswith("checkpoint-2/")])
    cases = []
    for n in range(first, len(order)):
        run = tmp_path / ("killed-%d" % n)
        made, _recorder = trainer(run)
        with pytest.raises(Killed), kill_at(run, n):
            made.train()
        cases.append(("killed before %s" % order[n], run))
    assert_right(cases, resume, saved)


def test_each_file_missing_or_cut(whole, tmp_path):
    root, saved, _order = whole
    cases = []
    for kind, rel in damages(root / "checkpoint-4"):
        run = fresh_copy(root, tmp_path / ("%s-%s" % (kind, rel.replace("/", "_"))))
        damage(run / "checkpoint-4", kind, rel)
        cases.append(("checkpoint-4/%s %s" % (rel, kind), run))
    assert_right(cases, resume, saved)

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lightning (2.6.6) ``ModelCheckpoint``: a tiny GPT-2 in a LightningModule, ``epoch=<E>-step=<S>.ckpt`` every 2
steps and ``last.ckpt``; a save killed at each file, each file of the newest save missing or cut;
``Trainer.fit(ckpt_path=...)`` from the collection's answer must start with that save's global step, weights,
optimizer state and schedule."""

from __future__ import annotations

import copy
import os

import pytest
import torch

from conftest import adamw_and_schedule, assert_right, damage, tiny_gpt2, fresh_copy, kill_at, Killed  # pylint: disable=import-error

L = pytest.importorskip("lightning")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

STEPS = 4


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = tiny_gpt2()

    def training_step(self, batch, _index):
        return self.net(input_ids=batch[0], labels=batch[0]).loss

    def configure_optimizers(self):
        optimizer, schedule = adamw_and_schedule(self)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class _Resumed(Exception):
    pass


def snapshot(trainer, module):
    return {"step": trainer.global_step, "model": copy.deepcopy(module.state_dict()),
            "optimizer": copy.deepcopy(trainer.optimizers[0].state_dict()),
            "scheduler": copy.deepcopy(trainer.lr_scheduler_configs[0].scheduler.state_dict())}


class _Recorder(L.Callback):
    def __init__(self, stop=False):
        self.saved, self.resumed, self.stop = {}, None, stop

    def on_train_batch_end(self, trainer, module, *_args):
        # ModelCheckpoint saves in its own on_train_batch_end, before this one (callbacks run in order)
        if trainer.global_step % 2 == 0:
            name = "epoch=%d-step=%d.ckpt" % (trainer.current_epoch, trainer.global_step)
            self.saved[name] = self.saved["last.ckpt"] = snapshot(trainer, module)

    def on_train_start(self, trainer, module):
        if self.stop:
            self.resumed = snapshot(trainer, module)
            raise _Resumed()


def fit(root, stop=False, ckpt_path=None, max_steps=STEPS):
    torch.manual_seed(0)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(
        torch.randint(0, 32, (64, 8), generator=torch.Generator().manual_seed(0))), batch_size=4)
    every = L.pytorch.callbacks.ModelCheckpoint(dirpath=str(root), every_n_train_steps=2, save_top_k=-1,
                                                save_last=True)
    recorder = _Recorder(stop)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=max_steps, callbacks=[every, recorder], logger=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    module = Tiny()
    try:
        trainer.fit(module, data, ckpt_path=ckpt_path)
    except _Resumed:
        return recorder.resumed
    assert not stop, "the resumed run did not start"
    return recorder.saved


def resume(path):
    # a run that goes on past the save (one at max_steps ends before on_train_start)
    return fit(os.path.dirname(path) + "-resumed", stop=True, ckpt_path=path, max_steps=STEPS + 2)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    root = tmp_path_factory.mktemp("lightning") / "run"
    order = []
    with kill_at(root, None, order):
        saved = fit(root)
    assert sorted(saved) == ["epoch=0-step=2.ckpt", "epoch=0-step=4.ckpt", "last.ckpt"], sorted(saved)
    return root, saved, order


def test_a_save_killed_at_each_file(whole, tmp_path):
    _root, saved, order = whole
    first = order.index("epoch=0-step=4.ckpt")
    cases = []
    for n in range(first, len(order)):
        run = tmp_path / ("killed-%d" % n)
        with pytest.raises(Killed), kill_at(run, n):
            fit(run)
        cases.append(("killed before %s" % order[n], run))
    assert_right(cases, resume, saved)


def test_the_newest_file_missing_or_cut(whole, tmp_path):
    root, saved, _order = whole
    cases = []
    for kind in ("missing", "cut"):
        for name in ("epoch=0-step=4.ckpt", "last.ckpt"):
            run = fresh_copy(root, tmp_path / ("%s-%s" % (kind, name)))
            damage(run, kind, name)
            cases.append(("%s %s" % (name, kind), run))
    assert_right(cases, resume, saved)

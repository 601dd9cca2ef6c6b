# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""torch.distributed.checkpoint (torch 2.13.0): a tiny language model's weights, AdamW state (``get_state_dict``), schedule
and step in ``step-<S>`` folders. With collectives (one gloo rank): ``dcp.save`` and ``dcp.async_save`` (thread)
killed at each file of their order (``__0_0.distcp``, ``.metadata.tmp``, its rename to ``.metadata``), each file
of a whole save missing or cut. Without (``use_collectives=False``, two gloo ranks, rank-local
``__<rank>.metadata``): rank 1 killed at each of its files, each file missing or cut. ``dcp.load`` (and
``set_state_dict``) from the collection's answer must give that save's state, on every rank."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

from conftest import (  # pylint: disable=import-error
    adamw_and_schedule, ask, assert_right, damage, damages, fresh_copy, kill_at, Killed, same_state, snapshot_of,
)


class Tiny(torch.nn.Module):
    """A tiny language model of torch's own layers (the rank processes start faster without transformers)."""

    def __init__(self):
        super().__init__()
        self.embed, self.head = torch.nn.Embedding(32, 8), torch.nn.Linear(8, 32)

    def forward(self, input_ids, labels):
        logits = self.head(self.embed(input_ids))
        return torch.nn.functional.cross_entropy(logits.view(-1, 32), labels.view(-1))


def _setup(seed=0):
    torch.manual_seed(seed)
    model = Tiny()
    return (model,) + adamw_and_schedule(model)


snapshot = snapshot_of


def _state(step, model, optimizer, schedule):
    msd, osd = get_state_dict(model, optimizer)
    return {"model": msd, "optim": osd, "extra": {"step": step, "scheduler": schedule.state_dict()}}


def train(root, how, seed=0, saved=None):
    """Two saves (steps 2 and 4) into ``root``; ``how``: ``save``, ``async_save`` or ``local`` (rank-local)."""
    model, optimizer, schedule = _setup(seed)
    data = torch.randint(0, 32, (16, 8), generator=torch.Generator().manual_seed(seed))
    for step in range(1, 5):
        batch = data[step:step + 4]
        model(batch, batch).backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % 2:
            continue
        path = os.path.join(str(root), "step-%d" % step)
        if how == "async_save":
            dcp.async_save(_state(step, model, optimizer, schedule), checkpoint_id=path,
                           async_checkpointer_type=AsyncCheckpointerType.THREAD).result()
        else:
            dcp.save(_state(step, model, optimizer, schedule), checkpoint_id=path, use_collectives=how != "local")
        if saved is not None:
            saved["step-%d" % step] = snapshot(step, model, optimizer, schedule)


def resume(path, seed=0):
    model, optimizer, schedule = _setup(seed)
    state = _state(0, model, optimizer, schedule)
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    schedule.load_state_dict(state["extra"]["scheduler"])
    return snapshot(state["extra"]["step"], model, optimizer, schedule)


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method="file://%s" % store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("how", ["save", "async_save"])
def test_collective_saves_killed_at_each_file_missing_or_cut(one_rank, tmp_path, how):
    root, saved, order = tmp_path / "run", {}, []
    with kill_at(root, None, order):
        train(root, how, saved=saved)
    assert [rel.split("/", 1)[1] for rel in order if rel.startswith("step-4/")] == [
        "__0_0.distcp", ".metadata.tmp", ".metadata"]
    cases = []
    for n in range(order.index("step-4/__0_0.distcp"), len(order)):
        run = tmp_path / ("killed-%d" % n)
        with pytest.raises((Killed, CheckpointException)), kill_at(run, n):
            train(run, how)
        cases.append(("%s killed before %s" % (how, order[n]), run))
    for kind, rel in damages(root / "step-4"):
        run = fresh_copy(root, tmp_path / ("%s-%s" % (kind, rel)))
        damage(run / "step-4", kind, rel)
        cases.append(("step-4/%s %s" % (rel, kind), run))
    assert_right(cases, resume, saved)


# Rank-local metadata: two gloo ranks in processes of their own (torch.multiprocessing.spawn).

def _rank_main(rank, store, job, folder, work):
    """One of the two ranks. ``save``: for each ``(run folder, n)`` of ``work`` the two saves, rank 1's write of
    its file ``n`` killed (None: whole, the snapshots kept beside ``folder``); ``load``: ``resume`` from each path
    of ``work``, the results beside ``folder``."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://%s" % store, rank=rank, world_size=2)
    try:
        results = {}
        for item in work:
            if job == "save":
                run, kill = item
                try:
                    with kill_at(run, kill if rank == 1 else None):
                        train(run, "local", seed=rank, saved=results if kill is None else None)
                except (Killed, CheckpointException):
                    # rank 1's save stops at the file (no more of its writes); the only collective of a save
                    # without collectives is its last barrier, which rank 0 waits in: meet it there
                    dist.barrier()
            else:
                try:
                    results[item] = resume(item, seed=rank)
                except Exception as exc:  # pylint: disable=broad-except  # dcp.load refused it
                    results[item] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:200])
        torch.save(results, "%s.%s-%d" % (folder, job, rank))
    finally:
        dist.destroy_process_group()


def _spawn(tmp_path, job, work):
    """``_rank_main`` on two ranks; returns each rank's results."""
    folder = tmp_path / job
    torch.multiprocessing.spawn(_rank_main, args=(str(tmp_path / ("store-" + job)), job, str(folder), work), nprocs=2)
    return [torch.load("%s.%s-%d" % (folder, job, rank), weights_only=False) for rank in (0, 1)]


def test_rank_local_metadata_every_rank_killed_missing_or_cut(tmp_path):
    root = tmp_path / "run"
    # rank 1's files of step-4 in its order: __1_0.distcp, __1.metadata.tmp, its rename to __1.metadata
    kills = [(str(tmp_path / ("killed-%d" % n)), n) for n in (3, 4, 5)]
    saved = _spawn(tmp_path, "save", [(str(root), None)] + kills)
    names = sorted(os.listdir(str(root / "step-4")))
    assert names == ["__0.metadata", "__0_0.distcp", "__1.metadata", "__1_0.distcp"], names
    cases = [("rank 1 killed before its file %d of the save" % n, run) for run, n in kills]
    for kind, rel in damages(root / "step-4"):
        run = fresh_copy(root, tmp_path / ("%s-%s" % (kind, rel)))
        damage(run / "step-4", kind, rel)
        cases.append(("step-4/%s %s" % (rel, kind), run))
    answers = []
    for label, run in cases:
        answer, report = ask(run)
        assert answer is not None, "%s: no checkpoint chosen: %s" % (label, report.warnings)
        answers.append(answer)
    resumed = _spawn(tmp_path, "load", answers)
    wrong = []
    for (label, _run), answer in zip(cases, answers):
        for rank in (0, 1):
            got = resumed[rank][answer]
            why = got if isinstance(got, str) else same_state(got, saved[rank][os.path.basename(answer)])
            if why:
                wrong.append("%s: chose %s, rank %d: %s" % (label, os.path.basename(answer), rank, why))
    assert not wrong, "\n".join(wrong)

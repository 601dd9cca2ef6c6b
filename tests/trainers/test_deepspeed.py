# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""DeepSpeed (0.19.8) ZeRO-2 on the CPU, two gloo ranks in spawned processes: ``save_checkpoint`` every 2 steps
(``global_step<S>/``: rank 0's ``mp_rank_00_model_states.pt`` and ``zero_pp_rank_0_..._optim_states.pt``, rank 1's
``zero_pp_rank_1_..._optim_states.pt``, rank 0's ``latest`` written before the barrier that waits for rank 1).
Rank 1 killed before its shard (``latest`` already names the save), rank 0 killed at each of its files, each file
of a whole save missing or cut; ``load_checkpoint`` of the collection's answer on both ranks must give that save's
step, weights, ZeRO optimizer partition and schedule.

Without compiled ops: the venv's deepspeed is installed with DS_BUILD_OPS=0, and the shared-memory allreduce op
that deepspeed.comm would JIT-compile on CPU (about 80 s) is not built (gloo does the collectives)."""

from __future__ import annotations

import copy
import datetime
import os
import socket

import pytest
import torch
import torch.distributed as dist

from conftest import adamw_and_schedule, ask, damage, damages, fresh_copy, kill_at, Killed, same_state  # pylint: disable=import-error

pytest.importorskip("deepspeed")

CONFIG = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
          "zero_optimization": {"stage": 2}, "zero_allow_untested_optimizer": True, "steps_per_print": 10 ** 6}


def _engine(rank):
    import deepspeed  # pylint: disable=import-outside-toplevel
    import deepspeed.comm.torch  # pylint: disable=import-outside-toplevel
    deepspeed.comm.torch.build_shm_op = lambda: None  # no JIT-compiled op
    if not dist.is_initialized():
        deepspeed.init_distributed(dist_backend="gloo", timeout=datetime.timedelta(seconds=600))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(32, 8), torch.nn.Linear(8, 32))
    optimizer, schedule = adamw_and_schedule(model)
    engine, _opt, _data, _sched = deepspeed.initialize(model=model, optimizer=optimizer, lr_scheduler=schedule,
                                                       config=dict(CONFIG))
    return engine


def _detached(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return dict((k, _detached(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return [_detached(v) for v in obj]
    return copy.deepcopy(obj)


def snapshot(engine):
    state = engine.optimizer.state_dict()
    return _detached({"step": engine.global_steps, "model": engine.module.state_dict(),
                      "optimizer": {k: state[k] for k in ("base_optimizer_state", "single_partition_of_fp32_groups")},
                      "scheduler": engine.lr_scheduler.state_dict()})


def train(engine, rank, root, saved=None):
    data = torch.randint(0, 32, (16, 8), generator=torch.Generator().manual_seed(rank))
    for step in range(1, 5):
        batch = data[step:step + 4]
        loss = torch.nn.functional.cross_entropy(engine(batch).view(-1, 32), batch.view(-1))
        engine.backward(loss)
        engine.step()
        if step % 2 == 0:
            engine.save_checkpoint(str(root), tag="global_step%d" % step)
            if saved is not None:
                saved["global_step%d" % step] = snapshot(engine)


def _rank_main(rank, port, job, folder, work):
    """``save``: each ``(run folder, killed rank, n)`` of ``work``: a run from scratch whose rank ``killed`` stops
    at its file ``n`` (None: whole, the snapshots kept); ``load``: ``load_checkpoint`` of each path of ``work``."""
    torch.set_num_threads(1)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    results = {}
    for item in work:
        engine = _engine(rank)
        if job == "save":
            run, killed, kill = item
            try:
                with kill_at(run, kill if rank == killed else None):
                    train(engine, rank, run, saved=results if kill is None else None)
            except Killed:
                # this rank's save stops at the file; the other rank waits in save_checkpoint's last barrier
                dist.barrier()
        else:
            try:
                engine.load_checkpoint(os.path.dirname(item), tag=os.path.basename(item))
                results[item] = snapshot(engine)
            except Exception as exc:  # pylint: disable=broad-except  # deepspeed refused it
                results[item] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "")
            dist.barrier()
    torch.save(results, "%s.%s-%d" % (folder, job, rank))


def _spawn(tmp_path, job, work):
    folder = tmp_path / job
    with socket.socket() as probe:   # a port free now on the loopback (the dev clusters' ports are fixed)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    torch.multiprocessing.spawn(_rank_main, args=(port, job, str(folder), work), nprocs=2)
    return [torch.load("%s.%s-%d" % (folder, job, rank), weights_only=False) for rank in (0, 1)]


def test_zero2_a_rank_killed_missing_or_cut(tmp_path):
    root = tmp_path / "run"
    # rank 1 writes one file per save (its shard); rank 0 five: model states, its shard, zero_to_fp32.py,
    # zero_to_torch.py, latest
    kills = [(str(tmp_path / "rank1-killed"), 1, 1)] + [
        (str(tmp_path / ("rank0-killed-%d" % n)), 0, n) for n in range(5, 10)]
    saved = _spawn(tmp_path, "save", [(str(root), None, None)] + kills)
    names = sorted(os.listdir(str(root / "global_step4")))
    assert names == ["mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                     "zero_pp_rank_1_mp_rank_00_optim_states.pt"], names
    with open(str(tmp_path / "rank1-killed" / "latest")) as handle:
        assert handle.read().strip() == "global_step4"   # the premise the check must not rely on
    cases = [("rank %d killed before its file %d" % (killed, n), run) for run, killed, n in kills]
    for kind, rel in damages(root / "global_step4"):
        run = fresh_copy(root, tmp_path / ("%s-%s" % (kind, rel)))
        damage(run / "global_step4", kind, rel)
        cases.append(("global_step4/%s %s" % (rel, kind), run))
    answers, wrong = [], []
    for label, run in cases:
        answer, report = ask(run)
        if answer is None:
            wrong.append("%s: no checkpoint chosen: %s" % (label, report.warnings))
        answers.append(answer)
    resumed = _spawn(tmp_path, "load", [a for a in answers if a])
    for (label, _run), answer in zip(cases, answers):
        for rank in (0, 1):
            if answer is None:
                continue
            got = resumed[rank][answer]
            why = got if isinstance(got, str) else same_state(got, saved[rank][os.path.basename(answer)])
            if why:
                wrong.append("%s: chose %s, rank %d: %s" % (label, os.path.basename(answer), rank, why))
    assert not wrong, "%d wrong:\n%s" % (len(wrong), "\n".join(wrong))

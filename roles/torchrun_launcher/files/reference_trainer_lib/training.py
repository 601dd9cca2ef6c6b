# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Model, data, the training loop and what it does at each step boundary."""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from types import ModuleType
from typing import List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

from .common import EXIT_REFUSED, EXIT_SIGTERM, Refused, say
from .dist import Dist
from .plan import Plan, Position
from .progress import HANG_MARKER, Events, Heartbeat, injected_hang
from .signals import SignalFlags
from .state import Saver, load_state


FEATURES = 16
HIDDEN = 64
#: Input noise of the training step: ``NOISE * random.uniform(0.5, 1.5) * torch.randn(...)``.
NOISE = 0.05


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
                         nn.Linear(HIDDEN, 1))


def make_data(seed: int, size: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Synthetic regression data from its own generator (the global RNGs are not touched)."""
    gen = torch.Generator().manual_seed(seed)
    inputs = torch.randn(size, FEATURES, generator=gen)
    weight = torch.randn(FEATURES, 1, generator=gen)
    targets = torch.tanh(inputs @ weight) + 0.1 * torch.randn(size, 1, generator=gen)
    return inputs, targets


class Training:
    """What a run trains with, on this rank: the model (and its DDP wrapper), optimizer, LR scheduler,
    the data on the device, the sampler of the epochs' order and the checkpoint saver."""

    def __init__(self, plan: Plan, dev: Dist) -> None:
        args = plan.args
        torch.manual_seed(args.seed)
        self.model = make_model().to(dev.device)  # the same initial weights on every rank
        inputs, targets = make_data(args.seed, args.dataset_size)
        self.inputs, self.targets = inputs.to(dev.device), targets.to(dev.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=0.01)
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=args.total_steps,
                                                                    eta_min=args.lr * 0.1)
        # The noise RNGs differ per rank; a resume replaces them with the saved states.
        torch.manual_seed(args.seed + 1 + dev.rank)
        if dev.device.type == "cuda":
            torch.cuda.manual_seed(args.seed + 1 + dev.rank)
        random.seed(args.seed + 1 + dev.rank)
        if plan.resumed_from:
            load_state(plan.ck, plan.resumed_from, dev, self.model, self.optimizer, self.scheduler)
        self.ddp = DistributedDataParallel(
            self.model, device_ids=[dev.local_rank] if dev.device.type == "cuda" else None) \
            if dev.distributed else self.model
        self.sampler = DistributedSampler(range(args.dataset_size), num_replicas=dev.world_size, rank=dev.rank,
                                          shuffle=True, seed=args.seed, drop_last=True)
        self.saver = Saver(plan.ck, plan.run_dir, dev, plan.meta)
        self.saver.last_saved = plan.pos.step if plan.resumed_from else -1

    def step(self, args: argparse.Namespace, dev: Dist, order: List[int], index: int) -> float:
        """One optimizer step on batch ``index`` of the epoch's ``order``; its loss."""
        rows = torch.tensor(order[index * args.batch_size:(index + 1) * args.batch_size], device=dev.device)
        x, y = self.inputs[rows], self.targets[rows]
        scale = NOISE * random.uniform(0.5, 1.5)
        x = x + scale * torch.randn(x.shape, device=dev.device)
        self.optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(self.ddp(x), y)
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        if args.step_time:
            time.sleep(args.step_time)
        return float(loss.detach().item())


def train(plan: Plan, flags: SignalFlags) -> int:
    """Train from ``plan.pos`` to ``--total-steps``; the exit code."""
    args, pos, resumed_from, steps_per_epoch = plan.args, plan.pos, plan.resumed_from, plan.steps_per_epoch
    dev = Dist(plan, args.backend)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    dev.init()
    events = Events(args.events, dev.rank)
    try:
        run = Training(plan, dev)
        epoch, batch = pos.next_batch(steps_per_epoch)
        events.emit("start", step=pos.step, resumed_from=resumed_from, world_size=dev.world_size, epoch=epoch,
                    batch=batch, steps_per_epoch=steps_per_epoch, backend=dev.backend)
        say(dev.rank, "%s at step %d (epoch %d, batch %d of %d), %d rank(s), %s, run folder %s" % (
            "resuming from %s" % resumed_from if resumed_from else "fresh start", pos.step, epoch, batch,
            steps_per_epoch, dev.world_size, dev.backend, plan.run_dir))
        if dev.agree([0, int(flags.term)])[1]:
            # SIGTERM during start-up: the state is the resumed checkpoint's (or the initial one).
            say(dev.rank, "SIGTERM before the first step: exit %d" % EXIT_SIGTERM)
            dev.close()
            return EXIT_SIGTERM
        return run_steps(plan, flags, dev, events, run)
    finally:
        events.close()


def run_steps(plan: Plan, flags: SignalFlags, dev: Dist, events: Events, run: Training) -> int:
    """The steps from ``plan.pos`` on, each followed by its boundary; the exit code."""
    args, pos, steps_per_epoch = plan.args, plan.pos, plan.steps_per_epoch
    heartbeat = Heartbeat(args.heartbeat, dev.rank)
    while pos.step < args.total_steps:
        epoch, batch = pos.next_batch(steps_per_epoch)
        run.sampler.set_epoch(epoch)
        order = list(run.sampler)
        # Batches before ``batch`` were consumed before the checkpoint: skipped, not run.
        for index in range(batch, steps_per_epoch):
            if pos.step >= args.total_steps:
                break
            loss_value = run.step(args, dev, order, index)
            pos = Position(pos.step + 1, epoch, index + 1)
            events.emit("step", step=pos.step, epoch=epoch, loss=loss_value)
            heartbeat.beat(pos.step)
            if pos.step == args.hang_at_step and dev.rank == args.hang_rank \
                    and not os.path.exists(os.path.join(plan.run_dir, HANG_MARKER % pos.step)):
                injected_hang(plan.run_dir, pos.step)
            code = boundary(args, flags, dev, events, run, pos, loss_value)
            if code is not None:
                return code
    # Only reached when resuming from the final checkpoint (its FINISHED was not written).
    finish(plan.ck, dev, events, plan.run_dir, pos)
    return 0


def boundary(args: argparse.Namespace, flags: SignalFlags, dev: Dist, events: Events, run: Training,
             pos: Position, loss: float) -> Optional[int]:
    """After step ``pos.step``: agree on signals, save when due; an exit code to stop, else None."""
    saver = run.saver
    usr1_seen = flags.usr1
    usr1, term = dev.agree([int(usr1_seen > flags.usr1_handled), int(flags.term)])
    if usr1:
        # Also clears a USR1 that this rank got only after the others (one request, one save).
        flags.usr1_handled = max(usr1_seen, flags.usr1_handled + 1)
        events.emit("signal", name="USR1", step=pos.step)
    if term:
        events.emit("signal", name="TERM", step=pos.step)
    final = pos.step >= args.total_steps
    if final:
        why = "final"
    elif term:
        why = "sigterm"
    elif usr1:
        why = "usr1"
    elif pos.step % args.checkpoint_every == 0:
        why = "interval"
    else:
        why = ""
    if why and saver.last_saved != pos.step:
        path, seconds = saver.save(pos.step, pos, run.model, run.optimizer, run.scheduler, loss)
        events.emit("save", step=pos.step, seconds=round(seconds, 6), why=why, path=path)
        say(dev.rank, "checkpoint %s (step %d, epoch %d, %s, %.3f s)" % (path, pos.step, pos.epoch, why, seconds))
    if term:
        say(dev.rank, "SIGTERM: stopping at step %d (saved), exit %d" % (pos.step, EXIT_SIGTERM))
        dev.close()
        return EXIT_SIGTERM
    if final:
        finish(saver.ck, dev, events, saver.run_dir, pos)
        return 0
    if usr1:
        if args.after_usr1 == "exit":
            say(dev.rank, "USR1: saved step %d, exiting 0 (--after-usr1 exit; not finished)" % pos.step)
            dev.close()
            return 0
        if args.after_usr1 == "wait":
            say(dev.rank, "USR1: saved step %d, waiting for SIGTERM (--after-usr1 wait)" % pos.step)
            while not flags.term:
                time.sleep(0.2)
            # Every rank gets its own SIGTERM; the step is saved, so no collective is needed.
            events.emit("signal", name="TERM", step=pos.step)
            say(dev.rank, "SIGTERM while waiting: exit %d" % EXIT_SIGTERM)
            return EXIT_SIGTERM
    return None


def finish(ck: ModuleType, dev: Dist, events: Events, run_dir: str, pos: Position) -> None:
    """Write ``FINISHED`` naming the final checkpoint (rank 0), after every rank is done."""
    dev.barrier()
    if dev.rank == 0:
        name = ck.checkpoint_name(pos.step)
        ck.mark_finished(run_dir, step=pos.step, epoch=pos.epoch, checkpoint=name)
        events.emit("finished", step=pos.step)
        say(0, "finished at step %d; %s names %s" % (pos.step, ck.FINISHED, name))
    dev.close()


def main(plan: Plan, flags: SignalFlags) -> int:
    """Train; the exit code (2 for a refusal found only now, such as nccl without CUDA)."""
    try:
        return train(plan, flags)
    except Refused as exc:
        print("reference_trainer: error: %s" % exc, file=sys.stderr, flush=True)
        return EXIT_REFUSED


def exit_process(code: int) -> None:
    """Flush and end the process without Python's teardown when a process group exists.

    Checkpoints and events are fsynced already; skipping the teardown skips the process group's
    destructor, which can wait for a peer that has left.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    if dist.is_initialized():
        os._exit(code)
    sys.exit(code)

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The plan, made before torch is imported: rank, world size, and where to start (the ``--resume`` checks)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from types import ModuleType
from typing import Any, Dict, List, Optional, Tuple

from .arguments import parse_args
from .common import EXIT_REFUSED, Refused, say
from .library import load_checkpoint_library


#: Manifest ``extra`` keys that must match the running job for a resume to be exact.
MUST_MATCH = ("world_size", "seed", "batch_size", "dataset_size")


class Position:
    """Where training stands: global step done, and the epoch and batches done in that epoch."""

    def __init__(self, step: int, epoch: int, batch: int) -> None:
        self.step = step
        self.epoch = epoch
        self.batch = batch  # batches of ``epoch`` done (0..steps_per_epoch)

    def next_batch(self, steps_per_epoch: int) -> Tuple[int, int]:
        """``(epoch, batch index)`` of the next batch to run."""
        if self.batch >= steps_per_epoch:
            return self.epoch + 1, 0
        return self.epoch, self.batch


def read_resume(ck: ModuleType, path: str, meta: Dict[str, Any]) -> Tuple[Position, Dict[str, Any]]:
    """Check ``--resume PATH`` and return its position and manifest ``extra``; Refused if unusable."""
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise Refused("--resume %s is not a checkpoint folder" % path)
    checked = ck.verify(path, validate=ck.SIZES)
    if checked.layout != ck.CONTRACT or not checked.valid:
        raise Refused("--resume %s is not a valid %s checkpoint: %s" % (
            path, ck.CONTRACT, checked.why_invalid or "layout %s" % checked.layout))
    with open(os.path.join(path, ck.MANIFEST), encoding="utf-8") as handle:
        manifest = json.load(handle)
    extra = manifest.get("extra") or {}
    missing = [k for k in MUST_MATCH + ("steps_per_epoch", "batch") if k not in extra]
    if missing:
        raise Refused("--resume %s: the manifest's extra lacks %s (not written by this trainer?)" % (
            path, ", ".join(missing)))
    differ = ["%s %s (this run: %s)" % (k, extra[k], meta[k]) for k in MUST_MATCH if extra[k] != meta[k]]
    if differ:
        raise Refused("refusing to resume from %s: it was made with %s; an exact resume needs the same "
                      "world size, seed, batch size and dataset size" % (path, ", ".join(differ)))
    step, epoch, batch, spe = manifest["step"], manifest["epoch"], extra["batch"], extra["steps_per_epoch"]
    if spe != meta["steps_per_epoch"] or not isinstance(epoch, int) or epoch * spe + batch != step:
        raise Refused("--resume %s: inconsistent position (step %s, epoch %s, batch %s of %s per epoch)" % (
            path, step, epoch, batch, spe))
    return Position(step, epoch, batch), extra


class Plan:
    """What is decided before torch is imported: arguments, rank, world size, where to start."""

    def __init__(self, args: argparse.Namespace, ck: ModuleType) -> None:
        self.args = args
        self.ck = ck
        self.distributed = "WORLD_SIZE" in os.environ
        self.rank = int(os.environ.get("RANK", "0")) if self.distributed else 0
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0")) if self.distributed else 0
        self.world_size = int(os.environ.get("WORLD_SIZE", "1")) if self.distributed else 1
        self.run_dir = os.path.abspath(args.checkpoint_dir)
        self.steps_per_epoch = args.dataset_size // self.world_size // args.batch_size
        self.meta = dict(world_size=self.world_size, seed=args.seed, batch_size=args.batch_size,
                         dataset_size=args.dataset_size, steps_per_epoch=self.steps_per_epoch)
        self.pos = Position(0, 0, 0)
        self.resumed_from: Optional[str] = None


def make_plan(argv: Optional[List[str]] = None) -> Optional[Plan]:
    """Check everything that needs no torch; None when the run is finished already.

    Every rank does this before importing torch and before any process group exists, so a
    finished run or a refused resume ends every rank at once, the same way.
    """
    plan = Plan(parse_args(argv), load_checkpoint_library())
    args, ck = plan.args, plan.ck
    os.makedirs(plan.run_dir, exist_ok=True)
    if os.path.exists(os.path.join(plan.run_dir, ck.FINISHED)):
        say(plan.rank, "%s already has %s: nothing to do" % (plan.run_dir, ck.FINISHED))
        return None
    if plan.steps_per_epoch < 1:
        raise Refused("--dataset-size %d is too small for %d ranks of --batch-size %d" % (
            args.dataset_size, plan.world_size, args.batch_size))
    if args.resume:
        plan.pos, _extra = read_resume(ck, args.resume, plan.meta)
        plan.resumed_from = os.path.abspath(args.resume)
        if plan.pos.step > args.total_steps:
            raise Refused("--resume %s is at step %d, beyond --total-steps %d" % (
                plan.resumed_from, plan.pos.step, args.total_steps))
    return plan


def plan_or_exit(argv: Optional[List[str]] = None) -> Plan:
    """:func:`make_plan`, or exit: 0 when already finished, 2 when refused (one message per node)."""
    try:
        plan = make_plan(argv)
    except Refused as exc:
        if os.environ.get("LOCAL_RANK", "0") == "0":
            print("reference_trainer: error: %s" % exc, file=sys.stderr, flush=True)
        sys.exit(EXIT_REFUSED)
    if plan is None:
        sys.exit(0)
    return plan

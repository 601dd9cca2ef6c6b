# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A checkpoint of the trainer: the multi-rank save protocol, and loading one to resume from it."""

from __future__ import annotations

import os
import random
import time
from types import ModuleType
from typing import Any, Dict, Tuple

import torch
from torch import nn

from .common import Refused, say
from .dist import Dist
from .plan import Position


MODEL_FILE = "model.pt"
OPTIM_FILE = "optim.pt"
RNG_DIR = "rng"


def rng_state(dev: Dist) -> Dict[str, Any]:
    state: Dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if dev.device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(dev.device)
    return state


def set_rng_state(dev: Dist, state: Dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(_as_python_random_state(state["python"]))
    if dev.device.type == "cuda":
        if "cuda" not in state:
            raise Refused("the checkpoint was written on CPU and has no CUDA RNG state for this GPU run")
        torch.cuda.set_rng_state(state["cuda"], dev.device)


def _as_python_random_state(value: Any) -> Tuple[Any, ...]:
    # random.getstate() is (version, tuple of ints, gauss_next); a loader may give lists back.
    version, internal, gauss = value
    return (version, tuple(internal), gauss)


class Saver:
    """Writes contract checkpoints with the multi-rank protocol of reference_trainer.py's docstring (Save protocol)."""

    def __init__(self, ck: ModuleType, run_dir: str, dev: Dist, meta: Dict[str, Any]) -> None:
        self.ck = ck
        self.run_dir = run_dir
        self.dev = dev
        self.meta = meta
        self.last_saved = -1

    def _staging(self, step: int) -> str:
        """Rank 0: a fresh ``tmp-step_<S>.<pid>.<random>`` folder (with ``rng/``) in the run folder."""
        name = self.ck.checkpoint_name(step)
        final = os.path.join(self.run_dir, name)
        if os.path.lexists(final):
            # Left by an earlier attempt that went further than the checkpoint we resumed from
            # (the launcher chose an older one, e.g. because this one is invalid). A committed
            # folder is never changed: move it out of the candidates, to a tmp-* name (pruning
            # deletes those), and write ours.
            aside = os.path.join(self.run_dir, "%ssuperseded-%s.%d.%s" % (
                self.ck.TMP_PREFIX, name, os.getpid(), os.urandom(4).hex()))
            os.rename(final, aside)
            say(0, "moved the existing %s aside to %s (resumed from an earlier step)" % (name, aside))
        staging = os.path.join(self.run_dir, "%s%s.%d.%s" % (self.ck.TMP_PREFIX, name, os.getpid(), os.urandom(4).hex()))
        os.makedirs(os.path.join(staging, RNG_DIR))
        return staging

    def save(self, step: int, pos: Position, model: nn.Module, optimizer: torch.optim.Optimizer,
             scheduler: Any, loss: float) -> Tuple[str, float]:
        """Write and commit ``step_<S>`` with every rank; returns (path on rank 0, seconds)."""
        started = time.monotonic()
        staging = self._staging(step) if self.dev.rank == 0 else None
        staging = self.dev.broadcast_text_from_0(staging)
        torch.save(rng_state(self.dev), os.path.join(staging, RNG_DIR, "rank%d.pt" % self.dev.rank))
        if self.dev.rank == 0:
            torch.save(model.state_dict(), os.path.join(staging, MODEL_FILE))
            torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()},
                       os.path.join(staging, OPTIM_FILE))
        self.dev.barrier()
        path = ""
        if self.dev.rank == 0:
            extra = dict(self.meta)
            extra.update(batch=pos.batch, loss=loss, step=step)
            path = self.ck.commit_checkpoint(staging, self.run_dir, step, pos.epoch, extra=extra)
        self.dev.barrier()
        self.last_saved = step
        return path, time.monotonic() - started


def load_state(ck: ModuleType, path: str, dev: Dist, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any) -> None:
    """Load model, optimizer, scheduler and this rank's RNG states from a checkpoint folder."""
    rng_file = os.path.join(path, RNG_DIR, "rank%d.pt" % dev.rank)
    if not os.path.isfile(rng_file):
        raise Refused("%s has no RNG state for rank %d" % (path, dev.rank))
    # Every file is opened before any state is changed; one that torch.load(weights_only=True)
    # refuses (a numpy RNG state, a class not allowed) is a refusal, not a traceback.
    model_state = load_file(ck, path, MODEL_FILE, dev.device)
    optim = load_file(ck, path, OPTIM_FILE, dev.device)
    rng = load_file(ck, path, os.path.relpath(rng_file, path), "cpu")
    model.load_state_dict(model_state)
    optimizer.load_state_dict(optim["optimizer"])
    scheduler.load_state_dict(optim["scheduler"])
    set_rng_state(dev, rng)


def load_file(ck: ModuleType, path: str, rel: str, map_location: Any) -> Any:
    """``torch.load(weights_only=True)`` with the checkpoint library's allowed globals, or Refused."""
    try:
        return ck.torch_load(os.path.join(path, rel), map_location=map_location)
    except Exception as exc:  # pylint: disable=broad-except  # any failure to open is a refusal
        raise Refused("cannot resume from %s: %s does not load with torch.load(weights_only=True): %s" % (
            path, rel, ck.load_error(exc)))

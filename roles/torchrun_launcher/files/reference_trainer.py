# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Reference trainer of the ``torchrun_launcher`` role: small, deterministic, resumable DDP training.

It is the example workload the launcher starts and the end-to-end tests crash, signal and resume.
It trains a small MLP on synthetic regression data with DDP (gloo on CPU, nccl on GPU) and writes
its checkpoints with the collection's checkpoint library (``clusterops_checkpoint``, the contract of
docs/checkpoint-contract.md). A run that is stopped at any point and resumed from its newest
valid checkpoint ends with parameters bitwise equal to a run that was never stopped.

Launch::

    python -m torch.distributed.run --nnodes ... --nproc-per-node ... reference_trainer.py \\
        --checkpoint-dir RUN_DIR [--resume RUN_DIR/step_000000040] [--total-steps 200] ...

or, for debugging, ``python reference_trainer.py --checkpoint-dir RUN_DIR`` with ``WORLD_SIZE``
unset (one process, no process group, no DDP wrapper).

Steps and data order
    ``step`` is the global optimizer step (1, 2, ...); checkpoint ``step_<S>`` holds the state
    after step ``S``. Each epoch is a ``DistributedSampler(shuffle=True, seed=seed,
    drop_last=True)`` order with ``set_epoch(epoch)``, cut into ``steps_per_epoch`` whole batches
    per rank. The manifest's ``epoch`` is the epoch step ``S`` belonged to; ``extra`` records
    ``batch`` (batches of that epoch done, 1..steps_per_epoch), ``steps_per_epoch``,
    ``world_size``, ``seed``, ``batch_size``, ``dataset_size`` and the loss. A resume starts at
    the next batch of that epoch, skipping the consumed ones without running them, or, when the
    checkpoint closed its epoch (``batch == steps_per_epoch``), at batch 0 of the next epoch. No
    step runs twice and none is skipped.

What a checkpoint holds
    ``model.pt`` (rank 0: the unwrapped model's state_dict), ``optim.pt`` (rank 0: optimizer and
    LR scheduler state_dicts), ``rng/rank<r>.pt`` (every rank: torch CPU RNG state, CUDA RNG
    state of its device when on GPU, Python ``random`` state). The training step draws input
    noise from the torch RNG and its scale from Python's ``random``, so both states matter.

Save protocol (every ``--checkpoint-every`` steps, on USR1, on SIGTERM, at the end)
    1. rank 0 creates ``tmp-step_<S>.<pid>.<random>/rng`` inside the run folder and broadcasts
       the path (as a byte tensor: ``broadcast_object_list`` needs numpy on the receiving side);
    2. every rank writes ``rng/rank<r>.pt``; rank 0 writes ``model.pt`` and ``optim.pt``;
    3. barrier; rank 0 calls ``commit_checkpoint`` (hash, fsync, manifest, atomic rename); barrier.
    A crash at any point leaves at most a ``tmp-*`` folder, which no reader chooses.

Signals
    The SIGUSR1 and SIGTERM handlers only record the signal (installed with ``signal.signal``,
    which also overrides a SIG_IGN inherited from the launcher). At every step boundary all ranks
    agree on the recorded signals with one ``all_reduce(MAX)``, so they all act at the same step:

    * USR1: save at this step (unless it is saved already), then by ``--after-usr1``: ``wait``
      stops stepping and sleeps until SIGTERM, then exits 143 (no step lost: the job ends at its
      time limit); ``continue`` trains on; ``exit`` exits 0 without ``FINISHED``.
    * SIGTERM: save at this step (unless saved already), exit 143 (128 + SIGTERM).

End
    A final checkpoint at ``--total-steps`` (always), then the run's ``FINISHED`` marker naming
    it. A run folder that already has ``FINISHED`` makes the trainer exit 0 at once. A run that
    ends on every rank at once ends with a barrier and ``os._exit`` (no ``destroy_process_group``,
    which now and then hangs on one rank after the other left). ``kill -USR2`` prints the stacks.

Events (``--events PATH``, rank 0, one JSON object a line, flushed and fsynced per line)
    ``start`` (step, resumed_from, world_size, epoch, batch, time), ``step`` (step, epoch, loss),
    ``save`` (step, seconds, why: interval, usr1, sigterm or final; path), ``signal`` (name,
    step), ``finished`` (step). Every event also has ``time`` (Unix seconds).

Exit codes: 0 finished (or already finished, or ``--after-usr1 exit``), 143 stopped by SIGTERM,
2 refused (bad arguments, a checkpoint from another world size, seed or data shape, an invalid
checkpoint), anything else a crash. ``FINISHED`` and the ``--resume`` checks are decided before
torch is imported and before any process group exists: every rank exits at once, the same way.
"""

from __future__ import annotations

import argparse
import datetime
import faulthandler
import importlib.util
import json
import os
import random
import signal
import sys
import time
from types import FrameType, ModuleType
from typing import Any, Dict, List, Optional, Tuple


# ---------------------------------------------------------------------------------------------
# Signals: the handlers only count; the training loop acts at step boundaries
# ---------------------------------------------------------------------------------------------

class SignalFlags:
    """Signals received by this process, recorded by the handlers and nothing else."""

    def __init__(self) -> None:
        self.usr1 = 0  # number of USR1 received
        self.usr1_handled = 0  # USR1 count already acted on
        self.term = False

    def install(self) -> None:
        # signal.signal replaces whatever was inherited, SIG_IGN included (the launcher makes
        # the torchrun agent ignore USR1, and its workers inherit that).
        signal.signal(signal.SIGUSR1, self._on_usr1)
        signal.signal(signal.SIGTERM, self._on_term)
        # For a hung rank: `kill -USR2 PID` prints every thread's Python stack to stderr.
        faulthandler.register(signal.SIGUSR2, all_threads=True)

    def _on_usr1(self, signum: int, frame: Optional[FrameType]) -> None:
        self.usr1 += 1

    def _on_term(self, signum: int, frame: Optional[FrameType]) -> None:
        self.term = True


EXIT_REFUSED = 2
EXIT_SIGTERM = 128 + signal.SIGTERM
FEATURES = 16
HIDDEN = 64
#: Input noise of the training step: ``NOISE * random.uniform(0.5, 1.5) * torch.randn(...)``.
NOISE = 0.05
MODEL_FILE = "model.pt"
OPTIM_FILE = "optim.pt"
RNG_DIR = "rng"
#: Manifest ``extra`` keys that must match the running job for a resume to be exact.
MUST_MATCH = ("world_size", "seed", "batch_size", "dataset_size")


class Refused(Exception):
    """A start the trainer refuses (exit 2) with a one-line reason."""


# ---------------------------------------------------------------------------------------------
# The checkpoint library
# ---------------------------------------------------------------------------------------------

def checkpoint_library_path() -> str:
    """The checkpoint package's folder: $CLUSTEROPS_CHECKPOINT_TOOL, ``clusterops_checkpoint/`` next to
    this file (as roles/checkpoint_tool installs it), or the repository's ``plugins/module_utils/_checkpoint/``."""
    env = os.environ.get("CLUSTEROPS_CHECKPOINT_TOOL")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    beside = os.path.join(here, "clusterops_checkpoint")
    if os.path.isdir(beside):
        return beside
    # roles/torchrun_launcher/files/ -> the collection root
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    return os.path.join(repo, "plugins", "module_utils", "_checkpoint")


def load_checkpoint_library() -> ModuleType:
    """Import the checkpoint package from its folder as ``clusterops_checkpoint`` (standard library only).

    The package's modules import each other relatively, so it is registered in ``sys.modules`` under
    that name before it runs; ``sys.path`` is left alone.
    """
    path = checkpoint_library_path()
    init = os.path.join(path, "__init__.py")
    if not os.path.isfile(init):
        raise Refused("checkpoint library %s not found (set CLUSTEROPS_CHECKPOINT_TOOL to the "
                      "clusterops_checkpoint folder)" % path)
    if "clusterops_checkpoint" in sys.modules:
        return sys.modules["clusterops_checkpoint"]
    spec = importlib.util.spec_from_file_location("clusterops_checkpoint", init, submodule_search_locations=[path])
    if spec is None or spec.loader is None:
        raise Refused("cannot import the checkpoint library %s" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[spec.name]
        raise
    return module


# ---------------------------------------------------------------------------------------------
# Plan: arguments, resume checks (no torch needed)
# ---------------------------------------------------------------------------------------------

def say(rank: int, message: str) -> None:
    """One human line on stdout, rank 0 only."""
    if rank == 0:
        print("reference_trainer: %s" % message, flush=True)


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


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Reference DDP trainer of clusterops.slurm (resumable, deterministic).")
    parser.add_argument("--checkpoint-dir", required=True, help="the run folder (docs/checkpoint-contract.md)")
    parser.add_argument("--resume", help="checkpoint folder step_N to resume from (absent: a fresh start)")
    parser.add_argument("--total-steps", type=int, default=200, help="global optimizer steps (default %(default)s)")
    parser.add_argument("--checkpoint-every", type=int, default=20, help="save every K steps (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1234, help="(default %(default)s)")
    parser.add_argument("--batch-size", type=int, default=16, help="per rank (default %(default)s)")
    parser.add_argument("--dataset-size", type=int, default=1024, help="synthetic samples (default %(default)s)")
    parser.add_argument("--lr", type=float, default=1e-3, help="(default %(default)s)")
    parser.add_argument("--step-time", type=float, default=0.0, help="extra sleep per step, seconds (default 0)")
    parser.add_argument("--after-usr1", choices=("wait", "continue", "exit"), default="wait",
                        help="after the USR1 checkpoint (default %(default)s)")
    parser.add_argument("--events", help="JSONL event file appended by rank 0")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                        help="auto: nccl if CUDA is available, else gloo")
    parser.add_argument("--heartbeat", help="file rank 0 replaces after every step with {step, time} "
                        "(the hang watchdog's progress; docs/reference-trainer.md)")
    parser.add_argument("--hang-at-step", type=int, default=0,
                        help="fault injection: after step S, rank --hang-rank blocks before the next "
                        "collective, once per run folder (0: never)")
    parser.add_argument("--hang-rank", type=int, default=1, help="the rank that hangs (default %(default)s)")
    args = parser.parse_args(argv)
    for name in ("total_steps", "checkpoint_every", "batch_size", "dataset_size"):
        if getattr(args, name) < 1:
            parser.error("--%s must be at least 1" % name.replace("_", "-"))
    if args.step_time < 0:
        parser.error("--step-time must not be negative")
    if args.hang_at_step < 0 or args.hang_rank < 0:
        parser.error("--hang-at-step and --hang-rank must not be negative")
    return args


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


# ---------------------------------------------------------------------------------------------
# Before torch: when run as a script, the handlers are installed first (a signal during the
# seconds torch takes to import is neither lost nor fatal), then the plan is made.
# ---------------------------------------------------------------------------------------------

FLAGS = SignalFlags()
if __name__ == "__main__":
    FLAGS.install()
    # A finished run or a refused resume exits here, without the seconds torch takes to import.
    PLAN = plan_or_exit()

# cuBLAS needs this before CUDA starts for torch.use_deterministic_algorithms(True) on GPU.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402


# ---------------------------------------------------------------------------------------------
# Process group
# ---------------------------------------------------------------------------------------------

class Dist:
    """Rank, world size and the few collectives used; no-ops in a single process without torchrun."""

    def __init__(self, plan: Plan, backend: str) -> None:
        self.distributed = plan.distributed
        self.rank = plan.rank
        self.world_size = plan.world_size
        self.local_rank = plan.local_rank
        if backend == "auto":
            backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl" and not torch.cuda.is_available():
            raise Refused("--backend nccl needs CUDA, and torch.cuda.is_available() is False")
        self.backend = backend
        if backend == "nccl":
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")

    def init(self) -> None:
        """The process group; collectives time out after $CLUSTEROPS_COLLECTIVE_TIMEOUT seconds
        (the launcher sets it; unset: torch's default, 10 min for nccl, 30 min for gloo)."""
        if self.distributed:
            kwargs: Dict[str, Any] = {}
            timeout = os.environ.get("CLUSTEROPS_COLLECTIVE_TIMEOUT")
            if timeout:
                kwargs["timeout"] = datetime.timedelta(seconds=int(timeout))
            if self.backend == "nccl":
                dist.init_process_group(backend=self.backend, device_id=self.device, **kwargs)
            else:
                dist.init_process_group(backend=self.backend, **kwargs)

    def close(self) -> None:
        """The last collective of a run that ends on every rank at the same step.

        No ``destroy_process_group``: it hangs now and then on one rank after the other left
        (pytorch/pytorch#75097; seen here with gloo in about one resumed run out of ten). The
        process ends with ``os._exit`` instead (see :func:`exit_process`).
        """
        self.barrier()

    def barrier(self) -> None:
        if self.distributed:
            if self.backend == "nccl":
                dist.barrier(device_ids=[self.local_rank])
            else:
                dist.barrier()

    def broadcast_text_from_0(self, text: Optional[str]) -> str:
        """Rank 0's ``text`` on every rank.

        The bytes travel as a uint8 tensor (length first): ``broadcast_object_list`` would do the
        same but its receiving side needs numpy (torch 2.x ``_tensor_to_object``), which a training
        image need not have.
        """
        if not self.distributed:
            return text or ""
        data = (text or "").encode("utf-8") if self.rank == 0 else b""
        length = torch.tensor([len(data)], dtype=torch.int64, device=self.device)
        dist.broadcast(length, src=0)
        buf = torch.zeros(int(length.item()), dtype=torch.uint8, device=self.device)
        if self.rank == 0:
            buf.copy_(torch.tensor(list(data), dtype=torch.uint8))
        dist.broadcast(buf, src=0)
        return bytes(buf.cpu().tolist()).decode("utf-8")

    def agree(self, flags: List[int]) -> List[int]:
        """Element-wise maximum of ``flags`` over all ranks: a flag set on one rank is set on all."""
        if not self.distributed:
            return list(flags)
        tensor = torch.tensor(flags, dtype=torch.int32, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return [int(v) for v in tensor.tolist()]


# ---------------------------------------------------------------------------------------------
# Events (rank 0)
# ---------------------------------------------------------------------------------------------

class Heartbeat:
    """The file rank 0 replaces after every step (``--heartbeat``): ``{"step", "time"}``.

    Written to a temporary name and renamed, so a reader never sees half a file; its mtime is
    the time of the last step. Not fsynced: a heartbeat lost in a crash costs nothing.
    """

    def __init__(self, path: Optional[str], rank: int) -> None:
        self.path = path if rank == 0 else None

    def beat(self, step: int) -> None:
        if not self.path:
            return
        tmp = "%s.tmp.%d" % (self.path, os.getpid())
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": step, "time": round(time.time(), 6)}) + "\n")
        os.replace(tmp, self.path)


#: Fault injection: the marker that makes ``--hang-at-step`` hang once per run folder.
HANG_MARKER = ".fault-hang-step%d"


def injected_hang(run_dir: str, step: int) -> None:
    """Block for ever, like a rank stuck before a collective (``--hang-at-step``).

    Writes the marker first, so the resumed run does not hang again. Signals do not end it: the
    SIGTERM handler only records the signal, and this loop never looks (Slurm's SIGKILL after
    KillWait ends it, as it ends a rank stuck in NCCL).
    """
    with open(os.path.join(run_dir, HANG_MARKER % step), "w", encoding="utf-8") as handle:
        handle.write("%d\n" % os.getpid())
    while True:
        time.sleep(1)


class Events:
    """JSONL event log written by rank 0; each line flushed and fsynced."""

    def __init__(self, path: Optional[str], rank: int) -> None:
        self.handle = None
        if path and rank == 0:
            self.handle = open(path, "a", encoding="utf-8")

    def emit(self, event: str, **fields: Any) -> None:
        if self.handle is None:
            return
        record = {"event": event}
        record.update(fields)
        record.setdefault("time", round(time.time(), 6))
        self.handle.write(json.dumps(record, sort_keys=True) + "\n")
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


# ---------------------------------------------------------------------------------------------
# Model, data, training state
# ---------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------

class Saver:
    """Writes contract checkpoints with the multi-rank protocol of the module docstring."""

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


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

def train(plan: Plan, flags: SignalFlags) -> int:
    """Train from ``plan.pos`` to ``--total-steps``; the exit code."""
    args, ck, run_dir, meta, steps_per_epoch = plan.args, plan.ck, plan.run_dir, plan.meta, plan.steps_per_epoch
    pos, resumed_from = plan.pos, plan.resumed_from
    dev = Dist(plan, args.backend)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    dev.init()
    events = Events(args.events, dev.rank)
    heartbeat = Heartbeat(args.heartbeat, dev.rank)
    try:
        torch.manual_seed(args.seed)
        model = make_model().to(dev.device)  # the same initial weights on every rank
        inputs, targets = make_data(args.seed, args.dataset_size)
        inputs, targets = inputs.to(dev.device), targets.to(dev.device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.total_steps,
                                                               eta_min=args.lr * 0.1)
        # The noise RNGs differ per rank; a resume replaces them with the saved states.
        torch.manual_seed(args.seed + 1 + dev.rank)
        if dev.device.type == "cuda":
            torch.cuda.manual_seed(args.seed + 1 + dev.rank)
        random.seed(args.seed + 1 + dev.rank)
        if resumed_from:
            load_state(ck, resumed_from, dev, model, optimizer, scheduler)
        ddp = DistributedDataParallel(model, device_ids=[dev.local_rank] if dev.device.type == "cuda" else None) \
            if dev.distributed else model
        sampler = DistributedSampler(range(args.dataset_size), num_replicas=dev.world_size, rank=dev.rank,
                                     shuffle=True, seed=args.seed, drop_last=True)
        saver = Saver(ck, run_dir, dev, meta)
        saver.last_saved = pos.step if resumed_from else -1

        epoch, batch = pos.next_batch(steps_per_epoch)
        events.emit("start", step=pos.step, resumed_from=resumed_from, world_size=dev.world_size, epoch=epoch,
                    batch=batch, steps_per_epoch=steps_per_epoch, backend=dev.backend)
        say(dev.rank, "%s at step %d (epoch %d, batch %d of %d), %d rank(s), %s, run folder %s" % (
            "resuming from %s" % resumed_from if resumed_from else "fresh start", pos.step, epoch, batch,
            steps_per_epoch, dev.world_size, dev.backend, run_dir))
        if dev.agree([0, int(flags.term)])[1]:
            # SIGTERM during start-up: the state is the resumed checkpoint's (or the initial one).
            say(dev.rank, "SIGTERM before the first step: exit %d" % EXIT_SIGTERM)
            dev.close()
            return EXIT_SIGTERM
        loss_value = float("nan")
        while pos.step < args.total_steps:
            epoch, batch = pos.next_batch(steps_per_epoch)
            sampler.set_epoch(epoch)
            order = list(sampler)
            # Batches before ``batch`` were consumed before the checkpoint: skipped, not run.
            for index in range(batch, steps_per_epoch):
                if pos.step >= args.total_steps:
                    break
                rows = torch.tensor(order[index * args.batch_size:(index + 1) * args.batch_size], device=dev.device)
                x, y = inputs[rows], targets[rows]
                scale = NOISE * random.uniform(0.5, 1.5)
                x = x + scale * torch.randn(x.shape, device=dev.device)
                optimizer.zero_grad(set_to_none=True)
                loss = nn.functional.mse_loss(ddp(x), y)
                loss.backward()
                optimizer.step()
                scheduler.step()
                if args.step_time:
                    time.sleep(args.step_time)
                pos = Position(pos.step + 1, epoch, index + 1)
                loss_value = float(loss.detach().item())
                events.emit("step", step=pos.step, epoch=epoch, loss=loss_value)
                heartbeat.beat(pos.step)
                if pos.step == args.hang_at_step and dev.rank == args.hang_rank \
                        and not os.path.exists(os.path.join(run_dir, HANG_MARKER % pos.step)):
                    injected_hang(run_dir, pos.step)
                code = boundary(args, flags, dev, events, saver, pos, model, optimizer, scheduler, loss_value)
                if code is not None:
                    return code
        # Only reached when resuming from the final checkpoint (its FINISHED was not written).
        finish(ck, dev, events, run_dir, pos)
        return 0
    finally:
        events.close()


def boundary(args: argparse.Namespace, flags: SignalFlags, dev: Dist, events: Events, saver: Saver,
             pos: Position, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
             loss: float) -> Optional[int]:
    """After step ``pos.step``: agree on signals, save when due; an exit code to stop, else None."""
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
        path, seconds = saver.save(pos.step, pos, model, optimizer, scheduler, loss)
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


def main(plan: Plan) -> int:
    """Train; the exit code (2 for a refusal found only now, such as nccl without CUDA)."""
    try:
        return train(plan, FLAGS)
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


if __name__ == "__main__":
    exit_process(main(PLAN))

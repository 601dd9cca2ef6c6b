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

Modules
    ``reference_trainer_lib/`` beside this file (the role installs both; its ``__init__.py`` says
    which module does what).
"""

from __future__ import annotations

import os
import sys

# The trainer's modules are found by the real path of this file, in the folder beside it, which is
# put first on sys.path only while that package is imported: no folder of the job's working
# directory or $PYTHONPATH can shadow it, and nothing else moves on sys.path.
HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
try:
    from reference_trainer_lib.plan import plan_or_exit
    from reference_trainer_lib.signals import SignalFlags
finally:
    sys.path.remove(HERE)

if __name__ == "__main__":
    # Before torch: the handlers first (a signal during the seconds torch takes to import is neither
    # lost nor fatal), then the plan: a finished run or a refused resume exits here, without the
    # seconds torch takes to import.
    FLAGS = SignalFlags()
    FLAGS.install()
    PLAN = plan_or_exit()
    # cuBLAS needs this before CUDA starts for torch.use_deterministic_algorithms(True) on GPU.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    from reference_trainer_lib.training import exit_process, main  # torch, and the rest of the trainer
    exit_process(main(PLAN, FLAGS))

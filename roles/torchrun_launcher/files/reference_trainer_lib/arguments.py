# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The trainer's command line."""

from __future__ import annotations

import argparse
from typing import List, Optional


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

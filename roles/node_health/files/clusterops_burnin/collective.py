# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collective test: an all-reduce (sum) across every rank of ``torch.distributed``, timed and
checked, on the node under test and its peers (a known-good node, or the rest of the quarantine).

Started as the training jobs are (``srun`` ... ``torchrun``, or ``torch.distributed.run``): the
process group comes from the environment (``MASTER_ADDR``, ``RANK``, ``WORLD_SIZE``...). NCCL on
CUDA, gloo on CPUs. The bandwidth is NCCL tests' bus bandwidth: ``bytes / seconds * 2 (n - 1) / n``,
comparable across world sizes; a slow link or a slow rank lowers every rank's figure.
"""

from __future__ import annotations

import time
from typing import Any, Dict


def allreduce_test(torch: Any, dist: Any, size_bytes: int, iterations: int) -> Dict[str, Any]:
    """All-reduce a float32 tensor of ``size_bytes`` ``iterations`` times (after one warm-up).

    Each rank fills its tensor with ``rank + 1``; the sum must be ``n (n + 1) / 2`` everywhere.

    Returns:
        ``{"rank", "world_size", "backend", "busbw_gbps", "algbw_gbps", "seconds", "bytes",
        "iterations", "correct"}`` (GB/s: 1e9 bytes per second).

    Raises:
        ValueError: ``size_bytes`` below 4 or ``iterations`` below 1.
    """
    if size_bytes < 4 or iterations < 1:
        raise ValueError("size_bytes must be at least 4 and iterations at least 1, not %d and %d"
                         % (size_bytes, iterations))
    rank, world = dist.get_rank(), dist.get_world_size()
    backend = dist.get_backend()
    device = "cuda:%d" % torch.cuda.current_device() if backend == "nccl" else "cpu"
    count = size_bytes // 4
    tensor = torch.full((count,), float(rank + 1), dtype=torch.float32, device=device)
    dist.all_reduce(tensor)  # warm-up: connections made
    _synchronize(torch, device)
    dist.barrier()
    start = time.perf_counter()
    for dummy in range(iterations):
        tensor.fill_(float(rank + 1))
        dist.all_reduce(tensor)
    _synchronize(torch, device)
    seconds = (time.perf_counter() - start) / iterations
    expected = world * (world + 1) / 2.0
    correct = bool(torch.all(tensor == expected).item())
    algbw = count * 4 / max(seconds, 1e-12) / 1e9
    return {"rank": rank, "world_size": world, "backend": backend, "algbw_gbps": algbw,
            "busbw_gbps": algbw * 2.0 * (world - 1) / world if world > 1 else algbw,
            "seconds": seconds, "bytes": count * 4, "iterations": iterations, "correct": correct}


def _synchronize(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)

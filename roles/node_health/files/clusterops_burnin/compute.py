# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The compute test: ``size`` x ``size`` float32 matrix products on one device, timed, and checked.

A device that computes slowly (a throttled GPU, a node whose CPU is limited) shows in the
throughput; one that computes wrongly (a faulty GPU) in the error: rows of the product are computed
again in float64 on the CPU and compared, elementwise, relative to the row's scale.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List

#: float32 products of normally distributed matrices agree with float64 to about 1e-6 of the row's
#: scale; a flipped bit in a mantissa's high half or an exponent is far above this.
TOLERANCE = 1e-3
#: Rows of the product checked against the float64 reference.
CHECKED_ROWS = 8


def devices(torch: Any) -> List[str]:
    """Every CUDA device (``cuda:0`` ...), else ``["cpu"]``."""
    if torch.cuda.is_available():
        return ["cuda:%d" % index for index in range(torch.cuda.device_count())]
    return ["cpu"]


def matmul_test(torch: Any, device: str, size: int, iterations: int, seed: int = 42) -> Dict[str, Any]:
    """Multiply two seeded ``size`` x ``size`` float32 matrices ``iterations`` times on ``device``.

    Returns:
        ``{"device", "gflops", "max_error", "seconds", "size", "iterations"}``: ``gflops`` is
        ``2 * size**3 * iterations`` over the timed seconds / 1e9 (after one warm-up product);
        ``max_error`` the largest ``|c - ref| / max(|ref row|)`` over :data:`CHECKED_ROWS` rows.

    Raises:
        ValueError: ``size`` or ``iterations`` below 1.
    """
    if size < 1 or iterations < 1:
        raise ValueError("size and iterations must be at least 1, not %d and %d" % (size, iterations))
    generator = torch.Generator().manual_seed(seed)
    a_cpu = torch.randn(size, size, generator=generator, dtype=torch.float32)
    b_cpu = torch.randn(size, size, generator=generator, dtype=torch.float32)
    a, b = a_cpu.to(device), b_cpu.to(device)
    product = torch.matmul(a, b)  # warm-up: kernels chosen, memory allocated
    synchronize(torch, device)
    start = time.perf_counter()
    for dummy in range(iterations):
        product = torch.matmul(a, b)
    synchronize(torch, device)
    seconds = time.perf_counter() - start
    rows = sorted(set(int(i * (size - 1) / max(1, CHECKED_ROWS - 1)) for i in range(CHECKED_ROWS)))
    got = product[rows].to("cpu", torch.float64)
    reference = torch.matmul(a_cpu[rows].to(torch.float64), b_cpu.to(torch.float64))
    scale = reference.abs().amax(dim=1, keepdim=True).clamp_min(1e-30)
    error = float(((got - reference).abs() / scale).max())
    return {"device": device, "gflops": 2.0 * size ** 3 * iterations / max(seconds, 1e-9) / 1e9,
            "max_error": error, "seconds": seconds, "size": size, "iterations": iterations}


def synchronize(torch: Any, device: str) -> None:
    """Wait for ``device``'s queued work (CUDA is asynchronous; the CPU is not)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The command line of the burn-in: ``python3 -m clusterops_burnin compute|collective [options]``.

Prints one JSON object (``{node, level, results, verdict}``; under ``torch.distributed``, one per
rank) and exits 0 when every figure passed, 1 when one failed (the verdict's ``reason`` is the drain
reason), 2 when the test could not run (torch missing, an error): never a pass.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import Any, Dict, List, Optional

from . import judge as judging

EXIT_PASSED, EXIT_FAILED, EXIT_NOT_RUN = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clusterops_burnin", description=__doc__.splitlines()[0])
    parser.add_argument("--node", default=os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
                        help="the node's name in the result (default SLURMD_NODENAME, else the host name)")
    parser.add_argument("--history", help="JSON lines of earlier results: the fleet medians, appended to")
    parser.add_argument("--fraction", type=float, default=0.8,
                        help="a figure below this fraction of the fleet's median fails (default 0.8)")
    sub = parser.add_subparsers(dest="level", required=True)
    compute = sub.add_parser("compute", help="matrix products on each device: GFLOP/s and correctness")
    compute.add_argument("--size", type=int, default=0, help="matrix size (default 8192 on CUDA, 512 on the CPU)")
    compute.add_argument("--iterations", type=int, default=10)
    compute.add_argument("--min-gflops", type=float, help="the floor of each device's GFLOP/s")
    compute.add_argument("--max-error", type=float, default=None, help="the largest error allowed (default 1e-3)")
    collective = sub.add_parser("collective", help="an all-reduce across the torch.distributed ranks: GB/s")
    collective.add_argument("--bytes", type=int, default=64 << 20, help="all-reduce size (default 64 MiB)")
    collective.add_argument("--iterations", type=int, default=20)
    collective.add_argument("--min-busbw", type=float, help="the floor of the bus bandwidth, GB/s")
    return parser


def _compute(torch: Any, args: Any) -> List[Dict[str, Any]]:
    from .compute import TOLERANCE, devices, matmul_test  # pylint: disable=import-outside-toplevel
    limit = TOLERANCE if args.max_error is None else args.max_error
    figures = []
    for device in devices(torch):
        size = args.size or (8192 if device.startswith("cuda") else 512)
        result = matmul_test(torch, device, size, args.iterations)
        figures.append({"test": "compute", "figure": "gflops", "device": device, "value": result["gflops"],
                        "operator_floor": args.min_gflops, "error": result["max_error"],
                        "correct": result["max_error"] <= limit, "seconds": result["seconds"]})
    return figures


def _collective(torch: Any, args: Any) -> List[Dict[str, Any]]:
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    from .collective import allreduce_test  # pylint: disable=import-outside-toplevel
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend)
    try:
        result = allreduce_test(torch, dist, args.bytes, args.iterations)
    finally:
        dist.destroy_process_group()
    return [{"test": "collective", "figure": "busbw_gbps", "value": result["busbw_gbps"], "rank": result["rank"],
             "world_size": result["world_size"], "backend": backend, "operator_floor": args.min_busbw,
             "correct": result["correct"]}]


def _emit(result: Dict[str, Any]) -> None:
    """One JSON line in one write: the ranks of a job share a stdout, and print's two writes interleave."""
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        import torch  # pylint: disable=import-outside-toplevel
        torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "0")) or torch.get_num_threads()))
        figures = _compute(torch, args) if args.level == "compute" else _collective(torch, args)
    except Exception as exc:  # pylint: disable=broad-except  # anything that stops the test: it did not pass
        _emit({"node": args.node, "level": args.level, "error": "%s: %s" % (type(exc).__name__, exc),
               "verdict": {"passed": False, "reason": "%s%s: could not run: %s" % (
                   judging.REASON_PREFIX, args.level, type(exc).__name__)}})
        return EXIT_NOT_RUN
    history = judging.read_history(args.history)
    verdict = judging.judge(args.node, figures, history, args.fraction)
    judging.append_history(args.history, args.node, time.time(), verdict["figures"], verdict["passed"])
    _emit({"node": args.node, "level": args.level, "verdict": verdict})
    return EXIT_PASSED if verdict["passed"] else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

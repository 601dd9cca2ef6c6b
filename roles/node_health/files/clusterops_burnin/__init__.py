# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The burn-in tests of a node before it takes training again (issue 42): real work on the node,
each figure judged against a floor, one verdict and, on a failure, the drain reason.

Run as ``python3 -m clusterops_burnin <level>`` with the training environment's Python (torch is
imported only by the tests that need it). One job a module:

- ``compute``: a matrix multiplication on each device (every CUDA GPU, else the CPU): throughput
  (GFLOP/s) and correctness against a float64 reference;
- ``collective``: an all-reduce across the ranks of ``torch.distributed`` (NCCL on GPUs, gloo on
  CPUs): its bus bandwidth (GB/s, NCCL tests' definition) and its sum checked;
- ``judge``: the figures against their floors (the operator's, or a fraction of the fleet's
  median of earlier results), the verdict and the drain reason (pure);
- ``__main__``: the command line, the JSON result and the exit status.
"""

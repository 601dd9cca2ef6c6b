# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The process group: rank, world size and the few collectives used."""

from __future__ import annotations

import datetime
import os
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist

from .common import Refused
from .plan import Plan


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

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What rank 0 tells the world of its progress: the heartbeat file and the event log; the injected hang."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Optional


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

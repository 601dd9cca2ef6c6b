# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Signals: the handlers only count; the training loop acts at step boundaries."""

from __future__ import annotations

import faulthandler
import signal
from types import FrameType
from typing import Optional


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

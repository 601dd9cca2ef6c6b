# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What every part of the trainer shares: the refusal, the exit codes, the one human line of rank 0."""

from __future__ import annotations

import signal


EXIT_REFUSED = 2
EXIT_SIGTERM = 128 + signal.SIGTERM


class Refused(Exception):
    """A start the trainer refuses (exit 2) with a one-line reason."""


def say(rank: int, message: str) -> None:
    """One human line on stdout, rank 0 only."""
    if rank == 0:
        print("reference_trainer: %s" % message, flush=True)

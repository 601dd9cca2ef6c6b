# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What every part of the health check shares: exit statuses, the errors that lead to them, the log."""

from __future__ import annotations

import logging


EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_SLURM, EXIT_TIMEOUT = 0, 1, 2, 3, 4

log = logging.getLogger("clusterops-healthcheck")


class ConfigError(Exception):
    """The configuration or the command line is wrong (exit 2)."""


class SlurmError(Exception):
    """scontrol failed (exit 3)."""


class OverallTimeout(Exception):
    """The whole run took longer than ``timeout`` (exit 4)."""

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The check types, what the checks of one run share, and running them in order."""

from __future__ import annotations

import time

from .base import OverallTimeout, log
from .commands import command_env
from .dcgm import check_dcgm_health
from .gpu import check_gpu_count, check_gpu_state, query_gpus
from .host import check_command, check_disk_free, check_mount
from .xid import check_gpu_xid


CHECK_TYPES = ("gpu_count", "gpu_state", "gpu_xid", "dcgm_health", "mount", "disk_free", "command")


# Each check returns None (pass) or a detail string (fail).
class Context:
    """What the checks share in one run: config, node, its features, cached command output."""

    def __init__(self, config, node, features=()):
        self.config = config
        self.node = node
        self.features = set(features)
        self._gpus = None

    def env(self):
        return command_env()

    def gpus(self, timeout):
        """GPUs from nvidia-smi (cached): (list, None) or (None, error detail)."""
        if self._gpus is None:
            self._gpus = query_gpus(self.config, self.node, timeout, self.env())
        return self._gpus


CHECKS = {
    "gpu_count": check_gpu_count,
    "gpu_state": check_gpu_state,
    "gpu_xid": check_gpu_xid,
    "dcgm_health": check_dcgm_health,
    "mount": check_mount,
    "disk_free": check_disk_free,
    "command": check_command,
}


def run_checks(config, ctx, deadline):
    """Run every check in order -> list of (name, detail) failures (all of them, in order).

    Each check runs in a boundary of its own: an exception it raises is its failure (``check
    error: ...``), never the end of the run; only OverallTimeout ends it."""
    failures = []
    for check in config.get("checks", []):
        name = check.get("name") or check["type"]
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise OverallTimeout()
        timeout = min(float(check.get("timeout", config.get("check_timeout", 10))), remaining)
        started = time.monotonic()
        try:
            detail = CHECKS[check["type"]](check, ctx, timeout)
        except OverallTimeout:
            raise
        except Exception as exc:  # pylint: disable=broad-except  # one check's boundary
            # Whatever one check meets (an output of a shape it does not know included) is that
            # check's failure: the checks after it still run and report their own findings.
            detail = "check error: %s" % (exc if isinstance(exc, (OSError, ValueError)) else
                                          "%s: %s" % (type(exc).__name__, exc))
        log.debug("check %s: %s (%.2fs)", name, detail or "ok", time.monotonic() - started)
        if detail:
            log.warning("check %s FAILED: %s", name, detail)
            failures.append((name, detail))
    return failures

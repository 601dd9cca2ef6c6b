# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Mode nhc: LBNL NHC runs instead of the checks, and its exit status is the program's."""

from __future__ import annotations

import os

from .base import EXIT_TIMEOUT, ConfigError, log
from .commands import run_cmd


def run_nhc(config, timeout):
    nhc = config.get("nhc", "/usr/sbin/nhc")
    if not os.path.isfile(nhc):
        raise ConfigError("mode nhc: %s is not installed" % nhc)
    rc, out, err = run_cmd([nhc] + list(config.get("nhc_args", [])), timeout)
    log.info("nhc exited %s%s", rc, (": " + (err or out).strip()[-200:]) if rc else "")
    return EXIT_TIMEOUT if rc is None else rc

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The config file, the log's handler, and the node's name."""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import sys

from .base import ConfigError, log
from .checks import CHECK_TYPES


DEFAULT_CONFIG = "/etc/clusterops/healthcheck.json"
CONFIG_ENV = "CLUSTEROPS_HEALTHCHECK_CONFIG"
# slurmd names the node in the environment of HealthCheckProgram: SLURMD_NODENAME (22.05, 24.11,
# 26.05 as measured on the dev cluster, see docs/node-health.md); SLURM_NODE_NAME is what 26.05
# gives RebootProgram, kept as a fallback.
NODE_ENV_VARS = ("SLURMD_NODENAME", "SLURM_NODE_NAME")


def load_config(path):
    try:
        with open(path) as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ConfigError("cannot read config %s: %s" % (path, exc))
    if not isinstance(config, dict):
        raise ConfigError("config %s: not a JSON object" % path)
    for i, check in enumerate(config.setdefault("checks", [])):
        if not isinstance(check, dict) or check.get("type") not in CHECK_TYPES:
            raise ConfigError("config %s: checks[%d]: type must be one of %s" % (path, i, ", ".join(CHECK_TYPES)))
    if config.get("mode", "checks") not in ("checks", "nhc"):
        raise ConfigError("config %s: mode must be checks or nhc" % path)
    return config


def setup_logging(config, verbose, node):
    level = logging.DEBUG if verbose or config.get("debug") else logging.INFO
    log.setLevel(level)
    handler = logging.StreamHandler(sys.stderr)
    path = (config.get("log_file") or "").replace("{node}", node)
    if path:
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            handler = logging.handlers.RotatingFileHandler(
                path, maxBytes=int(config.get("log_max_bytes", 1048576)),
                backupCount=int(config.get("log_backups", 3)))
        except OSError as exc:
            sys.stderr.write("clusterops-healthcheck: log file %s: %s\n" % (path, exc))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(process)d] %(message)s"))
    log.handlers[:] = [handler]


def node_name(arg):
    """--node, else the environment slurmd gives the program -> (name, source)."""
    if arg:
        return arg, "--node"
    for var in NODE_ENV_VARS:
        if os.environ.get(var):
            return os.environ[var], var
    return None, None

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The modules of clusterops-healthcheck, Slurm's HealthCheckProgram (standard library only).

The program (``clusterops-healthcheck`` in the role's files, installed as ``clusterops-healthcheck.py``)
puts the folder beside it first on ``sys.path`` and runs :func:`loop.main`. One job a module:

- ``base``: exit statuses, the errors that lead to them, the log;
- ``commands``: running a command (argument list, own process group, hard timeout);
- ``gpu``: nvidia-smi, the gpu_count and gpu_state checks;
- ``xid``: Xids in the kernel log, the gpu_xid check;
- ``dcgm``: DCGM's health watches, the dcgm_health check;
- ``host``: the mount, disk_free and command checks;
- ``checks``: the check types, what they share in a run, running them in order;
- ``config``: reading the config, the log's handler, the node's name;
- ``slurm``: reading the node through scontrol, the drain reason, deciding, draining and resuming;
- ``nhc``: mode nhc (LBNL NHC instead of the checks);
- ``loop``: the command line and a run (check, act, check again after a reboot).
"""

from __future__ import annotations

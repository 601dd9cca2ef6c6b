# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):

    # The options of the Slurm commands every module runs (module_utils/_slurm_cli.py
    # SLURM_COMMAND_OPTIONS). Their attributes: the clusterops.slurm.attributes fragment.
    DOCUMENTATION = r'''
options:
  slurm_conf:
    description:
      - Path of the C(slurm.conf) the Slurm commands read, passed to them as E(SLURM_CONF).
      - When not set, the commands use their built-in default or E(SLURM_CONF) from the
        environment of the task.
    type: path
  slurm_bin_dir:
    description:
      - Directory holding the Slurm client commands (C(sinfo), C(scontrol), ...).
      - When not set, they are looked up on E(PATH).
    type: path
  command_timeout:
    description:
      - Seconds after which one Slurm command is stopped and the task fails with
        a clear message (through coreutils C(timeout)). V(0) or less waits forever.
    type: int
    default: 60
requirements:
  - Slurm client commands on the target (22.05 or later for JSON output).
notes:
  - Commands run with an argument list, never through a shell, and with C(LC_ALL=C).
  - All modules of this collection belong to the action group C(clusterops.slurm.slurm),
    so the options above can be set once with C(module_defaults).
'''

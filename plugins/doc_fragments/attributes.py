# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):

    # Every module of the action group clusterops.slurm.slurm (meta/runtime.yml), with
    # ansible.builtin.action_common_attributes (which describes check_mode, diff_mode, platform).
    DOCUMENTATION = r'''
attributes:
  action_group:
    description: Use C(group/clusterops.slurm.slurm) in C(module_defaults) to set the shared options.
    support: full
    membership:
      - clusterops.slurm.slurm
  platform:
    platforms: posix
'''

    # A module whose second run in a row, with the same arguments, changes nothing.
    IDEMPOTENT = r'''
attributes:
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second run reports
        no change and runs no command that changes anything.
      - This assumes that nothing else changed what it looks at (nodes, jobs, files) in between.
    support: full
'''

    # A module that changes nothing (with IDEMPOTENT: it is).
    INFO_MODULE = r'''
attributes:
  check_mode:
    support: full
    details: This module changes nothing, so it runs in check mode too.
  diff_mode:
    support: N/A
    details: This module changes nothing.
'''

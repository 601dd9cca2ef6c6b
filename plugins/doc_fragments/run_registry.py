# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):

    # The options of the modules that read the run registry (training_remediation,
    # training_goodput_info): module_utils/_training_remediation/registry_options.py REGISTRY_OPTIONS.
    DOCUMENTATION = r'''
options:
  registry:
    description:
      - The run registry folder on the target. A missing folder means no run is registered; the modules
        that act on runs warn then (a shared registry that is not mounted would restart nothing).
    type: path
    default: /var/lib/clusterops/runs
  runs:
    description: Only these runs (names). Empty means every run of the registry.
    type: list
    elements: str
    default: []
  history:
    description:
      - How far back C(sacct) looks for the runs' jobs (C(--starttime)), in the forms
        M(clusterops.slurm.slurm_job_info) takes for O(clusterops.slurm.slurm_job_info#module:start)
        (V(now-30days), V(2026-01-31)). Jobs that ended before it are not read.
    type: str
    default: now-30days
'''

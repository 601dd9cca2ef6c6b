# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):

    # The options of a submission's retries, which every module that runs sbatch takes
    # (slurm_job, training_remediation): module_utils/_job_actions.py SUBMIT_RETRY_OPTIONS.
    DOCUMENTATION = r'''
options:
  submit_retries:
    description:
      - How many more times C(sbatch) may run after a failure that leaves open whether
        C(slurmctld) took the job (a timeout, a lost answer), each time only after C(squeue)
        showed that no job of this identity was created.
    type: int
    default: 2
  retry_delay:
    description:
      - Seconds to wait after such a failure before asking C(squeue).
    type: float
    default: 10
'''

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The options every module that reads one run folder's checkpoints takes (``checkpoint_info``,
``checkpoint_prune``), documented once by the doc fragment ``clusterops.slurm.checkpoint``.

Private to the collection (the leading underscore): no API promise outside it.

Kept apart from the ``_checkpoint`` package, which also runs on hosts without Ansible."""

from __future__ import annotations

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import LEVELS, SIZES
from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec

# run_folder (alias path, its name before 2.0): the folder holding the checkpoints; validate: the level a checkpoint must pass (LEVELS, each including the
# ones before it).
CHECKPOINT_OPTIONS = ArgumentSpec(dict(
    run_folder=dict(type="path", required=True, aliases=["path"]),
    validate=dict(type="str", choices=list(LEVELS), default=SIZES),
))

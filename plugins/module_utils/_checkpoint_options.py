# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""The options every module that reads one run folder's checkpoints takes (``checkpoint_info``,
``checkpoint_prune``), documented once by the doc fragment ``clusterops.slurm.checkpoint``.

Kept apart from the ``_checkpoint`` package, which also runs on hosts without Ansible."""

from __future__ import annotations

from typing import Any, Dict

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import LEVELS, SIZES

# path: the run folder; validate: the level a checkpoint must pass (LEVELS, each including the
# ones before it).
CHECKPOINT_ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    path=dict(type="path", required=True),
    validate=dict(type="str", choices=list(LEVELS), default=SIZES),
)


def checkpoint_argument_spec(**module_options: Any) -> Dict[str, Any]:
    """A module's argument_spec: its own options plus :data:`CHECKPOINT_ARGUMENT_SPEC` (copied)."""
    spec = dict((k, dict(v)) for k, v in CHECKPOINT_ARGUMENT_SPEC.items())
    spec.update(module_options)
    return spec

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The options of the modules that read the run registry (``training_remediation``,
``training_goodput_info``), documented once by the doc fragment ``clusterops.slurm.run_registry``,
and their one reader.

Private to the collection (the leading underscore of the package): no API promise outside it.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec, parse_time_option
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry import (
    DEFAULT_REGISTRY,
    read_registry,
)


#: ``registry`` the folder, ``runs`` only these names, ``history`` how far back sacct looks.
REGISTRY_OPTIONS = ArgumentSpec(dict(
    registry=dict(type="path", default=DEFAULT_REGISTRY),
    runs=dict(type="list", elements="str", default=[]),
    history=dict(type="str", default="now-30days"),
))


def registered_runs(params: Dict[str, Any]) -> Tuple[List[Dict[str, Any]], List[Dict[str, str]], Optional[int]]:
    """``(runs, errors, start)`` of :data:`REGISTRY_OPTIONS`: ``registry.read_registry`` of
    ``registry`` (only ``runs`` when given), each run with ``folder``, its entry in the registry;
    ``start`` the Unix time of ``history`` (sacct's ``--starttime``).

    Raises:
        TaskFailure: ``history`` is not a time (before the registry is read).
        RegistryError: the registry folder cannot be listed.
    """
    try:
        start = parse_time_option(params["history"])
    except ValueError as exc:
        raise TaskFailure("history: %s" % exc)
    runs, errors = read_registry(params["registry"], params["runs"] or None)
    for run in runs:
        run["folder"] = os.path.join(params["registry"], run["name"])
    return runs, errors, start

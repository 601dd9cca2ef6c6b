# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The collection's checkpoint library, imported from its folder as ``clusterops_checkpoint``."""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

from .common import Refused


def checkpoint_library_path() -> str:
    """The checkpoint package's folder: $CLUSTEROPS_CHECKPOINT_TOOL, ``clusterops_checkpoint/`` next to
    the trainer (as roles/checkpoint_tool installs it), or the repository's ``plugins/module_utils/_checkpoint/``."""
    env = os.environ.get("CLUSTEROPS_CHECKPOINT_TOOL")
    if env:
        return env
    # the trainer's folder, which holds this package
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    beside = os.path.join(here, "clusterops_checkpoint")
    if os.path.isdir(beside):
        return beside
    # roles/torchrun_launcher/files/ -> the collection root
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    return os.path.join(repo, "plugins", "module_utils", "_checkpoint")


def load_checkpoint_library() -> ModuleType:
    """Import the checkpoint package from its folder as ``clusterops_checkpoint`` (standard library only).

    The package's modules import each other relatively, so it is registered in ``sys.modules`` under
    that name before it runs; ``sys.path`` is left alone.
    """
    path = checkpoint_library_path()
    init = os.path.join(path, "__init__.py")
    if not os.path.isfile(init):
        raise Refused("checkpoint library %s not found (set CLUSTEROPS_CHECKPOINT_TOOL to the "
                      "clusterops_checkpoint folder)" % path)
    if "clusterops_checkpoint" in sys.modules:
        return sys.modules["clusterops_checkpoint"]
    spec = importlib.util.spec_from_file_location("clusterops_checkpoint", init, submodule_search_locations=[path])
    if spec is None or spec.loader is None:
        raise Refused("cannot import the checkpoint library %s" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[spec.name]
        raise
    return module

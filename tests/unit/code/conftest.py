# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the tests of the repository's own scripts under tests/ share."""

from __future__ import annotations

import importlib.util
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _load(name):
    """The script ``tests/<name>.py`` of the repository, loaded as the module ``name`` (these scripts
    are run as ``python3 tests/<name>.py``, not imported from a package)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "tests", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def tests_script():
    """:func:`_load`: ``tests_script("durations")`` is tests/durations.py as a module."""
    return _load

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fixture promtool: Debian's promtool (package prometheus, 2.42) for the tests of the remediate
role's alert rules and textfile. ``make test`` installs it first (``make deps``,
dev/cluster/install-deps.sh) and sets CLUSTEROPS_REQUIRE_PROMTOOL=1: there a missing promtool
fails the test. Elsewhere (``make unit``, pytest) a missing one skips it, saying so."""

from __future__ import annotations

import os
import shutil

import pytest


@pytest.fixture(name="promtool", scope="session")
def promtool_fixture():
    path = shutil.which("promtool")
    if path is None:
        why = ("promtool not found on PATH: make deps (dev/cluster/install-deps.sh) installs Debian's "
               "prometheus, which has it")
        if os.environ.get("CLUSTEROPS_REQUIRE_PROMTOOL"):
            pytest.fail(why + " (CLUSTEROPS_REQUIRE_PROMTOOL is set, as make test sets it)")
        pytest.skip(why + "; skipped outside make test, which installs it and fails without it")
    return path

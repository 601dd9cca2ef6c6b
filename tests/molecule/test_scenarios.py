# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""`molecule test` of every scenario on podman, through pytest-ansible (see conftest.py)."""

from __future__ import annotations

import pytest

from conftest import REPO


@pytest.mark.usefixtures("molecule_images")
def test_scenario(molecule_scenario, slurm_release, monkeypatch):
    """pytest-ansible runs ``molecule test -s <name>`` (and $MOLECULE_OPTS) in the scenarios'
    parent folder (extensions/); the project stays the repository (molecule.yml finds the
    collection under ${MOLECULE_PROJECT_DIRECTORY}/.collections)."""
    monkeypatch.setenv("MOLECULE_PROJECT_DIRECTORY", REPO)
    if slurm_release:
        monkeypatch.setenv("CLUSTEROPS_SLURM_IMAGE", "localhost/clusterops-molecule-slurm:" + slurm_release)
    else:
        monkeypatch.delenv("CLUSTEROPS_SLURM_IMAGE", raising=False)
    proc = molecule_scenario.test()
    assert proc.returncode == 0, "molecule test -s %s failed (exit %s)" % (molecule_scenario.name, proc.returncode)

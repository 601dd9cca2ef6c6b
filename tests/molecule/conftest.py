# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Molecule scenarios (extensions/molecule/<name>/) as pytest tests, one report for all.

pytest-ansible finds the scenarios (``git ls-files`` of ``**/molecule/*/molecule.yml`` under
pytest's rootdir: start pytest in the repository with ``--rootdir`` there, as
tests/molecule/run.sh does) and hands each to the test as its ``molecule_scenario`` fixture.
Here each test also gets ``slurm_release``: a scenario whose molecule.yml takes its image from
CLUSTEROPS_SLURM_IMAGE (``cluster``) runs once per release in CLUSTEROPS_SLURM_RELEASES (default:
every release of the release table dev/cluster/releases.txt), the others once (``slurm_release``
None).
CLUSTEROPS_MOLECULE_SCENARIOS (names, space separated; default all) chooses scenarios.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "dev", "cluster"))
from devcluster.releases import RELEASE_NAMES  # noqa: E402 pylint: disable=C0413

RELEASES = (os.environ.get("CLUSTEROPS_SLURM_RELEASES") or " ".join(RELEASE_NAMES)).split()
CHOSEN = os.environ.get("CLUSTEROPS_MOLECULE_SCENARIOS", "").split()


def per_release(scenario):
    """Whether a scenario (pytest-ansible's MoleculeScenario) runs once per Slurm release."""
    path = os.path.join(REPO, str(scenario.parent_directory), "molecule", scenario.name, "molecule.yml")
    with open(path) as handle:
        return "CLUSTEROPS_SLURM_IMAGE" in handle.read()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # pytest-ansible: no collections/ tree of links in the repository (see tests/integration/conftest.py).
    config.option.ansible_unit_inject_only = True


def pytest_generate_tests(metafunc):
    if "slurm_release" in metafunc.fixturenames:
        metafunc.parametrize("slurm_release", [None] + RELEASES, ids=["once"] + RELEASES)


def pytest_collection_modifyitems(config, items):
    """Keep each chosen scenario once, or once per release; refuse to run none."""
    keep, drop = [], []
    for item in items:
        params = getattr(item, "callspec", None) and item.callspec.params
        if not params or "molecule_scenario" not in params:
            keep.append(item)
            continue
        scenario = params["molecule_scenario"]
        wanted = not CHOSEN or scenario.name in CHOSEN
        if wanted and (params["slurm_release"] is not None) == per_release(scenario):
            keep.append(item)
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    if not keep:
        raise pytest.UsageError("no Molecule scenario to run (chosen: %s): start pytest in %s with --rootdir=%s"
                                % (" ".join(CHOSEN) or "all", REPO, REPO))


@pytest.fixture(scope="session")
def molecule_images(request):
    """The local images the chosen runs need (tests/molecule/images/build.sh: cached, a first
    build takes a few minutes per release): the Debian 12 base always, a Slurm image per release."""
    releases = sorted({item.callspec.params["slurm_release"] for item in request.session.items
                       if hasattr(item, "callspec") and item.callspec.params.get("slurm_release")})
    env = dict(os.environ, CLUSTEROPS_SLURM_RELEASES=" ".join(releases) or "none")
    subprocess.run(["bash", os.path.join(REPO, "tests", "molecule", "images", "build.sh")] + releases,
                   cwd=REPO, env=env, check=True)
    return releases

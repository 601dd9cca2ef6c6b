# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Packaging tests: the collection tarball, the execution environment definition, the AWX
set-up playbook, plugin docs and the docsite. No Slurm cluster and no network needed.

Every command runs with the venv's tools, from a temporary working directory and with
ANSIBLE_CONFIG pointing at an empty file, so that neither the repository's ansible.cfg
(collections_path=./.collections) nor a collection installed under ~/.ansible decides what
is found.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.dirname(sys.executable)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # pytest-ansible: no collections/ tree of links in the repository (see tests/integration/conftest.py).
    config.option.ansible_unit_inject_only = True


def tool(name):
    path = os.path.join(VENV_BIN, name)
    if not os.path.exists(path):
        pytest.fail("%s not found next to %s: run make venv" % (name, sys.executable))
    return path


def clean_env(tmp_path, **extra):
    cfg = tmp_path / "empty-ansible.cfg"
    cfg.write_text("[defaults]\n")
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("ANSIBLE_"):
            del env[key]
    env.update({
        "ANSIBLE_CONFIG": str(cfg),
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "LC_ALL": "C.UTF-8",
        "PATH": VENV_BIN + os.pathsep + env.get("PATH", ""),
    })
    env.update(extra)
    return env


def run(cmd, env, cwd, check=True, timeout=600):
    proc = subprocess.run([str(c) for c in cmd], cwd=str(cwd), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout,
                          check=False)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (rc=%s):\n%s" % (" ".join(map(str, cmd)), proc.returncode, proc.stdout))
    return proc


@pytest.fixture(scope="session")
def collection_tarball(tmp_path_factory):
    """`ansible-galaxy collection build` of the working tree, the guide's RST written first as
    `make tarball` does; path of the tarball."""
    tmp = tmp_path_factory.mktemp("build")
    run([sys.executable, os.path.join(REPO, "tests", "docsite", "guide_rst.py"), REPO], env=clean_env(tmp), cwd=tmp)
    run([tool("ansible-galaxy"), "collection", "build", "--output-path", tmp, REPO],
        env=clean_env(tmp), cwd=tmp)
    tarballs = sorted(tmp.glob("clusterops-slurm-*.tar.gz"))
    assert len(tarballs) == 1, tarballs
    return tarballs[0]


@pytest.fixture(scope="session")
def installed_collection(tmp_path_factory, collection_tarball):
    """The tarball installed into a clean collections path; returns that path."""
    tmp = tmp_path_factory.mktemp("collections")
    env = clean_env(tmp, ANSIBLE_COLLECTIONS_PATH=str(tmp))
    run([tool("ansible-galaxy"), "collection", "install", "--force", collection_tarball, "-p", tmp],
        env=env, cwd=tmp)
    assert (tmp / "ansible_collections" / "clusterops" / "slurm" / "MANIFEST.json").is_file()
    return tmp

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""execution-environment.yml and meta/execution-environment.yml: `ansible-builder create`
produces a build context that installs this collection with its Python and system needs.
(`ansible-builder build` needs the base image's registry: not run here.)"""

from __future__ import absolute_import, division, print_function

import os
import re
import shutil
import tarfile

import yaml

from conftest import REPO, clean_env, run, tool


def pinned(requirements, name):
    with open(os.path.join(REPO, requirements)) as f:
        for line in f:
            match = re.match(r"^%s==(\S+)" % re.escape(name), line.strip())
            if match:
                return match.group(1)
    raise AssertionError("%s not pinned in %s" % (name, requirements))


def test_builder_create_context(tmp_path, collection_tarball):
    # The layout the EE file documents: the file and build/<tarball> side by side.
    shutil.copy(os.path.join(REPO, "execution-environment.yml"), str(tmp_path))
    (tmp_path / "build").mkdir()
    shutil.copy(str(collection_tarball), str(tmp_path / "build"))
    run([tool("ansible-builder"), "create", "-f", "execution-environment.yml", "-c", "context"],
        env=clean_env(tmp_path), cwd=tmp_path)

    context = tmp_path / "context"
    containerfile = (context / "Containerfile").read_text()
    definition = yaml.safe_load((tmp_path / "execution-environment.yml").read_text())
    assert definition["version"] == 3
    base = definition["images"]["base_image"]["name"]
    assert 'ARG EE_BASE_IMAGE="%s"' % base in containerfile
    # The controller's ansible-core is the one the project pins.
    core = pinned("requirements.txt", "ansible-core")
    assert re.search(r'ARG ANSIBLE_INSTALL_REFS=".*ansible-core==%s[ "]' % re.escape(core), containerfile)
    assert "RUN dnf install -y epel-release" in containerfile
    # The tarball is in the context and the galaxy stage installs it.
    assert (context / "_build" / "collections" / collection_tarball.name).is_file()
    assert "COPY _build/collections/ /opt/clusterops/" in containerfile
    assert "ansible-galaxy collection install" in containerfile
    galaxy = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    assert galaxy["collections"] == [{"name": "/opt/clusterops/clusterops-slurm.tar.gz", "type": "file"}]
    # The final stage installs what introspection of the collections found.
    assert "introspect.py introspect" in containerfile
    assert "install-from-bindep" in containerfile


def test_collection_declares_its_ee_needs(collection_tarball):
    with tarfile.open(str(collection_tarball)) as tar:
        names = set(tar.getnames())
        meta = yaml.safe_load(tar.extractfile("meta/execution-environment.yml").read())
    assert meta["version"] == 1
    for path in meta["dependencies"].values():
        assert path in names, "%s is referenced by meta/execution-environment.yml but not in the tarball" % path


def test_introspection_of_the_installed_collection(tmp_path, installed_collection):
    """What ansible-builder's own introspect.py (the script the build runs) reads from the
    installed collection: jmespath, and Slurm's client commands and munge."""
    import ansible_builder

    script = os.path.join(os.path.dirname(ansible_builder.__file__), "_target_scripts", "introspect.py")
    proc = run([os.path.join(os.path.dirname(tool("ansible-builder")), "python"), script, "introspect",
                "--sanitize", installed_collection], env=clean_env(tmp_path), cwd=tmp_path)
    data = yaml.safe_load(proc.stdout[proc.stdout.index("---"):])
    python = [line.split("#")[0].strip() for line in data["python"]]
    system = [line.split("#")[0].strip() for line in data["system"]]
    assert python == ["jmespath>=1.0.1"]
    assert "slurm-client [platform:dpkg]" in system
    assert "munge [platform:dpkg]" in system
    assert "slurm [platform:rpm]" in system
    assert "munge [platform:rpm]" in system

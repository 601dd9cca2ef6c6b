# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation: ansible-doc renders every module, filter and role of the collection completely;
the antsibull-docs docsite builds without warnings about our docs (tests/docsite/build.sh);
antsibull-changelog lint accepts changelogs/."""

from __future__ import annotations

import glob
import json
import os

import pytest

from conftest import REPO, clean_env, run, tool

LINK = os.path.join(REPO, ".collections", "ansible_collections", "clusterops", "slurm")


def plugins(kind, folder):
    names = []
    for path in sorted(glob.glob(os.path.join(REPO, "plugins", folder, "*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        if not name.startswith("_"):
            names.append((kind, name))
    return names


def roles():
    return [("role", os.path.basename(os.path.dirname(os.path.dirname(p))))
            for p in sorted(glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml")))]


PLUGINS = plugins("module", "modules") + plugins("filter", "filter") + roles()


@pytest.fixture(scope="module")
def doc_env(tmp_path_factory):
    """The working tree as clusterops.slurm, alone on the collections path."""
    if not os.path.islink(LINK):
        os.makedirs(os.path.dirname(LINK), exist_ok=True)
        os.symlink(REPO, LINK)
    tmp = tmp_path_factory.mktemp("doc")
    return tmp, clean_env(tmp, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"))


def test_every_plugin_is_found():
    kinds = set(kind for kind, _name in PLUGINS)
    assert kinds == {"module", "filter", "role"}, PLUGINS


@pytest.mark.parametrize("kind,name", PLUGINS, ids=["%s:%s" % p for p in PLUGINS])
def test_ansible_doc_renders(doc_env, kind, name):
    tmp, env = doc_env
    fqcn = "clusterops.slurm." + name
    text = run([tool("ansible-doc"), "-t", kind, fqcn], env=env, cwd=tmp)
    assert "[WARNING]" not in text.stdout and "[ERROR]" not in text.stdout, text.stdout
    assert fqcn in text.stdout
    data = json.loads(run([tool("ansible-doc"), "--json", "-t", kind, fqcn], env=env, cwd=tmp).stdout)[fqcn]
    if kind == "role":
        spec = data["entry_points"]["main"]
        assert spec.get("short_description") and spec.get("description"), spec
        for option, option_doc in spec.get("options", {}).items():
            assert option_doc.get("description"), "%s: option %s has no description" % (fqcn, option)
        return
    doc = data["doc"]
    assert doc.get("short_description") and doc.get("description"), doc
    assert data.get("examples"), "%s has no EXAMPLES" % fqcn
    assert data.get("return"), "%s has no RETURN" % fqcn
    for option, option_doc in doc.get("options", {}).items():
        assert option_doc.get("description"), "%s: option %s has no description" % (fqcn, option)
        assert option_doc.get("type") or kind == "filter", "%s: option %s has no type" % (fqcn, option)


def test_docsite_builds_without_warnings(tmp_path):
    env = clean_env(tmp_path)
    proc = run(["bash", os.path.join(REPO, "tests", "docsite", "build.sh")], env=env, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert os.path.isfile(os.path.join(REPO, ".cache", "docsite", "build", "html", "collections", "clusterops",
                                       "slurm", "index.html"))


def test_changelog_lint(tmp_path):
    proc = run([tool("antsibull-changelog"), "lint"], env=clean_env(tmp_path), cwd=REPO, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout

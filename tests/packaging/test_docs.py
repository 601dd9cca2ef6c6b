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
import re
import sys

import pytest
import yaml

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


HTML = os.path.join(REPO, ".cache", "docsite", "build", "html", "collections", "clusterops", "slurm")
GUIDE_RST = os.path.join(REPO, "tests", "docsite", "guide_rst.py")


def test_docsite_builds_without_warnings(tmp_path):
    """The docsite builds, and carries every page of the operator's guide, linked from the
    collection's index, with its title and the links between pages resolved (an unresolved :ref:
    is a Sphinx warning, which fails build.sh)."""
    env = clean_env(tmp_path)
    proc = run(["bash", os.path.join(REPO, "tests", "docsite", "build.sh")], env=env, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:]
    with open(os.path.join(HTML, "index.html"), encoding="utf-8") as handle:
        index = handle.read()
    with open(os.path.join(REPO, "docs", "docsite", "extra-docs.yml"), encoding="utf-8") as handle:
        pages = [page for section in yaml.safe_load(handle)["sections"] for page in section["toctree"]]
    for page in pages:
        with open(os.path.join(REPO, "docs", page + ".md"), encoding="utf-8") as handle:
            title = handle.readline().lstrip("# ").strip()
        assert 'href="docsite/%s.html"' % page in index, page
        with open(os.path.join(HTML, "docsite", page + ".html"), encoding="utf-8") as handle:
            text = handle.read()
        words = re.sub(r"[`*]", "", title).split()[:3]
        assert " ".join(words) in re.sub(r"<[^>]+>", "", text), (page, words)
        assert re.findall(r'href="[^"]*\.md[#"]', text) == [], page
    with open(os.path.join(HTML, "docsite", "node-health.html"), encoding="utf-8") as handle:
        # docs/node-health.md: "the default reason classes of [node remediation](node-remediation.md)"
        assert re.search(r'<a class="reference internal" href="node-remediation\.html#[^"]*">'
                         r'<span class="std std-ref">node remediation</span>', handle.read())


def guide_tree(tmp_path, pages, listed):
    (tmp_path / "docs" / "docsite").mkdir(parents=True)
    for name, text in pages.items():
        (tmp_path / "docs" / (name + ".md")).write_text(text)
    (tmp_path / "docs" / "docsite" / "extra-docs.yml").write_text(
        yaml.safe_dump({"sections": [{"title": "Guide", "toctree": listed}]}))
    return tmp_path


def test_guide_links_become_references(tmp_path):
    repo = guide_tree(tmp_path, {
        "a": "# Page A\n\nSee [the other](b.md), [its part](b.md#a-part), [below](#later) and "
             "[the web](https://slurm.schedmd.com/).\n\n## Later\n\ntext\n",
        "b": "# Page B\n\n## A part\n\ntext\n"}, ["a", "b"])
    proc = run([sys.executable, GUIDE_RST, repo], env=clean_env(tmp_path), cwd=tmp_path)
    assert proc.stdout.split() == ["docs/docsite/rst/a.rst", "docs/docsite/rst/b.rst"]
    a = " ".join((repo / "docs" / "docsite" / "rst" / "a.rst").read_text().split())
    b = " ".join((repo / "docs" / "docsite" / "rst" / "b.rst").read_text().split())
    prefix = "ansible_collections.clusterops.slurm.docsite."
    assert ":ref:`the other <%sb>`" % prefix in a
    assert ":ref:`its part <%sb.a-part>`" % prefix in a
    assert ":ref:`below <%sa.later>`" % prefix in a
    assert "`the web <https://slurm.schedmd.com/>`__" in a
    assert ".. _%sa.later:" % prefix in a
    assert ".. _%sb:" % prefix in b and ".. _%sb.a-part:" % prefix in b
    assert b.startswith(".. Written by tests/docsite/guide_rst.py from docs/b.md: edit that file")


@pytest.mark.parametrize("pages,listed,message", [
    ({"a": "# A\n\n[the role](../roles/x/README.md)\n"}, ["a"], "link to ../roles/x/README.md"),
    ({"a": "# A\n\n[gone](missing.md)\n"}, ["a"], "link to missing.md"),
    ({"a": "# A\n", "b": "# B\n"}, ["a"], "extra-docs.yml lists"),
    ({"a": "# A\n"}, ["a", "b"], "extra-docs.yml lists"),
], ids=["repository-file", "unknown-page", "page-not-listed", "listed-page-missing"])
def test_guide_refuses_what_the_docsite_cannot_carry(tmp_path, pages, listed, message):
    repo = guide_tree(tmp_path, pages, listed)
    proc = run([sys.executable, GUIDE_RST, repo], env=clean_env(tmp_path), cwd=tmp_path, check=False)
    assert proc.returncode == 1 and message in proc.stdout, proc.stdout
    assert not (repo / "docs" / "docsite" / "rst").exists()


def test_changelog_lint(tmp_path):
    proc = run([tool("antsibull-changelog"), "lint"], env=clean_env(tmp_path), cwd=REPO, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout

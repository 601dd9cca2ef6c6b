# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""execution-environment.yml and meta/execution-environment.yml: `ansible-builder create`
produces a build context that installs this collection with its Python and system needs.
(`ansible-builder build` needs the base image's registry: not run here.)

`ansible-builder create` names its output after the container runtime it guesses from PATH:
`Containerfile` when podman is installed, `Dockerfile` when only the docker client is (a new
machine of this project's kind has the docker client and gets podman only at the Molecule step).
So the runtime's file is asked for explicitly: ansible-builder 3.2's `create` has no
`--container-runtime` (only `build` has), its `--output-filename Containerfile` is the same
choice. The tests run it with podman hidden from PATH and with a podman on PATH."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile

import pytest
import yaml

from conftest import REPO, clean_env, run, tool


def pinned(requirements, name):
    with open(os.path.join(REPO, requirements)) as f:
        for line in f:
            match = re.match(r"^%s==(\S+)" % re.escape(name), line.strip())
            if match:
                return match.group(1)
    raise AssertionError("%s not pinned in %s" % (name, requirements))


# The exact command execution-environment.yml and docs/awx.md document.
BUILDER_CREATE = ["create", "-f", "execution-environment.yml", "-c", "context", "--output-filename", "Containerfile"]


def path_without(command, path):
    """PATH with every directory that holds an executable `command` left out (/bin too, which is
    /usr/bin on a merged-/usr Debian)."""
    return os.pathsep.join(d for d in path.split(os.pathsep)
                           if d and not os.access(os.path.join(d, command), os.X_OK))


def builder_create(tmp_path, collection_tarball, podman):
    """`ansible-builder create` as documented, with podman "absent" (hidden from PATH) or "present"
    (a stand-in podman first on PATH: ansible-builder only looks for it, create never runs it)."""
    # The layout the EE file documents: the file and build/<tarball> side by side.
    shutil.copy(os.path.join(REPO, "execution-environment.yml"), str(tmp_path))
    (tmp_path / "build").mkdir()
    shutil.copy(str(collection_tarball), str(tmp_path / "build"))
    env = clean_env(tmp_path)
    env["PATH"] = path_without("podman", env["PATH"])
    if podman == "present":
        stand_in = tmp_path / "podman-bin"
        stand_in.mkdir()
        (stand_in / "podman").write_text("#!/bin/sh\necho 'stand-in podman: not to be run' >&2\nexit 99\n")
        (stand_in / "podman").chmod(0o755)
        env["PATH"] = str(stand_in) + os.pathsep + env["PATH"]
    run([tool("ansible-builder")] + BUILDER_CREATE, env=env, cwd=tmp_path)
    return tmp_path / "context"


@pytest.mark.parametrize("podman", ["absent", "present"])
def test_builder_create_writes_a_containerfile_with_or_without_podman(tmp_path, collection_tarball, podman):
    context = builder_create(tmp_path, collection_tarball, podman)
    assert sorted(p.name for p in context.iterdir()) == ["Containerfile", "_build"]


def test_documented_builder_command_is_the_tested_one():
    """execution-environment.yml and docs/awx.md tell people to run exactly BUILDER_CREATE's options."""
    documented = "ansible-builder create --output-filename Containerfile"
    for path in ("execution-environment.yml", os.path.join("docs", "awx.md")):
        with open(os.path.join(REPO, path)) as f:
            text = f.read()
        assert documented in text, "%s does not show `%s`" % (path, documented)
        assert not re.search(r"ansible-builder create(?! --output-filename Containerfile)", text), path


def test_builder_create_context(tmp_path, collection_tarball):
    context = builder_create(tmp_path, collection_tarball, "absent")
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


#: Git-ignored but shipped: written before every build (tests/docsite/guide_rst.py, the operator's
#: guide as the docsite's RST from docs/*.md), never kept in git.
GENERATED = "docs/docsite/rst"


def test_tarball_holds_no_git_ignored_file(collection_tarball):
    """galaxy.yml's build_ignore keeps every git-ignored path (venv, dev cluster state folders of
    each release, caches) out of the tarball, whatever the working tree holds right now; only the
    generated guide pages are in."""
    with tarfile.open(str(collection_tarball)) as tar:
        names = [name for name in tar.getnames() if name not in ("MANIFEST.json", "FILES.json")
                 and name != GENERATED and not name.startswith(GENERATED + "/")]
    git = shutil.which("git")
    if git is None:
        pytest.fail("git not found on PATH: run make deps (dev/cluster/install-deps.sh installs it)")
    proc = subprocess.run([git, "-C", REPO, "check-ignore", "--no-index", "--stdin"],
                          input="\n".join(names) + "\n", stdout=subprocess.PIPE, universal_newlines=True,
                          check=False)
    assert proc.returncode in (0, 1), proc
    assert proc.stdout.split() == []


#: What users run, and all the tarball may hold: top-level files and folders (issue 28).
SHIPPED_FILES = ("MANIFEST.json", "FILES.json", "README.md", "COPYING", "execution-environment.yml", "bindep.txt")
SHIPPED_FOLDERS = ("plugins", "roles", "playbooks", "docs", "meta", "changelogs", "extensions")


def test_tarball_ships_what_users_run_and_nothing_else(collection_tarball):
    """The dev cluster, the tests and their fixtures, benchmarks, make and nox files, development
    requirements, CI and the repository's ansible.cfg stay out; what users run is all in."""
    with tarfile.open(str(collection_tarball)) as tar:
        names = tar.getnames()
    outside = [n for n in names if n not in SHIPPED_FILES and n.split("/", 1)[0] not in SHIPPED_FOLDERS]
    assert outside == []
    assert [n for n in names if "__pycache__" in n or n.endswith(".pyc")] == []
    tops = set(n.split("/", 1)[0] for n in names)
    assert tops == set(SHIPPED_FILES) | set(SHIPPED_FOLDERS)
    # extensions: the rulebook and its event source (extensions/eda), not Molecule's scenarios
    assert [n for n in names if n.startswith("extensions/") and not n.startswith("extensions/eda")] == []
    tracked = subprocess.run(["git", "-C", REPO, "ls-files", "plugins", "roles", "playbooks", "meta", "extensions/eda"],
                             stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.split()
    assert sorted(set(tracked) - set(names)) == []


def test_tarball_ships_the_alert_rules(collection_tarball):
    """The Prometheus alert rules for the remediate role's textfile are where docs/alerts.md says
    (their promtool tests, under tests/, are not)."""
    with tarfile.open(str(collection_tarball)) as tar:
        names = set(tar.getnames())
    assert "roles/remediate/files/prometheus/clusterops-remediate.rules.yml" in names
    assert "docs/alerts.md" in names
    assert [n for n in names if n.endswith(".test.yml")] == []


def test_tarball_carries_the_guide_for_the_docsite(collection_tarball):
    """Every page of the operator's guide as Markdown (docs/) and as the docsite's RST, with the
    extra-docs index that lists them (what antsibull-docs reads from an installed collection)."""
    with tarfile.open(str(collection_tarball)) as tar:
        names = set(tar.getnames())
        index = yaml.safe_load(tar.extractfile("docs/docsite/extra-docs.yml").read())
    pages = [page for section in index["sections"] for page in section["toctree"]]
    markdown = sorted(os.path.basename(p)[:-3] for p in os.listdir(os.path.join(REPO, "docs")) if p.endswith(".md"))
    assert sorted(pages) == markdown
    for page in pages:
        assert "docs/%s.md" % page in names
        assert "%s/%s.rst" % (GENERATED, page) in names
    assert sorted(n for n in names if n.startswith(GENERATED + "/")) == sorted(
        "%s/%s.rst" % (GENERATED, page) for page in pages)


def test_collection_declares_its_ee_needs(collection_tarball):
    with tarfile.open(str(collection_tarball)) as tar:
        names = set(tar.getnames())
        meta = yaml.safe_load(tar.extractfile("meta/execution-environment.yml").read())
    assert meta["version"] == 1
    for path in meta["dependencies"].values():
        assert path in names, "%s is referenced by meta/execution-environment.yml but not in the tarball" % path


def test_introspection_of_the_installed_collection(tmp_path, installed_collection):
    """What ansible-builder's own introspect.py (the script the build runs) reads from the
    installed collection: jmespath, matplotlib, and Slurm's client commands and munge."""
    import ansible_builder

    script = os.path.join(os.path.dirname(ansible_builder.__file__), "_target_scripts", "introspect.py")
    proc = run([os.path.join(os.path.dirname(tool("ansible-builder")), "python"), script, "introspect",
                "--sanitize", installed_collection], env=clean_env(tmp_path), cwd=tmp_path)
    data = yaml.safe_load(proc.stdout[proc.stdout.index("---"):])
    python = [line.split("#")[0].strip() for line in data["python"]]
    system = [line.split("#")[0].strip() for line in data["system"]]
    assert python == ["jmespath>=1.0.1", "matplotlib>=3.8"]
    assert "slurm-client [platform:dpkg]" in system
    assert "munge [platform:dpkg]" in system
    assert "slurm [platform:rpm]" in system
    assert "munge [platform:rpm]" in system

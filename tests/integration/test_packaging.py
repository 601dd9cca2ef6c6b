# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection as users get it: `ansible-galaxy collection build`, install of the tarball into
a clean collections path, and `ansible-playbook clusterops.slurm.remediate` (the playbook by
FQCN, from the installed copy) against the dev cluster. On a healthy cluster it changes nothing.

Only the temporary collections path is searched: ANSIBLE_CONFIG is an empty file (the
repository's ansible.cfg would add ./.collections, where the working tree is linked) and
ANSIBLE_COLLECTIONS_PATH replaces the default paths (~/.ansible/collections may hold a copy)."""

from __future__ import annotations

import os
import re
import subprocess
import tarfile

from conftest import INVENTORY, REPO, VENV_BIN, is_healthy, nodes, slurm_env

# What must never be in the tarball: tool state, build and test output (galaxy.yml build_ignore).
NEVER = (".venv/", ".devcluster/", ".collections/", ".cache/", ".pytest_cache/", ".hypothesis/",
         "tests/output/", "benchmarks/results/", "build/", "context/", ".git/")


def isolated_env(tmp_path, collections):
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[defaults]\nretry_files_enabled = False\n")
    env = slurm_env()
    env["ANSIBLE_CONFIG"] = str(cfg)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    return env


def run(cmd, env, cwd, check=True):
    proc = subprocess.run([str(c) for c in cmd], cwd=str(cwd), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=600, check=False)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (rc=%s):\n%s" % (" ".join(map(str, cmd)), proc.returncode, proc.stdout))
    return proc


def test_installed_tarball_runs_remediate_and_changes_nothing(healthy, tmp_path):
    collections = tmp_path / "collections"
    env = isolated_env(tmp_path, collections)
    galaxy = os.path.join(VENV_BIN, "ansible-galaxy")

    run([galaxy, "collection", "build", "--output-path", tmp_path, REPO], env, tmp_path)
    tarballs = sorted(tmp_path.glob("clusterops-slurm-*.tar.gz"))
    assert len(tarballs) == 1, tarballs
    with tarfile.open(str(tarballs[0])) as tar:
        members = tar.getnames()
    # slurm-<jobid>.out: a job's output left in the tree (tests/ is not in the tarball at all:
    # tests/packaging/test_execution_environment.py lists what it holds)
    leaked = sorted(m for m in members if (m + "/").startswith(NEVER)
                    or os.path.basename(m).startswith("slurm-") and m.endswith(".out"))
    assert not leaked, "galaxy.yml build_ignore lets these into the tarball: %s" % leaked[:20]
    assert "playbooks/remediate.yml" in members
    assert "meta/runtime.yml" in members

    run([galaxy, "collection", "install", "--force", tarballs[0], "-p", collections], env, tmp_path)
    listing = run([galaxy, "collection", "list", "clusterops.slurm"], env, tmp_path).stdout
    paths = re.findall(r"^# (\S+)$", listing, re.MULTILINE)
    assert paths == [str(collections / "ansible_collections")], listing

    proc = run([os.path.join(VENV_BIN, "ansible-playbook"), "-i", INVENTORY, "clusterops.slurm.remediate"],
               env, tmp_path, check=False)
    assert proc.returncode == 0, proc.stdout
    recap = re.search(r"^localhost\s*:\s*(.*)$", proc.stdout, re.MULTILINE)
    assert recap, proc.stdout
    counts = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", recap.group(1)))
    assert counts["failed"] == 0 and counts["unreachable"] == 0, proc.stdout
    assert counts["changed"] == 0, proc.stdout
    assert counts["ok"] > 0, proc.stdout
    # The roles ran from the installed copy (role paths are printed with -v only; the task
    # names carry the FQCN role name).
    assert "clusterops.slurm.remediate_nodes : Read, plan and heal" in proc.stdout
    after = nodes()
    assert all(is_healthy(v) for v in after.values()), after
    assert sorted(after) == sorted(healthy)

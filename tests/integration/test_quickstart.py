# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/quickstart.md, run as written against the dev cluster, as a new operator runs it (issue 37,
part 7): a change to the page that breaks a step fails this test.

The steps are the page's own: the blocks it marks ``<!-- quickstart-test: ROLE -->`` (the scheme,
and the checks of each block, are in tests/quickstart_blocks.py; tests/unit/code/
test_quickstart_blocks.py checks them without a cluster). In order:

1. The collection's tarball is built from the checkout (``ansible-galaxy collection build``, as a
   publisher does; root) and must have the name the page's install command names.
2. The page's **install** command runs, word for word, as the non-root user ``clusterops-operator``
   (the page says root is not needed there), in a folder of its own that holds the tarball: HOME is
   that folder, ANSIBLE_CONFIG an empty file (not the repository's, whose collections path is the
   checkout) and ANSIBLE_COLLECTIONS_PATH an empty folder. The collection must land there, and only
   there.
3. The page's **inventory** is written to the file its commands name (``-i``), with these
   substitutions only (SUBSTITUTED, each one the dev cluster's own value):

   - its one host entry (the page's example host and its connection: ``ansible_become``) becomes
     the dev cluster's controller host entry of ``<state dir>/inventory.yml``: ``localhost`` with
     the local connection (the host's 22.05) or the podman connection into the container
     (24.11, 26.05), already root; the dev machine has neither sshd nor sudo;
   - ``slurm_conf`` becomes the dev cluster's slurm.conf;
   - ``remediate_training_registry`` becomes an empty folder of this test (shared with the
     container), so that no other test's runs decide the training part.

4. Two nodes are broken as on a real cluster: the first drained by Slurm with ``Prolog error``,
   the last by an admin (``disk swap``), the example of the page's summary.
5. The page's **plan** command (``--check``), then its **act** command, run from that folder as
   root, with the installed collection. Each gets ``-e {"remediate_nodes_heal_since": ...}``, as
   ``conftest.playbook()`` does: the dev cluster's accounting outlives a test, and earlier tests'
   heals of the same node would count against the healing budget. The plan must succeed and change
   nothing; the run must succeed, resume the first node and leave the admin's drain alone; and every
   message line of the page's **summary** must be in its output, the page's example names (cluster
   ``trn``, host, ``gpu017``, ``gpu042``, registry) read as the dev cluster's and other numbers as
   any number, the fleet line with its exact counts.

Run: ``SLURM=22.05 .venv/bin/python -m pytest tests/integration/test_quickstart.py`` (the dev
cluster up: ``make cluster-up``); ``SLURM=24.11`` or ``26.05`` on those releases' dev clusters.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile

import pytest
import yaml

from conftest import (INVENTORY, REPO, SLURM_CONF, VENV_BIN, cluster_name, ensure_user, heal_since, is_healthy,
                      nodes, scontrol, shared_tmpdir, wait_for)
from conftest import run as slurm_run

OPERATOR = "clusterops-operator"
#: The page's example names in its summary (the test's own scenario matches them).
PAGE_CLUSTER, PAGE_HEALED, PAGE_KEPT = "trn", "gpu017", "gpu042"
SLURM_REASON, ADMIN_REASON = "Prolog error", "disk swap"
SUBSTITUTED = ("the host entry", "slurm_conf", "remediate_training_registry")
#: HOME of the commands that run as root (never the operator's folder: root's ~/.ansible stays root's).
ROOT_HOME = os.environ.get("HOME") or "/root"


def _blocks_module():
    spec = importlib.util.spec_from_file_location("quickstart_blocks", os.path.join(REPO, "tests", "quickstart_blocks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


QS = _blocks_module()


def page():
    """What the test takes from docs/quickstart.md (quickstart_blocks.check)."""
    with open(QS.PAGE, encoding="utf-8") as handle:
        text = handle.read()
    with open(os.path.join(REPO, "galaxy.yml"), encoding="utf-8") as handle:
        version = yaml.safe_load(handle)["version"]
    return QS.check(QS.blocks(text), version)


def environment(folder, home):
    """The environment of every command: the venv's Ansible, nothing of the repository's
    (ANSIBLE_CONFIG an empty file, only the operator's empty collections path, no SLURM_CONF:
    the inventory's slurm_conf points at the cluster, as on a real one)."""
    return {"PATH": VENV_BIN + os.pathsep + "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": home, "LC_ALL": "C.UTF-8", "ANSIBLE_CONFIG": os.path.join(folder, "ansible.cfg"),
            "ANSIBLE_COLLECTIONS_PATH": os.path.join(folder, "collections"),
            "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}


def run(words, env, cwd, user=None, check=True):
    """``words`` (a page command: its program replaced by the venv's), as ``user`` when given."""
    words = [os.path.join(VENV_BIN, words[0])] + list(words[1:])
    if user:
        words = ["runuser", "-u", user, "--", "env", "-i"] + ["%s=%s" % kv for kv in sorted(env.items())] + words
    proc = subprocess.run(words, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600, check=False)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (rc=%s):\n%s" % (" ".join(words), proc.returncode, proc.stdout))
    return proc


def dev_host():
    """The dev cluster's controller host entry: ``(name, its variables)``."""
    with open(INVENTORY, encoding="utf-8") as handle:
        hosts = yaml.safe_load(handle)["all"]["children"]["slurm_controller"]["hosts"]
    assert len(hosts) == 1, hosts
    name, variables = next(iter(hosts.items()))
    return name, dict(variables or {})


def substituted(inventory, registry):
    """The page's inventory with SUBSTITUTED replaced by the dev cluster's values; the rest as is."""
    inventory = copy.deepcopy(inventory)
    group = inventory["all"]["children"]["slurm_controller"]
    name, variables = dev_host()
    group["hosts"] = {name: variables}
    group["vars"].update(slurm_conf=SLURM_CONF, remediate_training_registry=registry)
    return inventory


@pytest.fixture()
def operator_folder():
    """A folder of the operator's own (their HOME here), with an empty ansible.cfg and an empty
    collections folder; removed afterwards."""
    entry = ensure_user(OPERATOR)
    folder = tempfile.mkdtemp(prefix="clusterops-quickstart-", dir="/tmp")
    os.mkdir(os.path.join(folder, "collections"))
    with open(os.path.join(folder, "ansible.cfg"), "w", encoding="utf-8") as handle:
        handle.write("[defaults]\n")
    for path in (folder, os.path.join(folder, "collections"), os.path.join(folder, "ansible.cfg")):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    env = environment(folder, folder)
    probe = run(["ansible-galaxy", "--version"], env, folder, user=OPERATOR, check=False)
    if probe.returncode != 0:
        pytest.fail("%s cannot run %s/ansible-galaxy (the venv must be usable by other users, as make venv "
                    "makes it): %s" % (OPERATOR, VENV_BIN, probe.stdout))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def build_and_install(taken, folder):
    """Steps 1 and 2: the tarball built from the checkout (root), installed by the operator."""
    build = tempfile.mkdtemp(prefix="clusterops-quickstart-build-")
    try:
        run(["ansible-galaxy", "collection", "build", "--output-path", build, REPO], environment(folder, ROOT_HOME), build)
        assert os.listdir(build) == [taken["tarball"]], "the page installs %s, the build wrote %s" % (
            taken["tarball"], os.listdir(build))
        shutil.copy(os.path.join(build, taken["tarball"]), folder)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    env = environment(folder, folder)
    run(taken["install"], env, folder, user=OPERATOR)
    installed = os.path.join(folder, "collections", "ansible_collections", "clusterops", "slurm")
    assert os.stat(os.path.join(installed, "MANIFEST.json")).st_uid == ensure_user(OPERATOR).pw_uid, \
        "not installed by the operator"
    listing = run(["ansible-galaxy", "collection", "list", "clusterops.slurm"], env, folder, user=OPERATOR).stdout
    assert [line[2:] for line in listing.splitlines() if line.startswith("# ")] == [
        os.path.join(folder, "collections", "ansible_collections")], listing


def playbook(words, folder):
    """Step 5: a page's ansible-playbook command as root (the dev host's connection), with the
    test's healing-budget start."""
    env = environment(folder, ROOT_HOME)
    return run(list(words) + ["-e", json.dumps(heal_since())], env, folder, check=False)


def fleet_line(cluster, host, check_mode):
    if check_mode:
        return '"cluster %s: %s would act; nodes to heal 1, reboot requested 0, skipped 1, overflow 0; runs to resubmit 0 (check mode: ' \
            'nothing changed)"' % (cluster, host)
    return '"cluster %s: %s acted; nodes healed 1, reboot requested 0, skipped 1, overflow 0; runs resubmitted 0"' % (cluster, host)


def test_the_quickstart_runs_as_written(healthy, operator_folder):
    taken = page()
    folder = operator_folder
    build_and_install(taken, folder)

    registry = os.path.join(shared_tmpdir("quickstart-"), "runs")
    os.mkdir(registry, 0o755)
    inventory = substituted(taken["inventory"], registry)
    with open(os.path.join(folder, taken["inventory_file"]), "w", encoding="utf-8") as handle:
        yaml.safe_dump(inventory, handle)

    names = sorted(healthy)
    healed, kept = names[0], names[-1]
    host = dev_host()[0]
    page_registry = taken["inventory"]["all"]["children"]["slurm_controller"]["vars"]["remediate_training_registry"]
    # The page's example names, as the dev cluster's (the page's summary shows them).
    real = {PAGE_CLUSTER: cluster_name(), taken["host"]: host, PAGE_HEALED: healed, PAGE_KEPT: kept,
            page_registry: registry}
    try:
        scontrol("update", "NodeName=%s" % healed, "State=DRAIN", "Reason=%s" % SLURM_REASON)
        scontrol("update", "NodeName=%s" % kept, "State=DRAIN", "Reason=%s" % ADMIN_REASON)

        plan = playbook(taken["plan"], folder)
        assert plan.returncode == 0, plan.stdout
        assert fleet_line(real[PAGE_CLUSTER], host, True) in plan.stdout, plan.stdout
        assert "clusterops.slurm.remediate_nodes : Read, plan and heal" in plan.stdout
        state = nodes()
        assert "DRAIN" in state[healed]["flags"] and state[healed]["reason"] == SLURM_REASON, state

        act = playbook(taken["act"], folder)
        assert act.returncode == 0, act.stdout
        assert fleet_line(real[PAGE_CLUSTER], host, False) in act.stdout, act.stdout
        missing = [line for line in taken["summary"] if not QS.line_pattern(line, real).search(act.stdout)]
        assert missing == [], "lines of the page's summary not in the output:\n%s\n\n%s" % ("\n".join(missing), act.stdout)
        after = wait_for(lambda ns: is_healthy(ns[healed]), "%s back in service" % healed, timeout=60)
        assert "DRAIN" in after[kept]["flags"] and after[kept]["reason"] == ADMIN_REASON, after
    finally:
        slurm_run(["scontrol", "update", "NodeName=%s" % kept, "State=RESUME"], check=False)
        shutil.rmtree(os.path.dirname(registry), ignore_errors=True)

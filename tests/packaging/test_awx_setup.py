# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/awx_setup.yml: syntax and module arguments (AWX itself cannot run here).

ansible-playbook --syntax-check does not look at module arguments, so every awx.awx task's
arguments are also checked against that module's documented options (ansible-doc --json of
the installed awx.awx, from the `ansible` package pinned in requirements-molecule.txt)."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from conftest import REPO, clean_env, run, tool

PLAYBOOK = os.path.join(REPO, "playbooks", "awx_setup.yml")


def tasks():
    with open(PLAYBOOK) as f:
        plays = yaml.safe_load(f)
    return [task for play in plays for task in play["tasks"]]


def test_syntax_check(tmp_path):
    proc = run([tool("ansible-playbook"), "--syntax-check", PLAYBOOK], env=clean_env(tmp_path), cwd=tmp_path)
    assert "playbook: %s" % PLAYBOOK in proc.stdout


def test_creates_every_object_the_job_needs():
    modules = [name for task in tasks() for name in task if name.startswith("awx.awx.")]
    assert modules == ["awx.awx.execution_environment", "awx.awx.project", "awx.awx.inventory",
                       "awx.awx.host", "awx.awx.group", "awx.awx.credential", "awx.awx.job_template",
                       "awx.awx.schedule"]
    by_module = dict((name, task[name]) for task in tasks() for name in task if name.startswith("awx.awx."))
    assert by_module["awx.awx.credential"]["credential_type"] == "Machine"
    assert by_module["awx.awx.group"]["name"] == "slurm_controller"
    template = by_module["awx.awx.job_template"]
    assert os.path.isfile(os.path.join(REPO, template["playbook"]))
    assert template["allow_simultaneous"] is False
    with open(PLAYBOOK) as f:
        defaults = yaml.safe_load(f)[0]["vars"]
    assert defaults["awx_schedule_rrule"].endswith("RRULE:FREQ=MINUTELY;INTERVAL=10")


@pytest.fixture(scope="module")
def awx_docs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("awxdoc")
    names = sorted(set(name for task in tasks() for name in task if name.startswith("awx.awx.")))
    proc = run([tool("ansible-doc"), "--json", "-t", "module"] + names, env=clean_env(tmp), cwd=tmp)
    return json.loads(proc.stdout)


def test_arguments_are_documented_options(awx_docs):
    for task in tasks():
        for name, args in task.items():
            if not name.startswith("awx.awx."):
                continue
            options = awx_docs[name]["doc"]["options"]
            known = set(options)
            for option in options.values():
                known.update(option.get("aliases", []))
            unknown = sorted(set(args) - known)
            assert not unknown, "%s (%s): unknown arguments %s" % (task["name"], name, unknown)
            required = sorted(o for o, spec in options.items() if spec.get("required") and o not in args)
            assert not required, "%s (%s): required arguments missing %s" % (task["name"], name, required)

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/remediate.yml declares what it runs as (issue 37, docs/security.md): root on the Slurm host -
it becomes root when it connects as another account, not when it connects as root (hosts without sudo),
and remediate_become decides when set. The play's own become expression, templated by ansible-playbook
for each kind of host."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

#: host -> (its variables, whether the play becomes root there)
HOSTS = {
    "as-root": ({"ansible_user": "root"}, False),
    "as-operator": ({"ansible_user": "ops"}, True),
    "as-operator-declined": ({"ansible_user": "ops", "remediate_become": False}, False),
    "as-root-asked": ({"ansible_user": "root", "remediate_become": "true"}, True),
    # no ansible_user: the account ansible-playbook runs as (this test's)
    "as-controller-user": ({}, getpass.getuser() != "root"),
}


def test_the_play_becomes_root_unless_it_connects_as_root(tmp_path):
    with open(os.path.join(REPO, "playbooks", "remediate.yml")) as handle:
        play = yaml.safe_load(handle)[0]
    assert "become_user" not in play  # root, or --become-user: a play keyword would override the command line
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {"all": {"hosts": dict((name, dict(hostvars, **local)) for name, (hostvars, dummy) in HOSTS.items())}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "name": "The become of remediate.yml", "hosts": "all", "gather_facts": False,
        "vars": {"declared": play["become"]},
        "tasks": [{"name": "Show", "ansible.builtin.debug": {"msg": "{{ inventory_hostname }} {{ declared }}"}}]}]))
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    env.update(ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=str(tmp_path / "none.cfg"))
    proc = subprocess.run([PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")],
                          cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout
    for name, (dummy, becomes) in HOSTS.items():
        assert json.dumps("%s %s" % (name, becomes)) in proc.stdout, (name, proc.stdout)

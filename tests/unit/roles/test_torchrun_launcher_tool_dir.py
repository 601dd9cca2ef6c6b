# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""torchrun_launcher's checkpoint command folder has one home for its default: unset, the role reads
checkpoint_tool_dir (set in the play, else the role checkpoint_tool's default). ansible-playbook of the
role on this machine (connection local, every folder under tmp_path, no Slurm, nothing installed)."""

from __future__ import annotations

import getpass
import os
import re
import subprocess
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# The run's owner: not root, whom training_run refuses; as another user, that user.
OWNER = "nobody" if os.geteuid() == 0 else getpass.getuser()
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def load(*parts):
    with open(os.path.join(REPO, "roles", *parts)) as handle:
        return yaml.safe_load(handle)


def checkpoint_tool_line(tmp_path, play_vars):
    """The launcher's CHECKPOINT_TOOL= line, the role run with ``play_vars`` as play variables."""
    link = tmp_path / "collections" / "ansible_collections" / "clusterops" / "slurm"
    link.parent.mkdir(parents=True)
    link.symlink_to(REPO)
    role_vars = {"torchrun_launcher_run_name": "llama", "torchrun_launcher_owner": OWNER,
                 "torchrun_launcher_registry_dir": str(tmp_path / "runs"),
                 "torchrun_launcher_workdir": str(tmp_path / "work"),
                 "torchrun_launcher_checkpoint_dir": str(tmp_path / "ckpt"),
                 "torchrun_launcher_program": str(tmp_path / "train.py"),
                 "torchrun_launcher_install_tools": False}
    (tmp_path / "ansible.cfg").write_text(u"[defaults]\n")
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False, "vars": play_vars,
        "roles": [{"role": "clusterops.slurm.torchrun_launcher", "vars": role_vars}]}]))
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    env.update(ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "collections"),
               ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([PLAYBOOK, "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter=%s" % sys.executable, str(tmp_path / "play.yml")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout
    with open(str(tmp_path / "runs" / "llama" / "launcher.sbatch")) as handle:
        return re.search(r"^CHECKPOINT_TOOL=.*$", handle.read(), re.MULTILINE).group(0)


def test_the_launcher_has_no_tool_dir_default_of_its_own():
    assert "torchrun_launcher_tool_dir" not in (load("torchrun_launcher", "defaults", "main.yml") or {})
    spec = load("torchrun_launcher", "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert "default" not in spec["torchrun_launcher_tool_dir"]


@pytest.mark.parametrize("play_vars, want", [
    ({}, None),  # checkpoint_tool's default
    ({"checkpoint_tool_dir": "/shared/clusterops"}, "/shared/clusterops"),
    ({"checkpoint_tool_dir": "/shared/clusterops", "torchrun_launcher_tool_dir": "/srv/tools"}, "/srv/tools"),
], ids=["checkpoint_tool default", "checkpoint_tool_dir", "launcher's own wins"])
def test_the_launcher_reads_the_checkpoint_tool_folder(tmp_path, play_vars, want):
    want = want or load("checkpoint_tool", "defaults", "main.yml")["checkpoint_tool_dir"]
    assert checkpoint_tool_line(tmp_path, play_vars) == "CHECKPOINT_TOOL=%s/clusterops_checkpoint" % want

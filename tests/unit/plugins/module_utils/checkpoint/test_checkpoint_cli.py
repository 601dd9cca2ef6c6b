# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_checkpoint.cli: exit codes, and the installed package run by the system python without Ansible
(``python3 <dir>/clusterops_checkpoint``)."""

from __future__ import annotations

import io
import json
import os
import subprocess

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck

from checkpoint_builders import (  # noqa: E402 pylint: disable=import-error
    SYSTEM_PYTHON,
    contract,
    install_tool,
    truncate,
    write,
)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

def _cli(args):
    out, err = io.StringIO(), io.StringIO()
    code = ck.main(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_exit_codes(tmp_path):
    run = str(tmp_path / "run")
    os.mkdir(run)
    assert _cli(["latest", run]) == (ck.EXIT_NONE, "", "")
    assert _cli(["latest", str(tmp_path / "nope")])[0] == ck.EXIT_ERROR
    write(os.path.join(run, "checkpoint_epoch_1_step_1.pth"), b"")
    code, out, err = _cli(["latest", run])
    assert (code, out) == (ck.EXIT_INVALID, "") and "empty file" in err
    path = contract(run, 5)
    code, out, err = _cli(["latest", run])
    assert (code, out) == (ck.EXIT_OK, path + "\n")
    assert "checkpoint_epoch_1_step_1.pth is invalid" in err  # (1, 1) ranks above (-1, 5)
    assert _cli(["latest", run, "--quiet"])[2] == ""
    code, out, _err = _cli(["latest", run, "--json"])
    assert code == 0 and json.loads(out)["latest_valid"]["path"] == path
    assert _cli(["verify", path]) == (0, "valid\t%s\t\n" % path, "")
    code, out, _err = _cli(["verify", path, os.path.join(run, "checkpoint_epoch_1_step_1.pth")])
    assert code == ck.EXIT_INVALID and "INVALID" in out
    assert _cli(["verify", str(tmp_path / "handpicked")])[0] == ck.EXIT_ERROR
    code, out, _err = _cli(["list", run])
    assert code == 0 and "<- latest valid" in out
    assert [c["name"] for c in json.loads(_cli(["list", run, "--json"])[1])["checkpoints"]] == [
        "step_000000005", "checkpoint_epoch_1_step_1.pth"]
    assert _cli(["finished", run])[0] == ck.EXIT_NONE
    ck.mark_finished(run, step=5)
    assert _cli(["finished", run])[0] == ck.EXIT_OK
    with pytest.raises(SystemExit) as exc:
        _cli(["latest", run, "--validate", "md5"])
    assert exc.value.code == ck.EXIT_ERROR


@pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON), reason="no system python3")
def test_cli_runs_on_system_python_without_ansible(tmp_path):
    # A copy of the file alone, run by the system python without site-packages: no ansible, no torch.
    tool = str(tmp_path / "bin" / "clusterops_checkpoint")  # as roles/checkpoint_tool installs it
    install_tool(tool)
    python = [SYSTEM_PYTHON, "-I", "-S"]
    probe = subprocess.run(python + ["-c", "import ansible"], stderr=subprocess.PIPE, check=False)
    assert probe.returncode != 0
    run = str(tmp_path / "run")
    contract(run, 9000)
    newest = contract(run, 10000)
    contract(run, 11000)
    truncate(os.path.join(run, "step_000011000", "model.pt"), 3)
    write(os.path.join(run, "latest"), b"step_000009000")
    proc = subprocess.run(python + [tool, "latest", run], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    assert (proc.returncode, proc.stdout) == (0, newest + "\n"), proc.stderr
    assert "step_000011000 is invalid" in proc.stderr and "latest points to step_000009000" in proc.stderr
    proc = subprocess.run(python + [tool, "list", run, "--json", "--validate", "sha256", "--validate-all"],
                          stdout=subprocess.PIPE, universal_newlines=True, check=False)
    listed = json.loads(proc.stdout)
    assert proc.returncode == 0
    assert [(c["step"], c["valid"]) for c in listed["checkpoints"]] == [(9000, True), (10000, True), (11000, False)]
    proc = subprocess.run(python + [tool, "verify", os.path.join(run, "step_000011000")], stdout=subprocess.PIPE,
                          universal_newlines=True, check=False)
    assert proc.returncode == 3
    empty = str(tmp_path / "empty")
    os.mkdir(empty)
    assert subprocess.run(python + [tool, "latest", empty], stdout=subprocess.PIPE, check=False).returncode == 1
    assert subprocess.run(python + [tool, "latest", str(tmp_path / "nope")], stderr=subprocess.PIPE, check=False).returncode == 2

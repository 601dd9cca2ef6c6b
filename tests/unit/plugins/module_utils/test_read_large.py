# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_slurm_cli.read_large against AnsibleModule.run_command on real processes: the same answer
(rc, stdout, stderr, environment, bytes that are not UTF-8), only faster for large outputs."""

from __future__ import annotations

import sys

import pytest

from ansible.module_utils import basic
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import DECODE_ERRORS, read_large
from ansible_collections.clusterops.slurm.tests.unit.plugins.modules.module_args import patch_module_args

# Writes 3 MiB and some bytes that are not UTF-8 to stdout, a line to stderr, then exits 3.
PROGRAM = r"""
import os, sys
sys.stdout.buffer.write(b"x" * (3 << 20) + b"\xe9t\xe9 " + os.environ.get("CLUSTEROPS_PROBE", "unset").encode())
sys.stderr.write("sinfo: error: something\n")
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def module():
    with patch_module_args({}):
        yield basic.AnsibleModule(argument_spec={})


@pytest.mark.parametrize("exit_code", [0, 3])
def test_the_same_answer_as_run_command(module, exit_code):
    argv = [sys.executable, "-c", PROGRAM, str(exit_code)]
    env = {"CLUSTEROPS_PROBE": "seen"}
    expected = module.run_command(argv, environ_update=env, check_rc=False, use_unsafe_shell=False,
                                  errors=DECODE_ERRORS)
    got = read_large(module, argv, environ_update=env)
    assert got == expected
    rc, out, err = got
    assert rc == exit_code and len(out) == (3 << 20) + len(u"\ufffdt\ufffd seen")
    assert out.endswith(u"\ufffdt\ufffd seen") and err == "sinfo: error: something\n"


def test_the_module_locale_reaches_the_command(module):
    module.run_command_environ_update = {"CLUSTEROPS_PROBE": "from the module"}
    rc, out, err = read_large(module, [sys.executable, "-c", PROGRAM, "0"])
    assert rc == 0 and out.endswith("from the module")


def test_a_missing_command_raises(module):
    with pytest.raises(OSError):
        read_large(module, ["/nonexistent/sinfo", "--json"])

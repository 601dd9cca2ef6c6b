# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Running a module as data (community.general style): the expected run_command calls, each
with the rc/stdout/stderr recorded from the real dev cluster, and nothing else mocked."""

from __future__ import annotations

import json

import pytest

from ansible.module_utils import basic
from ansible_collections.clusterops.slurm.plugins.module_utils import _slurm_cli
from ansible_collections.clusterops.slurm.tests.unit.plugins.modules.module_args import patch_module_args


@pytest.fixture
def run_module(monkeypatch, capsys):
    """``run_module(module, args, calls, on_call=None) -> result dict``.

    ``calls`` is a list of ``(argv, rc, stdout, stderr)``: every command the module must run,
    in order; an extra, a missing or a different call fails the test. ``on_call(argv, kwargs)``
    may check more of each call (environment, stdin). Commands are found in ``/usr/bin``;
    ``command_timeout`` defaults to 0 (no timeout(1) wrapper) unless ``args`` sets it.
    """
    def run(module, args, calls, on_call=None):
        expected = list(calls)

        def run_command(self, argv, **kwargs):
            assert kwargs.get("use_unsafe_shell") is False
            assert isinstance(argv, list), "commands run as argument lists"
            assert expected, "unexpected extra call %s" % (argv,)
            want, rc, out, err = expected.pop(0)
            assert argv == want
            if on_call:
                on_call(argv, kwargs)
            return rc, out, err

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        # Large reads (sinfo --json) bypass run_command (_slurm_cli.read_large): the same stand-in.
        monkeypatch.setattr(_slurm_cli, "read_large", lambda module, argv, environ_update=None, errors=None:
                            module.run_command(argv, environ_update=environ_update, check_rc=False,
                                               use_unsafe_shell=False, errors=errors))
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                            lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)
        with patch_module_args(dict({"command_timeout": 0}, **args)):
            with pytest.raises(SystemExit):
                module.main()
        result = json.loads(capsys.readouterr().out)
        assert expected == [], "calls not made: %s" % (expected,)
        return result
    return run


@pytest.fixture
def owner_calls_in_place(monkeypatch):
    """Training remediation as root whose runs belong to ``nobody``: sbatch gets the ``runuser -u
    nobody --`` prefix as on a real controller, and the reads in the runs' folders run in their
    forked child (``_privsep.call_as``) without the id change, so that they reach pytest's tmp_path
    (mode 0700). The change of ids itself is tested in test_privsep.py and on the dev cluster."""
    from ansible_collections.clusterops.slurm.plugins.module_utils import _privsep
    from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import runner
    monkeypatch.setattr(_privsep, "switch_user", lambda uid, gid, groups: None)
    monkeypatch.setattr(runner, "effective_user", lambda: "root")
    monkeypatch.setattr(runner.os, "geteuid", lambda: 0)

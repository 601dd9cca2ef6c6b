# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The size limits of tests/code_limits.py hold (functions, files, private imports inside a
package), except for the offenders its KNOWN list still names; a mended one must leave the list."""

from __future__ import annotations

import textwrap

import pytest


@pytest.fixture(scope="module")
def limits(tests_script):
    return tests_script("code_limits")


def test_no_offender_outside_the_known_list_and_none_of_it_mended(limits, capsys):
    report, new, mended = limits.check()
    print("\n".join(report))
    assert new == [], "over the limits (issue 26, part 5):\n" + "\n".join(line for line in report if "[new]" in line)
    assert mended == [], "no longer over the limits, take them out of KNOWN: %s" % mended


def test_each_limit_is_found(limits, tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "ROOT", str(tmp_path))
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import _private, public\n"
                                  "from pkg.b import _other\n"
                                  "from os import _exit\n"
                                  "def long():\n" + "    x = 1\n" * 80)
    (package / "big.py").write_text("x = 1\n" * 601)
    (tmp_path / "alone.py").write_text("from b import _private\n" + textwrap.indent("def ok():\n" + "    x = 1\n" * 79, ""))
    found = {key: what for path in ("pkg/a.py", "pkg/big.py", "alone.py") for key, dummy, what in limits.offenders(path)}
    assert found == {
        "pkg/a.py->b:_private": "imports the private _private of b.py",
        "pkg/a.py->b:_other": "imports the private _other of b.py",
        "pkg/a.py::long": "function long of 81 lines (limit 80)",
        "pkg/big.py": "file of 601 lines (limit 600)",
    }
    monkeypatch.setattr(limits, "FILE_LIMITS", {"pkg/big.py": 601, "alone.py": 80})
    assert [what for dummy, dummy, what in limits.offenders("pkg/big.py")] == []
    assert [what for dummy, dummy, what in limits.offenders("alone.py")] == ["file of 81 lines (limit 80)"]


def test_a_policy_module_that_imports_a_command_runner_is_found(limits, tmp_path, monkeypatch):
    """Issue 40: a policy decides from what was read; one that imports the command layer, itself or
    through a module of the collection (relative or absolute import), or subprocess is an offender."""
    monkeypatch.setattr(limits, "ROOT", str(tmp_path))
    utils = tmp_path / "plugins" / "module_utils"
    (utils / "_pkg").mkdir(parents=True)
    for init in (utils / "__init__.py", utils / "_pkg" / "__init__.py"):
        init.write_text("")
    (utils / "_slurm_cli.py").write_text("import subprocess\n")
    (utils / "_reader.py").write_text("from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import run\n")
    (utils / "_pure.py").write_text("import re\n")
    (utils / "_pkg" / "helper.py").write_text("from .. import _reader\n")
    cases = {
        "direct": "from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SlurmCLI\n",
        "through": "from ansible_collections.clusterops.slurm.plugins.module_utils._reader import read\n",
        "relative": "from .helper import x\n",
        "subprocess": "import subprocess\n",
        "pure": "from ansible_collections.clusterops.slurm.plugins.module_utils._pure import x\nimport time\n",
    }
    found = {}
    for name, text in cases.items():
        (utils / "_pkg" / "policy.py").write_text(text)
        found[name] = [what for dummy, dummy, what in limits.policy_offenders("plugins/module_utils/_pkg/policy.py")]
    assert found == {
        "direct": ["a policy module imports a command runner: plugins/module_utils/_pkg/policy.py -> "
                   "plugins/module_utils/_slurm_cli.py"],
        "through": ["a policy module imports a command runner: plugins/module_utils/_pkg/policy.py -> "
                    "plugins/module_utils/_reader.py -> plugins/module_utils/_slurm_cli.py"],
        "relative": ["a policy module imports a command runner: plugins/module_utils/_pkg/policy.py -> "
                     "plugins/module_utils/_pkg/helper.py -> plugins/module_utils/_reader.py -> "
                     "plugins/module_utils/_slurm_cli.py"],
        "subprocess": ["a policy module imports a command runner: plugins/module_utils/_pkg/policy.py -> subprocess"],
        "pure": [],
    }
    # not a policy module: the same import is no offence
    (utils / "_pkg" / "runner.py").write_text(cases["direct"])
    assert list(limits.policy_offenders("plugins/module_utils/_pkg/runner.py")) == []

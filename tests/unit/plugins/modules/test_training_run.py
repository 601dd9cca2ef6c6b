# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""training_run: run.json written with the registry's validator and defaults, check mode, diff,
absent; no Slurm command at all."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible_collections.clusterops.slurm.plugins.doc_fragments import run_registry
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry_options import REGISTRY_OPTIONS
from ansible_collections.clusterops.slurm.plugins.modules import training_remediation, training_run
from ansible_collections.clusterops.slurm.tests.unit.plugins.modules.module_args import patch_module_args

#: The runs' owner: a user of every Debian host other than root (root is refused).
USER = "nobody"
ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "roles", "torchrun_launcher")


@pytest.fixture
def run_module(capsys):
    """``run_module(module, args, calls) -> result``: training_run runs no command (``calls`` is [])."""
    def run(module, module_args, calls):
        assert calls == []
        with patch_module_args(module_args):
            with pytest.raises(SystemExit):
                module.main()
        return json.loads(capsys.readouterr().out)
    return run


def args(reg, **kw):
    out = {"registry": str(reg), "name": "llm", "owner": USER, "checkpoint_dir": "/ckpt/llm"}
    out.update(kw)
    return out


def read(reg, name="llm"):
    with open(os.path.join(str(reg), name, training_registry.RUN_FILE)) as handle:
        return json.load(handle)


def test_present_writes_every_field_once_then_changes_nothing(run_module, tmp_path):
    reg = tmp_path / "runs"
    result = run_module(training_run, dict(args(reg, hang_timeout=600, log_dir="/work/llm/logs"), _ansible_diff=True), [])
    written = read(reg)
    assert result["changed"] is True and result["run"] == written
    assert result["run_file"] == str(reg / "llm" / "run.json") and "owner" not in result
    expected = dict(training_registry.RUN_DEFAULTS, format="clusterops.training_run", format_version=1, name="llm",
                    owner=USER, launcher=str(reg / "llm" / "launcher.sbatch"), checkpoint_dir="/ckpt/llm",
                    hang_timeout=600, log_dir="/work/llm/logs")
    assert written == expected
    assert result["diff"]["before"] == "" and json.loads(result["diff"]["after"]) == written
    # The reader takes what the module wrote, as it is (with the launcher the role writes next to it).
    (reg / "llm" / "launcher.sbatch").write_text("#!/bin/bash\n")
    os.chmod(str(reg / "llm" / "launcher.sbatch"), 0o755)
    runs, errors = training_registry.read_registry(str(reg))
    assert errors == [] and [dict((k, r[k]) for k in written) for r in runs] == [written]
    again = run_module(training_run, args(reg, hang_timeout=600, log_dir="/work/llm/logs"), [])
    assert again["changed"] is False and again["run"] == written


def test_check_mode_and_diff_show_the_change_without_writing(run_module, tmp_path):
    reg = tmp_path / "runs"
    run_module(training_run, args(reg), [])
    result = run_module(training_run, dict(args(reg, max_resubmissions=9), _ansible_check_mode=True,
                                           _ansible_diff=True), [])
    assert result["changed"] is True and result["run"]["max_resubmissions"] == 9
    assert read(reg)["max_resubmissions"] == training_registry.RUN_DEFAULTS["max_resubmissions"]
    before, after = json.loads(result["diff"]["before"]), json.loads(result["diff"]["after"])
    assert before == read(reg) and dict(before, max_resubmissions=9) == after


@pytest.mark.parametrize("field,value,error", [
    ("checkpoint_validate", "full", "checkpoint_validate 'full' is not a validation level"),
    ("progress", "stdout", "progress 'stdout' is not one of heartbeat, checkpoint, log"),
    ("checkpoint_dir", "relative/ckpt", "checkpoint_dir 'relative/ckpt' is not an absolute path"),
    ("max_resubmissions", -1, "max_resubmissions must be an integer of 0 to 2**53, not -1"),
    ("checkpoint_name_template", "{epoch}", "checkpoint_name_template"),
    ("progress", "heartbeat", "progress is heartbeat but heartbeat_file is not set"),
])
def test_unknown_or_wrong_values_fail_and_write_nothing(run_module, tmp_path, field, value, error):
    reg = tmp_path / "runs"
    run_module(training_run, args(reg), [])
    before = read(reg)
    result = run_module(training_run, args(reg, **{field: value}), [])
    assert result["failed"] is True and error in result["msg"], result["msg"]
    assert read(reg) == before


def test_a_bad_name_fails_before_any_path_is_built(run_module, tmp_path):
    result = run_module(training_run, args(tmp_path, name="../etc"), [])
    assert result["failed"] is True and "letters, digits" in result["msg"]
    assert os.listdir(str(tmp_path)) == []


def test_absent_removes_the_runs_folder_check_mode_does_not(run_module, tmp_path):
    reg = tmp_path / "runs"
    run_module(training_run, args(reg), [])
    (reg / "llm" / training_registry.STATE_FILE).write_text("{}")
    result = run_module(training_run, dict(args(reg, state="absent"), _ansible_check_mode=True, _ansible_diff=True), [])
    assert result["changed"] is True and result["diff"]["after"] == "" and (reg / "llm").exists()
    result = run_module(training_run, {"registry": str(reg), "name": "llm", "state": "absent"}, [])
    assert result["changed"] is True and result["run"] is None and not (reg / "llm").exists()
    result = run_module(training_run, {"registry": str(reg), "name": "llm", "state": "absent"}, [])
    assert result["changed"] is False


def test_absent_waits_for_the_registry_lock(run_module, tmp_path):
    reg = tmp_path / "runs"
    run_module(training_run, args(reg), [])
    lock = training_registry.RegistryLock(str(reg))
    assert lock.acquire()
    try:
        result = run_module(training_run, {"registry": str(reg), "name": "llm", "state": "absent",
                                           "lock_timeout": 0}, [])
    finally:
        lock.release()
    assert result["failed"] is True and "holds" in result["msg"] and (reg / "llm" / "run.json").exists()


def test_one_home_for_the_run_defaults():
    """The module's options, its documentation, training_remediation's registry and the launcher
    role's defaults and argument spec all say what registry.RUN_DEFAULTS says."""
    assert set(training_run.FIELD_TYPES) == set(training_registry.RUN_DEFAULTS)
    spec = training_run.argument_spec().argument_spec
    doc = yaml.safe_load(training_run.DOCUMENTATION)["options"]
    assert set(doc) == set(spec)
    for field, default in training_registry.RUN_DEFAULTS.items():
        assert spec[field].get("default") == default, field
        assert doc[field].get("default") == default, field
        assert doc[field]["type"] == spec[field]["type"], field
    assert doc["registry"]["default"] == spec["registry"]["default"] == training_registry.DEFAULT_REGISTRY
    # training_remediation's and training_goodput_info's registry: the doc fragment run_registry and REGISTRY_OPTIONS
    fragment = yaml.safe_load(run_registry.ModuleDocFragment.DOCUMENTATION)["options"]
    assert fragment["registry"]["default"] == REGISTRY_OPTIONS.argument_spec["registry"]["default"] == \
        training_registry.DEFAULT_REGISTRY
    assert "clusterops.slurm.run_registry" in yaml.safe_load(training_remediation.DOCUMENTATION)[
        "extends_documentation_fragment"]
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        role = yaml.safe_load(handle)
    with open(os.path.join(ROLE, "meta", "argument_specs.yml")) as handle:
        role_spec = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    assert role["torchrun_launcher_registry_dir"] == training_registry.DEFAULT_REGISTRY
    for field in ("requeue", "checkpoint_validate", "max_resubmissions", "no_progress_limit", "enabled",
                  "hang_timeout", "progress", "suspect_nodes", "suspect_after"):
        default = training_registry.RUN_DEFAULTS[field]
        assert role["torchrun_launcher_" + field] == default, field
        assert role_spec["torchrun_launcher_" + field]["default"] == default, field


@pytest.mark.parametrize("owner, message", [("root", "training runs as root are refused"),
                                            ("no-such-user-here", "is no user on this host")])
def test_an_owner_remediation_would_refuse_is_refused_when_registered(run_module, tmp_path, owner, message):
    reg = tmp_path / "runs"
    result = run_module(training_run, args(reg, owner=owner), [])
    assert result["failed"] is True and message in result["msg"]
    assert not os.path.exists(str(reg / "llm" / training_registry.RUN_FILE))

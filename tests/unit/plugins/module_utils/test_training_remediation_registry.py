# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training-run registry: run.json read and validated, state.json round trip, the lock."""

from __future__ import annotations

import json
import multiprocessing
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ckpt_lib
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry
from ansible_collections.clusterops.slurm.tests.unit.plugins.module_utils.training_remediation_cases import run, run_spec, state


# ---- registry and state files ----------------------------------------------------------------------

def write_run(reg, name, **kw):
    folder = reg / name
    folder.mkdir(parents=True)
    (folder / training_registry.RUN_FILE).write_text(json.dumps(run_spec(name=name, **kw)))
    return folder


def test_registry_reads_good_runs_and_reports_bad_ones(tmp_path):
    reg = tmp_path / "runs"
    write_run(reg, "a")
    write_run(reg, "b", max_resubmissions=-1)
    write_run(reg, "c", a_future_field=True)  # unknown fields are kept, not refused
    (reg / "d").mkdir()
    (reg / "d" / training_registry.RUN_FILE).write_text("{not json")
    write_run(reg, "e", format_version=99)
    (reg / ".remediate.lock").write_text("")
    runs, errors = training_registry.read_registry(str(reg))
    assert [r["name"] for r in runs] == ["a", "c"]
    assert runs[0]["max_resubmissions"] == 3 and runs[0]["requeue"] is False
    by_name = dict((e["name"], e["error"]) for e in errors)
    assert set(by_name) == {"b", "d", "e"}
    assert "max_resubmissions" in by_name["b"] and "not valid JSON" in by_name["d"]
    assert "format_version 99" in by_name["e"]
    runs, errors = training_registry.read_registry(str(reg), ["a", "zz"])
    assert [r["name"] for r in runs] == ["a"] and errors[0]["name"] == "zz"
    assert training_registry.read_registry(str(tmp_path / "missing")) == ([], [])


def test_registry_refuses_a_name_that_is_not_its_folder(tmp_path):
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / training_registry.RUN_FILE).write_text(json.dumps(run_spec(name="y")))
    runs, errors = training_registry.read_registry(str(tmp_path))
    assert runs == [] and "differs from its folder" in errors[0]["error"]


def test_state_round_trip_and_corruption(tmp_path):
    assert training_registry.read_state(str(tmp_path)) == training_registry.empty_state()
    st = state(40)
    training_registry.write_state(str(tmp_path), st)
    assert training_registry.read_state(str(tmp_path)) == st
    assert [p for p in os.listdir(str(tmp_path)) if p != training_registry.STATE_FILE] == []
    (tmp_path / training_registry.STATE_FILE).write_text("{")
    with pytest.raises(training_registry.RegistryError, match="not valid JSON"):
        training_registry.read_state(str(tmp_path))
    (tmp_path / training_registry.STATE_FILE).write_text("{}")
    with pytest.raises(training_registry.RegistryError, match="not a clusterops.training_state"):
        training_registry.read_state(str(tmp_path))


def _hold_lock(registry, ready, release):
    lock = training_registry.RegistryLock(registry)
    assert lock.acquire()
    ready.set()
    release.wait(30)
    lock.release()


def test_lock_excludes_a_second_holder_and_dies_with_its_holder(tmp_path):
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold_lock, args=(str(tmp_path), ready, release))
    proc.start()
    try:
        assert ready.wait(10)
        assert training_registry.RegistryLock(str(tmp_path), timeout=0).acquire() is False
        assert training_registry.RegistryLock(str(tmp_path), timeout=1.0).acquire() is False
    finally:
        proc.kill()  # no release: the kernel drops a dead holder's flock
        proc.join()
    lock = training_registry.RegistryLock(str(tmp_path), timeout=0)
    assert lock.acquire() is True
    lock.release()


def test_registry_refuses_unknown_levels_and_bad_name_templates(tmp_path):
    reg = tmp_path / "runs"
    write_run(reg, "a", checkpoint_validate="load", checkpoint_name_template="{epoch}-{step}")
    write_run(reg, "b", checkpoint_validate="full")
    write_run(reg, "c", checkpoint_name_template="{epoch}")
    runs, errors = training_registry.read_registry(str(reg))
    assert [(r["name"], r["checkpoint_validate"], r["checkpoint_name_template"]) for r in runs] == [
        ("a", "load", "{epoch}-{step}")]
    by_name = dict((e["name"], e["error"]) for e in errors)
    assert "checkpoint_validate 'full' is not a validation level" in by_name["b"]
    assert "has no {step}" in by_name["c"]


def test_launcher_role_levels_and_name_template_match_the_library():
    yaml = pytest.importorskip("yaml")
    role = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "roles", "torchrun_launcher")
    with open(os.path.join(role, "meta", "argument_specs.yml")) as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    with open(os.path.join(role, "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    assert options["torchrun_launcher_checkpoint_validate"]["choices"] == list(ckpt_lib.LEVELS)
    assert defaults["torchrun_launcher_checkpoint_validate"] == options["torchrun_launcher_checkpoint_validate"][
        "default"] == training_registry.RUN_DEFAULTS["checkpoint_validate"]
    assert defaults["torchrun_launcher_checkpoint_name_template"] == options[
        "torchrun_launcher_checkpoint_name_template"]["default"] == ""
    # The role writes "" for no template: the registry reads it as none.
    assert run(checkpoint_name_template="")["checkpoint_name_template"] is None

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

#: A user that exists on every Debian host and is not root: the owner of the runs written here.
USER = "nobody"


def write_run(reg, name, **kw):
    """A registry entry as the module training_run writes it: run.json and the launcher, owned by the
    process (root or the operator), mode 0644, folder 0755."""
    folder = reg / name
    folder.mkdir(parents=True)
    (folder / "launcher.sbatch").write_text("#!/bin/bash\n")
    kw = dict({"owner": USER, "launcher": str(folder / "launcher.sbatch")}, **kw)
    (folder / training_registry.RUN_FILE).write_text(json.dumps(run_spec(name=name, **kw)))
    for path in (folder, folder / "launcher.sbatch", folder / training_registry.RUN_FILE):
        os.chmod(str(path), 0o755 if path == folder else 0o644)
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


def test_registry_takes_replica_folders_and_refuses_bad_ones(tmp_path):
    reg = tmp_path / "runs"
    write_run(reg, "a", checkpoint_replicas=["/backup/a", "/other/a"])
    write_run(reg, "b", checkpoint_replicas=["backup/b"])
    write_run(reg, "c", checkpoint_replicas="/backup/c")
    write_run(reg, "d", checkpoint_dir="/ckpt/d", checkpoint_replicas=["/ckpt/d/"])
    write_run(reg, "e", checkpoint_replicas=["/backup/e", "/backup//e"])
    write_run(reg, "f")
    runs, errors = training_registry.read_registry(str(reg))
    assert [(r["name"], r["checkpoint_replicas"]) for r in runs] == [("a", ["/backup/a", "/other/a"]), ("f", [])]
    assert sorted(e["name"] for e in errors) == ["b", "c", "d", "e"]
    assert all("checkpoint_replicas" in e["error"] for e in errors)


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


# ---- hostile entries: owner binding, file kinds, sizes, shapes ----------------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")


def read_errors(reg):
    runs, errors = training_registry.read_registry(str(reg))
    return [r["name"] for r in runs], dict((e["name"], e["error"]) for e in errors)


def test_an_entry_naming_root_or_an_unknown_user_is_refused(tmp_path):
    reg = tmp_path / "runs"
    write_run(reg, "good")
    write_run(reg, "as-root", owner="root")
    write_run(reg, "ghost", owner="no-such-user-here")
    names, errors = read_errors(reg)
    assert names == ["good"]
    assert "owner root is root: training runs as root are refused" in errors["as-root"]
    assert "owner no-such-user-here is no user on this host" in errors["ghost"]


@pytest.mark.parametrize("what", ["run.json", "folder"])
def test_an_entry_others_can_write_is_refused(tmp_path, what):
    reg = tmp_path / "runs"
    folder = write_run(reg, "a")
    write_run(reg, "b")
    os.chmod(str(folder / "run.json") if what == "run.json" else str(folder), 0o666 if what == "run.json" else 0o777)
    names, errors = read_errors(reg)
    assert names == ["b"] and "writable by its group or others" in errors["a"]


@needs_root
def test_a_user_written_entry_binds_its_writer_and_no_one_else(tmp_path):
    """In a registry users may write (sticky, like /tmp), run.json owned by the user named as owner is
    theirs; one that names another user (daemon) or root is refused: nobody submits as somebody else."""
    reg = tmp_path / "runs"
    reg.mkdir()
    os.chmod(str(reg), 0o1777)
    nobody = training_registry.pwd.getpwnam(USER).pw_uid
    own = write_run(reg, "own")
    other = write_run(reg, "other", owner="daemon")
    for folder in (own, other):
        for path in (folder, folder / "run.json"):
            os.chown(str(path), nobody, -1)
    names, errors = read_errors(reg)
    assert names == ["own"]
    assert "is owned by uid %d" % nobody in errors["other"] and "the run's owner daemon" in errors["other"]


def test_a_registry_anyone_can_write_without_the_sticky_bit_is_refused_whole(tmp_path):
    reg = tmp_path / "runs"
    write_run(reg, "a")
    os.chmod(str(reg), 0o777)
    with pytest.raises(training_registry.RegistryError, match="without the sticky bit"):
        training_registry.read_registry(str(reg))


@pytest.mark.parametrize("attack", ["symlink", "missing", "folder-writable", "writable", "foreign"])
def test_a_launcher_someone_else_controls_is_refused(tmp_path, attack):
    if attack == "foreign" and os.geteuid() != 0:
        pytest.skip("chown needs root")
    reg = tmp_path / "runs"
    folder = write_run(reg, "a")
    write_run(reg, "b")
    launcher = folder / "launcher.sbatch"
    if attack == "symlink":
        launcher.unlink()
        launcher.symlink_to(tmp_path / "elsewhere.sbatch")
        (tmp_path / "elsewhere.sbatch").write_text("#!/bin/bash\n")
    elif attack == "missing":
        launcher.unlink()
    elif attack == "folder-writable":
        shared = tmp_path / "shared"
        shared.mkdir()
        os.chmod(str(shared), 0o777)
        (shared / "l.sbatch").write_text("#!/bin/bash\n")
        (folder / "run.json").write_text(json.dumps(run_spec(name="a", owner=USER, launcher=str(shared / "l.sbatch"))))
    elif attack == "writable":
        os.chmod(str(launcher), 0o666)
    else:
        os.chown(str(launcher), training_registry.pwd.getpwnam("daemon").pw_uid, -1)
    names, errors = read_errors(reg)
    assert names == ["b"] and "launcher" in errors["a"]


def test_a_hostile_run_json_is_one_error_and_the_others_are_read(tmp_path):
    """A symlink to a file root may read, a FIFO (would block), a 2 MiB file, JSON nested 100,000 deep
    (RecursionError), bytes that are not UTF-8: each is one error entry; the good run is read."""
    reg = tmp_path / "runs"
    write_run(reg, "good")
    for name in ("link", "fifo", "huge", "nested", "binary"):
        folder = write_run(reg, name)
        spec = folder / "run.json"
        spec.unlink()
        if name == "link":
            spec.symlink_to("/etc/passwd")
        elif name == "fifo":
            os.mkfifo(str(spec))
        elif name == "huge":
            spec.write_text(json.dumps(run_spec(name="huge", pad="x" * (2 << 20))))
        elif name == "nested":
            spec.write_bytes(b"[" * 100000 + b"]" * 100000)
        else:
            spec.write_bytes(b"\xff\xfe\x00{")
    names, errors = read_errors(reg)
    assert names == ["good"] and sorted(errors) == ["binary", "fifo", "huge", "link", "nested"]
    assert "larger than" in errors["huge"] and "nested too deeply" in errors["nested"]
    assert "not a regular file" in errors["fifo"]


@pytest.mark.parametrize("content, problem", [
    ({"resubmissions": ["x"]}, "resubmissions[0] is not an object"),
    ({"resubmissions": [{"job_id": {"a": 1}}]}, "resubmissions[0].job_id"),
    ({"resubmissions": [{"step": "40"}]}, "resubmissions[0].step '40' is not an integer of 0 to 2**53"),
    ({"resubmissions": [], "hang_cancels": {"a": 1}}, "hang_cancels is not a list"),
    ({"resubmissions": [], "stopped": "yes"}, "stopped is neither null nor an object"),
    ({"resubmissions": {}}, "resubmissions is not a list"),
])
def test_a_state_of_the_wrong_shape_is_refused_with_what_is_wrong(tmp_path, content, problem):
    (tmp_path / training_registry.STATE_FILE).write_text(json.dumps(dict({"format": training_registry.STATE_FORMAT},
                                                                         **content)))
    with pytest.raises(training_registry.RegistryError) as err:
        training_registry.read_state(str(tmp_path))
    assert problem in str(err.value)


@pytest.mark.parametrize("kind", ["fifo", "nested", "symlink"])
def test_a_hostile_state_file_is_an_error_never_a_block_or_a_crash(tmp_path, kind):
    path = tmp_path / training_registry.STATE_FILE
    if kind == "fifo":
        os.mkfifo(str(path))
    elif kind == "nested":
        path.write_bytes(b'{"a":' * 100000)
    else:
        (tmp_path / "real").write_text(json.dumps(state(40)))
        path.symlink_to(tmp_path / "real")
    with pytest.raises(training_registry.RegistryError):
        training_registry.read_state(str(tmp_path))

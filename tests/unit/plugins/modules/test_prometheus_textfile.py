# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""prometheus_textfile on real folders: the temporary is made in the textfile's own folder under a
name node_exporter ignores, also when that folder is on another file system (tmpfs /dev/shm) than the
process's temporary folder; no ``*.prom`` but the target ever appears there, a failure keeps the old
file whole; a killed run's leftover is removed on the next run, nothing else; idempotence, check
mode, diff, mode."""

from __future__ import annotations

import json
import os
import stat
import tempfile

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import atomic
from ansible_collections.clusterops.slurm.plugins.modules import prometheus_textfile
from ansible_collections.clusterops.slurm.tests.unit.plugins.modules.module_args import patch_module_args

OLD = "# HELP clusterops_remediate_nodes_healed x\n# TYPE clusterops_remediate_nodes_healed gauge\n" \
      'clusterops_remediate_nodes_healed{cluster="a"} 1\n'
NEW = OLD.replace("} 1\n", "} 2\n") + "clusterops_remediate_fleet_clusters 1\n"
SHM = "/dev/shm"


@pytest.fixture
def run(capsys):
    """``run(path, content, **options) -> result`` of the module (``check``, ``diff``: the run's modes)."""
    def run_it(path, content, check=False, diff=False, **options):
        args = dict(options, path=str(path), content=content, _ansible_check_mode=check, _ansible_diff=diff)
        with patch_module_args(args):
            with pytest.raises(SystemExit):
                prometheus_textfile.main()
        return json.loads(capsys.readouterr().out)
    return run_it


@pytest.fixture
def shm_folder(tmp_path, monkeypatch):
    """A textfile folder on tmpfs (/dev/shm) while the process's temporary folder (TMPDIR) is
    tmp_path, on another file system; removed afterwards."""
    if not os.path.isdir(SHM) or not os.access(SHM, os.W_OK):
        pytest.skip("no writable /dev/shm")
    elsewhere = tmp_path / "tmpdir"
    elsewhere.mkdir()
    folder = tempfile.mkdtemp(prefix="clusterops-textfile-", dir=SHM)
    if os.stat(folder).st_dev == os.stat(str(elsewhere)).st_dev:
        os.rmdir(folder)
        pytest.skip("/dev/shm and %s are one file system here" % tmp_path)
    monkeypatch.setenv("TMPDIR", str(elsewhere))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    assert tempfile.gettempdir() == str(elsewhere)
    yield folder
    for name in os.listdir(folder):
        os.unlink(os.path.join(folder, name))
    os.rmdir(folder)


def watch_renames(monkeypatch, fail=False):
    """Record, at each rename of the atomic write, the rename's two paths and the folder's listing
    at that moment (the temporary written, not yet renamed); ``fail``: the rename raises ENOSPC
    instead (a run killed or failing between write and rename)."""
    seen = []
    real = os.rename

    def rename(src, dst):
        seen.append((src, dst, sorted(os.listdir(os.path.dirname(dst)))))
        if fail:
            raise OSError(28, "No space left on device (injected)")
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "rename", rename)
    return seen


def test_the_temporary_is_in_the_textfiles_folder_and_not_a_prom(run, tmp_path, monkeypatch):
    """(a) the temporary is created in the target's folder, named .<name>.<random>.tmp."""
    seen = watch_renames(monkeypatch)
    target = tmp_path / "remediate.prom"
    result = run(target, NEW)
    assert result["changed"] is True and result["written"] is True
    [(src, dst, listing)] = seen
    assert dst == str(target) and os.path.dirname(src) == str(tmp_path)
    name = os.path.basename(src)
    assert name.startswith(".remediate.prom.") and name.endswith(".tmp") and not name.endswith(".prom")
    assert atomic.leftover_pattern(str(target)).match(name)
    assert listing == [name]
    assert target.read_text() == NEW and os.listdir(str(tmp_path)) == ["remediate.prom"]


def test_on_another_file_system_no_other_prom_ever_appears(run, shm_folder, monkeypatch):
    """(b) textfile folder on tmpfs, TMPDIR on the root disk: at the rename the folder holds the old
    target and the one hidden .tmp, no other *.prom; afterwards the target is whole."""
    target = os.path.join(shm_folder, "remediate.prom")
    with open(target, "w") as handle:
        handle.write(OLD)
    seen = watch_renames(monkeypatch)
    result = run(target, NEW)
    assert result["written"] is True
    [(src, _dst, listing)] = seen
    assert os.path.dirname(src) == shm_folder
    assert [name for name in listing if name.endswith(".prom")] == ["remediate.prom"]
    assert len(listing) == 2 and not os.path.basename(src).endswith(".prom")
    with open(target) as handle:
        assert handle.read() == NEW
    assert os.listdir(shm_folder) == ["remediate.prom"]
    assert not os.listdir(tempfile.gettempdir())  # nothing went through the other file system


def test_a_failure_between_write_and_rename_keeps_the_old_textfile_whole(run, shm_folder, monkeypatch):
    """(b) the rename fails: the target is the old one, whole; no *.prom but it, the temporary removed."""
    target = os.path.join(shm_folder, "remediate.prom")
    with open(target, "w") as handle:
        handle.write(OLD)
    seen = watch_renames(monkeypatch, fail=True)
    result = run(target, NEW)
    assert result.get("failed") is True and "No space left on device" in result["msg"]
    [(src, _dst, listing)] = seen
    assert [name for name in listing if name.endswith(".prom")] == ["remediate.prom"]
    assert os.path.dirname(src) == shm_folder and not os.path.exists(src)
    assert os.listdir(shm_folder) == ["remediate.prom"]
    with open(target) as handle:
        assert handle.read() == OLD


def test_the_temporary_then_the_folder_are_fsynced(run, tmp_path, monkeypatch):
    """The content reaches the disk before the rename (fsync of the temporary), the rename after it
    (fsync of the folder): what each fsync was, in order, with the renames between."""
    events = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd):
        st = os.fstat(fd)
        events.append(("fsync", "folder" if stat.S_ISDIR(st.st_mode) else "file %d bytes" % st.st_size))
        return real_fsync(fd)

    def rename(src, dst):
        events.append(("rename", os.path.basename(dst)))
        return real_rename(src, dst)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic.os, "rename", rename)
    run(tmp_path / "remediate.prom", NEW)
    assert events == [("fsync", "file %d bytes" % len(NEW)), ("rename", "remediate.prom"), ("fsync", "folder")]


def test_a_killed_runs_leftover_is_removed_and_nothing_else(run, tmp_path):
    """(c) .remediate.prom.XXXX.tmp of a killed run goes on the next run (even one that writes
    nothing); other files, other targets' temporaries and a symlink of that name stay."""
    target = tmp_path / "remediate.prom"
    target.write_text(NEW)
    os.chmod(str(target), 0o644)
    keep = ["other.prom", ".other.prom.abcd1234.tmp", ".remediate.prom.tmp", "remediate.prom.old",
            ".remediate.prom.ab.cd.tmp", "notes.txt"]
    for name in keep:
        (tmp_path / name).write_text("x\n")
    (tmp_path / ".remediate.prom.link0000.tmp").symlink_to(tmp_path / "notes.txt")
    (tmp_path / ".remediate.prom.XXXX.tmp").write_text(NEW[:20])
    (tmp_path / ".remediate.prom.k3j9x0_a.tmp").write_text("")

    checked = run(target, NEW, check=True)
    assert checked["changed"] is True and checked["written"] is False
    assert checked["leftovers_removed"] == [".remediate.prom.XXXX.tmp", ".remediate.prom.k3j9x0_a.tmp"]
    assert (tmp_path / ".remediate.prom.XXXX.tmp").exists()  # check mode removes nothing

    result = run(target, NEW)
    assert result["changed"] is True and result["written"] is False
    assert result["leftovers_removed"] == [".remediate.prom.XXXX.tmp", ".remediate.prom.k3j9x0_a.tmp"]
    assert sorted(os.listdir(str(tmp_path))) == sorted(keep + [".remediate.prom.link0000.tmp", "remediate.prom"])
    assert target.read_text() == NEW
    assert run(target, NEW)["changed"] is False


def test_a_temporary_of_a_live_writer_is_left_alone(tmp_path):
    """(c) what a concurrent run is writing (its flock held) is no leftover; once it is dead, it is."""
    target = str(tmp_path / "remediate.prom")
    live = tmp_path / ".remediate.prom.live1234.tmp"
    live.write_text("part")
    fd = os.open(str(live), os.O_RDONLY)
    try:
        if atomic._flock_if_supported(fd) is None:
            pytest.skip("no flock on %s" % tmp_path)
        assert atomic.remove_leftover_temporaries(target) == []
        assert live.exists()
    finally:
        os.close(fd)
    assert atomic.remove_leftover_temporaries(target) == [live.name]
    assert not live.exists()


def test_idempotent_check_mode_and_diff(run, tmp_path, monkeypatch):
    """(d) a new file, then the same content (changed false, no rewrite: same inode, no rename), a
    new content in check mode (reported with its diff, not written), then written."""
    target = tmp_path / "remediate.prom"
    checked = run(target, OLD, check=True, diff=True)
    assert checked["changed"] is True and checked["written"] is True
    assert checked["diff"]["before"] == "" and checked["diff"]["after"] == OLD
    assert not target.exists()

    first = run(target, OLD)
    assert first["changed"] is True and first["mode"] == "0644" and first["size"] == len(OLD)
    assert stat.S_IMODE(os.stat(str(target)).st_mode) == 0o644
    inode = os.stat(str(target)).st_ino

    seen = watch_renames(monkeypatch)
    again = run(target, OLD, diff=True)
    assert again["changed"] is False and again["written"] is False and again["leftovers_removed"] == []
    assert again["diff"]["before"] == again["diff"]["after"] == OLD
    assert seen == [] and os.stat(str(target)).st_ino == inode

    checked = run(target, NEW, check=True, diff=True)
    assert checked["changed"] is True and (checked["diff"]["before"], checked["diff"]["after"]) == (OLD, NEW)
    assert seen == [] and target.read_text() == OLD

    written = run(target, NEW)
    assert written["changed"] is True and len(seen) == 1 and target.read_text() == NEW
    assert os.listdir(str(tmp_path)) == ["remediate.prom"]


def test_mode_changes_in_place_and_owner_is_kept(run, tmp_path):
    """Only the mode differs: changed, not rewritten (same inode); a numeric owner and group of
    the writer's own are accepted."""
    target = tmp_path / "remediate.prom"
    assert run(target, OLD, mode="0600")["changed"] is True
    assert stat.S_IMODE(os.stat(str(target)).st_mode) == 0o600
    inode = os.stat(str(target)).st_ino
    result = run(target, OLD, mode="0644", owner=str(os.geteuid()), group=str(os.getegid()))
    assert result["changed"] is True and result["written"] is False
    assert stat.S_IMODE(os.stat(str(target)).st_mode) == 0o644 and os.stat(str(target)).st_ino == inode
    assert run(target, OLD, mode="0644")["changed"] is False


@pytest.mark.parametrize("make, message", [
    (lambda p: p.symlink_to(p.parent / "real.prom"), "is a symlink"),
    (lambda p: p.mkdir(), "cannot read the textfile"),
])
def test_a_symlink_or_folder_in_its_place_is_refused(run, tmp_path, make, message):
    target = tmp_path / "remediate.prom"
    (tmp_path / "real.prom").write_text(OLD)
    make(target)
    result = run(target, NEW)
    assert result["failed"] is True and message in result["msg"]
    assert (tmp_path / "real.prom").read_text() == OLD


def test_bad_mode_and_missing_folder_fail(run, tmp_path):
    assert "not an octal file mode" in run(tmp_path / "a.prom", OLD, mode="rw-r--r--")["msg"]
    assert "does not exist" in run(tmp_path / "missing" / "a.prom", OLD)["msg"]


def test_a_folder_the_account_may_not_write_fails_in_check_mode_too(tmp_path, monkeypatch):
    """Issue 37: --check says what the real write would meet (cause permission), instead of passing."""
    from ansible_collections.clusterops.slurm.plugins.module_utils import _prometheus_textfile as textfile
    from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure
    monkeypatch.setattr(textfile.os, "access", lambda path, mode: False)
    with pytest.raises(TaskFailure) as refused:
        textfile.plan_textfile(str(tmp_path / "remediate.prom"), b"x 1\n", 0o644)
    assert refused.value.result["failed_cause"] == "permission" and "may not write it" in refused.value.msg

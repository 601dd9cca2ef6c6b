# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue 22: the prune acts only in the run folder it opened, whatever its users do to the path.

A user who can write to the folder above a run folder can swap the run folder for a symlink to
another user's folder, before or during a prune that runs as someone else (root). Here, on real
folders in tmp_path: fsutil.open_dir_nofollow, names_folder and remove_tree_at, then the prune's
guards, each with the swap made at the moment it guards against (before the scan, between the
scan and the deletions, between two deletions, before the lock)."""

from __future__ import annotations

import errno
import io
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import fsutil

from checkpoint_builders import names, tree_digest  # noqa: E402 pylint: disable=import-error


def contract(root, step, size=64):
    return ck.write_checkpoint(str(root), step, 0, {"model.pt": b"m" * size, "optim/rank0.pt": b"o" * size},
                               fsync=False)


def remove_in(folder, name):
    """fsutil.remove_tree_at of ``name`` in ``folder``, opened as the prune opens its run folder."""
    fd = fsutil.open_dir_nofollow(str(folder))
    try:
        fsutil.remove_tree_at(fd, name)
    finally:
        os.close(fd)


def swap_for_symlink(path, target):
    """What the owner of the folder above ``path`` can do: move it aside, put a symlink in its place."""
    os.rename(str(path), str(path) + ".moved")
    os.symlink(str(target), str(path))
    return str(path) + ".moved"


@pytest.fixture
def two_runs(tmp_path):
    """``(parent, run, victim)``: the attacker's run folder (steps 100-300) under a folder they own,
    and another user's run folder (steps 100-400, the same names and one more)."""
    parent, victim = tmp_path / "alice", tmp_path / "bob" / "run"
    run = parent / "run"
    for step in (100, 200, 300):
        contract(run, step)
    for step in (100, 200, 300, 400):
        contract(victim, step)
    return parent, run, victim


# ---------------------------------------------------------------------------------------------
# fsutil.open_dir_nofollow, names_folder
# ---------------------------------------------------------------------------------------------

def test_open_dir_nofollow_opens_the_folder(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    for path in (str(tmp_path / "a" / "b"), str(tmp_path / "a" / "x" / ".." / "b"), str(tmp_path) + "//a/./b"):
        fd = fsutil.open_dir_nofollow(path)
        try:
            here, there = os.fstat(fd), os.stat(str(tmp_path / "a" / "b"))
            assert (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
            assert os.listdir(fd) == []
        finally:
            os.close(fd)
    os.close(fsutil.open_dir_nofollow("/"))


def test_open_dir_nofollow_refuses_a_symlink_in_any_component(tmp_path):
    (tmp_path / "real" / "run").mkdir(parents=True)
    (tmp_path / "real" / "file").write_bytes(b"x")
    os.symlink(str(tmp_path / "real"), str(tmp_path / "link"))
    os.symlink("run", str(tmp_path / "real" / "run-link"))
    cases = [
        (tmp_path / "link" / "run", errno.ELOOP, tmp_path / "link", "is a symlink (not followed; in the path"),
        (tmp_path / "link", errno.ELOOP, tmp_path / "link", "is a symlink (not followed)"),
        (tmp_path / "real" / "run-link", errno.ELOOP, tmp_path / "real" / "run-link", "is a symlink"),
        (tmp_path / "real" / "file", errno.ENOTDIR, tmp_path / "real" / "file", "is not a folder"),
        (tmp_path / "real" / "file" / "x", errno.ENOTDIR, tmp_path / "real" / "file", "is not a folder (in the path"),
        (tmp_path / "nope" / "run", errno.ENOENT, tmp_path / "nope", "does not exist"),
    ]
    for path, code, component, words in cases:
        with pytest.raises(fsutil.FolderPathError) as info:
            fsutil.open_dir_nofollow(str(path))
        assert (info.value.errno, info.value.filename) == (code, str(component)), path
        assert str(info.value).startswith(str(component) + " " + words), str(info.value)
        assert isinstance(info.value, OSError)


def test_names_folder_follows_the_path_not_the_descriptor(tmp_path):
    run, other = tmp_path / "run", tmp_path / "other"
    run.mkdir()
    other.mkdir()
    fd = fsutil.open_dir_nofollow(str(run))
    try:
        assert fsutil.names_folder(str(run), fd) is True
        moved = swap_for_symlink(run, other)
        assert fsutil.names_folder(str(run), fd) is False  # a symlink now
        assert fsutil.names_folder(moved, fd) is True  # the descriptor is still the folder
        os.unlink(str(run))
        os.mkdir(str(run))
        assert fsutil.names_folder(str(run), fd) is False  # another folder of the same name
        os.rmdir(str(run))
        assert fsutil.names_folder(str(run), fd) is False  # gone
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# fsutil.remove_tree_at
# ---------------------------------------------------------------------------------------------

def test_remove_tree_at_unlinks_symlinks_and_never_follows_them(tmp_path):
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "weights.pt").write_bytes(b"precious")
    (outside / "sub" / "f").write_bytes(b"precious too")
    canary = tree_digest(outside)
    top = tmp_path / "run"
    doomed = top / "doomed"
    (doomed / "a" / "b").mkdir(parents=True)
    (doomed / "a" / "b" / "model.pt").write_bytes(b"x")
    os.symlink(str(outside), str(doomed / "a" / "dir-link"))  # a symlink to a folder, inside
    os.symlink(str(outside / "weights.pt"), str(doomed / "a" / "b" / "file-link"))
    os.symlink("/nonexistent", str(doomed / "dangling"))
    os.symlink(str(outside), str(top / "top-link"))  # the entry itself a symlink: the link goes
    fd = fsutil.open_dir_nofollow(str(top))
    try:
        fsutil.remove_tree_at(fd, "doomed")
        fsutil.remove_tree_at(fd, "top-link")
        with pytest.raises(OSError) as info:
            fsutil.remove_tree_at(fd, "doomed")
        assert info.value.errno == errno.ENOENT
        for bad in ("", ".", "..", "a/b", "../outside"):
            with pytest.raises(ValueError):
                fsutil.remove_tree_at(fd, bad)
    finally:
        os.close(fd)
    assert os.listdir(str(top)) == []
    assert tree_digest(outside) == canary


def test_remove_tree_at_removes_a_hard_link_and_the_other_name_keeps_the_content(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "weights.pt").write_bytes(b"precious")
    (tmp_path / "run" / "doomed").mkdir(parents=True)
    os.link(str(outside / "weights.pt"), str(tmp_path / "run" / "doomed" / "model.pt"))
    assert os.stat(str(outside / "weights.pt")).st_nlink == 2
    remove_in(tmp_path / "run", "doomed")
    assert os.listdir(str(tmp_path / "run")) == []
    assert (outside / "weights.pt").read_bytes() == b"precious"
    assert os.stat(str(outside / "weights.pt")).st_nlink == 1


def test_remove_tree_at_stays_in_the_folder_opened_after_its_path_is_swapped(tmp_path):
    run, victim = tmp_path / "run", tmp_path / "victim"
    for top in (run, victim):
        (top / "doomed" / "sub").mkdir(parents=True)
        (top / "doomed" / "sub" / "f").write_bytes(b"x")
    canary = tree_digest(victim)
    fd = fsutil.open_dir_nofollow(str(run))
    try:
        moved = swap_for_symlink(run, victim)
        fsutil.remove_tree_at(fd, "doomed")
    finally:
        os.close(fd)
    assert os.listdir(moved) == [] and tree_digest(victim) == canary


def test_remove_tree_at_a_tree_deeper_than_the_recursion_limit(tmp_path):
    import sys  # pylint: disable=import-outside-toplevel
    depth = sys.getrecursionlimit() + 100
    (tmp_path / "run" / "deep").mkdir(parents=True)
    fd = fsutil.open_dir_nofollow(str(tmp_path / "run" / "deep"))
    for _level in range(depth):  # relative to descriptors: the path would be longer than PATH_MAX
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    os.close(fd)
    remove_in(tmp_path / "run", "deep")
    assert os.listdir(str(tmp_path / "run")) == []


# ---------------------------------------------------------------------------------------------
# The prune's guards
# ---------------------------------------------------------------------------------------------

def test_a_run_folder_given_through_a_symlink_is_refused(two_runs, tmp_path):
    parent, run, _victim = two_runs
    os.symlink(str(parent), str(tmp_path / "alice-link"))
    os.symlink(str(run), str(tmp_path / "run-link"))
    before = tree_digest(tmp_path)
    for path in (tmp_path / "alice-link" / "run", tmp_path / "run-link"):
        for dry_run in (False, True):
            with pytest.raises(ck.CheckpointError) as info:
                ck.prune(str(path), keep_last=1, dry_run=dry_run)
            message = str(info.value)
            assert message.startswith("refusing the run folder %s: " % path) and "is a symlink" in message
            assert "its real path now: %s" % run in message and "nothing done" in message
        out, err = io.StringIO(), io.StringIO()
        assert ck.main(["prune", str(path), "--keep-last", "1"], out=out, err=err) == ck.EXIT_ERROR
        assert "refusing the run folder" in err.getvalue() and out.getvalue() == ""
    assert tree_digest(tmp_path) == before  # nothing deleted, no lock file created
    assert not os.path.exists(str(run / ck.PRUNE_LOCK))
    assert len(ck.prune(str(run), keep_last=1).deleted) == 2  # by its real path it is pruned


def test_swapped_between_the_scan_and_the_deletions_deletes_nothing(two_runs, monkeypatch):
    _parent, run, victim = two_runs
    canary = tree_digest(victim)
    real_inspect = ck.pruning.inspect
    moved = []

    def inspect_then_swap(*args, **kwargs):
        report = real_inspect(*args, **kwargs)
        moved.append(swap_for_symlink(run, victim))
        return report

    monkeypatch.setattr(ck.pruning, "inspect", inspect_then_swap)
    lines = []
    result = ck.prune(str(run), keep_last=1, log=lines.append)
    assert result.deleted == [] and tree_digest(victim) == canary
    assert "no longer leads to the folder this prune opened" in result.error
    assert lines == ["error: %s; stopped, nothing more deleted" % result.error]
    assert names(moved[0]) == ["step_000000100", "step_000000200", "step_000000300"]  # its own too
    assert all(k["reason"].startswith("not reached") for k in result.kept if k["name"] != "step_000000300")


def test_swapped_between_two_deletions_stops_before_the_next(two_runs):
    _parent, run, victim = two_runs
    (run / "tmp-stale").mkdir()
    os.utime(str(run / "tmp-stale"), (1, 1))
    canary = tree_digest(victim)
    moved = []

    def log(line):
        if not moved:
            moved.append(swap_for_symlink(run, victim))

    result = ck.prune(str(run), keep_last=1, tmp_grace=60, log=log)
    assert [d["name"] for d in result.deleted] == ["tmp-stale"]
    assert "no longer leads to the folder" in result.error
    assert tree_digest(victim) == canary
    assert names(moved[0]) == ["step_000000100", "step_000000200", "step_000000300"]


def test_deletions_are_made_in_the_folder_opened_even_past_the_path_check(two_runs, monkeypatch):
    """The path check can be raced (swapped, then swapped back in time): deletions are still made
    relative to the descriptor, by name, so only the folder opened loses anything."""
    _parent, run, victim = two_runs
    canary = tree_digest(victim)
    moved = []
    real_inspect = ck.pruning.inspect

    def inspect_then_swap(*args, **kwargs):
        report = real_inspect(*args, **kwargs)
        moved.append(swap_for_symlink(run, victim))
        return report

    monkeypatch.setattr(ck.pruning, "inspect", inspect_then_swap)
    monkeypatch.setattr(ck.pruning, "names_folder", lambda path, fd: True)
    result = ck.prune(str(run), keep_last=1, fsync=True)
    assert result.error is None and [d["name"] for d in result.deleted] == ["step_000000100", "step_000000200"]
    assert tree_digest(victim) == canary
    assert names(moved[0]) == ["step_000000300"]
    assert os.path.exists(os.path.join(moved[0], ck.PRUNE_LOCK))
    assert not os.path.exists(str(victim / ck.PRUNE_LOCK))


def test_the_lock_file_is_opened_in_the_folder_opened(two_runs, monkeypatch):
    _parent, run, victim = two_runs
    canary = tree_digest(victim)
    moved = []
    real_open = ck.pruning.open_dir_nofollow

    def open_then_swap(path):
        fd = real_open(path)
        moved.append(swap_for_symlink(run, victim))
        return fd

    monkeypatch.setattr(ck.pruning, "open_dir_nofollow", open_then_swap)
    result = ck.prune(str(run), keep_last=1)
    assert result.deleted == [] and "no longer leads" in result.error
    assert os.path.exists(os.path.join(moved[0], ck.PRUNE_LOCK))
    assert tree_digest(victim) == canary and not os.path.exists(str(victim / ck.PRUNE_LOCK))


def test_symlinks_and_hard_links_in_a_deleted_checkpoint(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    (outside / "data").mkdir(parents=True)
    (outside / "data" / "shard0").write_bytes(b"someone else's")
    (outside / "weights.pt").write_bytes(b"precious")
    for step in (100, 200, 300):
        contract(run, step)
    old = run / "step_000000100"
    os.symlink(str(outside / "data"), str(old / "data-link"))  # a folder symlink out of the folder
    os.symlink(str(outside / "weights.pt"), str(old / "weights-link.pt"))
    os.link(str(outside / "weights.pt"), str(old / "hard.pt"))  # unlisted: the manifest is still valid
    canary = tree_digest(outside)
    result = ck.prune(str(run), keep_last=2)
    assert result.error is None and [d["name"] for d in result.deleted] == ["step_000000100"]
    assert tree_digest(outside) == canary  # the targets, and the hard link's other name, untouched
    assert os.stat(str(outside / "weights.pt")).st_nlink == 1
    assert names(run) == ["step_000000200", "step_000000300"]


def test_swapped_for_the_scan_and_back_before_the_deletions_plans_from_the_folder_opened(two_runs, monkeypatch):
    """The scan reads the folder opened (its /proc/self/fd link), not the path: a folder swapped for
    another user's during the scan (steps 100-400 there) and swapped back before the path check feeds
    no plan; the owner's newest valid checkpoint (300) stays, the other folder is untouched."""
    _parent, run, victim = two_runs
    canary = tree_digest(victim)
    real_inspect = ck.pruning.inspect

    def swap_scan_swap_back(*args, **kwargs):
        moved = swap_for_symlink(run, victim)
        try:
            return real_inspect(*args, **kwargs)
        finally:
            os.unlink(str(run))
            os.rename(moved, str(run))

    monkeypatch.setattr(ck.pruning, "inspect", swap_scan_swap_back)
    result = ck.prune(str(run), keep_last=1)
    assert result.error is None and result.latest_valid == "step_000000300"
    assert [d["name"] for d in result.deleted] == ["step_000000100", "step_000000200"]
    assert names(run) == ["step_000000300"] and tree_digest(victim) == canary

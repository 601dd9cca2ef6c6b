# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_checkpoint.replicas: replication to a replica folder, the choice between the copies, and pruning
that waits for the replica; run folders built for real in tmp_path.

Each case of issue 27's part 4 that needs no cluster: the newest checkpoint deleted or damaged in
the run folder after replication, the run folder lost whole, replication killed mid-copy and run
again, the replica's file system full (a tmpfs of 1 MiB when this runs as root; skipped otherwise),
plus the layouts of other trainers (a file checkpoint, a Hugging Face folder).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck

from checkpoint_builders import flip_byte, hf_folder, install_tool, plain_torch_file, torch_file, truncate  # noqa: E402 pylint: disable=import-error


def contract(root, step, size=4096):
    return ck.write_checkpoint(str(root), step, 0, {"model.pt": os.urandom(size), "optim/rank0.pt": b"o" * size},
                               fsync=False)


def names(folder):
    return sorted(n for n in os.listdir(str(folder)) if not n.startswith("."))


@pytest.fixture
def run(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    return folder


@pytest.fixture
def replica(tmp_path):
    return tmp_path / "replica"


def latest(run_dir, *replicas):
    out, err = io.StringIO(), io.StringIO()
    args = ["latest", str(run_dir)]
    for r in replicas:
        args += ["--replica", str(r)]
    code = ck.main(args, out, err)
    return code, out.getvalue().strip(), err.getvalue()


# ---------------------------------------------------------------------------------------------
# replicate
# ---------------------------------------------------------------------------------------------

def test_copies_the_newest_valid_checkpoints_verified_with_an_index(run, replica):
    for step in (10, 20, 30):
        contract(run, step)
    result = ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    assert [c["name"] for c in result.copied] == ["step_000000030", "step_000000020"]
    assert names(replica) == ["step_000000020", "step_000000030"]
    index = ck.read_index(str(replica))
    assert sorted(index) == ["step_000000020", "step_000000030"]
    entry = index["step_000000030"]
    assert entry["step"] == 30 and entry["layout"] == "clusterops" and entry["is_dir"] is True
    for item in entry["files"]:
        size, sha = ck.hash_file(os.path.join(str(run), "step_000000030", item["path"]))
        assert (item["size"], item["sha256"]) == (size, sha)
    assert result.lag == dict(primary_step=30, replica_step=30, checkpoints_behind=0, seconds_behind=0.0)
    assert not result.error


def test_a_second_run_copies_nothing_and_a_new_checkpoint_moves_the_window(run, replica):
    for step in (10, 20):
        contract(run, step)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    again = ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    assert not again.changed
    contract(run, 30)
    third = ck.replicate(str(run), str(replica), keep_last=2, keep_every=0, fsync=False)
    assert [c["name"] for c in third.copied] == ["step_000000030"]
    assert [d["name"] for d in third.deleted] == ["step_000000010"]
    assert names(replica) == ["step_000000020", "step_000000030"]
    assert sorted(ck.read_index(str(replica))) == ["step_000000020", "step_000000030"]


def test_keep_every_keeps_milestones_in_the_replica(run, replica):
    for step in (100, 150, 200, 250, 300):
        contract(run, step)
    ck.replicate(str(run), str(replica), keep_last=1, keep_every=100, fsync=False)
    assert names(replica) == ["step_000000100", "step_000000200", "step_000000300"]


def test_lag_counts_the_checkpoints_not_yet_copied(run, replica):
    contract(run, 10)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    contract(run, 20)
    contract(run, 30)
    dry = ck.replicate(str(run), str(replica), keep_last=2, dry_run=True)
    assert [c["name"] for c in dry.copied] == ["step_000000030", "step_000000020"]
    assert dry.lag["primary_step"] == 30 and dry.lag["replica_step"] == 10
    assert dry.lag["checkpoints_behind"] == 2 and dry.lag["seconds_behind"] >= 0
    assert names(replica) == ["step_000000010"], "a dry run copies nothing"


def test_lag_survives_checkpoints_deleted_meanwhile(run):
    """The trainer's own rotation may delete a checkpoint while a long copy runs: the lag says None, never raises."""
    gone = [ck.Checkpoint("step_%09d" % s, os.path.join(str(run), "step_%09d" % s), ck.CONTRACT, s) for s in (1, 2)]
    lag = ck.replicas.replica_lag(gone[-1], None, gone, time.time())
    assert lag == dict(primary_step=2, replica_step=None, checkpoints_behind=2, seconds_behind=None)


def test_invalid_checkpoints_of_the_run_folder_are_not_copied(run, replica):
    contract(run, 10)
    bad = contract(run, 20)
    truncate(os.path.join(bad, "model.pt"), 10)
    result = ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    assert [c["name"] for c in result.copied] == ["step_000000010"]
    assert names(replica) == ["step_000000010"]


def test_other_layouts_are_copied_under_their_own_names(run, replica):
    torch_file(str(run), 1, 100)
    hf_folder(str(run), 200)
    ck.replicate(str(run), str(replica), keep_last=0, fsync=False)
    report = ck.inspect(str(replica), ck.SHA256, validate_all=True)
    # Ordered as in the run folder: (epoch, step), the Hugging Face name carries no epoch (-1).
    assert [(c.layout, c.step, c.valid) for c in report.checkpoints] == [
        ("huggingface", 200, True), ("torch_file", 100, True)]
    assert ck.newest_verified(str(replica))[1].name == "checkpoint_epoch_1_step_100.pth"
    assert ck.read_index(str(replica))["checkpoint_epoch_1_step_100.pth"]["is_dir"] is False
    assert not report.unexplained and not report.unordered


def test_the_index_and_lock_are_never_checkpoints_nor_training_state(run, replica):
    contract(run, 10)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    report = ck.inspect(str(replica))
    ignored = dict((i["name"], i["reason"]) for i in report.ignored)
    assert ck.REPLICA_INDEX in ignored and ck.REPLICATE_LOCK in ignored
    assert not report.unexplained


def test_a_copy_renamed_but_never_indexed_is_not_used_and_is_made_again(run, replica):
    contract(run, 10)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    contract(run, 20)
    # What a run killed between the rename and the index write leaves: the copy, no entry.
    shutil.copytree(os.path.join(str(run), "step_000000020"), os.path.join(str(replica), "step_000000020"))
    assert ck.newest_verified(str(replica))[1].name == "step_000000010"
    result = ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    assert [c["name"] for c in result.copied] == ["step_000000020"]
    assert ck.newest_verified(str(replica))[1].name == "step_000000020"


def test_a_copy_whose_files_no_longer_match_the_index_is_not_counted(run, replica):
    contract(run, 10)
    contract(run, 20)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    truncate(os.path.join(str(replica), "step_000000020", "model.pt"), 1)
    assert ck.newest_verified(str(replica))[1].name == "step_000000010"
    # The next replication takes it out of the manifest and makes it again from the run folder.
    result = ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    assert [c["name"] for c in result.copied] == ["step_000000020"] and "no longer matches" in result.warnings[0]
    assert ck.newest_verified(str(replica))[1].name == "step_000000020"
    assert ck.verify(os.path.join(str(replica), "step_000000020"), ck.SHA256).valid


def test_the_replica_is_not_the_run_folder(run):
    with pytest.raises(ValueError, match="is the run folder itself"):
        ck.replicate(str(run), str(run))


def test_a_broken_index_is_an_error_not_an_empty_replica(run, replica):
    contract(run, 10)
    replica.mkdir()
    (replica / ck.REPLICA_INDEX).write_text("{not json")
    with pytest.raises(ck.CheckpointError, match="not valid JSON"):
        ck.replicate(str(run), str(replica))
    newer = {"format": "clusterops.replica", "format_version": 99, "checkpoints": {}}
    (replica / ck.REPLICA_INDEX).write_text(json.dumps(newer))
    with pytest.raises(ck.CheckpointError, match="format_version"):
        ck.newest_verified(str(replica))


def test_a_lost_run_folder_leaves_the_replica_untouched(run, replica):
    for step in (10, 20):
        contract(run, step)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    shutil.rmtree(str(run))
    with pytest.raises(ck.CheckpointError):
        ck.replicate(str(run), str(replica), keep_last=1, fsync=False)
    assert names(replica) == ["step_000000010", "step_000000020"]


@pytest.mark.parametrize("whose", ["replica", "replica link", "run folder", "replica's parent"])
def test_root_does_not_replicate_in_a_users_folders(tmp_path, whose):
    """Root copies and renames by path in the replica: a user who can write there could swap a folder for a link.
    So root replicates only between folders root owns; a user's are replicated as that user."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    nobody = 65534
    top = tmp_path / "top"
    top.mkdir()
    run, replica = top / "run", top / "backup" / "replica"
    contract(run, 10)
    replica.parent.mkdir()
    if whose == "replica":
        replica.mkdir()
        os.chown(str(replica), nobody, nobody)
    elif whose == "replica link":  # planted where root would create the replica
        os.symlink(str(tmp_path), str(replica))
        os.lchown(str(replica), nobody, nobody)
    elif whose == "run folder":
        os.chown(str(run), nobody, nobody)
    else:
        os.chown(str(replica.parent), nobody, nobody)
    with pytest.raises(ck.CheckpointError, match="refusing to replicate as root"):
        ck.replicate(str(run), str(replica), fsync=False)
    assert not os.path.exists(str(tmp_path / "step_000000010"))


def test_a_second_replication_into_the_same_replica_waits_its_turn(run, replica):
    contract(run, 10)
    replica.mkdir()
    fd = ck.open_lock_file(str(replica / ck.REPLICATE_LOCK))
    try:
        assert ck.try_flock(fd)
        with pytest.raises(ck.ReplicaLocked):
            ck.replicate(str(run), str(replica))
    finally:
        os.close(fd)
    assert names(replica) == []


def test_bwlimit_paces_the_copy():
    slept = []
    pacer = ck.replicas._Pacer(1000.0, clock=lambda: 0.0, sleep=slept.append)  # pylint: disable=protected-access
    pacer(500)
    pacer(1500)
    assert slept == [0.5, 2.0]


def test_bwlimit_slows_a_real_copy(run, replica):
    contract(run, 10, size=200000)
    start = time.monotonic()
    ck.replicate(str(run), str(replica), keep_last=1, bwlimit=800000, fsync=False)
    assert time.monotonic() - start >= 0.4  # 400 kB at 800 kB/s


# ---------------------------------------------------------------------------------------------
# Interrupted and failing copies
# ---------------------------------------------------------------------------------------------

def test_replication_killed_mid_copy_leaves_nothing_that_reads_as_valid_then_resumes(run, replica, tmp_path):
    tool = install_tool(str(tmp_path / "clusterops_checkpoint"))
    contract(run, 10, size=1 << 20)
    contract(run, 20, size=64 << 20)
    # At most 8 MB/s: the 128 MiB of step 20 take about 16 s; killed after 2 s, mid-copy.
    proc = subprocess.Popen([sys.executable, tool, "replicate", str(run), str(replica), "--keep-last", "2",
                             "--bwlimit", "8M", "--quiet"])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(n.startswith(ck.REPLICA_STAGING_PREFIX + "step_000000020")
                                                  for n in (os.listdir(str(replica)) if replica.exists() else [])):
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = os.listdir(str(replica))
    assert any(n.startswith(ck.REPLICA_STAGING_PREFIX) for n in left), left
    assert "step_000000020" not in left
    # The copy cut short is never a candidate; the run folder's newest is still chosen; with the run
    # folder gone, nothing (not the partial copy) is chosen.
    assert ck.newest_verified(str(replica))[1] is None
    assert ck.inspect(str(replica)).latest_valid is None
    # Run again: the leftover is removed, both copies made.
    result = ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    assert [c["name"] for c in result.copied] == ["step_000000020", "step_000000010"]
    assert names(replica) == ["step_000000010", "step_000000020"]
    assert not [n for n in os.listdir(str(replica)) if n.startswith("tmp-")]


@pytest.fixture
def small_fs(tmp_path):
    """A tmpfs of 1 MiB (as root only: mount needs it)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(mnt)], capture_output=True, text=True,
                         check=False)
    if res.returncode != 0:
        pytest.skip("tmpfs mount refused here: %s" % res.stderr.strip())
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_replica_file_system_is_an_error_and_nothing_partial_is_kept(run, small_fs):
    replica = small_fs / "replica"
    contract(run, 10, size=100000)     # about 200 kB: fits
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    contract(run, 20, size=600000)     # about 1.2 MB: does not
    result = ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    assert result.error and "the replica's file system is full" in result.error
    assert names(replica) == ["step_000000010"]
    assert not [n for n in os.listdir(str(replica)) if n.startswith("tmp-")]
    assert sorted(ck.read_index(str(replica))) == ["step_000000010"]
    assert result.lag["checkpoints_behind"] == 1 and result.lag["replica_step"] == 10
    code = ck.main(["replicate", str(run), str(replica), "--quiet"], io.StringIO(), io.StringIO())
    assert code == ck.EXIT_ERROR


# ---------------------------------------------------------------------------------------------
# best_copy and latest --replica
# ---------------------------------------------------------------------------------------------

def test_latest_prefers_the_run_folder_when_it_is_as_new(run, replica):
    for step in (10, 20):
        contract(run, step)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    code, path, err = latest(run, replica)
    assert (code, path) == (0, os.path.join(str(run), "step_000000020"))
    assert "replica" not in err


def test_newest_deleted_in_the_run_folder_resumes_from_the_replica(run, replica):
    for step in (10, 20):
        contract(run, step)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    shutil.rmtree(os.path.join(str(run), "step_000000020"))
    code, path, err = latest(run, replica)
    assert (code, path) == (0, os.path.join(str(replica), "step_000000020"))
    assert "newer than the run folder's newest valid (step 10)" in err


def test_newest_damaged_in_the_run_folder_resumes_from_the_replica(run, replica):
    for step in (10, 20):
        contract(run, step)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    truncate(os.path.join(str(run), "step_000000020", "model.pt"), 100)
    code, path, _err = latest(run, replica)
    assert (code, path) == (0, os.path.join(str(replica), "step_000000020"))
    # The same damage, one byte flipped: seen at the sha256 level only.
    contract(run, 30)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    flip_byte(os.path.join(str(run), "step_000000030", "model.pt"), 7)
    choice = ck.best_copy(str(run), [str(replica)], ck.SHA256)
    assert choice.copy == str(replica) and choice.checkpoint.step == 30


def test_run_folder_lost_whole_resumes_from_the_replica(run, replica):
    contract(run, 10)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    shutil.rmtree(str(run))
    code, path, err = latest(run, replica)
    assert (code, path) == (0, os.path.join(str(replica), "step_000000010"))
    assert "the folder does not exist" in err


def test_no_copy_anywhere_starts_from_scratch_and_a_broken_one_does_not(run, replica):
    replica.mkdir()
    assert latest(run, replica)[0] == ck.EXIT_NONE
    bad = contract(run, 10)
    truncate(os.path.join(bad, "model.pt"), 10)
    assert latest(run, replica)[0] == ck.EXIT_INVALID


def test_an_unreadable_replica_is_a_warning_and_the_run_folder_is_used(run, replica):
    contract(run, 10)
    replica.mkdir()
    (replica / ck.REPLICA_INDEX).write_text("[]")
    code, path, err = latest(run, replica)
    assert (code, path) == (0, os.path.join(str(run), "step_000000010"))
    assert "not used" in err


def test_a_run_folder_whose_order_is_unknown_chooses_no_copy(run, replica):
    contract(run, 10)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    shutil.rmtree(os.path.join(str(run), "step_000000010"))
    plain_torch_file(str(run), "model.ckpt")  # a whole .ckpt whose step neither name nor file tells
    choice = ck.best_copy(str(run), [str(replica)])
    assert choice.blocked and choice.checkpoint is None
    assert latest(run, replica)[0] == ck.EXIT_INVALID


# ---------------------------------------------------------------------------------------------
# prune --replica
# ---------------------------------------------------------------------------------------------

def test_prune_keeps_what_the_replica_does_not_hold_yet(run, replica):
    for step in (10, 20):
        contract(run, step)
    replica.mkdir()
    nothing = ck.prune(str(run), keep_last=1, replicas=[str(replica)], fsync=False)
    assert nothing.deleted == [] and any("no verified copy" in w for w in nothing.warnings)
    ck.replicate(str(run), str(replica), keep_last=1, fsync=False)  # the replica holds step 20
    for step in (30, 40):
        contract(run, step)
    result = ck.prune(str(run), keep_last=1, replicas=[str(replica)], fsync=False)
    assert sorted(d["name"] for d in result.deleted) == ["step_000000010", "step_000000020"]
    kept = dict((k["name"], k["reason"]) for k in result.kept)
    assert "not yet replicated" in kept["step_000000030"]
    assert names(run) == ["step_000000030", "step_000000040"]


def test_prune_keeps_everything_while_a_replica_cannot_be_read(run, replica):
    for step in (10, 20, 30):
        contract(run, step)
    ck.replicate(str(run), str(replica), keep_last=1, fsync=False)
    (replica / ck.REPLICA_INDEX).write_text("{broken")
    result = ck.prune(str(run), keep_last=1, replicas=[str(replica)], fsync=False)
    assert result.deleted == [] and any("cannot be read" in w for w in result.warnings)


def test_prune_without_replicas_is_unchanged(run):
    for step in (10, 20, 30):
        contract(run, step)
    result = ck.prune(str(run), keep_last=1, fsync=False)
    assert sorted(d["name"] for d in result.deleted) == ["step_000000010", "step_000000020"]


def test_prune_command_takes_replicas(run, replica):
    for step in (10, 20, 30):
        contract(run, step)
    replica.mkdir()
    out, err = io.StringIO(), io.StringIO()
    code = ck.main(["prune", str(run), "--keep-last", "1", "--replica", str(replica)], out, err)
    assert code == 0 and names(run) == ["step_000000010", "step_000000020", "step_000000030"]
    assert "no verified copy" in err.getvalue()


def test_the_installed_command_replicates(run, replica, tmp_path):
    tool = install_tool(str(tmp_path / "clusterops_checkpoint"))
    contract(run, 10)
    res = subprocess.run([sys.executable, tool, "replicate", str(run), str(replica), "--json"],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["copied"][0]["name"] == "step_000000010"


# ---------------------------------------------------------------------------------------------
# A hostile or broken replica (review of issue 27): never "start from scratch" because of it
# ---------------------------------------------------------------------------------------------

def break_index(replica, **fields):
    index = json.loads((replica / ck.REPLICA_INDEX).read_text())
    for entry in index["checkpoints"].values():
        entry.update(fields)
    (replica / ck.REPLICA_INDEX).write_text(json.dumps(index))


@pytest.mark.parametrize("fields", [dict(files=5), dict(files="model.pt"), dict(files=[{"path": 3}]),
                                    dict(files=[{"path": "../../etc/passwd", "size": 1, "sha256": "x"}]),
                                    dict(files=[{"path": "/etc/passwd", "size": 1, "sha256": "x"}]),
                                    dict(files=[{"path": "a\x00b", "size": 1, "sha256": "x"}]),
                                    dict(step="300"), dict(is_dir="yes"), dict(files=[])])
def test_a_malformed_index_makes_the_replica_unreadable_never_a_start_from_scratch(run, replica, fields):
    contract(run, 10)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    break_index(replica, **fields)
    code, path, err = latest(run, replica)
    assert (code, path) == (0, os.path.join(str(run), "step_000000010")) and "not used" in err
    shutil.rmtree(str(run))
    assert latest(run, replica)[0] == ck.EXIT_INVALID  # the replica may hold the newest: a human decides
    guard = ck.copies.unreplicated_guard([str(replica)])
    assert guard[0] is None and "cannot be read" in guard[1][0]


def test_a_lost_run_folder_and_an_unreadable_replica_is_not_a_start_from_scratch(run, tmp_path):
    contract(run, 10)
    shutil.rmtree(str(run))
    unmounted = tmp_path / "mnt" / "replica"  # its parent is missing too: an unmounted file system
    assert latest(run, unmounted)[0] == ck.EXIT_INVALID
    (tmp_path / "mnt").mkdir()  # the parent is there, the replica not made yet: nothing anywhere
    assert latest(run, unmounted)[0] == ck.EXIT_NONE


def test_an_unexpected_error_is_exit_2_never_the_1_of_start_from_scratch(run, replica, monkeypatch):
    contract(run, 10)

    def boom(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")
    monkeypatch.setattr(ck.cli, "best_copy", boom)
    code, path, err = latest(run, replica)
    assert code == ck.EXIT_ERROR and "unexpected RecursionError" in err


def test_a_replica_of_another_run_folder_is_refused(tmp_path):
    run_a, run_b, shared = tmp_path / "a", tmp_path / "b", tmp_path / "shared"
    contract(run_a, 100)
    contract(run_b, 300)
    ck.replicate(str(run_a), str(shared), fsync=False)
    with pytest.raises(ck.CheckpointError, match="one replica folder per run folder"):
        ck.replicate(str(run_b), str(shared), fsync=False)
    shutil.rmtree(str(run_b))
    code, dummy, err = latest(run_b, shared)
    assert code == ck.EXIT_INVALID and "replica of" in err  # never run A's checkpoint for run B


def test_retention_never_removes_the_newest_verified_copy(run, replica):
    for step in (200, 300):
        contract(run, step)
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False)
    # step 300's copy goes bad at the same size (flipped bytes), and the run folder loses step 300.
    flip_byte(os.path.join(str(replica), "step_000000300", "manifest.json"), 3)
    shutil.rmtree(os.path.join(str(run), "step_000000300"))
    result = ck.replicate(str(run), str(replica), keep_last=1, fsync=False)
    assert ck.newest_verified(str(replica))[1].name == "step_000000200"
    assert "step_000000200" not in [d["name"] for d in result.deleted]


def test_copies_are_no_more_readable_than_their_originals(run, replica):
    folder = contract(run, 10)
    for dirpath, dirnames, filenames in os.walk(folder):
        os.chmod(dirpath, 0o700)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o600)
    os.chmod(str(run), 0o700)
    ck.replicate(str(run), str(replica), fsync=False)
    copy = os.path.join(str(replica), "step_000000010")
    assert stat_mode(copy) == 0o700 and stat_mode(os.path.join(copy, "model.pt")) == 0o600
    assert stat_mode(os.path.join(str(replica), ck.REPLICA_INDEX)) == 0o600 and stat_mode(str(replica)) == 0o700


def stat_mode(path):
    return os.stat(path).st_mode & 0o7777


def test_a_checkpoint_that_cannot_be_copied_stops_no_other(run, replica, tmp_path):
    contract(run, 10)
    bad = contract(run, 20)
    os.symlink("/etc/passwd", os.path.join(bad, "extra"))  # unlisted, so valid; the copy refuses to follow it
    out, err = io.StringIO(), io.StringIO()
    code = ck.main(["replicate", str(run), str(replica), "--keep-last", "2"], out, err)
    assert code == ck.EXIT_ERROR and "copying step_000000020" in err.getvalue()
    assert names(replica) == ["step_000000010"] and list(ck.read_index(str(replica))) == ["step_000000010"]


def test_an_index_the_reader_would_refuse_is_never_written(run, replica, monkeypatch):
    for step in (10, 20, 30):
        contract(run, step)
    monkeypatch.setattr(ck.replica_index, "MAX_INDEX_BYTES", 5000)  # room for about two entries
    result = ck.replicate(str(run), str(replica), keep_last=0, fsync=False)
    assert result.error and "would exceed" in result.error
    assert ck.read_index(str(replica))  # what was written before still reads


def test_a_name_reused_for_a_newer_step_is_copied_again(run, replica):
    torch_file(str(run), 1, 100)
    ck.replicate(str(run), str(replica), fsync=False)
    index = ck.read_index(str(replica))
    index["checkpoint_epoch_1_step_100.pth"]["step"] = 99  # as if the name had held step 99 when copied
    doc = json.loads((replica / ck.REPLICA_INDEX).read_text())
    doc["checkpoints"] = index
    (replica / ck.REPLICA_INDEX).write_text(json.dumps(doc))
    result = ck.replicate(str(run), str(replica), fsync=False)
    assert [c["name"] for c in result.copied] == ["checkpoint_epoch_1_step_100.pth"]
    assert ck.read_index(str(replica))["checkpoint_epoch_1_step_100.pth"]["step"] == 100


def test_each_copy_says_what_it_copies_before_it_starts(run, replica):
    """Issue 37: a replication of large checkpoints says what it is doing as it goes."""
    for step in (10, 20):
        contract(run, step)
    lines = []
    ck.replicate(str(run), str(replica), keep_last=2, fsync=False, log=lines.append)
    copying = [line for line in lines if line.startswith("copying ")]
    assert copying == ["copying step_000000020 (1 of 2, %d bytes)" % ck.inspect(str(run)).checkpoints[-1].size,
                       "copying step_000000010 (2 of 2, %d bytes)" % ck.inspect(str(run)).checkpoints[0].size]
    assert lines.index(copying[0]) < lines.index([l for l in lines if l.startswith("copied step_000000020")][0])


def test_no_copy_starts_after_the_time_limit_and_the_next_run_makes_it(run, replica, monkeypatch):
    for step in (10, 20, 30):
        contract(run, step)
    clock = iter(range(1000, 10 ** 6, 100))  # each read of the clock 100 s later
    monkeypatch.setattr(ck.replicas.time, "time", lambda: float(next(clock)))
    lines = []
    first = ck.replicate(str(run), str(replica), keep_last=3, fsync=False, log=lines.append, time_limit=150)
    assert [c["name"] for c in first.copied] == ["step_000000030"]
    assert any("time limit was reached: 2 checkpoint(s) left for the next run" in w for w in first.warnings), first.warnings
    assert not first.error and any(line.startswith("warning: the time limit was reached") for line in lines)
    second = ck.replicate(str(run), str(replica), keep_last=3, fsync=False)
    assert sorted(c["name"] for c in second.copied) == ["step_000000010", "step_000000020"]

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_checkpoint.prune and the ``prune`` command: run folders built for real in tmp_path.

One test per input kind of issue 5, then the guards (pointers, symlinks, temporaries, lock,
errors, min_free), the command line, and a hypothesis state machine: random saves, crashes that
leave temporary or half-written folders, pointer updates and prunes with random policies, with the
safety properties checked after every step.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import struct
import subprocess
import tempfile
import time
import zipfile

import pytest

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck

from checkpoint_builders import install_tool, names, torch_zip as ck_zip, tree_digest, write  # noqa: E402 pylint: disable=import-error


# ---------------------------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------------------------

def contract(root, step, epoch=0, size=64):
    return ck.write_checkpoint(str(root), step, epoch, {"model.pt": b"m" * size, "optim/rank0.pt": b"o" * size},
                               fsync=False)


def safetensors(n_floats=8):
    header = json.dumps({"w": {"dtype": "F32", "shape": [n_floats], "data_offsets": [0, 4 * n_floats]}}).encode()
    return struct.pack("<Q", len(header)) + header + b"\x01" * (4 * n_floats)


def torch_zip(stem="archive"):
    """A zip laid out like torch.save's (``<stem>/data.pkl`` and a storage)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(stem + "/data.pkl", pickle.dumps({"w": "storage 0"}, protocol=2))
        archive.writestr(stem + "/data/0", b"\x01" * 256)
    return buf.getvalue()


def hf(root, step):
    folder = os.path.join(str(root), "checkpoint-%d" % step)
    write(os.path.join(folder, "model.safetensors"), safetensors())
    write(os.path.join(folder, "trainer_state.json"), json.dumps({"global_step": step, "epoch": 1.0}).encode())
    return folder


def deepspeed(root, step):
    folder = os.path.join(str(root), "global_step%d" % step)
    write(os.path.join(folder, "mp_rank_00_model_states.pt"), torch_zip())
    write(os.path.join(folder, "zero_pp_rank_0_mp_rank_00_optim_states.pt"), torch_zip())
    return folder


def megatron(root, step):
    folder = os.path.join(str(root), "iter_%07d" % step)
    write(os.path.join(folder, "mp_rank_00", "model_optim_rng.pt"), torch_zip())
    return folder


def lightning(root, epoch, step):
    path = os.path.join(str(root), "epoch=%d-step=%d.ckpt" % (epoch, step))
    write(path, torch_zip())
    return path


def age(path, seconds):
    """Make an entry and everything under it look unchanged for ``seconds``."""
    when = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (when, when), follow_symlinks=False)
    os.utime(path, (when, when), follow_symlinks=False)


def _cli(args):
    out, err = io.StringIO(), io.StringIO()
    code = ck.main(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# ---------------------------------------------------------------------------------------------
# The input kinds of issue 5
# ---------------------------------------------------------------------------------------------

def test_keep_last_orders_by_step_not_name(tmp_path):
    """checkpoint-9000 ... 9900 then 10000 ... 10400, keep_last 10: keeps 9500-10400."""
    steps = list(range(9000, 10000, 100)) + list(range(10000, 10500, 100))
    for step in steps:
        hf(tmp_path, step)
    result = ck.prune(str(tmp_path), keep_last=10)
    assert result.error is None and result.latest_valid == "checkpoint-10400"
    assert names(tmp_path) == sorted("checkpoint-%d" % s for s in range(9500, 10500, 100))
    assert [d["step"] for d in result.deleted] == [9000, 9100, 9200, 9300, 9400]  # oldest first
    assert all(d["reason"].startswith("older than the 10 newest valid") for d in result.deleted)


def test_padding_changed_mid_run(tmp_path):
    """step_0900000 next to step_100000: numbers are compared, not names."""
    for step, name in ((100000, "step_100000"), (800000, "step_0800000"), (900000, "step_0900000")):
        os.rename(contract(tmp_path, step), os.path.join(str(tmp_path), name))
    result = ck.prune(str(tmp_path), keep_last=2)
    assert result.latest_valid == "step_0900000"
    assert names(tmp_path) == ["step_0800000", "step_0900000"]
    assert [d["name"] for d in result.deleted] == ["step_100000"]


@pytest.mark.parametrize("other, named_with_epoch", [
    ("5", False), ("checkpoint_7", False), ("x--step=5-last", False),
    ("epoch_3", True), ("ep1-ba20", True), ("epoch_0_step_5", True),
])
def test_only_checkpoints_named_like_the_resume_point_are_deleted(tmp_path, other, named_with_epoch):
    """A user's folder whose name another layout accepts (Orbax, Accelerate, NeMo 2, torchtune,
    Composer, NeMo Automodel), older than the resume point, is an invalid candidate: never pruned."""
    write(os.path.join(str(tmp_path), other, "notes.txt"), b"mine")
    if named_with_epoch:  # beside torch.save files, whose names carry the epoch too
        saved = ["checkpoint_epoch_9_step_%d.pth" % step for step in (100, 200, 300)]
        for name in saved:
            write(os.path.join(str(tmp_path), name), ck_zip())
    else:
        saved = [os.path.basename(contract(tmp_path, step)) for step in (100, 200, 300)]
    result = ck.prune(str(tmp_path), keep_last=1)
    assert result.error is None and result.latest_valid == saved[-1]
    assert names(tmp_path) == sorted([other, saved[-1]])
    assert [d["name"] for d in result.deleted] == saved[:2]
    assert "only checkpoints named like the resume point are deleted" in [
        k for k in result.kept if k["name"] == other][0]["reason"]


@pytest.mark.parametrize("keep_last", [0, -1, -100])
def test_keep_last_zero_or_less_deletes_nothing(tmp_path, keep_last):
    for step in range(1, 6):
        contract(tmp_path, step * 10)
    write(os.path.join(str(tmp_path), "step_000000001", "model.pt"), b"half")  # invalid, old
    before = names(tmp_path)
    result = ck.prune(str(tmp_path), keep_last=keep_last, keep_every=0)
    assert result.deleted == [] and names(tmp_path) == before
    assert all(k["reason"] == "keep_last %d: every checkpoint is kept" % keep_last for k in result.kept)
    assert _cli(["prune", str(tmp_path), "--keep-last", str(keep_last)])[0] == 0
    assert names(tmp_path) == before


def _ds_latest(root):
    for step in (100, 200, 300, 400, 500):
        deepspeed(root, step)
    write(os.path.join(str(root), "latest"), b"global_step200")
    return "global_step200"


def _contract_latest_symlink(root):
    for step in (100, 200, 300, 400, 500):
        contract(root, step)
    os.symlink("step_000000200", os.path.join(str(root), "latest"))
    return "step_000000200"


def _megatron_tracker(root):
    for step in (100, 200, 300, 400, 500):
        megatron(root, step)
    write(os.path.join(str(root), "latest_checkpointed_iteration.txt"), b"200\n")
    return "iter_0000200"


def _lightning_last(root):
    for step in (100, 200, 300, 400, 500):
        lightning(root, 0, step)
    os.symlink("epoch=0-step=200.ckpt", os.path.join(str(root), "last.ckpt"))
    return "epoch=0-step=200.ckpt"


def _alias_symlink(root):
    for step in (100, 200, 300, 400, 500):
        contract(root, step)
    os.symlink("step_000000200/model.pt", os.path.join(str(root), "best-model.pt"))
    return "step_000000200"


@pytest.mark.parametrize("build", [_ds_latest, _contract_latest_symlink, _megatron_tracker, _lightning_last,
                                   _alias_symlink])
def test_pointer_to_an_older_checkpoint_keeps_it(tmp_path, build):
    pinned = build(tmp_path)
    result = ck.prune(str(tmp_path), keep_last=2)
    assert result.error is None
    kept = dict((k["name"], k["reason"]) for k in result.kept)
    assert pinned in kept and os.path.lexists(os.path.join(str(tmp_path), pinned))
    assert "pointer" in kept[pinned] or "symlink" in kept[pinned]
    assert len(result.deleted) == 2  # 100 and 300 go; 200 (pointed at), 400 and 500 stay
    assert sorted(d["step"] for d in result.deleted) == [100, 300]


def test_symlinks_out_of_the_folder_are_never_followed(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    write(str(outside / "model.pt"), b"precious")
    contract(outside, 5)  # a real checkpoint outside, named like one
    os.makedirs(str(run))
    for step in (100, 200, 300):
        contract(run, step)
    os.symlink(str(outside / "step_000000005"), str(run / "step_000000050"))  # a checkpoint name, out
    os.symlink(str(outside), str(run / "escape"))
    os.symlink(str(outside / "step_000000005"), str(run / "latest"))  # a pointer out
    os.symlink(str(outside / "model.pt"), str(run / "step_000000100" / "extra.pt"))  # inside a victim
    os.symlink(str(outside), str(run / "tmp-old-link"))
    age(str(run / "tmp-old-link"), 10 ** 6)
    canary = tree_digest(outside)
    result = ck.prune(str(run), keep_last=1, tmp_grace=0)
    assert result.error is None
    assert [d["name"] for d in result.deleted] == ["step_000000100", "step_000000200"]
    assert tree_digest(outside) == canary
    for link in ("step_000000050", "escape", "latest", "tmp-old-link"):
        assert os.path.islink(str(run / link))
    assert "tmp-old-link" in [k["name"] for k in result.kept]


# ---------------------------------------------------------------------------------------------
# Never newer than the newest valid; no valid checkpoint
# ---------------------------------------------------------------------------------------------

def test_nothing_newer_than_the_newest_valid_is_deleted(tmp_path):
    for step in (100, 200, 300, 400):
        contract(tmp_path, step)
    write(os.path.join(str(tmp_path), "step_000000500", "model.pt"), b"being written by another tool")
    truncated = contract(tmp_path, 600)
    with open(os.path.join(truncated, "model.pt"), "r+b") as handle:
        handle.truncate(10)
    result = ck.prune(str(tmp_path), keep_last=1)
    assert result.latest_valid == "step_000000400"
    assert names(tmp_path) == ["step_000000400", "step_000000500", "step_000000600"]
    reasons = dict((k["name"], k["reason"]) for k in result.kept)
    assert reasons["step_000000500"].startswith("newer than the newest valid")
    assert reasons["step_000000400"].startswith("the newest valid checkpoint")


def test_invalid_ones_inside_the_window_are_kept_and_count_for_nothing(tmp_path):
    for step in (100, 200, 300, 400):
        contract(tmp_path, step)
    with open(os.path.join(str(tmp_path), "step_000000300", "model.pt"), "r+b") as handle:
        handle.truncate(1)
    result = ck.prune(str(tmp_path), keep_last=2)
    # 400 and 200 are the 2 newest valid; 300 between them is kept; only 100 goes.
    assert [d["name"] for d in result.deleted] == ["step_000000100"]


def test_no_valid_checkpoint_deletes_no_checkpoint(tmp_path):
    for step in (100, 200):
        write(os.path.join(str(tmp_path), "checkpoint_epoch_0_step_%d.pth" % step), b"")
    result = ck.prune(str(tmp_path), keep_last=1)
    assert result.deleted == [] and result.latest_valid is None
    assert any("no valid checkpoint" in w for w in result.warnings)


def test_keep_every_and_keep_patterns(tmp_path):
    for step in range(100, 1100, 100):
        contract(tmp_path, step)
    os.rename(os.path.join(str(tmp_path), "step_000000300"), os.path.join(str(tmp_path), "step_300"))
    result = ck.prune(str(tmp_path), keep_last=2, keep_every=400, keep=["step_3*", "step_000000100"])
    assert sorted(d["step"] for d in result.deleted) == [200, 500, 600, 700]
    reasons = dict((k["name"], k["reason"]) for k in result.kept)
    assert reasons["step_000000800"] == "step 800 is a multiple of keep_every 400"
    assert reasons["step_300"] == "matches the keep pattern step_3*"
    assert reasons["step_000000100"] == "matches the keep pattern step_000000100"


def test_another_run_written_later_with_lower_steps_is_kept(tmp_path):
    """A stale folder of an older run (high steps) next to a new run (low steps, written later)."""
    old = contract(tmp_path, 50000)
    contract(tmp_path, 49000)
    for path in (old, os.path.join(str(tmp_path), "step_000049000")):
        manifest = os.path.join(path, "manifest.json")
        with open(manifest) as handle:
            data = json.load(handle)
        data["time"] = "2020-01-01T00:00:00Z" if path == old else "2019-12-31T00:00:00Z"
        with open(manifest, "w") as handle:
            json.dump(data, handle)
    for step in (100, 200, 300):
        contract(tmp_path, step)
    result = ck.prune(str(tmp_path), keep_last=1)
    assert result.latest_valid == "step_000050000"
    assert [d["name"] for d in result.deleted] == ["step_000049000"]
    assert any("written after step_000050000" in w for w in result.warnings)
    assert names(tmp_path) == ["step_000000100", "step_000000200", "step_000000300", "step_000050000"]


def test_a_checkpoint_a_kept_one_links_into_is_kept(tmp_path):
    for step in (100, 200, 300):
        hf(tmp_path, step)
    newest = os.path.join(str(tmp_path), "checkpoint-300", "model.safetensors")
    os.unlink(newest)
    os.symlink("../checkpoint-100/model.safetensors", newest)  # deduplicated weights
    assert ck.latest_valid(str(tmp_path)).name == "checkpoint-300"
    result = ck.prune(str(tmp_path), keep_last=1)
    assert [d["name"] for d in result.deleted] == ["checkpoint-200"]
    assert dict((k["name"], k["reason"]) for k in result.kept)["checkpoint-100"] == "checkpoint-300 links into it"
    assert ck.latest_valid(str(tmp_path), "sha256").name == "checkpoint-300"


# ---------------------------------------------------------------------------------------------
# Temporary entries
# ---------------------------------------------------------------------------------------------

def test_tmp_grace(tmp_path):
    contract(tmp_path, 100)
    root = str(tmp_path)
    young = os.path.join(root, "tmp-step_000000200.4711.aaaa")
    old = os.path.join(root, "tmp-step_000000300.4712.bbbb")
    busy = os.path.join(root, "tmp-checkpoint-400")
    stale_file = os.path.join(root, "model.pt.tmp")
    deleting = os.path.join(root, "tmp-deleting-step_000000050")
    for folder in (young, old, busy, deleting):
        write(os.path.join(folder, "model.pt"), b"x")
    write(stale_file, b"x")
    age(young, 100)
    age(old, 5000)
    age(busy, 5000)
    os.utime(os.path.join(busy, "model.pt"))  # a file inside is still being written
    age(stale_file, 5000)
    result = ck.prune(root, keep_last=1, tmp_grace=3600)
    gone = dict((d["name"], d["reason"]) for d in result.deleted)
    assert sorted(gone) == ["model.pt.tmp", "tmp-deleting-step_000000050", "tmp-step_000000300.4712.bbbb"]
    assert gone["tmp-deleting-step_000000050"] == "left by an interrupted prune"
    assert gone["tmp-step_000000300.4712.bbbb"].startswith("temporary, unchanged for 5")
    assert all(d["kind"] == "temporary" for d in result.deleted)
    assert names(tmp_path) == ["step_000000100", "tmp-checkpoint-400", "tmp-step_000000200.4711.aaaa"]
    kept = dict((k["name"], k["reason"]) for k in result.kept)
    assert "may be being written" in kept["tmp-checkpoint-400"]
    # tmp_grace None (or < 0 on the command line): temporaries are kept
    age(young, 10 ** 6)
    assert ck.prune(root, keep_last=1, tmp_grace=None).deleted == []
    assert _cli(["prune", root, "--keep-last", "1", "--tmp-grace", "-1"])[0] == 0
    assert os.path.isdir(young)
    assert _cli(["prune", root, "--keep-last", "1", "--tmp-grace", "3600"])[0] == 0
    assert not os.path.exists(young)


# ---------------------------------------------------------------------------------------------
# Deleting: rename first, log, dry run, lock, errors
# ---------------------------------------------------------------------------------------------

def test_rename_first_then_remove_and_log(tmp_path, monkeypatch):
    for step in (100, 200, 300):
        contract(tmp_path, step)
    removed = []
    real_remove = ck.pruning._remove_tree

    def remove(dir_fd, name):  # by name, in the run folder's descriptor
        removed.append((name, os.path.exists(os.path.join(str(tmp_path), name[len(ck.DELETING_PREFIX):]))))
        real_remove(dir_fd, name)

    monkeypatch.setattr(ck.pruning, "_remove_tree", remove)
    lines = []
    result = ck.prune(str(tmp_path), keep_last=1, log=lines.append)
    assert removed == [("tmp-deleting-step_000000100", False), ("tmp-deleting-step_000000200", False)]
    assert len(lines) == 2 and lines[0].startswith("deleted step_000000100 (step 100, 128 B): older than")
    assert [d["size"] for d in result.deleted] == [128, 128]


def test_dry_run_lists_what_would_go_and_changes_nothing(tmp_path):
    for step in (100, 200, 300):
        contract(tmp_path, step)
    old = os.path.join(str(tmp_path), "tmp-x")
    write(os.path.join(old, "f"), b"x")
    age(old, 10 ** 6)
    digest = tree_digest(tmp_path)
    lines = []
    dry = ck.prune(str(tmp_path), keep_last=1, log=lines.append, dry_run=True)
    assert tree_digest(tmp_path) == digest and not os.path.exists(os.path.join(str(tmp_path), ck.PRUNE_LOCK))
    assert [d["name"] for d in dry.deleted] == ["tmp-x", "step_000000100", "step_000000200"]
    assert all(line.startswith("would delete") for line in lines)
    assert dry.after == ["step_000000300"]
    real = ck.prune(str(tmp_path), keep_last=1)
    assert real.deleted == dry.deleted and real.after == dry.after == names(tmp_path)


def test_lock_stops_a_second_prune(tmp_path):
    for step in (100, 200):
        contract(tmp_path, step)
    fd = ck.pruning._lock(os.path.join(str(tmp_path), ck.PRUNE_LOCK))
    try:
        with pytest.raises(ck.PruneLocked):
            ck.prune(str(tmp_path), keep_last=1)
        code, out, err = _cli(["prune", str(tmp_path), "--keep-last", "1"])
        assert (code, out) == (ck.EXIT_LOCKED, "") and "another prune" in err
        assert names(tmp_path) == ["step_000000100", "step_000000200"]
        assert ck.prune(str(tmp_path), keep_last=1, dry_run=True).deleted  # a dry run takes no lock
    finally:
        os.close(fd)
    assert len(ck.prune(str(tmp_path), keep_last=1).deleted) == 1
    report = ck.inspect(str(tmp_path))  # the lock file stays and is no candidate
    assert {"name": ck.PRUNE_LOCK, "reason": "lock file of checkpoint pruning"} in report.ignored
    assert [c.name for c in report.checkpoints] == ["step_000000200"]


def test_an_error_stops_the_run(tmp_path, monkeypatch):
    for step in (100, 200, 300, 400):
        contract(tmp_path, step)
    real_delete = ck.pruning._delete_checkpoint

    def delete(root, ckpt):
        if ckpt.step == 200:
            raise OSError(13, "Permission denied", ckpt.path)
        real_delete(root, ckpt)

    monkeypatch.setattr(ck.pruning, "_delete_checkpoint", delete)
    lines = []
    result = ck.prune(str(tmp_path), keep_last=1, log=lines.append)
    assert [d["name"] for d in result.deleted] == ["step_000000100"]
    assert "cannot delete" in result.error and "step_000000200" in result.error
    assert names(tmp_path) == ["step_000000200", "step_000000300", "step_000000400"]
    assert lines[-1].startswith("error: cannot delete") and lines[-1].endswith("nothing more deleted")
    reasons = dict((k["name"], k["reason"]) for k in result.kept)
    assert reasons["step_000000300"].startswith("not reached")
    code, _out, err = _cli(["prune", str(tmp_path), "--keep-last", "1"])
    assert code == ck.EXIT_ERROR and "Permission denied" in err


def test_bad_folder_and_policy(tmp_path):
    with pytest.raises(ck.CheckpointError):
        ck.prune(str(tmp_path / "nope"), keep_last=1)
    for kwargs in (dict(keep_last="3"), dict(keep_last=True), dict(keep_last=1, keep_every=-1),
                   dict(keep_last=1, keep="step_*"), dict(keep_last=1, min_free="lots")):
        with pytest.raises(ValueError):
            ck.prune(str(tmp_path), **kwargs)
    assert _cli(["prune", str(tmp_path / "nope"), "--keep-last", "1"])[0] == ck.EXIT_ERROR
    assert _cli(["prune", str(tmp_path), "--keep-last", "1", "--min-free", "110%"])[0] == ck.EXIT_ERROR
    with pytest.raises(SystemExit):
        _cli(["prune", str(tmp_path)])  # --keep-last is required


# ---------------------------------------------------------------------------------------------
# min_free
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("10%", ("percent", 10.0)), ("0.5 %", ("percent", 0.5)), ("500G", ("bytes", 500.0 * (1 << 30))),
    ("1.5TiB", ("bytes", 1.5 * (1 << 40))), ("64k", ("bytes", 65536.0)), ("2MB", ("bytes", 2.0 * (1 << 20))),
    ("1048576", ("bytes", 1048576.0)), (4096, ("bytes", 4096.0)), (None, None), ("", None),
])
def test_parse_min_free(text, expected):
    assert ck.parse_min_free(text) == expected


@pytest.mark.parametrize("text", ["101%", "-1G", "ten", "5X", True, -3])
def test_parse_min_free_refuses(text):
    with pytest.raises(ValueError):
        ck.parse_min_free(text)


def test_min_free_deletes_only_while_below(tmp_path, monkeypatch):
    for step in range(100, 700, 100):
        contract(tmp_path, step)
    unit = ck.pruning._unshared_blocks(os.open(str(tmp_path), os.O_RDONLY), "step_000000100")  # blocks of one

    def free_space(path):  # a file system whose free space grows by what each deletion gives back
        return int(7.8 * unit) - unit * len([n for n in os.listdir(path) if n.startswith("step_")]), 10000 * unit

    monkeypatch.setattr(ck.pruning, "_free_space", free_space)
    assert ck.prune(str(tmp_path), keep_last=1, min_free=int(1.8 * unit)).deleted == []  # available: enough
    result = ck.prune(str(tmp_path), keep_last=1, min_free=int(4.5 * unit))  # needs 3 of the 5 old ones gone
    assert [d["step"] for d in result.deleted] == [100, 200, 300]
    assert result.min_free_bytes == int(4.5 * unit) and result.free_after == int(7.8 * unit) - 3 * unit
    assert dict((k["name"], k["reason"]) for k in result.kept)["step_000000400"].startswith(
        "min_free %d reached" % int(4.5 * unit))
    result = ck.prune(str(tmp_path), keep_last=1, min_free="99%")  # never reached: the policy still holds
    assert [d["step"] for d in result.deleted] == [400, 500] and names(tmp_path) == ["step_000000600"]


def test_min_free_is_reached_only_when_the_file_system_says_so(tmp_path, monkeypatch):
    """Issue 38, part 6: deleting a checkpoint whose files are sparse frees less than their size. Here
    statvfs says 100 bytes available whatever is deleted, and each old checkpoint's two data files are
    holes of 1 MiB: only its manifest's blocks come back, so three deletions reach a target of 100 + 10,000
    bytes (before: the apparent 2 MiB of the first one was counted as freed, and the prune stopped there
    with the disk still full)."""
    for step in range(100, 700, 100):
        contract(tmp_path, step, size=1 << 20)
        for rel in ("model.pt", os.path.join("optim", "rank0.pt")):
            path = os.path.join(str(tmp_path), "step_%09d" % step, rel)
            os.unlink(path)
            with open(path, "wb") as handle:
                handle.truncate(1 << 20)  # the size the manifest says, no block allocated
    manifest = os.stat(os.path.join(str(tmp_path), "step_000000100", "manifest.json")).st_blocks * 512
    root_fd = os.open(str(tmp_path), os.O_RDONLY)
    assert 0 < manifest <= 5000 and ck.pruning._unshared_blocks(root_fd, "step_000000100") == manifest
    monkeypatch.setattr(ck.pruning, "_free_space", lambda path: (100, 1 << 40))
    result = ck.prune(str(tmp_path), keep_last=1, min_free=100 + 10000)
    assert [d["step"] for d in result.deleted] == [100, 200, 300], result.deleted
    assert dict((k["name"], k["reason"]) for k in result.kept)["step_000000400"].startswith("min_free")


def test_min_free_dry_run_counts_no_byte_a_hard_link_or_a_hole_keeps(tmp_path, monkeypatch):
    """Issue 38, part 6: a dry run estimates what the deletions give back from the allocated blocks of
    the files no other link keeps, never their apparent sizes: a hole gives back nothing, and so does
    a hard link to another checkpoint's file (here each old model.pt is one to the newest's), so each old
    checkpoint gives back its manifest's and optimizer file's blocks, and three reach the target."""
    for step in range(100, 600, 100):
        contract(tmp_path, step)
    newest = os.path.join(str(tmp_path), "step_000000500", "model.pt")
    for step in range(100, 500, 100):
        folder = os.path.join(str(tmp_path), "step_%09d" % step)
        os.unlink(os.path.join(folder, "model.pt"))
        os.link(newest, os.path.join(folder, "model.pt"))
    monkeypatch.setattr(ck.pruning, "_free_space", lambda path: (100, 10000))
    shared = ck.pruning._unshared_blocks(os.open(str(tmp_path), os.O_RDONLY), "step_000000100")
    assert shared == os.stat(os.path.join(str(tmp_path), "step_000000100", "manifest.json")).st_blocks * 512 + \
        os.stat(os.path.join(str(tmp_path), "step_000000100", "optim", "rank0.pt")).st_blocks * 512
    sparse = os.path.join(str(tmp_path), "hole")
    with open(sparse, "wb") as handle:
        handle.truncate(1 << 20)
    assert ck.pruning._unshared_blocks(os.open(str(tmp_path), os.O_RDONLY), "hole") == 0
    before = names(tmp_path)
    result = ck.prune(str(tmp_path), keep_last=1, min_free=100 + 2 * shared + 1, dry_run=True)
    assert [d["step"] for d in result.deleted] == [100, 200, 300], result.deleted
    assert dict((k["name"], k["reason"]) for k in result.kept)["step_000000400"].startswith("min_free")
    assert names(tmp_path) == before  # a dry run


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

def test_cli_prune_output_json_and_log_rotation(tmp_path):
    run = tmp_path / "run"
    for step in (100, 200, 300):
        contract(run, step)
    log = str(tmp_path / "prune.log")
    write(log, b"x" * 100)
    code, out, err = _cli(["prune", str(run), "--keep-last", "2", "--dry-run", "--log", log,
                           "--log-max-bytes", "50", "--log-backups", "2", "-v"])
    assert code == 0 and err == ""
    assert out.splitlines()[0].startswith("would delete step_000000100")
    assert "kept step_000000300: the newest valid checkpoint (the resume point)" in out
    assert out.splitlines()[-1].startswith("dry run: 1 deleted (128 B), 2 kept; newest valid step_000000300")
    with open(log + ".1") as handle:
        assert handle.read() == "x" * 100  # rotated when the run started
    with open(log) as handle:
        logged = handle.read().splitlines()
    assert len(logged) == 2 and " would delete step_000000100 " in logged[0] and str(run) in logged[0]
    code, out, err = _cli(["prune", str(run), "--keep-last", "2", "--json", "--log", log])
    assert code == 0 and json.loads(out)["deleted"][0]["name"] == "step_000000100" and err == ""
    assert _cli(["prune", str(run), "--keep-last", "1", "--quiet", "--log", log])[1:] == ("", "")
    assert names(run) == ["step_000000300"]
    with open(log) as handle:
        assert sum(" deleted step_" in line for line in handle) == 2


SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON), reason="no system python3")
def test_cli_prune_on_system_python_without_ansible(tmp_path):
    tool = str(tmp_path / "bin" / "clusterops_checkpoint")  # as roles/checkpoint_tool installs it
    install_tool(tool)
    run = tmp_path / "run"
    for step in (9000, 9500, 10000, 10500):
        contract(run, step)
    proc = subprocess.run([SYSTEM_PYTHON, "-I", "-S", tool, "prune", str(run), "--keep-last", "2"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert names(run) == ["step_000010000", "step_000010500"]
    assert proc.stdout.count("\ndeleted ") + proc.stdout.startswith("deleted ") == 2


# ---------------------------------------------------------------------------------------------
# Property: random saves, crashes, pointer updates and prunes
# ---------------------------------------------------------------------------------------------

class PruneMachine(RuleBasedStateMachine):
    """A run folder with a sibling canary folder; the model tracks which steps hold a valid checkpoint."""

    def __init__(self):
        super(PruneMachine, self).__init__()
        self.top = tempfile.mkdtemp(prefix="ckpt-prune-prop-")
        self.run = os.path.join(self.top, "run")
        self.outside = os.path.join(self.top, "outside")
        self.valid = set()  # steps whose step_<S> is a valid contract checkpoint (the model)
        self.next_step = 10
        self.links = {}

    @initialize()
    def setup(self):
        os.makedirs(self.run)
        write(os.path.join(self.outside, "weights.pt"), b"keep me")
        contract(self.outside, 999999)  # a real checkpoint outside, the newest by far
        links = {"escape": self.outside, "step_000999999": os.path.join(self.outside, "step_000999999"),
                 "latest-outside.pt": os.path.join(self.outside, "weights.pt"), "tmp-outside": self.outside}
        for name, target in links.items():
            os.symlink(target, os.path.join(self.run, name))
        age(os.path.join(self.run, "tmp-outside"), 10 ** 6)
        self.links = links
        self.canary = tree_digest(self.outside)

    def teardown(self):
        shutil.rmtree(self.top, ignore_errors=True)

    def _present(self):
        return set(names(self.run))

    @rule(gap=st.integers(1, 3))
    def save(self, gap):
        self.next_step += 10 * gap
        path = contract(self.run, self.next_step)
        if rand_link_inside_choice(self.next_step):
            os.symlink(self.links["latest-outside.pt"], os.path.join(path, "unlisted-link.pt"))
        self.valid.add(self.next_step)

    @rule(gap=st.integers(1, 3), seconds=st.sampled_from([0, 30, 500, 5000]),
          how=st.sampled_from(["tmp", "tmp-with-manifest", "half-step", "truncated"]))
    def crash_mid_write(self, gap, seconds, how):
        self.next_step += 10 * gap
        name = ck.checkpoint_name(self.next_step)
        if how == "tmp":
            folder = os.path.join(self.run, "tmp-%s.%d.dead" % (name, self.next_step))
            write(os.path.join(folder, "model.pt"), b"partial")
            age(folder, seconds)
        elif how == "tmp-with-manifest":
            folder = os.path.join(self.run, "tmp-%s.%d.beef" % (name, self.next_step))
            write(os.path.join(folder, "model.pt"), b"whole")
            write(os.path.join(folder, "manifest.json"), b"{}")
            age(folder, seconds)
        elif how == "half-step":  # another tool's save cut short (or an rsync of one: an old mtime)
            write(os.path.join(self.run, name, "model.pt"), b"no manifest yet")
            age(os.path.join(self.run, name), seconds)
        else:
            with open(os.path.join(contract(self.run, self.next_step), "model.pt"), "r+b") as handle:
                handle.truncate(3)

    @precondition(lambda self: bool(self.valid))
    @rule(data=st.data(), as_link=st.booleans())
    def point_latest(self, data, as_link):
        step = data.draw(st.sampled_from(sorted(self.valid)))
        latest = os.path.join(self.run, "latest")
        if os.path.lexists(latest):
            os.unlink(latest)
        if as_link:
            os.symlink(ck.checkpoint_name(step), latest)
        else:
            write(latest, ck.checkpoint_name(step).encode())

    @rule(keep_last=st.integers(-2, 5), keep_every=st.sampled_from([0, 20, 30, 70]),
          keep=st.sampled_from([[], ["step_0000001*"], ["nothing"]]),
          min_free=st.sampled_from([None, None, "0", "100%"]),
          tmp_grace=st.sampled_from([None, 0, 60, 3600]), dry_run=st.booleans())
    def prune(self, keep_last, keep_every, keep, min_free, tmp_grace, dry_run):
        before = self._present()
        newest = max(self.valid) if self.valid else None
        pointed = None
        latest = os.path.join(self.run, "latest")
        if os.path.islink(latest):
            pointed = os.readlink(latest)
        elif os.path.isfile(latest):
            with open(latest) as handle:
                pointed = handle.read()
        young = set(n for n in before if n.startswith("tmp-") and tmp_grace is not None and
                    time.time() - ck.prune_plan.newest_mtime(os.path.join(self.run, n)) < tmp_grace - 5)
        result = ck.prune(self.run, keep_last=keep_last, keep_every=keep_every, keep=keep, min_free=min_free,
                          tmp_grace=tmp_grace, dry_run=dry_run)
        assert result.error is None
        after = self._present()
        gone = before - after
        if dry_run:
            assert gone == set()
            gone = set(d["name"] for d in result.deleted)
        else:
            assert gone == set(d["name"] for d in result.deleted)
        assert not any(n.startswith(ck.DELETING_PREFIX) for n in after)
        # the newest valid checkpoint exists, and nothing newer than it was deleted
        assert result.latest_valid == (ck.checkpoint_name(newest) if newest else None)
        if newest is not None:
            assert ck.checkpoint_name(newest) not in gone
            for name in gone:
                parsed = ck.parse_name(name)
                assert parsed is None or parsed[2] < newest, name
        # at least min(keep_last, number valid) valid checkpoints remain; keep_last <= 0 keeps all
        remaining = set(s for s in self.valid if ck.checkpoint_name(s) not in gone)
        if keep_last > 0:
            assert len(remaining) >= min(keep_last, len(self.valid))
        else:
            assert all(not ck.parse_name(n) for n in gone)
        assert pointed is None or pointed not in gone
        assert young.isdisjoint(gone)
        if keep_every:
            assert all(ck.parse_name(n)[2] % keep_every for n in gone if ck.parse_name(n))
        if not dry_run:
            self.valid = remaining

    @invariant()
    def nothing_outside_touched_and_choice_matches_the_model(self):
        if not os.path.isdir(self.run):
            return
        assert tree_digest(self.outside) == self.canary
        for name, target in self.links.items():
            assert os.readlink(os.path.join(self.run, name)) == target
        newest = max(self.valid) if self.valid else None
        chosen = ck.latest_valid(self.run)
        assert (chosen.name if chosen else None) == (ck.checkpoint_name(newest) if newest else None)


def rand_link_inside_choice(step):
    """Every third save carries an unlisted symlink out of the folder (deleted with it, never followed)."""
    return step % 30 == 0


PruneMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
TestPruneProperties = PruneMachine.TestCase

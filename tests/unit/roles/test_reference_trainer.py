# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The torchrun_launcher role's reference trainer, run for real: torchrun with 2 gloo ranks on CPU.

One uninterrupted run is the reference. Every other run is stopped in some way (a worker killed with
SIGKILL, USR1 then SIGTERM, a resume at an epoch boundary) and resumed from its newest valid
checkpoint; its final parameters and optimizer state must be bitwise equal to the reference's, and
its events must show each step run exactly once after the resume point. With 640 samples, 2 ranks
and 16 per batch an epoch is 20 steps, so step_20 and step_40 close an epoch and step_30 is in the
middle of one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TRAINER = os.path.join(REPO, "roles", "torchrun_launcher", "files", "reference_trainer.py")
TOTAL = 60
STEPS_PER_EPOCH = 20  # 640 samples / 2 ranks / 16 per batch
COMMON = ["--total-steps", str(TOTAL), "--checkpoint-every", "10", "--dataset-size", "640", "--batch-size", "16",
          "--seed", "1234", "--backend", "gloo"]
WAIT = 120  # seconds; generous, the machine may be busy


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def _env():
    env = dict(os.environ)
    for name in ("CLUSTEROPS_CHECKPOINT_TOOL", "WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)  # the trainer finds plugins/module_utils/_checkpoint/ by itself
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def _torchrun(run_dir, events, *extra):
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc_per_node", "2",
            TRAINER, "--checkpoint-dir", str(run_dir), "--events", str(events)] + COMMON + list(extra)


def _single(run_dir, events, *extra):
    """One process, WORLD_SIZE unset: no process group."""
    return [sys.executable, TRAINER, "--checkpoint-dir", str(run_dir), "--events", str(events)] + COMMON + list(extra)


def _ignore_usr1():
    # What the launcher's `trap '' USR1; exec python -m torch.distributed.run ...` does.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


def _start(cmd, log, ignore_usr1=False):
    handle = open(str(log), "w")
    try:
        return subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=_env(), start_new_session=True,
                                preexec_fn=_ignore_usr1 if ignore_usr1 else None)
    finally:
        handle.close()


def _finish(proc, log, timeout=WAIT):
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError("timed out:\n%s" % _read(log))
    return rc, _read(log)


def _run(cmd, log, timeout=WAIT):
    return _finish(_start(cmd, log), log, timeout)


def _read(path):
    with open(str(path)) as handle:
        return handle.read()


def _events(path):
    if not os.path.exists(str(path)):
        return []
    with open(str(path)) as handle:
        return [json.loads(line) for line in handle if line.endswith("\n")]


def _wait_for(what, predicate, proc, log, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError("the run ended (rc %s) before %s:\n%s" % (proc.returncode, what, _read(log)))
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError("timed out waiting for %s:\n%s" % (what, _read(log)))


def _steps(events):
    return [e["step"] for e in events if e["event"] == "step"]


def _processes(marker):
    """``(pid, parent pid)`` of the processes whose command line names the trainer and ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except (OSError, IndexError, ValueError):
            continue
        if marker in cmdline and TRAINER in cmdline and int(entry) != os.getpid():
            found.append((int(entry), ppid))
    return sorted(found)


def _children(pid, marker):
    """Worker processes of the torchrun agent ``pid`` whose command line contains ``marker``."""
    return [p for p, ppid in _processes(marker) if ppid == pid]


@pytest.fixture(autouse=True)
def _no_leftover_workers(tmp_path):
    """Kill what a failed or interrupted test left: torchrun starts each worker in a session of its
    own, so killing the agent's process group does not end them, and an orphaned worker waits for
    its dead peer until gloo's timeout (30 minutes)."""
    yield
    for pid, _ppid in _processes(str(tmp_path)):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _signal_all(proc, workers, signum):
    """What Slurm does with proctrack/cgroup: signal the agent and every worker.

    torchrun starts each worker in a session of its own, so a signal to the agent's process group
    does not reach them.
    """
    os.killpg(proc.pid, signum)
    for pid in workers:
        os.kill(pid, signum)


def _assert_same_state(run_dir, reference_dir, step=TOTAL):
    name = ck.checkpoint_name(step)
    for rel in ("model.pt", "optim.pt"):
        got = torch.load(os.path.join(str(run_dir), name, rel), weights_only=True)
        want = torch.load(os.path.join(str(reference_dir), name, rel), weights_only=True)
        _assert_equal(got, want, rel)


def _assert_equal(got, want, where):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype and torch.equal(got, want), \
            "%s differs from the uninterrupted run" % where
    elif isinstance(want, dict):
        assert sorted(got, key=str) == sorted(want, key=str), where
        for key in want:
            _assert_equal(got[key], want[key], "%s[%r]" % (where, key))
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (a, b) in enumerate(zip(got, want)):
            _assert_equal(a, b, "%s[%d]" % (where, i))
    else:
        assert got == want, "%s: %r != %r" % (where, got, want)


def _assert_resumed_exactly(events, resume_step, total=TOTAL):
    """The resumed job starts at ``resume_step`` and runs each later step exactly once."""
    starts = [e for e in events if e["event"] == "start"]
    assert len(starts) == 1 and starts[0]["step"] == resume_step, starts
    assert _steps(events) == list(range(resume_step + 1, total + 1))
    assert [e["step"] for e in events if e["event"] == "finished"] == [total]


# ---------------------------------------------------------------------------------------------
# The reference: one uninterrupted run
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    base = tmp_path_factory.mktemp("reference")
    run_dir, events = base / "run", base / "events.jsonl"
    try:
        rc, out = _run(_torchrun(run_dir, events), base / "log")
        assert rc == 0, out
        yield run_dir, _events(events), out
    finally:
        for pid, _ppid in _processes(str(base)):
            os.kill(pid, signal.SIGKILL)


def test_uninterrupted_run_finishes_with_valid_checkpoints(reference):
    run_dir, events, out = reference
    latest = ck.latest_valid(str(run_dir), validate=ck.SHA256)
    assert latest is not None and latest.step == TOTAL and latest.layout == ck.CONTRACT
    checkpoints = ck.scan(str(run_dir), validate=ck.SHA256)
    assert [c.step for c in checkpoints] == [10, 20, 30, 40, 50, 60]
    assert all(c.valid for c in checkpoints), [(c.name, c.why_invalid) for c in checkpoints]
    assert not [n for n in os.listdir(str(run_dir)) if ck.is_temporary(n)]
    with open(os.path.join(str(run_dir), ck.FINISHED)) as handle:
        finished = json.load(handle)
    assert finished["checkpoint"] == ck.checkpoint_name(TOTAL) and finished["step"] == TOTAL
    # Every rank's RNG state, rank 0's model and optimizer; the data position in the manifest.
    with open(os.path.join(latest.path, ck.MANIFEST)) as handle:
        manifest = json.load(handle)
    assert sorted(f["path"] for f in manifest["files"]) == ["model.pt", "optim.pt", "rng/rank0.pt", "rng/rank1.pt"]
    assert manifest["epoch"] == 2
    extra = manifest["extra"]
    assert (extra["batch"], extra["steps_per_epoch"], extra["world_size"], extra["seed"]) == (20, 20, 2, 1234)
    assert _steps(events) == list(range(1, TOTAL + 1))
    assert [(e["step"], e["why"]) for e in events if e["event"] == "save"] == \
        [(10, "interval"), (20, "interval"), (30, "interval"), (40, "interval"), (50, "interval"), (60, "final")]
    assert [e["epoch"] for e in events if e["event"] == "step"] == [s // STEPS_PER_EPOCH for s in range(TOTAL)]
    assert events[0]["event"] == "start" and events[0]["world_size"] == 2 and events[0]["resumed_from"] is None
    assert events[-1]["event"] == "finished" and events[-1]["step"] == TOTAL
    assert "finished at step %d" % TOTAL in out


# ---------------------------------------------------------------------------------------------
# Stopped and resumed runs
# ---------------------------------------------------------------------------------------------

def test_sigkill_of_one_worker_then_resume_matches_bitwise(reference, tmp_path):
    ref_dir = reference[0]
    run_dir = tmp_path / "run"
    proc = _start(_torchrun(run_dir, tmp_path / "ev1.jsonl", "--step-time", "0.1"), tmp_path / "log1")
    workers = _wait_for("2 workers", lambda: len(_children(proc.pid, str(tmp_path))) == 2 and
                        _children(proc.pid, str(tmp_path)), proc, tmp_path / "log1")
    # step_30 is in the middle of epoch 1 (batch 10 of 20): the resume must skip 10 batches.
    _wait_for("step_30", lambda: os.path.isdir(os.path.join(str(run_dir), ck.checkpoint_name(30))), proc,
              tmp_path / "log1")
    os.kill(workers[-1], signal.SIGKILL)  # a node lost: no handler runs, nothing is saved
    rc, out = _finish(proc, tmp_path / "log1")
    assert rc != 0, out
    assert not os.path.exists(os.path.join(str(run_dir), ck.FINISHED))
    latest = ck.latest_valid(str(run_dir))
    assert latest is not None and 30 <= latest.step < TOTAL, out

    rc, out = _run(_torchrun(run_dir, tmp_path / "ev2.jsonl", "--resume", latest.path), tmp_path / "log2")
    assert rc == 0, out
    events = _events(tmp_path / "ev2.jsonl")
    _assert_resumed_exactly(events, latest.step)
    assert events[0]["resumed_from"] == latest.path
    if latest.step == 30:
        assert (events[0]["epoch"], events[0]["batch"]) == (1, 10)
    _assert_same_state(run_dir, ref_dir)
    assert ck.latest_valid(str(run_dir), validate=ck.SHA256).step == TOTAL


def test_usr1_saves_at_the_step_reached_waits_then_sigterm_and_resume_matches(reference, tmp_path):
    ref_dir = reference[0]
    run_dir, ev1 = tmp_path / "run", tmp_path / "ev1.jsonl"
    # No interval saves: the only checkpoint before the end is USR1's. The agent ignores USR1 as the
    # launcher makes it; the workers inherit SIG_IGN and must install their handler anyway.
    proc = _start(_torchrun(run_dir, ev1, "--step-time", "0.1", "--checkpoint-every", "1000", "--after-usr1", "wait"),
                  tmp_path / "log1", ignore_usr1=True)
    workers = _wait_for("2 workers", lambda: len(_children(proc.pid, str(tmp_path))) == 2 and
                        _children(proc.pid, str(tmp_path)), proc, tmp_path / "log1")
    _wait_for("step 12", lambda: any(s >= 12 for s in _steps(_events(ev1))), proc, tmp_path / "log1")
    _signal_all(proc, workers, signal.SIGUSR1)
    saves = _wait_for("the USR1 save", lambda: [e for e in _events(ev1) if e["event"] == "save"], proc,
                      tmp_path / "log1")
    assert [s["why"] for s in saves] == ["usr1"]
    saved = saves[0]["step"]
    time.sleep(1.0)  # 10 step times: training must have stopped
    events = _events(ev1)
    assert max(_steps(events)) == saved, "steps after the USR1 checkpoint: 0 steps lost only if none ran"
    assert proc.poll() is None, "--after-usr1 wait keeps the job alive until SIGTERM"
    assert [c.step for c in ck.scan(str(run_dir))] == [saved]
    assert ck.latest_valid(str(run_dir), validate=ck.SHA256).step == saved

    _signal_all(proc, workers, signal.SIGTERM)  # the time limit
    _finish(proc, tmp_path / "log1", timeout=60)
    events = _events(ev1)
    assert [e["step"] for e in events if e["event"] == "save"] == [saved]  # nothing saved twice
    assert [e["name"] for e in events if e["event"] == "signal"] == ["USR1", "TERM"]
    assert not os.path.exists(os.path.join(str(run_dir), ck.FINISHED))

    resume = os.path.join(str(run_dir), ck.checkpoint_name(saved))
    rc, out = _run(_torchrun(run_dir, tmp_path / "ev2.jsonl", "--resume", resume), tmp_path / "log2")
    assert rc == 0, out
    _assert_resumed_exactly(_events(tmp_path / "ev2.jsonl"), saved)
    _assert_same_state(run_dir, ref_dir)


def test_resume_at_an_epoch_boundary_starts_the_next_epoch(reference, tmp_path):
    ref_dir = reference[0]
    boundary = os.path.join(str(ref_dir), ck.checkpoint_name(STEPS_PER_EPOCH))
    with open(os.path.join(boundary, ck.MANIFEST)) as handle:
        manifest = json.load(handle)
    assert manifest["epoch"] == 0 and manifest["extra"]["batch"] == STEPS_PER_EPOCH  # epoch 0 done
    run_dir = tmp_path / "run"
    rc, out = _run(_torchrun(run_dir, tmp_path / "ev.jsonl", "--resume", boundary), tmp_path / "log")
    assert rc == 0, out
    events = _events(tmp_path / "ev.jsonl")
    _assert_resumed_exactly(events, STEPS_PER_EPOCH)
    assert (events[0]["epoch"], events[0]["batch"]) == (1, 0)
    steps = [e for e in events if e["event"] == "step"]
    assert (steps[0]["step"], steps[0]["epoch"]) == (STEPS_PER_EPOCH + 1, 1)
    assert [e["epoch"] for e in steps] == [s // STEPS_PER_EPOCH for s in range(STEPS_PER_EPOCH, TOTAL)]
    _assert_same_state(run_dir, ref_dir)


def test_resume_with_another_seed_or_world_size_is_refused(reference, tmp_path):
    # One process (no torchrun: cheaper) resuming a 2-rank checkpoint with another seed: both refused,
    # both named, before anything is trained or written. Under torchrun every rank refuses the same way.
    ckpt = os.path.join(str(reference[0]), ck.checkpoint_name(30))
    run_dir = tmp_path / "run"
    rc, out = _run(_single(run_dir, tmp_path / "ev.jsonl", "--resume", ckpt, "--seed", "99"), tmp_path / "log")
    assert rc == 2, out
    assert "error: refusing to resume from %s: it was made with world_size 2 (this run: 1), seed 1234 (this run: 99)" \
        % ckpt in out, out
    assert not _events(tmp_path / "ev.jsonl") and os.listdir(str(run_dir)) == []


def test_a_finished_run_is_not_started_again(reference, tmp_path):
    rc, out = _run(_single(reference[0], tmp_path / "ev.jsonl"), tmp_path / "log")
    assert rc == 0 and "already has FINISHED: nothing to do" in out, out
    assert _events(tmp_path / "ev.jsonl") == []


# ---------------------------------------------------------------------------------------------
# One process without torchrun (WORLD_SIZE unset): exit codes
# ---------------------------------------------------------------------------------------------

def test_single_process_sigterm_exits_143_after_saving_the_step_reached(tmp_path):
    run_dir, ev = tmp_path / "run", tmp_path / "ev.jsonl"
    proc = _start(_single(run_dir, ev, "--step-time", "0.05", "--checkpoint-every", "1000"), tmp_path / "log")
    _wait_for("step 5", lambda: any(s >= 5 for s in _steps(_events(ev))), proc, tmp_path / "log")
    proc.send_signal(signal.SIGTERM)
    rc, out = _finish(proc, tmp_path / "log")
    assert rc == 128 + signal.SIGTERM, out
    events = _events(ev)
    saves = [e for e in events if e["event"] == "save"]
    assert [s["why"] for s in saves] == ["sigterm"] and saves[0]["step"] == max(_steps(events))
    assert ck.latest_valid(str(run_dir), validate=ck.SHA256).step == saves[0]["step"]
    assert events[0]["world_size"] == 1 and not os.path.exists(os.path.join(str(run_dir), ck.FINISHED))


def test_single_process_usr1_exit_leaves_no_finished_even_when_usr1_was_ignored(tmp_path):
    run_dir, ev = tmp_path / "run", tmp_path / "ev.jsonl"
    proc = _start(_single(run_dir, ev, "--step-time", "0.05", "--checkpoint-every", "1000", "--after-usr1", "exit"),
                  tmp_path / "log", ignore_usr1=True)
    _wait_for("step 3", lambda: any(s >= 3 for s in _steps(_events(ev))), proc, tmp_path / "log")
    proc.send_signal(signal.SIGUSR1)
    rc, out = _finish(proc, tmp_path / "log")
    assert rc == 0, out
    events = _events(ev)
    assert [e["why"] for e in events if e["event"] == "save"] == ["usr1"]
    assert not os.path.exists(os.path.join(str(run_dir), ck.FINISHED))
    assert ck.latest_valid(str(run_dir)).step == max(_steps(events))


def test_resume_from_an_older_checkpoint_moves_the_newer_broken_one_aside(tmp_path):
    # The newest checkpoint is broken (a truncated model.pt), so the launcher resumes from the one
    # before; when the trainer reaches that step again it moves the broken folder to a tmp-* name
    # (never a candidate) and commits its own, equal to what the first run computed.
    run_dir = tmp_path / "run"
    args = ["--total-steps", "30", "--checkpoint-every", "10"]
    rc, out = _run(_single(run_dir, tmp_path / "ev1.jsonl", *args), tmp_path / "log1")
    assert rc == 0, out
    os.unlink(os.path.join(str(run_dir), ck.FINISHED))
    broken = os.path.join(str(run_dir), ck.checkpoint_name(30))
    with open(os.path.join(broken, "optim.pt"), "rb") as handle:
        optim_before = handle.read()
    with open(os.path.join(broken, "model.pt"), "r+b") as handle:
        handle.truncate(100)
    latest = ck.latest_valid(str(run_dir))
    assert latest.step == 20

    rc, out = _run(_single(run_dir, tmp_path / "ev2.jsonl", "--resume", latest.path, *args), tmp_path / "log2")
    assert rc == 0, out
    aside = [n for n in os.listdir(str(run_dir)) if n.startswith("tmp-superseded-%s." % ck.checkpoint_name(30))]
    assert len(aside) == 1 and "moved the existing %s aside" % ck.checkpoint_name(30) in out
    assert ck.latest_valid(str(run_dir), validate=ck.SHA256).step == 30
    with open(os.path.join(broken, "optim.pt"), "rb") as handle:
        assert handle.read() == optim_before  # the same optimizer state, bit for bit
    _assert_resumed_exactly(_events(tmp_path / "ev2.jsonl"), 20, total=30)


# ---------------------------------------------------------------------------------------------
# A checkpoint torch.load(weights_only=True) refuses: a clean refusal, never a traceback
# ---------------------------------------------------------------------------------------------

def test_resume_from_a_checkpoint_weights_only_refuses_exits_2_with_the_reason(tmp_path, torch_save_numpy_rng):
    run_dir = tmp_path / "run"
    spe = 640 // 16  # one process

    def files(staging):
        torch.save({}, os.path.join(staging, "model.pt"))
        torch.save({"optimizer": {}, "scheduler": {}}, os.path.join(staging, "optim.pt"))
        os.makedirs(os.path.join(staging, "rng"))
        torch_save_numpy_rng(os.path.join(staging, "rng", "rank0.pt"))

    extra = dict(world_size=1, seed=1234, batch_size=16, dataset_size=640, steps_per_epoch=spe, batch=10, step=10)
    ckpt = ck.write_checkpoint(str(run_dir), 10, 0, files, extra=extra, fsync=False)
    assert ck.verify(ckpt, ck.SHA256).valid and not ck.verify(ckpt, ck.LOAD).valid
    rc, out = _run(_single(run_dir, tmp_path / "ev.jsonl", "--resume", ckpt), tmp_path / "log")
    assert rc == 2, out
    assert ("reference_trainer: error: cannot resume from %s: rng/rank0.pt does not load with "
            "torch.load(weights_only=True): UnpicklingError: Unsupported global: GLOBAL "
            "numpy._core.multiarray._reconstruct was not an allowed global by default" % ckpt) in out, out
    assert "Traceback" not in out, out
    assert sorted(os.listdir(str(run_dir))) == [os.path.basename(ckpt)]

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The real-library checkpoint suite (issue 39, `make trainers`, its own venv .venv-trainers from
tests/trainers/requirements.txt): each library trains a tiny model built from a config on the CPU (one
thread), saves, has a save killed at each file of its own save order (:func:`kill_at`: the library's file
writes raise at the N-th file, deterministically), or a whole save damaged (a file missing, a file cut); the
collection is asked for the newest valid checkpoint (:func:`ask`: ``best_copy``, what remediation asks) and
the library resumes from the answer. The answer is right when the library resumes from it faithfully: the same
step, optimizer state and schedule as when that checkpoint was saved (:func:`same_state`).

The collection's checkpoint package is imported as the top-level ``_checkpoint`` (it is self-contained, as on
cluster hosts): this venv has no Ansible.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import io
import os
import shutil
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("DS_ACCELERATOR", "cpu")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# TRAINERS_CHECKPOINT_LIB: another copy's plugins/module_utils (an older commit's, to see this suite go red)
sys.path.insert(0, os.environ.get("TRAINERS_CHECKPOINT_LIB") or os.path.join(REPO, "plugins", "module_utils"))

import _checkpoint as ck  # noqa: E402  pylint: disable=wrong-import-position,import-error

#: The level remediation validates at unless a run says otherwise (registry default ``checkpoint_validate``).
LEVEL = "sizes"


class Killed(Exception):
    """The save was killed here (a node lost, the job killed) before this file was written."""


#: The gate of the :func:`kill_at` in force (None: none): called with each path a library writes.
_GATE = [None]


def _gated(real):
    """``real`` (a function whose second argument is the path it writes) asking the gate first. Installed once,
    before the libraries import it: a module that binds the name while a :func:`kill_at` is in force
    (``from safetensors.torch import save_file``) keeps a wrapper that still asks the gate of the moment."""
    def write(obj, f, *args, **kwargs):
        if _GATE[0] is not None and isinstance(f, (str, os.PathLike)):
            _GATE[0](f)
        outer, _GATE[0] = _GATE[0], None   # what it writes through Python's open is this one file
        try:
            return real(obj, f, *args, **kwargs)
        finally:
            _GATE[0] = outer
    write.__wrapped__ = real
    return write


torch.save = torch.serialization.save = _gated(torch.serialization.save)
try:
    import safetensors.torch  # noqa: E402  pylint: disable=wrong-import-position
    safetensors.torch.save_file = _gated(safetensors.torch.save_file)
except ImportError:  # pragma: no cover
    pass


@contextlib.contextmanager
def kill_at(root, n, order=None):
    """Inside: the ``n``-th file written under ``root`` (0-based, in the library's own order of writes) raises
    :class:`Killed` before any byte of it is written, and so does every file after it in that process; the
    files before it are whole. ``n`` None kills nothing. ``order``: a list that gets each file's path
    relative to ``root`` as it is written (the save order).

    The writes caught are the ways these libraries write files: ``torch.save`` (its C++ writer opens the path
    itself), safetensors' ``save_file`` (Rust), Python's ``open`` in a writing mode (JSON, DCP's streams) and a
    rename into ``root`` (fsspec's transactions, which Lightning saves through, DCP's ``.metadata.tmp``)."""
    root = os.path.realpath(str(root))
    count = [0]

    def gate(path):
        full = os.path.realpath(os.fspath(path))
        if not full.startswith(root + os.sep):
            return
        if n is not None and count[0] >= n:
            raise Killed(os.path.relpath(full, root))
        count[0] += 1
        if order is not None:
            order.append(os.path.relpath(full, root))

    def opener(real):
        def _open(file, mode="r", *args, **kwargs):
            if _GATE[0] is not None and isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+"):
                _GATE[0](file)
            return real(file, mode, *args, **kwargs)
        return _open

    def renamer(real):
        def _rename(src, dst, *args, **kwargs):
            if _GATE[0] is not None:
                _GATE[0](dst)
            return real(src, dst, *args, **kwargs)
        return _rename

    patches = [(builtins, "open", opener(builtins.open)), (io, "open", opener(io.open)),
               (os, "rename", renamer(os.rename)), (os, "replace", renamer(os.replace))]
    saved = [(module, attr, getattr(module, attr)) for module, attr, _new in patches]
    outer, _GATE[0] = _GATE[0], gate
    try:
        for module, attr, new in patches:
            setattr(module, attr, new)
        yield count
    finally:
        _GATE[0] = outer
        for module, attr, old in reversed(saved):
            setattr(module, attr, old)


def ask(run_dir):
    """The collection's answer: the path of the newest valid checkpoint of ``run_dir`` (``best_copy``, what
    remediation's checkpoint_status asks, at its default level), or None; and the report."""
    choice = ck.best_copy(str(run_dir), (), LEVEL)
    return (choice.checkpoint.path if choice.checkpoint is not None else None), choice.report


def cut(path, keep=0.5):
    """A file cut as a crash leaves it: its first ``keep`` part only (at least one byte less)."""
    size = os.path.getsize(path)
    with open(path, "r+b") as handle:
        handle.truncate(min(int(size * keep), size - 1))


def damages(folder):
    """``(kind, relative path)`` of every damage applied to a whole save: each file missing, each file cut."""
    found = []
    for dirpath, _dirnames, filenames in os.walk(str(folder)):
        for name in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, name), str(folder))
            if os.path.getsize(os.path.join(dirpath, name)) > 1:
                found.append(("cut", rel))
            found.append(("missing", rel))
    return sorted(found)


def damage(folder, kind, rel):
    path = os.path.join(str(folder), rel)
    if kind == "missing":
        os.remove(path)
    else:
        cut(path)


def same_state(got, want):
    """Why two snapshots ``{"step", "optimizer", "scheduler", ...}`` differ (tensors compared exactly), or ''."""
    def diff(a, b, where):
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape \
                    or not torch.equal(a, b):
                return "%s differs" % where
            return ""
        if isinstance(a, dict) and isinstance(b, dict):
            if set(a) != set(b):
                return "%s keys %s != %s" % (where, sorted(map(str, a)), sorted(map(str, b)))
            for key in a:
                found = diff(a[key], b[key], "%s.%s" % (where, key))
                if found:
                    return found
            return ""
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            if len(a) != len(b):
                return "%s length %d != %d" % (where, len(a), len(b))
            for i, (x, y) in enumerate(zip(a, b)):
                found = diff(x, y, "%s[%d]" % (where, i))
                if found:
                    return found
            return ""
        return "" if a == b else "%s %r != %r" % (where, a, b)
    return diff(got, want, "state")


def tiny_gpt2():
    """A GPT-2 of one layer built from its config (no weights from a hub)."""
    import transformers  # pylint: disable=import-outside-toplevel
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=1, n_head=2, n_embd=8, vocab_size=32, n_positions=16))


def adamw_and_schedule(model):
    """The optimizer and schedule of the hand-written loops: AdamW and a LambdaLR of 1/(1+s)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1 + s))


def snapshot_of(step, model, optimizer, schedule):
    """What a resume must give back: step, weights, optimizer state and schedule (copies)."""
    return copy.deepcopy({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                          "scheduler": schedule.state_dict()})


def fresh_copy(src, dst):
    """``dst`` a copy of the run folder ``src`` (each case starts from the same saves)."""
    if os.path.exists(str(dst)):
        shutil.rmtree(str(dst))
    shutil.copytree(str(src), str(dst), symlinks=True)
    return dst


def judge(cases, resume, snapshots):
    """Every case's answer judged by the library itself: ``cases`` ``[(label, run_dir)]``; ``resume(path)`` the
    library's own resume from a checkpoint, giving its snapshot (or raising: the library refused it);
    ``snapshots`` ``{checkpoint name: snapshot when it was saved}``. Returns the wrong answers, one line each:
    none chosen, the library refused the chosen one, or resumed from it with another state."""
    wrong = []
    for label, run_dir in cases:
        answer, report = ask(run_dir)
        if answer is None:
            wrong.append("%s: no checkpoint chosen (%s)" % (label, "; ".join(report.warnings) if report else ""))
            continue
        name = os.path.basename(answer)
        try:
            got = resume(answer)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # pylint: disable=broad-except  # the library refused it (DCP's are BaseException)
            wrong.append("%s: chose %s, the library's resume fails: %s: %s" % (
                label, name, type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else ""))
            continue
        why = same_state(got, snapshots[name])
        if why:
            wrong.append("%s: chose %s, the library resumed with another state: %s" % (label, name, why))
    return wrong


def assert_right(cases, resume, snapshots):
    """:func:`judge`'s wrong answers, none expected; each on its own line when some are."""
    wrong = judge(cases, resume, snapshots)
    assert not wrong, "%d of %d answers wrong:\n%s" % (len(wrong), len(cases), "\n".join(wrong))
    return len(cases)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield

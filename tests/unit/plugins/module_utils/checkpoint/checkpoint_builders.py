# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Builders for the _checkpoint tests: real files in a run folder (torch.save-like zips built with
zipfile the way torch.save lays them out, ``<name>/data.pkl``, ``<name>/data/0``, ..., stored, with data
descriptors; safetensors; torch.distributed.checkpoint metadata stand-ins; every layout's folders)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import struct
import zipfile

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck


LIBRARY = os.path.dirname(os.path.abspath(ck.__file__))  # the package folder
#: The package's entry point, which roles/checkpoint_tool installs beside the package's modules.
TOOL_MAIN = os.path.join(LIBRARY, "..", "..", "..", "roles", "checkpoint_tool", "files", "__main__.py")


def install_tool(dest):
    """The checkpoint command at ``dest`` as roles/checkpoint_tool installs it: the package's
    modules (no __pycache__) and the role's ``__main__.py``. Returns ``dest``."""
    import shutil
    shutil.copytree(LIBRARY, dest, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(TOOL_MAIN, os.path.join(dest, "__main__.py"))
    return dest


# ---------------------------------------------------------------------------------------------
# Builders: real files in a run folder
# ---------------------------------------------------------------------------------------------

class _Unseekable(io.RawIOBase):
    """A stream zipfile cannot seek in, so it writes data descriptors, as torch.save does."""

    def __init__(self):
        super(_Unseekable, self).__init__()
        self.buf = io.BytesIO()

    def writable(self):
        return True

    def write(self, data):
        return self.buf.write(data)

    def seekable(self):
        return False

    def seek(self, *args):
        raise io.UnsupportedOperation("not seekable")

    def tell(self):
        raise io.UnsupportedOperation("no tell")


def torch_zip(stem="archive", payload_size=4000, descriptors=True, data=None, raw_pkl=None):
    """Bytes of a zip laid out like torch.save's: stored entries under one top folder; ``data``: what its
    data.pkl holds (``raw_pkl``: its bytes, a recorded one)."""
    target = _Unseekable() if descriptors else io.BytesIO()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(stem + "/data.pkl", raw_pkl if raw_pkl is not None else pickle.dumps(
            {"w": "storage 0", "step": 1} if data is None else data, protocol=2))
        archive.writestr(stem + "/.format_version", b"1")
        archive.writestr(stem + "/byteorder", b"little")
        archive.writestr(stem + "/data/0", bytes(bytearray(i % 251 for i in range(payload_size))))
        archive.writestr(stem + "/version", b"3\n")
    return target.buf.getvalue() if descriptors else target.getvalue()


def safetensors(n_floats=64, truncate=0):
    header = json.dumps({"w": {"dtype": "F32", "shape": [n_floats], "data_offsets": [0, 4 * n_floats]},
                         "__metadata__": {"format": "pt"}}).encode("utf-8")
    data = struct.pack("<Q", len(header)) + header + b"\x01" * (4 * n_floats)
    return data[:len(data) - truncate] if truncate else data


# Stand-ins for torch.distributed.checkpoint's metadata classes: the reader never imports the
# classes a pickle names, it only keeps their state, so these pickle the same shape.
class Metadata(object):
    def __init__(self, storage_data):
        self.state_dict_metadata = {}
        self.storage_data = storage_data


class _StorageInfo(object):
    def __init__(self, relative_path, offset, length):
        self.relative_path = relative_path
        self.offset = offset
        self.length = length


class MetadataIndex(object):
    def __init__(self, fqn):
        self.fqn = fqn


def write(path, data):
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent)
    with open(path, "wb") as handle:
        handle.write(data)


def contract(root, step, epoch=0, files=None):
    return ck.write_checkpoint(str(root), step, epoch, files or {"model.pt": torch_zip(), "optim.pt": torch_zip()})


def dcp_folder(root, name, sizes=(3000, 0), truncate=0, metadata=True):
    folder = os.path.join(str(root), name)
    storage = {}
    for rank, size in enumerate(sizes):
        rel = "__%d_0.distcp" % rank
        write(os.path.join(folder, rel), b"\x07" * max(size - (truncate if rank == 0 else 0), 0))
        if size:
            storage[MetadataIndex("w%d" % rank)] = _StorageInfo(rel, 0, size)
    if metadata:
        write(os.path.join(folder, ".metadata"), pickle.dumps(Metadata(storage), protocol=4))
    return folder


def hf_folder(root, step, epoch=1.5, state=True, zero=False, shards=None):
    """A Trainer checkpoint-<S> as transformers 5.25.0's _save_checkpoint writes it (the files of
    tests/unit/fixtures/checkpoints/transformers-5.25.0/): weights, training_args.bin, optimizer.pt,
    scheduler.pt, rng_state.pth, trainer_state.json last."""
    folder = os.path.join(str(root), "checkpoint-%d" % step)
    if zero:
        for name in ("model.safetensors", "optimizer.pt", "trainer_state.json"):
            write(os.path.join(folder, name), b"")
        return folder
    if shards is None:
        write(os.path.join(folder, "model.safetensors"), safetensors())
    else:
        weight_map = dict(("w%d" % i, name) for i, name in enumerate(shards))
        write(os.path.join(folder, "model.safetensors.index.json"), json.dumps({"weight_map": weight_map}).encode())
        for name in shards[:-1]:
            write(os.path.join(folder, name), safetensors())
    for name in ("training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth"):
        write(os.path.join(folder, name), torch_zip(name.split(".", maxsplit=1)[0]))
    if state:
        write(os.path.join(folder, "trainer_state.json"), json.dumps({"global_step": step, "epoch": epoch}).encode())
    return folder


def deepspeed_folder(root, step, dp=2, drop_rank=None, zero=False):
    folder = os.path.join(str(root), "global_step%d" % step)
    # the keys deepspeed 0.19.8's _common_checkpoint_state writes that say the grid (ZeRO: optimizer None)
    states = {"dp_world_size": dp, "mp_world_size": 1, "optimizer": None, "param_shapes": [{"w": [4, 8]}]}
    write(os.path.join(folder, "mp_rank_00_model_states.pt"), b"" if zero else torch_zip("model", data=states))
    for rank in range(dp):
        if rank != drop_rank:
            write(os.path.join(folder, "zero_pp_rank_%d_mp_rank_00_optim_states.pt" % rank),
                  b"" if zero else torch_zip("optim"))
    return folder


def megatron_folder(root, step, tp=2, pp=1, drop=None, zero=False):
    folder = os.path.join(str(root), "iter_%07d" % step)
    for t in range(tp):
        for p in range(pp):
            if (t, p) == drop:
                continue
            sub = "mp_rank_%02d" % t if pp == 1 else "mp_rank_%02d_%03d" % (t, p)
            write(os.path.join(folder, sub, "model_optim_rng.pt"), b"" if zero else torch_zip("model"))
    return folder


def torch_file(root, epoch, step, data=None, ext="pth"):
    path = os.path.join(str(root), "checkpoint_epoch_%d_step_%d.%s" % (epoch, step, ext))
    write(path, torch_zip("checkpoint_epoch_%d_step_%d" % (epoch, step)) if data is None else data)
    return path


def truncate(path, count):
    with open(path, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data[:len(data) - count])


def flip_byte(path, offset):
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes(bytearray([byte[0] ^ 0xFF])))


def touch_newest(path):
    """Give an entry the newest mtime of the folder: it must not matter."""
    os.utime(path, (4000000000, 4000000000))


def lightning_ckpt(root, name, global_step, epoch=0, extra=None):
    """A real Lightning-shaped torch.save file: the keys Trainer.save_checkpoint writes."""
    torch = pytest.importorskip("torch")
    from collections import OrderedDict
    state = {"epoch": epoch, "global_step": global_step, "pytorch-lightning_version": "2.5.1",
             "state_dict": OrderedDict(w=torch.full((4,), float(global_step))), "loops": {}, "callbacks": {},
             "optimizer_states": [{"state": {}, "param_groups": []}], "lr_schedulers": [], "hparams_name": "kwargs"}
    if extra:
        state.update(extra)
    path = os.path.join(str(root), name)
    torch.save(state, path)
    return path


def plain_torch_file(root, name):
    torch = pytest.importorskip("torch")
    path = os.path.join(str(root), name)
    torch.save({"w": torch.zeros(2)}, path)
    return path


def _steps(root, *names_steps):
    for name, step in names_steps:
        lightning_ckpt(root, name, step, epoch=step // 100)


SYSTEM_PYTHON = "/usr/bin/python3"


def tree_digest(top):
    """sha256 over every path, symlink target and file content under ``top`` (not following links):
    equal before and after means nothing under ``top`` was changed, added or removed."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(str(top))):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            digest.update(os.path.relpath(path, str(top)).encode())
            if os.path.islink(path):
                digest.update(b"->" + os.readlink(path).encode())
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    digest.update(handle.read())
    return digest.hexdigest()


def names(root):
    """The entries of a run folder, sorted, less the prune's lock file."""
    return sorted(n for n in os.listdir(str(root)) if n != ck.PRUNE_LOCK)


def rebuild_recorded(fixture, dest):
    """A run folder rebuilt at ``dest`` from a recording of tests/trainers/record_fixtures.py (``fixture``: its
    folder): every file the library wrote, by its recorded name; the small ones as recorded, each torch.save zip
    with its recorded data.pkl, safetensors and DCP data files of their recorded sizes. Returns ``dest``."""
    with open(os.path.join(str(fixture), "files.json")) as handle:
        listing = json.load(handle)["files"]
    for item in listing:
        path = os.path.join(str(dest), *item["path"].split("/"))
        recorded = os.path.join(str(fixture), "files", *item["path"].split("/"))
        if item["kind"] == "copy":
            with open(recorded, "rb") as handle:
                data = handle.read()
        elif item["kind"] == "zip":
            with open(recorded + ".data.pkl", "rb") as handle:
                stem = os.path.splitext(os.path.basename(path))[0]
                data = torch_zip(stem, payload_size=max(item["size"] - 2000, 64), raw_pkl=handle.read())
        elif item["kind"] == "safetensors":
            data = safetensors(n_floats=max((item["size"] - 200) // 4, 1))
        else:
            data = b"\x11" * item["size"]
        write(path, data)
    return dest

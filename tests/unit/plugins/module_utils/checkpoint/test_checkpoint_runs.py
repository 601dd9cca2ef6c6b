# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_checkpoint.runs (and the layouts' checks under it): run folders built for real in tmp_path, one
table row per situation; pointers; every common naming as a kind; properties of the choice."""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import zipfile

import pytest

from hypothesis import given, settings, HealthCheck, strategies as st

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck

from checkpoint_builders import (  # noqa: E402 pylint: disable=import-error
    LIBRARY,
    install_tool,
    Metadata,
    MetadataIndex,
    _StorageInfo,
    _steps,
    contract,
    dcp_folder,
    deepspeed_folder,
    flip_byte,
    hf_folder,
    lightning_ckpt,
    megatron_folder,
    plain_torch_file,
    safetensors,
    torch_file,
    torch_zip,
    touch_newest,
    truncate,
    write,
)


# ---------------------------------------------------------------------------------------------
# Choosing the newest valid checkpoint: one row per situation
# ---------------------------------------------------------------------------------------------

def _steps_9000_10000(root):
    # Unpadded names: "step_9000" > "step_10000" as strings.
    for step in (9000, 10000):
        os.rename(contract(root, step), os.path.join(str(root), "step_%d" % step))


def _epoch_before_step(root):
    torch_file(root, 2, 100)
    torch_file(root, 10, 5)
    touch_newest(os.path.join(str(root), "checkpoint_epoch_2_step_100.pth"))


def _tmp_file_newest(root):
    torch_file(root, 1, 10)
    write(os.path.join(str(root), "ckpt.pt.tmp"), torch_zip())
    write(os.path.join(str(root), "checkpoint_epoch_9_step_9.pth.tmp"), torch_zip())
    touch_newest(os.path.join(str(root), "ckpt.pt.tmp"))


def _crash_before_rename(root):
    contract(root, 100)
    staging = os.path.join(str(root), "tmp-step_000000200.999.abcd")
    write(os.path.join(staging, "model.pt"), torch_zip())
    write(os.path.join(staging, "manifest.json"), b"{}")


def _zero_contract(root):
    contract(root, 100)
    write(os.path.join(str(root), "step_000000200", "model.pt"), b"")
    write(os.path.join(str(root), "step_000000200", "manifest.json"), b"")


def _zero_listed_contract(root):
    contract(root, 100)
    contract(root, 200, files={"model.pt": b"", "optim.pt": b""})


def _zero_hf(root):
    hf_folder(root, 100)
    hf_folder(root, 200, zero=True)


def _zero_dcp(root):
    dcp_folder(root, "step-100")
    dcp_folder(root, "step-200", sizes=(0, 0))


def _zero_deepspeed(root):
    deepspeed_folder(root, 100)
    deepspeed_folder(root, 200, zero=True)


def _zero_megatron(root):
    megatron_folder(root, 100)
    megatron_folder(root, 200, zero=True)


def _zero_torch_file(root):
    torch_file(root, 1, 100)
    torch_file(root, 1, 200, data=b"")


def _handpicked(root):
    contract(root, 100)
    os.mkdir(os.path.join(str(root), "handpicked"))
    write(os.path.join(str(root), "handpicked", "model.pt"), torch_zip())
    touch_newest(os.path.join(str(root), "handpicked"))


def _padding(root):
    contract(root, 100000)
    os.rename(os.path.join(str(root), "step_000100000"), os.path.join(str(root), "step_100000"))
    contract(root, 900000)
    os.rename(os.path.join(str(root), "step_000900000"), os.path.join(str(root), "step_0900000"))


def _sha_mismatch(root):
    contract(root, 100)
    path = contract(root, 200)
    flip_byte(os.path.join(path, "model.pt"), 200)  # same size: only sha256 sees it


def _size_mismatch(root):
    contract(root, 100)
    path = contract(root, 200)
    truncate(os.path.join(path, "optim.pt"), 1)


def _file_missing(root):
    contract(root, 100)
    path = contract(root, 200)
    os.remove(os.path.join(path, "optim.pt"))


def _manifest_step_mismatch(root):
    contract(root, 100)
    path = contract(root, 200)
    os.rename(path, os.path.join(str(root), "step_000000300"))


def _manifest_not_json(root):
    contract(root, 100)
    path = contract(root, 200)
    write(os.path.join(path, "manifest.json"), b'{"format": "clusterops.checkpoint", "files": [')


def _manifest_newer_version(root):
    contract(root, 100)
    path = contract(root, 200)
    with open(os.path.join(path, "manifest.json")) as handle:
        manifest = json.load(handle)
    manifest["format_version"] = 2
    write(os.path.join(path, "manifest.json"), json.dumps(manifest).encode())


def _manifest_escaping_path(root):
    contract(root, 100)
    path = contract(root, 200)
    with open(os.path.join(path, "manifest.json")) as handle:
        manifest = json.load(handle)
    manifest["files"][0]["path"] = "../step_000000100/model.pt"
    write(os.path.join(path, "manifest.json"), json.dumps(manifest).encode())


def _contract_symlinked_file(root):
    contract(root, 100)
    path = contract(root, 200)
    os.remove(os.path.join(path, "model.pt"))
    os.symlink(os.path.join(str(root), "step_000000100", "model.pt"), os.path.join(path, "model.pt"))


def _torch_truncated(count):
    def build(root):
        torch_file(root, 1, 100)
        truncate(torch_file(root, 1, 200), count)
    return build


def _torch_truncated_no_descriptors(root):
    torch_file(root, 1, 100)
    truncate(torch_file(root, 1, 200, data=torch_zip(descriptors=False)), 2)


def _torch_torn_entry(root):
    # The central directory is intact but an entry's data was cut out of the middle.
    torch_file(root, 1, 100)
    data = torch_zip("checkpoint_epoch_1_step_200")
    archive = zipfile.ZipFile(io.BytesIO(data))
    info = [i for i in archive.infolist() if i.filename.endswith("data/0")][0]
    cut = info.header_offset + 100
    torch_file(root, 1, 200, data=data[:cut] + data[cut + 64:])


def _torch_legacy(root):
    torch_file(root, 1, 100)
    torch_file(root, 1, 200, data=b"\x80\x02\x8a\x0alZ\xf0\xfc\x9cF\xf9 j\xa8P\x19." + b"\x00" * 100)


def _torch_not_torch(root):
    torch_file(root, 1, 100)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("notes.txt", b"hello")
    torch_file(root, 1, 200, data=buf.getvalue())


def _dcp_no_metadata(root):
    dcp_folder(root, "step-100")
    dcp_folder(root, "step-200", metadata=False)


def _dcp_truncated(root):
    dcp_folder(root, "step-100")
    dcp_folder(root, "step-200", truncate=10)


def _dcp_in_contract_name(root):
    contract(root, 100)
    dcp_folder(root, "step_000000200")


def _hf_not_committed(root):
    hf_folder(root, 100)
    hf_folder(root, 200, state=False)


def _hf_missing_shard(root):
    hf_folder(root, 100)
    hf_folder(root, 200, shards=["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"])


def _hf_truncated_safetensors(root):
    hf_folder(root, 100)
    folder = hf_folder(root, 200)
    write(os.path.join(folder, "model.safetensors"), safetensors(truncate=8))


def _deepspeed_missing_rank(root):
    deepspeed_folder(root, 100, dp=4)
    deepspeed_folder(root, 200, dp=4, drop_rank=1)


def _deepspeed_truncated(root):
    deepspeed_folder(root, 100)
    folder = deepspeed_folder(root, 200)
    truncate(os.path.join(folder, "zero_pp_rank_1_mp_rank_00_optim_states.pt"), 5)


def _megatron_missing_rank(root):
    megatron_folder(root, 100, tp=2, pp=2)
    megatron_folder(root, 200, tp=2, pp=2, drop=(1, 1))


def _megatron_dist(root):
    megatron_folder(root, 100)
    dcp_folder(root, "iter_0000200")


def _lightning(root):
    write(os.path.join(str(root), "epoch=0-step=100.ckpt"), torch_zip())
    write(os.path.join(str(root), "epoch=1-step=200-v1.ckpt"), torch_zip())
    write(os.path.join(str(root), "epoch=1-step=150.ckpt"), torch_zip())
    os.symlink("epoch=1-step=200-v1.ckpt", os.path.join(str(root), "last.ckpt"))


def _symlink_out(root):
    contract(root, 100)
    outside = tempfile.mkdtemp(prefix="ckpt-outside-")
    contract(outside, 999)
    os.symlink(os.path.join(outside, "step_000000999"), os.path.join(str(root), "step_000000999"))


def _symlink_out_inside_checkpoint(root):
    deepspeed_folder(root, 100)
    folder = deepspeed_folder(root, 200)
    outside = tempfile.mkdtemp(prefix="ckpt-outside-")
    write(os.path.join(outside, "model.pt"), torch_zip())
    os.symlink(os.path.join(outside, "model.pt"), os.path.join(folder, "extra_model_states.pt"))


# (id, builder, validate, expected latest_valid name or None, names expected invalid, ignored names)
CHOICE_CASES = [
    ("step_9000 and step_10000: numbers, not names", _steps_9000_10000, "sizes", "step_10000", [], []),
    ("epoch 10 step 5 is newer than epoch 2 step 100", _epoch_before_step, "sizes",
     "checkpoint_epoch_10_step_5.pth", [], []),
    ("*.tmp newest by mtime: ignored", _tmp_file_newest, "sizes", "checkpoint_epoch_1_step_10.pth", [],
     ["checkpoint_epoch_9_step_9.pth.tmp", "ckpt.pt.tmp"]),
    ("crash before the rename: tmp-* folder ignored", _crash_before_rename, "sha256", "step_000000100", [],
     ["tmp-step_000000200.999.abcd"]),
    ("zero-byte contract folder", _zero_contract, "structure", "step_000000100", ["step_000000200"], []),
    ("manifest listing only empty files", _zero_listed_contract, "structure", "step_000000100", ["step_000000200"], []),
    ("zero-byte Hugging Face folder", _zero_hf, "structure", "checkpoint-100", ["checkpoint-200"], []),
    ("zero-byte DCP folder", _zero_dcp, "structure", "step-100", ["step-200"], []),
    ("zero-byte DeepSpeed folder", _zero_deepspeed, "structure", "global_step100", ["global_step200"], []),
    ("zero-byte Megatron folder", _zero_megatron, "structure", "iter_0000100", ["iter_0000200"], []),
    ("zero-byte torch file", _zero_torch_file, "structure", "checkpoint_epoch_1_step_100.pth",
     ["checkpoint_epoch_1_step_200.pth"], []),
    ("stray handpicked/ folder", _handpicked, "sizes", "step_000000100", [], ["handpicked"]),
    ("zero padding changes: numbers compared", _padding, "sizes", "step_0900000", [], []),
    ("sha256 mismatch, same size: sha256 level", _sha_mismatch, "sha256", "step_000000100", ["step_000000200"], []),
    ("sha256 mismatch, same size: sizes level cannot see it", _sha_mismatch, "sizes", "step_000000200", [], []),
    ("size differs from the manifest", _size_mismatch, "sizes", "step_000000100", ["step_000000200"], []),
    ("listed file missing", _file_missing, "structure", "step_000000100", ["step_000000200"], []),
    ("manifest step disagrees with the name", _manifest_step_mismatch, "structure", "step_000000100",
     ["step_000000300"], []),
    ("manifest cut short", _manifest_not_json, "structure", "step_000000100", ["step_000000200"], []),
    ("manifest from a newer format", _manifest_newer_version, "structure", "step_000000100", ["step_000000200"], []),
    ("manifest path escaping the folder", _manifest_escaping_path, "structure", "step_000000100",
     ["step_000000200"], []),
    ("contract file replaced by a symlink", _contract_symlinked_file, "structure", "step_000000100",
     ["step_000000200"], []),
    ("torch zip truncated by 1 byte", _torch_truncated(1), "sizes", "checkpoint_epoch_1_step_100.pth",
     ["checkpoint_epoch_1_step_200.pth"], []),
    ("torch zip truncated by 3 bytes", _torch_truncated(3), "sizes", "checkpoint_epoch_1_step_100.pth",
     ["checkpoint_epoch_1_step_200.pth"], []),
    ("torch zip truncated by 30 bytes", _torch_truncated(30), "sizes", "checkpoint_epoch_1_step_100.pth",
     ["checkpoint_epoch_1_step_200.pth"], []),
    ("torch zip truncated by 3 bytes: structure level cannot see it", _torch_truncated(3), "structure",
     "checkpoint_epoch_1_step_200.pth", [], []),
    ("zip without data descriptors truncated", _torch_truncated_no_descriptors, "sizes",
     "checkpoint_epoch_1_step_100.pth", ["checkpoint_epoch_1_step_200.pth"], []),
    ("torn entry, central directory intact", _torch_torn_entry, "sizes", "checkpoint_epoch_1_step_100.pth",
     ["checkpoint_epoch_1_step_200.pth"], []),
    ("legacy (pickle) torch.save file", _torch_legacy, "sizes", "checkpoint_epoch_1_step_100.pth",
     ["checkpoint_epoch_1_step_200.pth"], []),
    ("zip that is not a torch.save file", _torch_not_torch, "sizes", "checkpoint_epoch_1_step_100.pth",
     ["checkpoint_epoch_1_step_200.pth"], []),
    ("DCP folder without .metadata", _dcp_no_metadata, "structure", "step-100", ["step-200"], []),
    ("DCP data file shorter than .metadata says", _dcp_truncated, "sizes", "step-100", ["step-200"], []),
    ("DCP folder under the contract's name", _dcp_in_contract_name, "sizes", "step_000000200", [], []),
    ("Hugging Face without trainer_state.json", _hf_not_committed, "structure", "checkpoint-100",
     ["checkpoint-200"], []),
    ("Hugging Face index names a missing shard", _hf_missing_shard, "structure", "checkpoint-100",
     ["checkpoint-200"], []),
    ("Hugging Face safetensors truncated", _hf_truncated_safetensors, "sizes", "checkpoint-100",
     ["checkpoint-200"], []),
    ("DeepSpeed ZeRO rank missing", _deepspeed_missing_rank, "structure", "global_step100", ["global_step200"], []),
    ("DeepSpeed shard truncated", _deepspeed_truncated, "sizes", "global_step100", ["global_step200"], []),
    ("Megatron tensor/pipeline rank missing", _megatron_missing_rank, "structure", "iter_0000100",
     ["iter_0000200"], []),
    ("Megatron torch_dist format", _megatron_dist, "sizes", "iter_0000200", [], []),
    ("Lightning: epoch then step, -v1 suffix", _lightning, "sizes", "epoch=1-step=200-v1.ckpt", [], []),
    ("symlinked checkpoint out of the folder", _symlink_out, "sizes", "step_000000100", [], ["step_000000999"]),
    ("symlink out of the folder inside a checkpoint", _symlink_out_inside_checkpoint, "structure",
     "global_step100", ["global_step200"], []),
]


@pytest.mark.parametrize("build, validate, expected, invalid, ignored", [c[1:] for c in CHOICE_CASES],
                         ids=[c[0] for c in CHOICE_CASES])
def test_choice(tmp_path, build, validate, expected, invalid, ignored):
    build(tmp_path)
    report = ck.inspect(str(tmp_path), validate)
    chosen = report.latest_valid.name if report.latest_valid else None
    assert chosen == expected, [(c.name, c.valid, c.why_invalid) for c in report.checkpoints]
    assert sorted(c.name for c in report.checkpoints if c.valid is False) == sorted(invalid)
    for c in report.checkpoints:
        assert (c.why_invalid is None) == (c.valid is not False)
    assert sorted(i["name"] for i in report.ignored) == sorted(ignored)
    # The lazy path (what the launcher uses) chooses the same, and so does a full check.
    lazy = ck.latest_valid(str(tmp_path), validate)
    assert (lazy.name if lazy else None) == expected
    assert [c.name for c in ck.scan(str(tmp_path), validate) if c.valid][-1:] == ([expected] if expected else [])


INVALID_WHY = [
    (_zero_contract, "structure", "step_000000200", "manifest.json is empty"),
    (_sha_mismatch, "sha256", "step_000000200", "model.pt: sha256"),
    (_size_mismatch, "sizes", "step_000000200", "optim.pt: 4"),
    (_file_missing, "structure", "step_000000200", "optim.pt is missing"),
    (_manifest_step_mismatch, "structure", "step_000000300", "does not match the folder name's 300"),
    (_manifest_newer_version, "structure", "step_000000200", "format_version 2 is newer"),
    (_torch_truncated(3), "sizes", "checkpoint_epoch_1_step_200.pth", "end of central directory"),
    (_torch_torn_entry, "sizes", "checkpoint_epoch_1_step_200.pth", "zip entry"),
    (_torch_legacy, "sizes", "checkpoint_epoch_1_step_200.pth", "legacy torch.save format"),
    (_dcp_no_metadata, "structure", "step-200", "no .metadata: not committed"),
    (_dcp_truncated, "sizes", "step-200", "__0_0.distcp: 2990 bytes, .metadata needs 3000"),
    (_hf_not_committed, "structure", "checkpoint-200", "no trainer_state.json"),
    (_deepspeed_missing_rank, "structure", "global_step200", "zero_pp_rank_1_mp_rank_00_optim_states.pt missing: the model states say dp_world_size 4"),
    (_megatron_missing_rank, "structure", "iter_0000200", "3 of 4"),
    (_symlink_out_inside_checkpoint, "structure", "global_step200", "symlink out of the run folder"),
]


@pytest.mark.parametrize("build, validate, name, why", INVALID_WHY, ids=[c[2] + ": " + c[3] for c in INVALID_WHY])
def test_why_invalid_says_why(tmp_path, build, validate, name, why):
    build(tmp_path)
    report = ck.inspect(str(tmp_path), validate)
    ckpt = [c for c in report.checkpoints if c.name == name][0]
    assert ckpt.valid is False
    assert why in ckpt.why_invalid
    assert any(w.startswith(name + " is invalid") for w in report.warnings)


class _StorageDict(dict):
    """A dict subclass: pickled as a class plus SETITEMS, as a future torch might."""


def test_dcp_metadata_shapes(tmp_path):
    # A dict subclass for storage_data is still read, and its sizes checked.
    folder = dcp_folder(tmp_path, "step-100", truncate=5)
    storage = _StorageDict()
    storage[MetadataIndex("w0")] = _StorageInfo("__0_0.distcp", 0, 3000)
    write(os.path.join(folder, ".metadata"), pickle.dumps(Metadata(storage), protocol=4))
    assert "truncated" in ck.verify(folder, "sizes").why_invalid
    # A .metadata cut short is invalid.
    dcp_folder(tmp_path, "step-200")
    truncate(os.path.join(str(tmp_path), "step-200", ".metadata"), 10)
    assert "cut short or corrupt" in ck.verify(os.path.join(str(tmp_path), "step-200"), "sizes").why_invalid
    # A whole pickle of a shape the reader does not know: sizes not checked, not invalid.
    folder = dcp_folder(tmp_path, "step-300")
    write(os.path.join(folder, ".metadata"), pickle.dumps(frozenset([1, 2]), protocol=4))
    assert ck.verify(folder, "sizes").valid is True


def test_empty_and_only_temporary_folders(tmp_path):
    report = ck.inspect(str(tmp_path))
    assert report.latest_valid is None and report.checkpoints == [] and not report.had_candidates
    write(os.path.join(str(tmp_path), "tmp-step_000000001.1.ab", "model.pt"), b"x")
    report = ck.inspect(str(tmp_path))
    assert report.latest_valid is None and not report.had_candidates


@pytest.mark.parametrize("make", ["missing", "file"])
def test_bad_run_folder_raises(tmp_path, make):
    path = os.path.join(str(tmp_path), "run")
    if make == "file":
        write(path, b"x")
    with pytest.raises(ck.CheckpointError):
        ck.inspect(path)


def test_lazy_latest_checks_only_what_it_needs(tmp_path):
    for step in (100, 200, 300):
        contract(tmp_path, step)
    truncate(os.path.join(str(tmp_path), "step_000000300", "model.pt"), 1)
    report = ck.inspect(str(tmp_path), "sha256", list_all=False)
    assert report.latest_valid.name == "step_000000200"
    assert [(c.name, c.valid, c.checked) for c in report.checkpoints] == [
        ("step_000000100", None, None), ("step_000000200", True, "sha256"), ("step_000000300", False, "sha256")]
    # The listing checks everything at structure, only the newest at the level asked for.
    report = ck.inspect(str(tmp_path), "sha256")
    assert [c.checked for c in report.checkpoints] == ["structure", "sha256", "sha256"]


def test_structure_listing_checks_every_checkpoint(tmp_path):
    for step in (100, 200, 300):
        contract(tmp_path, step)
    os.remove(os.path.join(str(tmp_path), "step_000000100", "optim.pt"))
    report = ck.inspect(str(tmp_path), "structure")
    assert [(c.valid, c.checked) for c in report.checkpoints] == [
        (False, "structure"), (True, "structure"), (True, "structure")]
    assert report.warnings == []  # an old broken checkpoint is listed, not warned about


_FIFO_RUN = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import _checkpoint as ck
run = sys.argv[2]
for name in ("latest", "FINISHED", "latest_checkpointed_iteration.txt", "checkpoint_epoch_9_step_9.pth"):
    os.mkfifo(os.path.join(run, name))
report = ck.inspect(run)
print(report.latest_valid.name, report.finished, sorted(i["name"] for i in report.ignored))
"""


def test_fifos_never_block(tmp_path):
    contract(tmp_path, 100)
    proc = subprocess.run([sys.executable, "-c", _FIFO_RUN, os.path.dirname(LIBRARY), str(tmp_path)],
                          stdout=subprocess.PIPE, universal_newlines=True, timeout=60, check=True)
    assert proc.stdout.split(" ", 2)[:2] == ["step_000000100", "None"]
    assert "latest" in proc.stdout and "FINISHED" in proc.stdout


def test_verify_does_not_follow_a_symlink_out(tmp_path):
    outside = tmp_path / "outside"
    real = contract(outside, 5)
    os.mkdir(str(tmp_path / "run"))
    link = os.path.join(str(tmp_path / "run"), "step_000000005")
    os.symlink(real, link)
    assert ck.verify(link).valid is False and "symlink" in ck.verify(link).why_invalid
    assert ck.verify(real).valid is True


def test_contract_records_epoch_time_and_sizes(tmp_path):
    path = ck.write_checkpoint(str(tmp_path), 1000, 3, {"model.pt": b"abc", "sub/opt.pt": b"defg"}, extra={"loss": 1.5})
    assert path == os.path.join(str(tmp_path), "step_000001000")
    ckpt = ck.verify(path)
    assert (ckpt.valid, ckpt.layout, ckpt.step, ckpt.epoch, ckpt.files, ckpt.size) == (True, "clusterops", 1000, 3, 2, 7)
    with open(os.path.join(path, "manifest.json")) as handle:
        manifest = json.load(handle)
    assert manifest["format"] == "clusterops.checkpoint" and manifest["format_version"] == 1
    assert manifest["extra"] == {"loss": 1.5} and manifest["time"].endswith("Z")
    assert [f["path"] for f in manifest["files"]] == ["model.pt", "sub/opt.pt"]
    assert manifest["files"][0] == {"path": "model.pt", "size": 3,
                                    "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}


# ---------------------------------------------------------------------------------------------
# Pointers
# ---------------------------------------------------------------------------------------------

def _pointer(report, name):
    return [p for p in report.pointers if p["name"] == name][0]


POINTER_CASES = [
    # (id, builder, pointer name, status, resolves_to, expected latest_valid)
    ("deepspeed latest current", lambda r: (deepspeed_folder(r, 100), deepspeed_folder(r, 200),
                                            write(os.path.join(str(r), "latest"), b"global_step200")),
     "latest", "current", "global_step200", "global_step200"),
    ("deepspeed latest older", lambda r: (deepspeed_folder(r, 100), deepspeed_folder(r, 200),
                                          write(os.path.join(str(r), "latest"), b"global_step100\n")),
     "latest", "older", "global_step100", "global_step200"),
    ("deepspeed latest missing", lambda r: (deepspeed_folder(r, 100),
                                            write(os.path.join(str(r), "latest"), b"global_step300")),
     "latest", "missing", None, "global_step100"),
    ("deepspeed latest to a broken one", lambda r: (deepspeed_folder(r, 100), deepspeed_folder(r, 200, drop_rank=0),
                                                    write(os.path.join(str(r), "latest"), b"global_step200")),
     "latest", "invalid", "global_step200", "global_step100"),
    ("deepspeed latest with a path", lambda r: (deepspeed_folder(r, 100),
                                                write(os.path.join(str(r), "latest"), b"../elsewhere/global_step100")),
     "latest", "unreadable", None, "global_step100"),
    ("megatron tracker older", lambda r: (megatron_folder(r, 100), megatron_folder(r, 200),
                                          write(os.path.join(str(r), "latest_checkpointed_iteration.txt"), b"100\n")),
     "latest_checkpointed_iteration.txt", "older", "iter_0000100", "iter_0000200"),
    ("megatron tracker missing", lambda r: (megatron_folder(r, 100),
                                            write(os.path.join(str(r), "latest_checkpointed_iteration.txt"), b"500")),
     "latest_checkpointed_iteration.txt", "missing", None, "iter_0000100"),
    ("megatron tracker in other digits", lambda r: (megatron_folder(r, 100), write(
        os.path.join(str(r), "latest_checkpointed_iteration.txt"), u"\u0661\u0660\u0660".encode("utf-8"))),
     "latest_checkpointed_iteration.txt", "unreadable", None, "iter_0000100"),
    ("megatron tracker release", lambda r: (megatron_folder(r, 100),
                                            write(os.path.join(str(r), "latest_checkpointed_iteration.txt"), b"release")),
     "latest_checkpointed_iteration.txt", "release", None, "iter_0000100"),
    ("last.ckpt symlink older", lambda r: (write(os.path.join(str(r), "epoch=0-step=10.ckpt"), torch_zip()),
                                           write(os.path.join(str(r), "epoch=1-step=20.ckpt"), torch_zip()),
                                           os.symlink("epoch=0-step=10.ckpt", os.path.join(str(r), "last.ckpt"))),
     "last.ckpt", "older", "epoch=0-step=10.ckpt", "epoch=1-step=20.ckpt"),
    ("last.ckpt dangling", lambda r: (write(os.path.join(str(r), "epoch=0-step=10.ckpt"), torch_zip()),
                                      os.symlink("epoch=5-step=99.ckpt", os.path.join(str(r), "last.ckpt"))),
     "last.ckpt", "missing", None, "epoch=0-step=10.ckpt"),
    ("last.ckpt out of the folder", lambda r: (write(os.path.join(str(r), "epoch=0-step=10.ckpt"), torch_zip()),
                                               os.symlink("/etc/hostname", os.path.join(str(r), "last.ckpt"))),
     "last.ckpt", "escapes", None, "epoch=0-step=10.ckpt"),
    ("latest symlink to a contract checkpoint", lambda r: (contract(r, 100), contract(r, 200),
                                                           os.symlink("step_000000100", os.path.join(str(r), "latest"))),
     "latest", "older", "step_000000100", "step_000000200"),
    ("latest symlink inside a checkpoint", lambda r: (contract(r, 100),
                                                      os.symlink("step_000000100/model.pt", os.path.join(str(r), "latest"))),
     "latest", "unrecognised", None, "step_000000100"),
]


@pytest.mark.parametrize("build, name, status, resolves_to, expected", [c[1:] for c in POINTER_CASES],
                         ids=[c[0] for c in POINTER_CASES])
def test_pointers(tmp_path, build, name, status, resolves_to, expected):
    build(tmp_path)
    report = ck.inspect(str(tmp_path))
    pointer = _pointer(report, name)
    assert (pointer["status"], pointer["resolves_to"]) == (status, resolves_to), pointer
    assert report.latest_valid.name == expected
    if status == "current":
        assert pointer["message"] == "" and name in report.latest_valid.pointed_by
    else:
        assert pointer["message"] and pointer["message"] in report.warnings
    assert name not in [i["name"] for i in report.ignored]


def test_ties_and_mixed_layouts_warn(tmp_path):
    contract(tmp_path, 500)
    dcp_folder(tmp_path, "step-500")
    torch_file(tmp_path, 0, 10)
    report = ck.inspect(str(tmp_path))
    assert report.latest_valid.name == "checkpoint_epoch_0_step_10.pth"  # (0, 10) > (-1, 500)
    assert any("same (epoch, step)" in w for w in report.warnings)
    assert any("mixed" in w for w in report.warnings)


def test_finished_marker(tmp_path):
    contract(tmp_path, 100)
    assert ck.inspect(str(tmp_path)).finished is None
    ck.mark_finished(str(tmp_path), step=100, epoch=0, checkpoint="step_000000100")
    report = ck.inspect(str(tmp_path))
    assert report.finished["step"] == 100 and report.finished["checkpoint"] == "step_000000100"
    assert report.warnings == [] and report.ignored == []
    ck.mark_finished(str(tmp_path), step=900)
    assert any("FINISHED says step 900" in w for w in ck.inspect(str(tmp_path)).warnings)
    write(os.path.join(str(tmp_path), "FINISHED"), b"")  # touched by a shell: finished all the same
    assert ck.inspect(str(tmp_path)).finished == {}


# ---------------------------------------------------------------------------------------------
# Property: whatever the mix, the choice is the largest valid (epoch, step)
# ---------------------------------------------------------------------------------------------

KINDS = ("valid", "partial", "tmp", "zero", "truncated")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.dictionaries(
    keys=st.tuples(st.integers(0, 12), st.integers(0, 3000)),
    values=st.tuples(st.sampled_from(KINDS), st.sampled_from(("torch_file", "contract"))),
    max_size=8))
def test_latest_valid_is_the_max_valid_epoch_step(entries):
    root = tempfile.mkdtemp(prefix="ckpt-prop-")
    try:
        expected = None
        used_steps = set()
        for (epoch, step), (kind, layout) in sorted(entries.items()):
            if layout == "contract":
                if step in used_steps:
                    continue  # contract names carry no epoch: one per step
                used_steps.add(step)
                name = ck.checkpoint_name(step)
                if kind == "valid":
                    ck.write_checkpoint(root, step, epoch, {"m.pt": torch_zip()}, fsync=False)
                elif kind == "partial":
                    write(os.path.join(root, name, "m.pt"), torch_zip())
                elif kind == "tmp":
                    write(os.path.join(root, "tmp-" + name, "m.pt"), torch_zip())
                elif kind == "zero":
                    write(os.path.join(root, name, "m.pt"), b"")
                else:
                    truncate(ck.write_checkpoint(root, step, epoch, {"m.pt": torch_zip()}, fsync=False) + "/m.pt", 2)
                key = (-1, step)
            else:
                name = "checkpoint_epoch_%d_step_%d.pth" % (epoch, step)
                data = {"valid": torch_zip(), "partial": torch_zip()[:-40], "tmp": torch_zip(), "zero": b"",
                        "truncated": torch_zip()[:-2]}[kind]
                write(os.path.join(root, name + (".tmp" if kind == "tmp" else "")), data)
                key = (epoch, step)
            if kind == "valid" and (expected is None or key > expected[0]):
                expected = (key, name)
        chosen = ck.latest_valid(root, "sizes")
        assert (chosen.name if chosen else None) == (expected[1] if expected else None)
        full = ck.inspect(root, "sha256", validate_all=True)
        assert (full.latest_valid.name if full.latest_valid else None) == (expected[1] if expected else None)
    finally:
        shutil.rmtree(root)


# ---------------------------------------------------------------------------------------------
# Every common naming, as a kind (issue 12 part 3): real torch.save files where the step is inside
# ---------------------------------------------------------------------------------------------

# (id, build, name_template, expected newest valid, its step, where the step came from, latest exit)
NAMING_CASES = [
    ("contract step_<S>", lambda r: (contract(r, 100), contract(r, 200)), None, "step_000000200", 200, "name", 0),
    ("torchtitan/DCP step-<S>", lambda r: (dcp_folder(r, "step-10"), dcp_folder(r, "step-9")), None,
     "step-10", 10, "name", 0),
    ("Hugging Face checkpoint-<S>", lambda r: (hf_folder(r, 500), hf_folder(r, 1000)), None,
     "checkpoint-1000", 1000, "name", 0),
    ("DeepSpeed global_step<S>", lambda r: (deepspeed_folder(r, 20), deepspeed_folder(r, 100)), None,
     "global_step100", 100, "name", 0),
    ("Megatron iter_<S>", lambda r: (megatron_folder(r, 100), megatron_folder(r, 2000)), None,
     "iter_0002000", 2000, "name", 0),
    ("torch.save checkpoint_epoch_<E>_step_<S>.pth", lambda r: (torch_file(r, 1, 5), torch_file(r, 0, 900)), None,
     "checkpoint_epoch_1_step_5.pth", 5, "name", 0),
    ("Lightning {step}: step=N.ckpt and a last.ckpt copy of the newest",
     lambda r: (_steps(r, ("step=10.ckpt", 10), ("step=20.ckpt", 20), ("step=9.ckpt", 9)),
                lightning_ckpt(r, "last.ckpt", 20)), None, "step=20.ckpt", 20, "name", 0),
    ("Lightning last.ckpt newer than every named one (save_top_k by a metric)",
     lambda r: (_steps(r, ("step=10.ckpt", 10), ("step=20.ckpt", 20)), lightning_ckpt(r, "last.ckpt", 35)), None,
     "last.ckpt", 35, "metadata", 0),
    ("Lightning default {epoch}-{step} with -v1",
     lambda r: _steps(r, ("epoch=3-step=1500.ckpt", 1500), ("epoch=3-step=1500-v1.ckpt", 1500),
                      ("epoch=2-step=1400.ckpt", 1400)), None, "epoch=3-step=1500-v1.ckpt", 1500, "name", 0),
    ("Lightning step before epoch, other metrics, any order",
     lambda r: _steps(r, ("val_loss=0.31-step=700-epoch=2.ckpt", 700), ("step=650-val_loss=0.29-epoch=2.ckpt", 650)),
     None, "val_loss=0.31-step=700-epoch=2.ckpt", 700, "name", 0),
    ("Lightning custom metric only: the step from the file",
     lambda r: _steps(r, ("epoch=2-val_loss=0.31.ckpt", 250), ("epoch=2-val_loss=0.12.ckpt", 240),
                      ("epoch=1-val_loss=0.50.ckpt", 120)), None, "epoch=2-val_loss=0.31.ckpt", 250, "metadata", 0),
    ("Lightning last-v1.ckpt after last.ckpt",
     lambda r: (lightning_ckpt(r, "last.ckpt", 40), lightning_ckpt(r, "last-v1.ckpt", 60)), None,
     "last-v1.ckpt", 60, "metadata", 0),
    ("Lightning bare numbers with the template {epoch}-{step}",
     lambda r: _steps(r, ("3-1500.ckpt", 1500), ("10-900.ckpt", 900), ("3-1500-v2.ckpt", 1500)), "{epoch}-{step}",
     "3-1500-v2.ckpt", 1500, "template", 0),
    ("Lightning bare numbers without a template: the step from the file",
     lambda r: _steps(r, ("3-1500.ckpt", 1500), ("10-900.ckpt", 900)), None, "3-1500.ckpt", 1500, "metadata", 0),
    ("Lightning padded template {step:06d} and a NeMo-style name",
     lambda r: _steps(r, ("gpt--val_loss=1.23-step=001000-consumed_samples=8000.0.ckpt", 1000),
                      ("gpt--val_loss=1.20-step=000999-consumed_samples=7992.0.ckpt", 999)),
     "gpt--{val_loss:.2f}-{step:06d}-{consumed_samples}", "gpt--val_loss=1.23-step=001000-consumed_samples=8000.0.ckpt",
     1000, "template", 0),
    ("unorderable: a whole .ckpt that does not say its step",
     lambda r: (_steps(r, ("step=10.ckpt", 10)), plain_torch_file(r, "model.ckpt")), None, None, None, None, 3),
    ("unorderable: only a last.ckpt without global_step",
     lambda r: plain_torch_file(r, "last.ckpt"), None, None, None, None, 3),
    ("a broken step-less .ckpt is invalid, not in the way",
     lambda r: (_steps(r, ("step=10.ckpt", 10)), write(os.path.join(str(r), "best.ckpt"), b"PK\x03\x04junk")), None,
     "step=10.ckpt", 10, "name", 0),
    ("only a broken step-less .ckpt: exists, none usable",
     lambda r: write(os.path.join(str(r), "best.ckpt"), b"PK\x03\x04junk"), None, None, None, None, 3),
]


@pytest.fixture(scope="module")
def installed_tool(tmp_path_factory):
    """The checkpoint command as roles/checkpoint_tool installs it (outside the run folders)."""
    return install_tool(str(tmp_path_factory.mktemp("tool") / "clusterops_checkpoint"))


@pytest.mark.parametrize("build, template, expected, step, step_from, rc", [c[1:] for c in NAMING_CASES],
                         ids=[c[0] for c in NAMING_CASES])
def test_naming_kinds(tmp_path, installed_tool, build, template, expected, step, step_from, rc):
    build(tmp_path)
    report = ck.inspect(str(tmp_path), name_template=template)
    best = report.latest_valid
    assert (best.name if best else None, best.step if best else None, best.step_from if best else None) == \
        (expected, step, step_from), report.to_dict()
    assert report.had_candidates
    argv = [sys.executable, installed_tool, "latest", str(tmp_path)] + (["--name-template", template] if template else [])
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode == rc, proc.stderr
    assert proc.stdout == (os.path.join(str(tmp_path), expected) + "\n" if expected else "")
    if rc == 3:
        assert "cannot be ordered" in proc.stderr


def test_unorderable_folder_is_never_no_checkpoint(tmp_path):
    _steps(tmp_path, ("step=10.ckpt", 10), ("step=20.ckpt", 20))
    plain_torch_file(tmp_path, "model.ckpt")
    report = ck.inspect(str(tmp_path))
    assert report.latest_valid is None and report.had_candidates
    assert report.unordered == [dict(name="model.ckpt", valid=None, reason=report.unordered[0]["reason"])]
    assert "no global_step" in report.unordered[0]["reason"]
    assert any(w.startswith("refusing to choose a checkpoint") for w in report.warnings)
    assert ck.main(["latest", str(tmp_path), "--quiet"], io.StringIO(), io.StringIO()) == ck.EXIT_INVALID
    # Nothing is deleted while the order is unknown.
    result = ck.prune(str(tmp_path), keep_last=1, tmp_grace=None)
    assert result.deleted == [] and sorted(n for n in os.listdir(str(tmp_path)) if n != ck.PRUNE_LOCK) == [
        "model.ckpt", "step=10.ckpt", "step=20.ckpt"]
    # The template cannot help a name without the step; moving the file aside can.
    os.rename(os.path.join(str(tmp_path), "model.ckpt"), os.path.join(str(tmp_path), "model.ckpt.tmp"))
    assert ck.latest_valid(str(tmp_path)).name == "step=20.ckpt"


LIGHTNING_NAMES = [
    ("step=10.ckpt", None, dict(step=10, epoch=None, version=0, last=False, step_from="name")),
    ("epoch=3-step=1500-v1.ckpt", None, dict(step=1500, epoch=3, version=1, last=False, step_from="name")),
    ("epoch=2-val_loss=0.31.ckpt", None, dict(step=None, epoch=2, version=0, last=False, step_from=None)),
    ("last.ckpt", None, dict(step=None, epoch=None, version=0, last=True, step_from=None)),
    ("last-v1.ckpt", None, dict(step=None, epoch=None, version=1, last=True, step_from=None)),
    ("gpt--step=99-last.ckpt", None, dict(step=99, epoch=None, version=0, last=True, step_from="name")),
    ("global_step=5.ckpt", None, dict(step=None, epoch=None, version=0, last=False, step_from=None)),
    ("step=1e3.ckpt", None, dict(step=None, epoch=None, version=0, last=False, step_from=None)),
    ("3-1500.ckpt", "{epoch}-{step}", dict(step=1500, epoch=3, version=0, last=False, step_from="template")),
    ("epoch=3-step=1500.ckpt", "{epoch}-{step}", dict(step=1500, epoch=3, version=0, last=False, step_from="template")),
    ("3-1500-v4.ckpt", "{epoch}-{step}.ckpt", dict(step=1500, epoch=3, version=4, last=False, step_from="template")),
    ("x.ckpt", "{step}", dict(step=None, epoch=None, version=0, last=False, step_from=None)),
    ("model.pt", None, None),
    (".ckpt", None, None),
]


@pytest.mark.parametrize("name, template, expected", LIGHTNING_NAMES, ids=[c[0] for c in LIGHTNING_NAMES])
def test_parse_lightning_name(name, template, expected):
    assert ck.parse_lightning_name(name, template) == expected


@pytest.mark.parametrize("template", ["{epoch}", "{step}-{step}", "{}-{step}", "{step", "a/{step}", ""])
def test_bad_name_templates_are_refused(tmp_path, template):
    with pytest.raises(ValueError):
        ck.compile_name_template(template)
    if template:
        assert ck.main(["latest", str(tmp_path), "--name-template", template], io.StringIO(), io.StringIO()) == 2


def test_lightning_step_from_metadata_never_runs_code(tmp_path):
    # A data.pkl that would call os.system if unpickled for real: read with stand-ins only.
    marker = tmp_path / "ran"

    class Evil(object):
        def __reduce__(self):
            return (os.system, ("touch %s" % marker,))

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("a/data.pkl", pickle.dumps({"global_step": 7, "epoch": 1, "x": Evil()}, protocol=2))
        archive.writestr("a/version", b"3\n")
    write(os.path.join(str(tmp_path), "epoch=1-val_loss=0.5.ckpt"), buf.getvalue())
    best = ck.latest_valid(str(tmp_path))
    assert (best.step, best.epoch, best.step_from) == (7, 1, "metadata") and not marker.exists()


# Property: the pick never depends on mtimes nor on the text order of names.
NAME_POOL = [("step=%d.ckpt" % s, s) for s in (5, 50, 500)] + [
    ("epoch=%d-step=%d.ckpt" % (s // 100, s), s) for s in (90, 900, 1000)] + [
    ("epoch=%d-step=%d-v1.ckpt" % (s // 100, s), s) for s in (900,)] + [
    ("epoch=%d-val_loss=0.%d.ckpt" % (s // 100, s % 97), s) for s in (77, 777)] + [("last.ckpt", 1000)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picked=st.lists(st.sampled_from(NAME_POOL), min_size=1, max_size=6, unique=True),
       mtimes=st.lists(st.integers(0, 2 ** 31 - 1), min_size=6, max_size=6), data=st.data())
def test_lightning_order_ignores_mtimes_and_name_order(picked, mtimes, data):
    pytest.importorskip("torch")
    first = None
    for _round in range(2):
        root = tempfile.mkdtemp(prefix="ckpt-naming-")
        try:
            order = data.draw(st.permutations(picked))
            for (name, step), mtime in zip(order, mtimes):
                path = lightning_ckpt(root, name, step, epoch=step // 100)
                os.utime(path, (mtime, mtime))
            best = ck.latest_valid(root)
            key = max((step, 0 if name.startswith("last") else 1, 1 if "-v1" in name else 0, name)
                      for name, step in picked)
            assert best.name == key[-1]
            assert first is None or best.name == first
            first = best.name
        finally:
            shutil.rmtree(root)

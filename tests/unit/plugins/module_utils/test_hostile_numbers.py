# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue 38, part 3: every number a user can write is bounded where it is read (``_checkpoint/bounds.py``).

For each kind of file a user writes - the heartbeat, ``state.json`` and ``run.json`` of a registry they may
write, a checkpoint's name, manifest, ``data.pkl`` and DCP ``.metadata``, a replica's manifest - a table of
hostile values written as JSON text (``10**400``, ``1e308``, the ``Infinity`` and ``NaN`` that Python's json
reads, ``-1``, ``true``, ``"7"``, ``[]``, ``{}``): each is refused where it is read, with the file, the field
and the value, never an exception further on. The two-owner cases at the module level are in
tests/unit/plugins/modules/test_hostile_numbers_two_owners.py."""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import bounds, replica_index
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import evidence, observe
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry
from ansible_collections.clusterops.slurm.tests.unit.plugins.module_utils.checkpoint.checkpoint_builders import (
    Metadata,
    MetadataIndex,
)
from ansible_collections.clusterops.slurm.tests.unit.plugins.module_utils.training_remediation_cases import (
    run,
    run_spec,
)

#: ``(id, JSON text)``: what a hostile user writes where a number belongs.
HOSTILE = [
    ("10e400", "1" + "0" * 400),
    ("1e308", "1e308"),
    ("Infinity", "Infinity"),
    ("NaN", "NaN"),
    ("minus-1", "-1"),
    ("true", "true"),
    ("string", '"7"'),
    ("list", "[]"),
    ("object", "{}"),
]
hostile = pytest.mark.parametrize("text", [t for dummy, t in HOSTILE], ids=[i for i, dummy in HOSTILE])
#: The same, less the string: a job id may be a string ("58_1", an array task).
hostile_ids = pytest.mark.parametrize("text", [t for i, t in HOSTILE if i != "string"],
                                      ids=[i for i, dummy in HOSTILE if i != "string"])


def obj(**fields):
    """A JSON object's text whose values are JSON texts (hostile ones included)."""
    return "{%s}" % ", ".join("%s: %s" % (json.dumps(k), v) for k, v in fields.items())


# ---------------------------------------------------------------------------------------------
# The one home of the bounds
# ---------------------------------------------------------------------------------------------

@hostile
def test_each_bound_refuses_every_hostile_value_and_says_it_short(text):
    value = json.loads(text)
    for problem in (bounds.step_problem(value), bounds.time_problem(value), bounds.bytes_problem(value),
                    bounds.number_problem(value, "epoch")):
        assert problem is not None and len(problem) < 120, problem


def test_the_bounds_take_what_the_writers_write_and_show_what_cannot_be_printed():
    assert bounds.step_problem(0) is None and bounds.step_problem(2 ** 53) is None
    assert bounds.step_problem(2 ** 53 + 1) == "step %d is not an integer of 0 to 2**53" % (2 ** 53 + 1)
    assert bounds.time_problem(1796042290.5) is None and bounds.time_problem(0) is None
    assert bounds.bytes_problem(16106127360) is None and bounds.number_problem(2.5, "epoch") is None
    # a pickle's integer of 100000 digits cannot be printed (int_max_str_digits): shown by its bits
    assert bounds.step_problem(10 ** 100000) == "step <a 332193-bit integer> is not an integer of 0 to 2**53"
    assert bounds.time_problem(float("nan")) == "time nan is not a number of seconds of 0 to 4102444800 (2100-01-01)"
    assert bounds.record_value_problem(None, None) is None and "time" in bounds.record_value_problem(1, -1)


# ---------------------------------------------------------------------------------------------
# The heartbeat (observe.read_progress): the run needs a human
# ---------------------------------------------------------------------------------------------

def heartbeat_run(tmp_path, body):
    path = tmp_path / "heartbeat.json"
    path.write_text(body)
    return run(checkpoint_dir=str(tmp_path / "ckpt"), progress="heartbeat", heartbeat_file=str(path),
               hang_timeout=60), str(path)


@hostile
@pytest.mark.parametrize("field", ["step", "time"])
def test_a_heartbeat_number_out_of_range_names_the_file_and_the_field(tmp_path, field, text):
    fields = {"step": "25", "time": "1796042290.5"}
    fields[field] = text
    spec, path = heartbeat_run(tmp_path, obj(**fields))
    with pytest.raises(ValueError) as err:
        observe.read_progress(spec, 7)
    assert str(err.value).startswith("heartbeat %s: %s " % (path, field)), err.value
    # as remediation reads it (as the owner, in a child): that run's folders give an error, no exception
    out = observe.folders_or_failure(dict(spec, owner=None), 7)
    assert set(out) == {"error"} and "heartbeat %s: %s " % (path, field) in out["error"], out


def test_a_heartbeat_in_range_gives_its_step_and_a_mtime_out_of_range_is_refused(tmp_path):
    spec, path = heartbeat_run(tmp_path, obj(step="25", time="1796042290.5"))
    assert observe.read_progress(spec, 7)["step"] == 25
    spec, path = heartbeat_run(tmp_path, obj(step="25"))   # no time: the mtime is the time
    assert observe.read_progress(spec, 7)["step"] == 25
    os.utime(path, (-86400, -86400))     # touch -d 1969-12-31
    with pytest.raises(ValueError, match="%s: mtime -86400.0 is not a number of seconds" % path):
        observe.read_progress(spec, 7)


def test_a_log_file_whose_mtime_is_out_of_range_is_refused(tmp_path):
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "llm-7.out"
    log.write_text("step 1\n")
    os.utime(str(log), (5e9, 5e9))     # touch -d 2128
    spec = run(checkpoint_dir=str(tmp_path / "ckpt"), log_dir=str(tmp_path / "logs"), hang_timeout=60)
    with pytest.raises(ValueError, match="llm-7.out: mtime 5000000000.0 is not a number of seconds"):
        observe.read_progress(spec, 7)


# ---------------------------------------------------------------------------------------------
# state.json and run.json (registry): the run needs a human
# ---------------------------------------------------------------------------------------------

STATE_FIELDS = [("resubmissions", "time"), ("resubmissions", "step"), ("resubmissions", "hang_step"),
                ("hang_cancels", "time"), ("hang_cancels", "step"), ("hang_cancels", "idle")]


def write_state(tmp_path, entry_field, text):
    field, key = entry_field
    entries = {"resubmissions": "[]", "hang_cancels": "[]"}
    entries[field] = "[%s]" % obj(**{"job_id": "58", key: text})
    path = tmp_path / training_registry.STATE_FILE
    path.write_text(obj(format=json.dumps(training_registry.STATE_FORMAT), format_version="1", **entries))
    return str(path)


@hostile
@pytest.mark.parametrize("entry_field", STATE_FIELDS, ids=["%s.%s" % f for f in STATE_FIELDS])
def test_a_state_json_number_out_of_range_names_the_file_and_the_field(tmp_path, entry_field, text):
    path = write_state(tmp_path, entry_field, text)
    with pytest.raises(training_registry.RegistryError) as err:
        training_registry.read_state(str(tmp_path))
    message = str(err.value)
    assert message.startswith(path + " is not a clusterops.training_state file: %s[0].%s " % entry_field), message
    assert "fix or remove it" in message


@hostile_ids
@pytest.mark.parametrize("key", ["job_id", "after_job"])
def test_a_state_json_job_id_out_of_range_names_the_field(tmp_path, key, text):
    (tmp_path / training_registry.STATE_FILE).write_text(obj(
        format=json.dumps(training_registry.STATE_FORMAT), resubmissions="[%s]" % obj(**{key: text})))
    with pytest.raises(training_registry.RegistryError, match=r"resubmissions\[0\]\.%s " % key):
        training_registry.read_state(str(tmp_path))


def test_what_remediation_writes_is_read_back():
    st = training_registry.empty_state()
    st["resubmissions"] = [{"time": 1796042312, "job_id": 99, "after_job": "58_1", "after_state": "HUNG",
                            "step": 2 ** 53, "hang_step": 0}]
    st["hang_cancels"] = [{"time": 1796042300, "job_id": 58, "step": None, "idle": 16, "evidence": None}]
    assert training_registry.state_problem(st) is None


@hostile
@pytest.mark.parametrize("field", ["max_resubmissions", "no_progress_limit", "hang_timeout", "suspect_after", "nodes"])
def test_a_run_json_count_out_of_range_names_the_field(field, text):
    with pytest.raises(training_registry.RegistryError, match="/reg/llm: %s must be an integer of " % field):
        training_registry.validate_run(run_spec(**{field: json.loads(text)}), "/reg/llm")


# ---------------------------------------------------------------------------------------------
# Checkpoints: that checkpoint is not valid, with the reason; the one before it is chosen
# ---------------------------------------------------------------------------------------------

def two_checkpoints(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    for step in (10, 20):
        ck.write_checkpoint(str(folder), step, 0, {"model.pt": b"x" * 64}, fsync=False)
    return folder, folder / "step_000000020" / ck.MANIFEST


def rewrite_manifest(manifest, **fields):
    """The manifest's text with ``fields`` (paths into it: ``epoch`` or ``files.0.size``) replaced by JSON texts."""
    data = json.loads(manifest.read_text())
    marks = {}
    for dotted, text in fields.items():
        parts, target = dotted.split("."), data
        for part in parts[:-1]:
            target = target[int(part) if part.isdigit() else part]
        marks["@@%s@@" % dotted] = text
        target[parts[-1]] = "@@%s@@" % dotted
    body = json.dumps(data)
    for mark, text in marks.items():
        body = body.replace(json.dumps(mark), text)
    manifest.write_text(body)


@hostile
@pytest.mark.parametrize("field", ["epoch", "files.0.size", "step"])
def test_a_manifest_number_out_of_range_makes_that_checkpoint_invalid(tmp_path, field, text):
    folder, manifest = two_checkpoints(tmp_path)
    rewrite_manifest(manifest, **{field: text})
    report = ck.inspect(str(folder), ck.STRUCTURE, list_all=True)   # structure: sizes are not compared with the disk
    older, newer = report.checkpoints
    assert newer.valid is False and field.split(".")[-1] in newer.why_invalid, newer.why_invalid
    assert report.latest_valid is older
    st = observe.checkpoint_status(str(folder), ck.STRUCTURE)
    assert (st["status"], st["step"]) == ("valid", 10) and "step_000000020 is invalid" in st["warnings"][0]


def test_a_checkpoint_name_with_a_step_out_of_range_is_invalid(tmp_path):
    folder, dummy = two_checkpoints(tmp_path)
    huge = folder / ("step_" + "9" * 200)
    os.rename(str(folder / "step_000000020"), str(huge))
    report = ck.inspect(str(folder), ck.STRUCTURE, list_all=True)
    newer = report.checkpoints[-1]
    assert newer.name == huge.name and newer.valid is False
    assert newer.why_invalid == "step <a 665-bit integer> is not an integer of 0 to 2**53"
    assert report.latest_valid.step == 10


def lightning_file(path, global_step, epoch=0):
    """A torch.save-shaped zip (stored entries under one folder) whose data.pkl holds Lightning's keys."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"global_step": global_step, "epoch": epoch}, protocol=2))
        archive.writestr("archive/.format_version", b"1")
        archive.writestr("archive/byteorder", b"little")
        archive.writestr("archive/version", b"3\n")
    path.write_bytes(out.getvalue())


@pytest.mark.parametrize("global_step, epoch", [(10 ** 400, 0), (10 ** 100000, 0), (7, 10 ** 400)],
                         ids=["step-10e400", "step-unprintable", "epoch-10e400"])
def test_a_lightning_data_pkl_number_out_of_range_makes_that_file_invalid(tmp_path, global_step, epoch):
    folder = tmp_path / "run"
    folder.mkdir()
    lightning_file(folder / "epoch=0-val_loss=0.5.ckpt", 5)
    lightning_file(folder / "epoch=1-val_loss=0.4.ckpt", global_step, epoch)
    report = ck.inspect(str(folder), ck.STRUCTURE, list_all=True)
    (bad,) = report.unordered
    assert bad["name"] == "epoch=1-val_loss=0.4.ckpt" and bad["valid"] is False
    assert "data.pkl says " in bad["reason"] and "is not an integer of 0 to 2**53" in bad["reason"]
    assert report.latest_valid.step == 5
    st = observe.checkpoint_status(str(folder), ck.STRUCTURE)
    assert (st["status"], st["step"]) == ("valid", 5), st


class StorageInfo(object):
    """torch.distributed.checkpoint's ``_StorageInfo`` as a pickle holds it (the reader reads its attributes only)."""

    def __init__(self, relative_path, offset, length):
        self.relative_path, self.offset, self.length = relative_path, offset, length


def test_a_dcp_metadata_length_that_cannot_be_printed_makes_that_checkpoint_invalid(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    ck.write_checkpoint(str(folder), 10, 0, {"model.pt": b"x" * 64}, fsync=False)
    dcp = folder / "step-20"
    dcp.mkdir()
    (dcp / "__0_0.distcp").write_bytes(b"\x07" * 64)
    info = StorageInfo("__0_0.distcp", 0, 10 ** 100000)
    (dcp / ".metadata").write_bytes(pickle.dumps(Metadata({MetadataIndex("w"): info}), protocol=4))
    report = ck.inspect(str(folder), ck.SIZES, list_all=True)
    newer = report.checkpoints[-1]
    assert newer.name == "step-20" and newer.valid is False
    assert newer.why_invalid == ".metadata says length <a 332193-bit integer> is not an integer of 0 to 2**63-1 " \
                                "(bytes) for __0_0.distcp"
    assert report.latest_valid.step == 10


# ---------------------------------------------------------------------------------------------
# A replica's manifest: the replica is not used, with the reason; the run folder's copy is
# ---------------------------------------------------------------------------------------------

def replicated(tmp_path):
    folder, replica = tmp_path / "run", tmp_path / "replica"
    folder.mkdir()
    for step in (10, 20):
        ck.write_checkpoint(str(folder), step, 0, {"model.pt": b"x" * 64}, fsync=False)
    ck.replicate(str(folder), str(replica), keep_last=2, fsync=False)
    return folder, replica, replica / ck.REPLICA_INDEX


@hostile
@pytest.mark.parametrize("field", ["step", "name_epoch", "bytes", "files.0.size"])
def test_a_replica_manifest_number_out_of_range_makes_the_replica_unused(tmp_path, field, text):
    folder, replica, index = replicated(tmp_path)
    data = json.loads(index.read_text())
    entry = data["checkpoints"]["step_000000020"]
    if field == "files.0.size":
        entry["files"][0]["size"] = "@@"
    else:
        entry[field] = "@@"
    index.write_text(json.dumps(data).replace('"@@"', text))
    with pytest.raises(ck.CheckpointError) as err:
        replica_index.read_index(str(replica))
    message = str(err.value)
    assert message.startswith("%s: the entry 'step_000000020' " % index), message
    assert field.split(".")[-1] in message
    # remediation resumes from the run folder, and says why the replica is not used
    st = observe.checkpoint_status(str(folder), ck.SIZES, replicas=[str(replica)])
    assert (st["status"], st["step"], st["copy"]) == ("valid", 20, "primary")
    assert any(str(index) in w for w in st["warnings"]), st["warnings"]


# ---------------------------------------------------------------------------------------------
# The hang evidence: srun's labels are read as numbers of at most 9 digits
# ---------------------------------------------------------------------------------------------

def test_a_line_of_the_owners_py_spy_output_is_never_read_as_an_unprintable_number():
    text = "0: Thread 1\n%s: x\n1: Thread 2\n" % ("9" * 5000)
    assert evidence.group_by_task(text).splitlines() == ["9" * 5000 + ": x", "Thread 1", "Thread 2"]

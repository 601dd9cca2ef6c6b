# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Record the real libraries' checkpoints for the unit tests (issue 39 part 4): each library of this suite's venv
saves its tiny model as the tests here do (the same train functions), and the run folder is copied to
tests/unit/fixtures/checkpoints/<library>-<version>/ (a few KB each: tiny models), with a README naming the
versions that wrote it. Run from tests/trainers with the suite's venv:

    ../../.venv-trainers/bin/python record_fixtures.py
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import conftest  # noqa: E402,F401  pylint: disable=import-error,unused-import  # one thread, kill_at's wrappers
import test_accelerate  # noqa: E402  pylint: disable=import-error
import test_dcp  # noqa: E402  pylint: disable=import-error
import test_deepspeed  # noqa: E402  pylint: disable=import-error
import test_hf_trainer  # noqa: E402  pylint: disable=import-error

OUT = os.path.join(HERE, "..", "unit", "fixtures", "checkpoints")

README = """# %(title)s, recorded

Written by tests/trainers/record_fixtures.py (the real-library suite's own train functions, %(test)s) with
%(versions)s, on the CPU: %(what)s.

`files.json` lists every file the library wrote, in the run folder's terms (`path`, `size` in bytes, `kind`);
`files/` holds the small ones whole (JSON, torch.distributed.checkpoint `.metadata`, DeepSpeed's `latest`) and,
for each torch.save zip, its `data.pkl` (`<path>.data.pkl`: what a check reads without torch). The unit tests
rebuild the folder from them (checkpoint_builders.rebuild_recorded: each zip with its recorded data.pkl, each
safetensors file and data file of its recorded size) and damage copies of it
(tests/unit/plugins/module_utils/checkpoint/test_recorded_trainers.py).
"""


def versions(*names):
    found = ["torch %s" % torch.__version__]
    for name in names:
        found.append("%s %s" % (name, __import__(name).__version__))
    return ", ".join(found)


#: Files kept whole: metadata a check reads (and a few KB at most)
SMALL = 16 << 10


def _kind(rel, path):
    if rel.endswith(".distcp"):   # its records are read by their offsets in .metadata: rebuilt by size
        return "bytes"
    with open(path, "rb") as handle:
        head = handle.read(4)
    if head == b"PK\x03\x04":
        return "zip"
    if rel.endswith(".safetensors"):
        return "safetensors"
    return "copy"


def record(name, run_dir, title, test, what, libs, keep=None):
    target = os.path.join(OUT, name)
    if os.path.exists(target):
        shutil.rmtree(target)
    os.makedirs(os.path.join(target, "files"))
    listed = []
    for dirpath, _dirs, filenames in os.walk(run_dir):
        for filename in sorted(filenames):
            if filename in (keep or []):
                continue
            path = os.path.join(dirpath, filename)
            rel = os.path.relpath(path, run_dir).replace(os.sep, "/")
            kind, size = _kind(rel, path), os.path.getsize(path)
            listed.append({"path": rel, "size": size, "kind": kind})
            dest = os.path.join(target, "files", rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if kind == "copy":
                assert size <= SMALL, (rel, size)
                shutil.copyfile(path, dest)
            elif kind == "zip":
                with zipfile.ZipFile(path) as archive:
                    pkl = [i for i in archive.infolist() if i.filename.endswith("/data.pkl")][0]
                    assert pkl.file_size <= SMALL, (rel, pkl.file_size)
                    with open(dest + ".data.pkl", "wb") as handle:
                        handle.write(archive.read(pkl))
    with open(os.path.join(target, "files.json"), "w") as handle:
        json.dump({"files": sorted(listed, key=lambda f: f["path"])}, handle, indent=1)
        handle.write("\n")
    with open(os.path.join(target, "README.md"), "w") as handle:
        handle.write(README % dict(title=title, test=test, versions=versions(*libs), what=what))
    print(name, sum(os.path.getsize(os.path.join(d, f)) for d, _s, fs in os.walk(target) for f in fs), "bytes")


def main():
    base = tempfile.mkdtemp(prefix="record-")
    import transformers  # pylint: disable=import-outside-toplevel
    run = os.path.join(base, "hf")
    made, _recorder = test_hf_trainer.trainer(run)
    made.train()
    record("transformers-%s" % transformers.__version__, run, "Hugging Face Trainer checkpoint-<S>",
           "tests/trainers/test_hf_trainer.py", "a GPT-2 of one layer, checkpoint-2 and checkpoint-4",
           ["transformers", "accelerate"])
    import accelerate  # pylint: disable=import-outside-toplevel
    run = os.path.join(base, "accelerate", "run")
    os.makedirs(run)
    test_accelerate.train(run, "step_<S>", True)
    record("accelerate-%s-step" % accelerate.__version__, run, "Accelerate save_state to step_<S>, one registered object",
           "tests/trainers/test_accelerate.py", "a Llama of one layer, AdamW, LambdaLR and one registered object "
           "(custom_checkpoint_0.pkl), step_2 and step_4", ["transformers", "accelerate"])
    run = os.path.join(base, "dcp")
    test_dcp._spawn(__import__("pathlib").Path(base), "save", [(run, None)])  # pylint: disable=protected-access
    record("torch-%s-dcp-rank-local" % torch.__version__.split("+")[0], run,
           "torch.distributed.checkpoint with rank-local metadata", "tests/trainers/test_dcp.py",
           "dcp.save(use_collectives=False) on two gloo ranks, step-2 and step-4", [],
           keep=[])
    import deepspeed  # pylint: disable=import-outside-toplevel
    run = os.path.join(base, "deepspeed")
    test_deepspeed._spawn(__import__("pathlib").Path(base), "save", [(run, None, None)])  # pylint: disable=protected-access
    record("deepspeed-%s-zero2" % deepspeed.__version__, run, "DeepSpeed ZeRO-2 save_checkpoint",
           "tests/trainers/test_deepspeed.py", "two gloo ranks, global_step2 and global_step4 and latest "
           "(zero_to_fp32.py and zero_to_torch.py left out: scripts deepspeed copies beside them)", ["deepspeed"],
           keep=["zero_to_fp32.py", "zero_to_torch.py"])
    shutil.rmtree(base)


if __name__ == "__main__":
    main()

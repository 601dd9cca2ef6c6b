# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: finding the newest valid checkpoint among many, and sha256 verification throughput.

Prints figures; it is not a timed test and asserts nothing about speed.

1. Builds ``--count`` (default 10,000) contract checkpoints (``step_N/`` with one 4 KiB file and
   its manifest) in a temporary folder, then times, best and median of ``--repeat`` runs:

   * ``latest_valid`` at ``sizes`` and at ``sha256`` (what the job launcher calls: only the newest
     is checked deeply);
   * the same when the 3 newest are broken (fall back three times);
   * ``inspect`` as ``checkpoint_info`` runs it by default (every checkpoint at ``structure``);
   * ``inspect(validate="sha256", validate_all=True)`` (a pruning job verifying everything);
   * the command line ``python3 clusterops_checkpoint latest DIR`` as a launcher runs it (interpreter
     start included), with the system python when there is one.

2. Writes one ``--big-mib`` (default 512) MiB file of random bytes into a contract checkpoint and
   compares ``verify(..., "sha256")`` with raw ``hashlib.sha256`` over the same bytes already in
   memory (the upper bound), and ``hashlib.file_digest`` where Python has it. The file has just
   been written, so it is read from the page cache: this measures the hashing path, not the disk.
   It also prints the most memory ``verify`` allocated at once (tracemalloc: constant memory), and
   ``hash_file`` throughput for a few chunk sizes.

Usage: .venv/bin/python benchmarks/checkpoint_scan.py [--count 10000] [--big-mib 512] [--repeat 5]
                                                     [--dir PARENT] [--json FILE]
"""

import argparse
import hashlib
import json
import os
import pickle
import platform
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY_DIR = os.path.join(REPO, "plugins", "module_utils")
sys.path.insert(0, LIBRARY_DIR)

import _checkpoint as ck  # noqa: E402  pylint: disable=wrong-import-position,import-error

MIB = 1 << 20


def timed(func, repeat):
    """(best, median) wall seconds of ``repeat`` calls, and the last result."""
    times = []
    result = None
    for _run in range(repeat):
        start = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), result


def build_run(root, count):
    payload = os.urandom(4096)
    start = time.perf_counter()
    for index in range(count):
        ck.write_checkpoint(root, (index + 1) * 100, index // 1000, {"model.pt": payload}, fsync=False)
    return time.perf_counter() - start


def break_newest(root, count, broken):
    for index in range(count - broken, count):
        path = os.path.join(root, ck.checkpoint_name((index + 1) * 100), "model.pt")
        with open(path, "r+b") as handle:
            handle.truncate(4000)


def scan_figures(parent, count, repeat):
    root = os.path.join(parent, "run")
    os.mkdir(root)
    rows = []
    built = build_run(root, count)
    print("built %d checkpoint folders in %.1f s (fsync off)" % (count, built))
    newest = ck.checkpoint_name(count * 100)

    def row(what, func, expect):
        best, median, result = timed(func, repeat)
        name = result.name if hasattr(result, "name") else getattr(result, "latest_valid", None) and result.latest_valid.name
        assert name == expect, (what, name, expect)
        rows.append(dict(what=what, best_ms=best * 1000, median_ms=median * 1000))
        print("  %-66s best %8.1f ms   median %8.1f ms" % (what, best * 1000, median * 1000))

    print("\nnewest valid among %d contract checkpoints (warm cache, %d runs):" % (count, repeat))
    row("latest_valid, sizes (launcher default)", lambda: ck.latest_valid(root, "sizes"), newest)
    row("latest_valid, sha256 of the newest only", lambda: ck.latest_valid(root, "sha256"), newest)
    row("inspect, every checkpoint at structure + newest at sizes",
        lambda: ck.inspect(root, "sizes"), newest)
    row("inspect, sha256 of every checkpoint (validate_all)",
        lambda: ck.inspect(root, "sha256", validate_all=True), newest)
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    tool = os.path.join(tempfile.mkdtemp(prefix="ckpt-scan-tool-"), "clusterops_checkpoint")  # as installed
    shutil.copytree(os.path.join(LIBRARY_DIR, "_checkpoint"), tool, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(REPO, "roles", "checkpoint_tool", "files", "__main__.py"), tool)  # the role's entry point
    cli = [python, tool, "latest", root]

    def run_cli():
        out = subprocess.run(cli, stdout=subprocess.PIPE, check=True, universal_newlines=True).stdout.strip()
        return type("R", (), {"name": os.path.basename(out)})()

    row("CLI: %s clusterops_checkpoint latest DIR (with process start)" % os.path.basename(python), run_cli, newest)
    shutil.rmtree(os.path.dirname(tool))
    break_newest(root, count, 3)
    fallback = ck.checkpoint_name((count - 3) * 100)
    print("\nthe 3 newest truncated:")
    row("latest_valid, sizes: falls back 3 times", lambda: ck.latest_valid(root, "sizes"), fallback)
    row("latest_valid, sha256: falls back 3 times", lambda: ck.latest_valid(root, "sha256"), fallback)
    shutil.rmtree(root)
    return dict(count=count, build_s=built, rows=rows)


def lightning_file(path, step, layers=50):
    """A file laid out as Lightning's torch.save writes it (zip, data.pkl with global_step and a
    50-entry state_dict whose tensors are persistent ids), built without torch."""
    state = {"epoch": step // 1000, "global_step": step, "pytorch-lightning_version": "2.5.1",
             "state_dict": dict(("layer%d.weight" % i, "storage %d" % i) for i in range(layers)),
             "optimizer_states": [], "lr_schedulers": [], "loops": {}, "callbacks": {}}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", pickle.dumps(state, protocol=2))
        archive.writestr("archive/version", b"3\n")
        for i in range(layers):
            archive.writestr("archive/data/%d" % i, b"\0" * 16)


def lightning_figures(parent, count, repeat):
    """``latest_valid`` over Lightning ``.ckpt`` files: the step in the name, then only in the file."""
    rows = []
    print("\nnewest valid among %d Lightning .ckpt files (warm cache, %d runs):" % (count, repeat))
    for what, name in (("step in the name (epoch=E-step=S.ckpt)", "epoch=%d-step=%d.ckpt"),
                       ("step only in data.pkl (epoch=E-val_loss=X.ckpt)", "epoch=%d-val_loss=0.%d.ckpt")):
        root = os.path.join(parent, "lightning")
        os.mkdir(root)
        for index in range(count):
            step = (index + 1) * 10
            lightning_file(os.path.join(root, name % (step // 1000, step)), step)
        best, median, result = timed(lambda r=root: ck.latest_valid(r, "sizes"), repeat)
        assert result.step == count * 10, (what, result)
        rows.append(dict(what=what, best_ms=best * 1000, median_ms=median * 1000))
        print("  %-66s best %8.1f ms   median %8.1f ms" % (what, best * 1000, median * 1000))
        shutil.rmtree(root)
    return dict(count=count, rows=rows)


def throughput_figures(parent, big_mib, repeat):
    root = os.path.join(parent, "big")
    os.mkdir(root)
    size = big_mib * MIB

    def fill(staging):
        with open(os.path.join(staging, "model.pt"), "wb") as handle:
            for _mib in range(big_mib):
                handle.write(os.urandom(MIB))

    path = ck.write_checkpoint(root, 1, 0, fill, fsync=False)
    data_path = os.path.join(path, "model.pt")
    ck.verify(path, "sha256")  # one pass so that every run reads from the page cache

    print("\nsha256 of one %d MiB file (page cache, %d runs):" % (big_mib, repeat))
    best, median, result = timed(lambda: ck.verify(path, "sha256"), repeat)
    assert result.valid, result.why_invalid
    tracemalloc.start()
    ck.verify(path, "sha256")
    peak_kib = tracemalloc.get_traced_memory()[1] // 1024
    tracemalloc.stop()
    rows = [dict(what="verify(sha256)", best_s=best, mb_s=size / best / 1e6)]
    print("  %-44s %8.0f MB/s  (best %.3f s, median %.3f s)" % (
        "verify(checkpoint, 'sha256')", size / best / 1e6, best, median))
    print("  %-44s %8d KiB  (tracemalloc peak, for a %d MiB file)" % ("memory allocated by verify", peak_kib, big_mib))

    for chunk in (64 * 1024, 256 * 1024, MIB, 4 * MIB, 16 * MIB):
        best, _median, _result = timed(lambda c=chunk: ck.hash_file(data_path, chunk_size=c), repeat)
        rows.append(dict(what="hash_file chunk %d KiB" % (chunk // 1024), best_s=best, mb_s=size / best / 1e6))
        print("  %-44s %8.0f MB/s%s" % ("hash_file, %5d KiB chunks" % (chunk // 1024), size / best / 1e6,
                                        "  <- CHUNK_SIZE" if chunk == ck.CHUNK_SIZE else ""))
    if hasattr(hashlib, "file_digest"):
        def file_digest():
            with open(data_path, "rb") as handle:
                return hashlib.file_digest(handle, "sha256")
        best, _median, _result = timed(file_digest, repeat)
        rows.append(dict(what="hashlib.file_digest", best_s=best, mb_s=size / best / 1e6))
        print("  %-44s %8.0f MB/s" % ("hashlib.file_digest(file, 'sha256')", size / best / 1e6))
    with open(data_path, "rb") as handle:
        data = handle.read()
    best, _median, _result = timed(lambda: hashlib.sha256(data).hexdigest(), repeat)
    rows.append(dict(what="raw hashlib.sha256 (bytes in memory)", best_s=best, mb_s=size / best / 1e6))
    print("  %-44s %8.0f MB/s  (upper bound: no reading)" % ("raw hashlib.sha256(bytes in memory)", size / best / 1e6))
    del data
    shutil.rmtree(root)
    return dict(size_mib=big_mib, verify_peak_alloc_kib=peak_kib, rows=rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--lightning-count", type=int, default=1000)
    parser.add_argument("--big-mib", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", help="parent of the temporary folder (default: the system's)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    print("machine: %s, %d CPUs, Python %s, %s" % (platform.machine(), os.cpu_count() or 0,
                                                   platform.python_version(), ssl.OPENSSL_VERSION))
    parent = tempfile.mkdtemp(prefix="clusterops-ckpt-bench-", dir=args.dir)
    try:
        figures = dict(scan=scan_figures(parent, args.count, args.repeat),
                       lightning=lightning_figures(parent, args.lightning_count, args.repeat),
                       sha256=throughput_figures(parent, args.big_mib, args.repeat))
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(figures, handle, indent=2)


if __name__ == "__main__":
    main()

# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: replicating checkpoints to a replica folder (``_checkpoint.replicate``): throughput, the
bandwidth limit, replica lag, the cost of a cron run with nothing to copy, and ``best_copy``.

Prints figures; it is not a timed test and asserts nothing about speed.

1. **Throughput.** Writes one contract checkpoint of ``--size-mb`` MiB (default 1024, in ``--files``
   files, default 4; random-ish bytes: a 16 MiB random block repeated, each 1 MiB stamped, written with
   fsync) and copies it to a fresh replica folder with ``replicate(keep_last=2, fsync=True)``,
   ``--repeat`` times (default 3) with the page cache warm (the checkpoint was just written) and as
   often cold (the run folder's files dropped from the page cache with ``posix_fadvise(DONTNEED)``
   first; the VM's host may still cache them). Figures: the copy's own ``seconds``
   (``result.copied[0]["seconds"]``: copy with sha256 of what is read, fsync of each file, read back,
   rename, check), the wall time of the whole call (the run folder's scan, the replica's index and scan
   included), and the time of each step (wrappers around ``replicas``' functions). Reference floor:
   ``cp -r`` of the same folder then ``sync`` (an argument list, no shell). ``sync`` before each timed run.
2. **Bandwidth limit.** The same copy with ``bwlimit`` (``--bwlimit``, default ``100M`` = 100 MiB/s, the
   command line's units) at the ``sizes`` and at the ``sha256`` level: the achieved rate of the paced
   part (``_copy_checkpoint``) and of the whole copy against the limit.
3. **Lag.** A separate process writes a ``--lag-size-mb`` (default 64) MiB checkpoint every
   ``--interval`` seconds (default 3; fsync on) while ``replicate(keep_last=2)`` runs every
   ``--replicate-every`` seconds (default twice the interval; half an interval after the writes start)
   for ``--rounds`` rounds (default 6). Per round: the lag a dry run sees just before (what the replica
   had fallen behind), the lag ``replicate`` returns (as of its own scan), and a dry run's just after
   (checkpoints written while it copied). Then a replication with nothing new of that run folder at
   ``sizes`` and at ``sha256`` (at ``sha256`` the run folder's newest valid checkpoint is hashed).
4. **No-op cost.** A run folder of ``--noop-count`` (default 200) small checkpoints (one 4 KiB file each)
   whose 2 newest are already in the replica: ``replicate`` with nothing to copy or delete, what a cron
   job pays every time, in process (best and median of ``--noop-repeat``, default 10) and as the command
   cron runs (``/usr/bin/python3 clusterops_checkpoint replicate RUN REPLICA --quiet``, process start
   included, against the same command on an empty run folder).
5. **best_copy.** ``best_copy(run, [replica])`` against ``inspect`` of the run folder alone, for the
   folder of 4. at ``sizes`` and for the checkpoint of 1. at ``sha256``.

Ends with a Markdown table of the figures and the machine: CPUs, the file system of the run folder and
of the replica (``stat -f -c %T`` and /proc/mounts), Python, the load average at the start and the end.
Default run: about 2 minutes on 2 cores; the temporary folders are removed at the end.

Usage: .venv/bin/python benchmarks/checkpoint_replicate.py [--size-mb 1024] [--files 4] [--repeat 3]
           [--bwlimit 100M] [--lag-size-mb 64] [--interval 3] [--replicate-every 6] [--rounds 6]
           [--noop-count 200] [--noop-repeat 10] [--dir PARENT] [--replica-dir PARENT] [--json FILE]
"""

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY_DIR = os.path.join(REPO, "plugins", "module_utils")
sys.path.insert(0, LIBRARY_DIR)

import _checkpoint as ck  # noqa: E402  pylint: disable=wrong-import-position,import-error
import _checkpoint.replicas as ckr  # noqa: E402  pylint: disable=wrong-import-position,import-error
from _checkpoint.pruning import parse_size  # noqa: E402  pylint: disable=wrong-import-position,import-error

MIB = 1 << 20
MB = 1e6
#: The functions of replicas.py timed one by one (none of them calls another of them).
PHASES = ("inspect", "read_index", "_copy_checkpoint", "_read_back", "check_checkpoint", "_write_index")


class Phases(object):
    """Wall seconds spent in each of :data:`PHASES` (module-level functions of replicas.py, wrapped), while active."""

    def __init__(self) -> None:
        self.seconds: Dict[str, float] = dict((name, 0.0) for name in PHASES)
        self.saved: Dict[str, Callable[..., Any]] = {}

    def _wrap(self, name: str) -> None:
        real = getattr(ckr, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
        self.saved[name] = real
        setattr(ckr, name, timed)

    def __enter__(self) -> "Phases":
        for name in PHASES:
            self._wrap(name)
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, real in self.saved.items():
            setattr(ckr, name, real)

    def line(self, wall: float) -> str:
        parts = ["scan (inspect) %.2f" % self.seconds["inspect"], "index %.3f" % (
            self.seconds["read_index"] + self.seconds["_write_index"]),
            "copy+hash+fsync %.2f" % self.seconds["_copy_checkpoint"], "read back %.2f" % self.seconds["_read_back"],
            "check %.2f" % self.seconds["check_checkpoint"]]
        other = wall - sum(self.seconds.values())
        return ", ".join(parts) + ", other %.2f s" % other


def fs_type(path: str) -> str:
    """``stat -f -c %T`` of ``path`` and the type /proc/mounts gives its mount point (ext4 where stat says ext2/ext3)."""
    kind = subprocess.run(["stat", "-f", "-c", "%T", path], stdout=subprocess.PIPE, universal_newlines=True,
                          check=False).stdout.strip() or "?"
    real, best, mount_type = os.path.realpath(path), "", ""
    try:
        with open("/proc/mounts") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) > 2 and (real == fields[1] or real.startswith(fields[1].rstrip("/") + "/")) \
                        and len(fields[1]) >= len(best):
                    best, mount_type = fields[1], fields[2]
    except OSError:
        pass
    return "%s (%s on %s)" % (kind, mount_type, best) if mount_type else kind


def sync() -> None:
    subprocess.run([shutil.which("sync") or "sync"], check=True)


def evict(folder: str) -> None:
    """Drop the (clean) pages of every file under ``folder`` from the page cache."""
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(d, n)) for d, _s, files in os.walk(folder) for n in files)


def write_big(run: str, size_mib: int, files: int) -> Tuple[str, float]:
    """One contract checkpoint of ``size_mib`` MiB in ``files`` files, fsync on; (its path, seconds)."""
    block = os.urandom(16 * MIB)
    per_file = [size_mib // files + (1 if i < size_mib % files else 0) for i in range(files)]

    def fill(staging: str) -> None:
        for index, mib in enumerate(per_file):
            with open(os.path.join(staging, "model-%05d-of-%05d.bin" % (index + 1, files)), "wb") as handle:
                for part in range(mib):
                    offset = (part % 16) * MIB
                    handle.write(b"%08d%08d" % (index, part) + block[offset + 16:offset + MIB])

    start = time.perf_counter()
    path = ck.write_checkpoint(run, 1000, 0, fill, fsync=True)
    return path, time.perf_counter() - start


def spread(values: List[float], fmt: str = "%.0f") -> str:
    """``median (min-max)``, or the one value."""
    if len(values) == 1:
        return fmt % values[0]
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(values), min(values), max(values))


def throughput(parent: str, replica_parent: str, ckpt: str, repeat: int, figures: Dict[str, Any]) -> str:
    """Section 1; returns the path of the last replica (kept for section 5)."""
    run = os.path.dirname(ckpt)
    size = folder_bytes(ckpt)
    print("\n1. replicate one checkpoint of %.0f MiB (%d files + manifest), fsync on, %d runs each:" % (
        size / MIB, len(os.listdir(ckpt)) - 1, repeat))
    replica = ""
    rows = figures["throughput"] = []
    for cache in ("warm", "cold"):
        copy_rates: List[float] = []
        wall_rates: List[float] = []
        cp_rates: List[float] = []
        for rep in range(repeat):
            if replica:
                shutil.rmtree(replica)
            replica = os.path.join(replica_parent, "replica-%s-%d" % (cache, rep))
            sync()
            if cache == "cold":
                evict(run)
            with Phases() as phases:
                start = time.perf_counter()
                result = ck.replicate(run, replica, keep_last=2, fsync=True)
                wall = time.perf_counter() - start
            assert result.error is None and len(result.copied) == 1, result.to_dict()
            copied = result.copied[0]
            copy_rates.append(copied["bytes"] / copied["seconds"] / MB)
            wall_rates.append(copied["bytes"] / wall / MB)
            print("  %s cache, replicate: copy %.2f s = %.0f MB/s, whole call %.2f s = %.0f MB/s; %s" % (
                cache, copied["seconds"], copy_rates[-1], wall, wall_rates[-1], phases.line(wall)))
            target = os.path.join(replica_parent, "cp-%s-%d" % (cache, rep))
            sync()
            if cache == "cold":
                evict(run)
            start = time.perf_counter()
            subprocess.run([shutil.which("cp") or "cp", "-r", ckpt, target], check=True)
            sync()
            seconds = time.perf_counter() - start
            cp_rates.append(size / seconds / MB)
            print("  %s cache, cp -r + sync: %.2f s = %.0f MB/s" % (cache, seconds, cp_rates[-1]))
            shutil.rmtree(target)
        rows.append(dict(cache=cache, copy_mb_s=copy_rates, wall_mb_s=wall_rates, cp_sync_mb_s=cp_rates))
    figures["throughput_bytes"] = size
    return replica


def bandwidth(replica_parent: str, run: str, limit: float, figures: Dict[str, Any]) -> None:
    print("\n2. the same with bwlimit %.1f MB/s (%.0f MiB/s), page cache warm:" % (limit / MB, limit / MIB))
    rows = figures["bwlimit"] = []
    for level in ("sizes", "sha256"):
        replica = os.path.join(replica_parent, "replica-bwlimit-%s" % level)
        sync()
        with Phases() as phases:
            start = time.perf_counter()
            result = ck.replicate(run, replica, keep_last=2, validate=level, bwlimit=limit, fsync=True)
            wall = time.perf_counter() - start
        assert result.error is None and len(result.copied) == 1, result.to_dict()
        copied = result.copied[0]
        paced = copied["bytes"] / phases.seconds["_copy_checkpoint"] / MB
        whole = copied["bytes"] / copied["seconds"] / MB
        rows.append(dict(validate=level, limit_mb_s=limit / MB, paced_mb_s=paced, copy_mb_s=whole,
                         wall_s=wall, scan_s=phases.seconds["inspect"]))
        print("  validate %s: paced part (_copy_checkpoint) %.1f MB/s = %.3f x the limit; whole copy %.1f MB/s; "
              "call %.2f s; %s" % (level, paced, paced * MB / limit, whole, wall, phases.line(wall)))
        shutil.rmtree(replica)


def writer_loop(run: str, interval: float, size_mib: int, t0: float, stop: Any, queue: Any) -> None:
    """The training run of section 3: checkpoint step 100, 200, ... at t0, t0 + interval, ... (fsync on)."""
    block = os.urandom(MIB)
    index = 0
    while True:
        wait = t0 + index * interval - time.time()
        if stop.wait(max(wait, 0)):
            return
        step = (index + 1) * 100

        def fill(staging: str, step: int = step) -> None:
            with open(os.path.join(staging, "model.pt"), "wb") as handle:
                for part in range(size_mib):
                    handle.write(b"%08d%08d" % (step, part) + block[16:])

        start = time.time()
        ck.write_checkpoint(run, step, 0, fill, fsync=True)
        queue.put((step, start - t0, time.time() - start))
        index += 1


def _lag(lag: Dict[str, Any]) -> Tuple[Optional[int], Optional[float]]:
    return lag.get("checkpoints_behind"), lag.get("seconds_behind")


def _fmt_lag(lag: Tuple[Optional[int], Optional[float]]) -> str:
    return "%s behind, %s s" % ("-" if lag[0] is None else lag[0], "-" if lag[1] is None else "%.1f" % lag[1])


def lag_test(parent: str, replica_parent: str, size_mib: int, interval: float, every: float, rounds: int,
             figures: Dict[str, Any]) -> None:
    run = os.path.join(parent, "lag-run")
    replica = os.path.join(replica_parent, "lag-replica")
    os.mkdir(run)
    os.mkdir(replica)
    print("\n3. lag: a %d MiB checkpoint every %.1f s (another process, fsync on), replicate(keep_last=2) every "
          "%.1f s, %d rounds:" % (size_mib, interval, every, rounds))
    print("  %5s %7s %8s %6s %8s %18s %18s %18s" % ("round", "t s", "primary", "copied", "wall s",
                                                    "lag before", "lag returned", "lag just after"))
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    queue = context.Queue()
    t0 = time.time() + 0.5
    writer = context.Process(target=writer_loop, args=(run, interval, size_mib, t0, stop, queue), daemon=True)
    writer.start()
    rows: List[Dict[str, Any]] = []
    writes: List[Tuple[int, float, float]] = []
    try:
        for number in range(1, rounds + 1):
            wait = t0 + number * every + interval / 2 - time.time()
            if wait > 0:
                time.sleep(wait)
            before = ck.replicate(run, replica, keep_last=2, dry_run=True)
            start = time.perf_counter()
            result = ck.replicate(run, replica, keep_last=2, fsync=True)
            wall = time.perf_counter() - start
            after = ck.replicate(run, replica, keep_last=2, dry_run=True)
            assert result.error is None, result.error
            row: Dict[str, Any] = dict(round=number, t=time.time() - t0, primary_step=result.lag.get("primary_step"),
                                       copied=len(result.copied), wall_s=wall, before=_lag(before.lag),
                                       returned=_lag(result.lag), after=_lag(after.lag))
            rows.append(row)
            print("  %5d %7.1f %8s %6d %8.2f %18s %18s %18s" % (
                number, row["t"], row["primary_step"], row["copied"], wall, _fmt_lag(row["before"]),
                _fmt_lag(row["returned"]), _fmt_lag(row["after"])))
    finally:
        stop.set()
        writer.join(60)
        while True:
            try:
                writes.append(queue.get(timeout=0.5))
            except Exception:  # queue.Empty  pylint: disable=broad-except
                break
        if writer.is_alive():
            writer.terminate()
            writer.join()
    maxima = dict((key, (max(r[key][0] or 0 for r in rows), max(r[key][1] or 0.0 for r in rows)))
                  for key in ("before", "returned", "after"))
    later = rows[1:] or rows  # round 1 finds the replica empty: every checkpoint so far is behind
    steady = (max(r["before"][0] or 0 for r in later), max(r["before"][1] or 0.0 for r in later))
    write_s = [w[2] for w in writes]
    print("  max: lag before %s (rounds 2-%d: %s), returned %s, just after %s; %d checkpoints written, each in %s s "
          "(median, min-max)" % (_fmt_lag(maxima["before"]), len(rows), _fmt_lag(steady), _fmt_lag(maxima["returned"]),
                                 _fmt_lag(maxima["after"]), len(writes), spread(write_s, "%.2f") if write_s else "-"))
    figures["lag"] = dict(size_mib=size_mib, interval_s=interval, every_s=every, rounds=rows, max=maxima, steady=steady,
                          write_s=write_s)
    # Nothing new: what replicate costs for this run folder at sizes and at sha256.
    total = folder_bytes(run)
    count = len([n for n in os.listdir(run) if n.startswith("step_")])
    noop = figures["lag"]["noop"] = {}
    for level in ("sizes", "sha256"):
        times = []
        for _rep in range(3):
            start = time.perf_counter()
            result = ck.replicate(run, replica, keep_last=2, validate=level, fsync=True)
            times.append(time.perf_counter() - start)
            assert not result.copied and not result.deleted and result.error is None, result.to_dict()
        noop[level] = min(times)
        print("  nothing new, this run folder (%d checkpoints, %.0f MiB), validate %s: best of 3 %.3f s" % (
            count, total / MIB, level, min(times)))
    figures["lag"]["noop_folder"] = dict(checkpoints=count, bytes=total)


def timed(func: Callable[[], Any], repeat: int) -> Tuple[float, float, Any]:
    """(best, median) wall seconds of ``repeat`` calls, and the last result."""
    times = []
    result = None
    for _run in range(repeat):
        start = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), result


def noop_cost(parent: str, replica_parent: str, count: int, repeat: int, figures: Dict[str, Any]) -> Tuple[str, str]:
    run = os.path.join(parent, "noop-run")
    replica = os.path.join(replica_parent, "noop-replica")
    os.mkdir(run)
    payload = os.urandom(4096)
    for index in range(count):
        ck.write_checkpoint(run, (index + 1) * 100, 0, {"model.pt": payload}, fsync=False)
    first = ck.replicate(run, replica, keep_last=2, fsync=True)
    assert len(first.copied) == 2 and first.error is None, first.to_dict()
    print("\n4. nothing to copy: %d checkpoints (one 4 KiB file each), the 2 newest already in the replica, "
          "%d runs:" % (count, repeat))
    rows = figures["noop"] = {}

    def noop() -> Any:
        result = ck.replicate(run, replica, keep_last=2, fsync=True)
        assert not result.copied and not result.deleted and result.error is None, result.to_dict()
        return result

    best, median, _result = timed(noop, repeat)
    with Phases() as phases:
        start = time.perf_counter()
        noop()
        wall = time.perf_counter() - start
    rows["replicate"] = dict(best_ms=best * 1000, median_ms=median * 1000)
    print("  replicate in process: best %.1f ms, median %.1f ms (one run: %s)" % (
        best * 1000, median * 1000, phases.line(wall)))
    best, median, _result = timed(lambda: ck.inspect(run, "sizes", list_all=True), repeat)
    rows["inspect_list_all"] = dict(best_ms=best * 1000, median_ms=median * 1000)
    print("  of which the run folder's scan, inspect(sizes, list_all=True) alone: best %.1f ms, median %.1f ms" % (
        best * 1000, median * 1000))
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    tool = os.path.join(parent, "clusterops_checkpoint")  # as roles/checkpoint_tool installs it
    shutil.copytree(os.path.join(LIBRARY_DIR, "_checkpoint"), tool, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(REPO, "roles", "checkpoint_tool", "files", "__main__.py"), tool)
    empty, empty_replica = os.path.join(parent, "empty-run"), os.path.join(replica_parent, "empty-replica")
    os.mkdir(empty)
    for label, args in (("cli", [run, replica]), ("cli_empty", [empty, empty_replica])):
        cmd = [python, tool, "replicate"] + args + ["--quiet"]

        def command(cmd: List[str] = cmd) -> Any:
            return subprocess.run(cmd, check=True)

        best, median, _result = timed(command, max(3, repeat // 2))
        rows[label] = dict(best_ms=best * 1000, median_ms=median * 1000)
    print("  CLI with %s, process start included: best %.0f ms, median %.0f ms; on an empty run folder: best %.0f ms, "
          "median %.0f ms" % (python, rows["cli"]["best_ms"], rows["cli"]["median_ms"], rows["cli_empty"]["best_ms"],
                              rows["cli_empty"]["median_ms"]))
    return run, replica


def best_copy_cost(run: str, replica: str, level: str, repeat: int, label: str, rows: List[Dict[str, Any]]) -> None:
    cases: Tuple[Tuple[str, Callable[[], Any]], ...] = (
        ("best_copy(run, [replica])", lambda: ck.best_copy(run, [replica], level)),
        ("inspect(run, list_all=False) (= latest_valid)", lambda: ck.inspect(run, level, list_all=False)),
        ("inspect(run) (every checkpoint at structure)", lambda: ck.inspect(run, level)),
        ("newest_verified(replica)", lambda: ck.newest_verified(replica, level)))
    for what, func in cases:
        best, median, result = timed(func, repeat)
        if what.startswith("best_copy"):
            assert result.checkpoint is not None and result.copy == "primary", result.to_dict()
        rows.append(dict(folder=label, validate=level, what=what, best_ms=best * 1000, median_ms=median * 1000))
        print("  %-34s %-7s %-48s best %9.1f ms, median %9.1f ms" % (label, level, what, best * 1000, median * 1000))


def table(figures: Dict[str, Any], args: argparse.Namespace) -> str:
    size = figures["throughput_bytes"]
    lines = ["| what | figure |", "|---|---|"]
    for row in figures["throughput"]:
        lines.append("| replicate %.0f MiB (%d files), page cache %s: copy (`copied[0].seconds`) | %s MB/s |" % (
            size / MIB, args.files, row["cache"], spread(row["copy_mb_s"])))
        lines.append("| the same, whole `replicate` call | %s MB/s |" % spread(row["wall_mb_s"]))
        lines.append("| `cp -r` + `sync`, page cache %s | %s MB/s |" % (row["cache"], spread(row["cp_sync_mb_s"])))
    for row in figures["bwlimit"]:
        lines.append("| bwlimit %.1f MB/s, validate %s: paced part / whole copy | %.1f / %.1f MB/s (%.3f x the limit) |" % (
            row["limit_mb_s"], row["validate"], row["paced_mb_s"], row["copy_mb_s"], row["paced_mb_s"] / row["limit_mb_s"]))
    lag = figures["lag"]
    lines.append("| lag, %d MiB every %.0f s, replicate every %.0f s, %d rounds: max before a replication, "
                 "round 1 (replica empty); rounds 2-%d | %s; %s |" % (
                     lag["size_mib"], lag["interval_s"], lag["every_s"], len(lag["rounds"]), len(lag["rounds"]),
                     _fmt_lag(lag["rounds"][0]["before"]), _fmt_lag(lag["steady"])))
    lines.append("| lag returned by `replicate` (as of its scan); a dry run's just after, max | %s; %s |" % (
        _fmt_lag(lag["max"]["returned"]), _fmt_lag(lag["max"]["after"])))
    walls = [r["wall_s"] for r in lag["rounds"] if r["copied"]]
    if walls:
        lines.append("| replicate of 2 new %d MiB checkpoints (wall) | %s s |" % (lag["size_mib"], spread(walls, "%.2f")))
    folder = lag["noop_folder"]
    lines.append("| nothing new, %d checkpoints of %d MiB, validate sizes / sha256 | %.0f ms / %.0f ms |" % (
        folder["checkpoints"], lag["size_mib"], lag["noop"]["sizes"] * 1000, lag["noop"]["sha256"] * 1000))
    noop = figures["noop"]
    lines.append("| nothing new, %d small checkpoints: `replicate` in process (best / median) | %.1f / %.1f ms |" % (
        args.noop_count, noop["replicate"]["best_ms"], noop["replicate"]["median_ms"]))
    lines.append("| of which `inspect(sizes, list_all=True)` of the run folder (replicate's scan) | %.1f / %.1f ms |" % (
        noop["inspect_list_all"]["best_ms"], noop["inspect_list_all"]["median_ms"]))
    lines.append("| the CLI cron runs, process start included / on an empty run folder (median) | %.0f / %.0f ms |" % (
        noop["cli"]["median_ms"], noop["cli_empty"]["median_ms"]))
    for row in figures["best_copy"]:
        lines.append("| %s, %s: %s (best / median) | %.1f / %.1f ms |" % (
            row["folder"], row["validate"], row["what"].replace("|", "/"), row["best_ms"], row["median_ms"]))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="MiB in the checkpoint of sections 1, 2, 5")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bwlimit", default="100M", help="as the command line takes it (binary units)")
    parser.add_argument("--lag-size-mb", type=int, default=64)
    parser.add_argument("--interval", type=float, default=3.0, help="seconds between two checkpoints (section 3)")
    parser.add_argument("--replicate-every", type=float, default=None, help="seconds (default: 2 x --interval)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--noop-count", type=int, default=200)
    parser.add_argument("--noop-repeat", type=int, default=10)
    parser.add_argument("--dir", help="parent of the temporary run folders (default: the system's)")
    parser.add_argument("--replica-dir", help="parent of the temporary replica folders (default: as --dir)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    every = args.replicate_every or 2 * args.interval
    started = time.perf_counter()
    load_start = os.getloadavg()
    parent = tempfile.mkdtemp(prefix="ckpt-replicate-bench-", dir=args.dir)
    replica_parent = tempfile.mkdtemp(prefix="ckpt-replicate-bench-replicas-", dir=args.replica_dir or args.dir)
    machine: Dict[str, Any] = dict(cpus=os.cpu_count(), python=platform.python_version(), kernel=platform.release(),
                                   run_fs=fs_type(parent), replica_fs=fs_type(replica_parent), load_start=load_start)
    print("%d CPUs, Python %s, Linux %s; run folder %s: %s; replica %s: %s; load average %.2f %.2f %.2f" % (
        machine["cpus"], machine["python"], machine["kernel"], parent, machine["run_fs"], replica_parent,
        machine["replica_fs"], *load_start))
    figures: Dict[str, Any] = dict(machine=machine, best_copy=[])
    try:
        big_run = os.path.join(parent, "big-run")
        os.mkdir(big_run)
        ckpt, seconds = write_big(big_run, args.size_mb, args.files)
        print("wrote %s: %.0f MiB in %.1f s (write_checkpoint, fsync on: write, hash, fsync)" % (
            ckpt, folder_bytes(ckpt) / MIB, seconds))
        big_replica = throughput(parent, replica_parent, ckpt, args.repeat, figures)
        bandwidth(replica_parent, big_run, parse_size(args.bwlimit), figures)
        lag_test(parent, replica_parent, args.lag_size_mb, args.interval, every, args.rounds, figures)
        noop_run, noop_replica = noop_cost(parent, replica_parent, args.noop_count, args.noop_repeat, figures)
        print("\n5. best_copy against inspect alone (page cache warm):")
        best_copy_cost(noop_run, noop_replica, "sizes", args.noop_repeat, "%d small checkpoints" % args.noop_count,
                       figures["best_copy"])
        best_copy_cost(big_run, big_replica, "sha256", 3, "1 checkpoint of %d MiB" % args.size_mb, figures["best_copy"])
    finally:
        shutil.rmtree(parent, ignore_errors=True)
        shutil.rmtree(replica_parent, ignore_errors=True)
    machine["load_end"] = os.getloadavg()
    machine["seconds"] = time.perf_counter() - started
    print("\n%s, %d CPUs, Python %s, run folder on %s, replica on %s; load average %.2f at the start, %.2f at "
          "the end (1 min); %.0f s in all\n" % (datetime.date.today().isoformat(), machine["cpus"], machine["python"],
                                                machine["run_fs"], machine["replica_fs"], load_start[0],
                                                machine["load_end"][0], machine["seconds"]))
    print(table(figures, args))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(figures, handle, indent=1, sort_keys=True, default=str)


if __name__ == "__main__":
    main()

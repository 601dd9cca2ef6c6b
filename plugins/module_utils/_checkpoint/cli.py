# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""The command line (runs on cluster hosts without Ansible and without torch; its entry point is the
checkpoint_tool role's ``files/__main__.py``)."""

from __future__ import annotations

import argparse
import json
import logging
import logging.handlers
import os
import sys
import time

try:
    from typing import Any, Optional, Sequence  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .common import (
    CheckpointError,
    EXIT_ERROR,
    EXIT_INVALID,
    EXIT_NONE,
    EXIT_OK,
    FINISHED,
    LEVELS,
    PRUNE_LOCK,
    SHA256,
    SIZES,
)
from .runs import inspect, read_finished, verify
from .pruning import EXIT_LOCKED, human_size, parse_size, prune, PruneLocked, TMP_GRACE
from .copies import best_copy
from .replicas import ReplicaLocked, replicate


_EPILOG = """exit codes:
  0  latest: a valid checkpoint was found (its path is printed); list: listed;
     verify: every checkpoint is valid; finished: the run has a FINISHED marker
  1  latest: the folder holds no checkpoint at all (nothing printed): start from scratch;
     finished: no FINISHED marker
  2  usage error, or the folder is missing, not a folder or unreadable
  3  latest: checkpoints exist but none is valid, or one cannot be ordered (a .ckpt whose
     step neither its name nor its file tells): do not start from scratch blindly;
     verify: a checkpoint is invalid
  4  prune: another prune of the folder is running (it holds the lock); nothing done;
     replicate: another replication into the replica folder is running
prune: 0 when it ran to the end (whether or not it deleted anything); 2 when an error stopped it
(what was deleted before the error is printed and logged)
replicate: 0 when it ran to the end; 2 when an error stopped it (the replica's file system full, a
file that changed while copied): what was copied and verified before stays
latest --replica: as latest, over the run folder and the replicas' verified copies together (a run
folder that does not exist counts as empty)
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clusterops_checkpoint", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG,
        description="Find, list, verify and prune training checkpoints (clusterops.slurm; stdlib only).")
    sub = parser.add_subparsers(dest="command")
    sub.required = True
    level_help = "validation level (default %(default)s; load needs torch)"
    template_help = ("Lightning ModelCheckpoint filename of the run, for names that carry the step without "
                     "step= ({epoch}-{step}); step= and epoch= names need none")
    cmd = sub.add_parser("latest", help="print the path of the newest valid checkpoint")
    cmd.add_argument("dir")
    cmd.add_argument("--validate", choices=LEVELS, default=SIZES, help=level_help)
    cmd.add_argument("--json", action="store_true", help="print the whole report as JSON")
    cmd.add_argument("--quiet", "-q", action="store_true", help="no warnings on stderr")
    cmd.add_argument("--name-template", metavar="TEMPLATE", help=template_help)
    cmd.add_argument("--replica", action="append", default=[], metavar="DIR",
                     help="also consider this replica folder's verified copies; the newest valid checkpoint of "
                          "all copies is printed, the run folder's on a tie (repeatable)")
    cmd = sub.add_parser("list", help="list every checkpoint with its validity")
    cmd.add_argument("dir")
    cmd.add_argument("--validate", choices=LEVELS, default=SIZES, help=level_help)
    cmd.add_argument("--name-template", metavar="TEMPLATE", help=template_help)
    cmd.add_argument("--validate-all", action="store_true", help="check every checkpoint at --validate")
    cmd.add_argument("--json", action="store_true")
    cmd = sub.add_parser("verify", help="check checkpoints (folders or files)")
    cmd.add_argument("paths", nargs="+", metavar="path")
    cmd.add_argument("--validate", choices=LEVELS, default=SHA256, help=level_help)
    cmd.add_argument("--json", action="store_true")
    cmd = sub.add_parser("finished", help="exit 0 when the run has a FINISHED marker")
    cmd.add_argument("dir")
    cmd.add_argument("--json", action="store_true")
    cmd = sub.add_parser(
        "prune", help="delete old checkpoints by policy, never the newest valid one",
        description="Delete old checkpoints of RUN_DIR. Never deleted: the newest valid checkpoint and anything "
                    "newer, what a pointer or symlink names, anything outside the folder, temporary entries "
                    "younger than --tmp-grace. --keep-last 0 or less keeps every checkpoint.")
    cmd.add_argument("dir", metavar="RUN_DIR")
    cmd.add_argument("--keep-last", type=int, required=True, metavar="N",
                     help="keep the N newest valid checkpoints (and anything newer); N <= 0 keeps every checkpoint")
    cmd.add_argument("--keep-every", type=int, default=0, metavar="K",
                     help="also keep checkpoints whose step is a multiple of K (default 0: off)")
    cmd.add_argument("--keep", action="append", default=[], metavar="PATTERN",
                     help="also keep checkpoints whose name matches this shell pattern (repeatable)")
    cmd.add_argument("--min-free", metavar="SIZE|PERCENT",
                     help="delete only while the file system has less available than this (500G, 1.5TiB, 10%%)")
    cmd.add_argument("--tmp-grace", type=float, default=TMP_GRACE, metavar="SECONDS",
                     help="delete temporary entries unchanged for this long (default %(default)d; < 0: never)")
    cmd.add_argument("--validate", choices=LEVELS, default=SIZES, help=level_help)
    cmd.add_argument("--dry-run", "-n", action="store_true", help="delete nothing; print what would go")
    cmd.add_argument("--json", action="store_true", help="print the whole result as JSON")
    cmd.add_argument("--verbose", "-v", action="store_true", help="also print what is kept and why")
    cmd.add_argument("--quiet", "-q", action="store_true", help="print nothing on stdout (for cron)")
    cmd.add_argument("--log", metavar="FILE", help="append one line per deletion, error and run to FILE")
    cmd.add_argument("--log-max-bytes", type=int, default=10 << 20, metavar="BYTES",
                     help="rotate FILE when a run starts and it is this large (default %(default)d; 0: never)")
    cmd.add_argument("--log-backups", type=int, default=5, metavar="N",
                     help="rotated logs kept: FILE.1 ... FILE.N (default %(default)d)")
    cmd.add_argument("--lock-file", metavar="FILE", help="lock file (default RUN_DIR/%s)" % PRUNE_LOCK)
    cmd.add_argument("--replica", action="append", default=[], metavar="DIR",
                     help="a replica folder of RUN_DIR: delete no checkpoint newer than its newest verified copy "
                          "(repeatable)")
    _replicate_parser(sub, level_help, template_help)
    return parser


def _replicate_parser(sub: Any, level_help: str, template_help: str) -> None:
    cmd = sub.add_parser(
        "replicate", help="copy new valid checkpoints to a replica folder, verified",
        description="Copy RUN_DIR's valid checkpoints that REPLICA_DIR's retention keeps and lacks (newest first; "
                    "each written under a temporary name, read back, renamed, checked and entered in the "
                    "replica's index), then remove the copies retention no longer keeps. Prints how far the "
                    "replica lags.")
    cmd.add_argument("dir", metavar="RUN_DIR")
    cmd.add_argument("replica", metavar="REPLICA_DIR")
    cmd.add_argument("--keep-last", type=int, default=2, metavar="N",
                     help="copies kept: the N newest valid (default %(default)d; N <= 0 keeps every copy)")
    cmd.add_argument("--keep-every", type=int, default=0, metavar="K",
                     help="also keep copies whose step is a multiple of K (default 0: off)")
    cmd.add_argument("--bwlimit", metavar="SIZE", help="at most this many bytes per second (100M, 1.5G, 500000)")
    cmd.add_argument("--time-limit", type=float, metavar="SECONDS",
                     help="start no copy after this many seconds; the ones left wait for the next run")
    cmd.add_argument("--validate", choices=LEVELS, default=SIZES, help=level_help)
    cmd.add_argument("--name-template", metavar="TEMPLATE", help=template_help)
    cmd.add_argument("--dry-run", "-n", action="store_true", help="copy and delete nothing; print what would be")
    cmd.add_argument("--json", action="store_true", help="print the whole result as JSON")
    cmd.add_argument("--quiet", "-q", action="store_true", help="print nothing on stdout (for cron)")
    cmd.add_argument("--log", metavar="FILE", help="append one line per copy, deletion, error and run to FILE")
    cmd.add_argument("--log-max-bytes", type=int, default=10 << 20, metavar="BYTES",
                     help="rotate FILE when a run starts and it is this large (default %(default)d; 0: never)")
    cmd.add_argument("--log-backups", type=int, default=5, metavar="N",
                     help="rotated logs kept: FILE.1 ... FILE.N (default %(default)d)")


class _LogFile(object):
    """The prune log for cron runs: one line per event, ``<UTC time> pid=<pid> <run folder>: <line>``.

    Rotation is :class:`logging.handlers.RotatingFileHandler`'s (``FILE`` -> ``FILE.1`` ... ``FILE.N``,
    the oldest dropped), done once when a run starts and the file has ``max_bytes`` or more, never
    in the middle of a run, so one run's lines stay together. ``backups`` <= 0 starts the file
    afresh instead. A rotation the file system refuses is ignored (the lines are appended).

    Raises:
        OSError: the file cannot be opened for appending.
    """

    def __init__(self, path: Optional[str], max_bytes: int, backups: int, run_dir: str) -> None:
        self.handler: Optional[logging.handlers.RotatingFileHandler] = None
        if not path:
            return
        try:
            rotate = max_bytes > 0 and os.path.getsize(path) >= max_bytes
        except OSError:
            rotate = False  # no log yet
        mode = "w" if rotate and backups <= 0 else "a"
        self.handler = logging.handlers.RotatingFileHandler(path, mode=mode, backupCount=max(backups, 0))
        if rotate and backups > 0:
            try:
                self.handler.doRollover()
            except OSError:
                pass  # rotation refused: the next line reopens FILE and appends
        prefix = "pid=%d %s:" % (os.getpid(), os.path.abspath(run_dir))
        formatter = logging.Formatter("%(asctime)s " + prefix.replace("%", "%%") + " %(message)s",
                                      datefmt="%Y-%m-%dT%H:%M:%SZ")
        formatter.converter = time.gmtime
        self.handler.setFormatter(formatter)
        self.logger = logging.Logger("clusterops_checkpoint.prune")  # not registered: no global logging state
        self.logger.propagate = False
        self.logger.addHandler(self.handler)

    def __call__(self, line: str) -> None:
        if self.handler is not None:
            self.logger.info(line)

    def close(self) -> None:
        if self.handler is not None:
            self.logger.removeHandler(self.handler)
            self.handler.close()


def _logged_run(args: Any, out: Any, err: Any, run: Any, locked: Any, summarize: Any, details: Any = None) -> int:
    """What prune and replicate share as cron runs them: ``run(log_line)`` (the result: ``warnings``, ``error``,
    ``to_dict()``) with each line in the rotating ``--log`` and, unless ``--quiet``/``--json``, on stdout; ``locked``
    (the lock held by another run) exit 4; an error exit 2, logged; then the warnings, ``--json`` or ``details``,
    and the one-line ``summarize(result)``."""
    try:
        log = _LogFile(args.log, args.log_max_bytes, args.log_backups, args.dir)
    except OSError as exc:
        err.write("error: cannot open the log file %s: %s\n" % (args.log, exc))
        return EXIT_ERROR
    show = not args.quiet and not args.json

    def both(line: str) -> None:
        log(line)
        if show:
            out.write(line + "\n")

    try:
        try:
            result = run(both)
        except locked as exc:
            log("skipped: %s" % exc)
            err.write("skipped: %s\n" % exc)
            return EXIT_LOCKED
        except (CheckpointError, ValueError, OSError) as exc:
            log("error: %s" % exc)
            err.write("error: %s\n" % exc)
            return EXIT_ERROR
        for message in result.warnings:
            log("warning: %s" % message)
            if show:
                err.write("warning: %s\n" % message)
        if args.json:
            _print_json(result.to_dict(), out)
        elif show and details is not None:
            details(result)
        summary = summarize(result)
        if result.error:
            log("error: %s (%s)" % (result.error, summary))
            err.write("error: %s\n" % result.error)
            return EXIT_ERROR
        log(summary)
        if show:
            out.write(summary + "\n")
        return EXIT_OK
    finally:
        log.close()


def _main_prune(args: Any, out: Any, err: Any) -> int:
    def run(log: Any) -> Any:
        return prune(args.dir, args.keep_last, args.keep_every, args.keep, args.min_free,
                     None if args.tmp_grace < 0 else args.tmp_grace, args.validate, args.dry_run, log,
                     args.lock_file, replicas=args.replica)

    def details(result: Any) -> None:
        if args.verbose:
            for item in result.kept:
                out.write("kept %s: %s\n" % (item["name"], item["reason"]))

    def summarize(result: Any) -> str:
        return "%s%d deleted (%s), %d kept; newest valid %s; available %s%s" % (
            "dry run: " if args.dry_run else "", len(result.deleted),
            human_size(sum(d["size"] or 0 for d in result.deleted)), len(result.kept), result.latest_valid or "none",
            human_size(result.free_after if result.free_after is not None else result.free_before),
            "" if result.min_free_bytes is None else " (min_free %s)" % human_size(result.min_free_bytes))
    return _logged_run(args, out, err, run, PruneLocked, summarize, details)


def _main_replicate(args: Any, out: Any, err: Any) -> int:
    def run(log: Any) -> Any:
        rate = parse_size(args.bwlimit) if args.bwlimit else None
        return replicate(args.dir, args.replica, args.keep_last, args.keep_every, args.validate, rate, args.dry_run,
                         log, args.name_template, time_limit=args.time_limit)

    def summarize(result: Any) -> str:
        lag = result.lag
        return "%s%d copied (%s), %d deleted, %d kept; replica at step %s, run folder at step %s, %s" % (
            "dry run: " if args.dry_run else "", len(result.copied),
            human_size(sum(c["bytes"] or 0 for c in result.copied)), len(result.deleted), len(result.kept),
            _fmt(lag.get("replica_step")), _fmt(lag.get("primary_step")),
            "%s checkpoint(s) behind (%s s)" % (_fmt(lag.get("checkpoints_behind")), _fmt(lag.get("seconds_behind"))))
    return _logged_run(args, out, err, run, ReplicaLocked, summarize)


def _main_latest(args: Any, out: Any, err: Any) -> int:
    """``latest --replica``: the newest valid checkpoint of the run folder and its replicas."""
    try:
        choice = best_copy(args.dir, args.replica, args.validate, args.name_template)
    except (CheckpointError, ValueError) as exc:
        err.write("error: %s\n" % exc)
        return EXIT_ERROR
    if args.json:
        _print_json(choice.to_dict(), out)
    elif choice.checkpoint is not None:
        out.write(choice.checkpoint.path + "\n")
    if not args.quiet and not args.json:
        for message in choice.warnings:
            err.write("warning: %s\n" % message)
        if choice.copy not in (None, "primary"):
            err.write("note: resuming from a replica: %s\n" % choice.why)
    if choice.checkpoint is not None:
        return EXIT_OK
    return EXIT_NONE if choice.empty else EXIT_INVALID


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)


def _print_json(data: Any, out: Any) -> None:
    out.write(json.dumps(data, indent=2, sort_keys=True) + "\n")


def main(argv: Optional[Sequence[str]] = None, out: Any = None, err: Any = None) -> int:
    """The command line; returns the exit code (see ``python3 clusterops_checkpoint --help``).

    An unexpected error (a bug, a file system that answers oddly) is exit 2, never the 1 of ``latest`` that
    tells a launcher to start from scratch."""
    err = err or sys.stderr
    try:
        return _main(argv, out or sys.stdout, err)
    except Exception as exc:  # pylint: disable=broad-exception-caught  # 2, whatever it is
        err.write("error: unexpected %s: %s\n" % (type(exc).__name__, exc))
        return EXIT_ERROR


def _main(argv: Optional[Sequence[str]], out: Any, err: Any) -> int:
    args = _parser().parse_args(argv)
    if args.command == "prune":
        return _main_prune(args, out, err)
    if args.command == "replicate":
        return _main_replicate(args, out, err)
    if args.command == "latest" and args.replica:
        return _main_latest(args, out, err)
    try:
        if args.command == "finished":
            if not os.path.isdir(args.dir):
                raise CheckpointError("%s is not a folder" % os.path.abspath(args.dir))
            marker = os.path.join(args.dir, FINISHED)
            finished = read_finished(marker) if os.path.isfile(marker) else None
            if args.json:
                _print_json(finished, out)
            return EXIT_OK if finished is not None else EXIT_NONE
        if args.command == "verify":
            results = [verify(p, args.validate) for p in args.paths]
            if args.json:
                _print_json([r.to_dict() for r in results], out)
            else:
                for r in results:
                    out.write("%s\t%s\t%s\n" % ("valid" if r.valid else "INVALID", r.path, r.why_invalid or ""))
            return EXIT_OK if all(r.valid for r in results) else EXIT_INVALID
        report = inspect(args.dir, getattr(args, "validate", SIZES),
                         validate_all=getattr(args, "validate_all", False),
                         list_all=args.command == "list", name_template=getattr(args, "name_template", None))
    except (CheckpointError, ValueError) as exc:
        err.write("error: %s\n" % exc)
        return EXIT_ERROR
    if args.command == "list":
        if args.json:
            _print_json(report.to_dict(), out)
            return EXIT_OK
        out.write("%-12s %-8s %-12s %-9s %s\n" % ("STEP", "EPOCH", "LAYOUT", "VALID", "NAME"))
        for c in report.checkpoints:
            state = "-" if c.valid is None else ("yes" if c.valid else "NO")
            mark = " <- latest valid" if c is report.latest_valid else ""
            why = " (%s)" % c.why_invalid if c.why_invalid else ""
            out.write("%-12d %-8s %-12s %-9s %s%s%s\n" % (c.step, _fmt(c.epoch), c.layout, state, c.name, mark, why))
        for item in report.unordered:
            out.write("unordered: %s (%s)\n" % (item["name"], item["reason"]))
        for item in report.ignored:
            out.write("ignored: %s (%s)\n" % (item["name"], item["reason"]))
        for message in report.warnings:
            out.write("warning: %s\n" % message)
        if report.finished is not None:
            out.write("finished: %s\n" % json.dumps(report.finished, sort_keys=True))
        return EXIT_OK
    # latest
    if args.json:
        _print_json(report.to_dict(), out)
    elif report.latest_valid is not None:
        out.write(report.latest_valid.path + "\n")
    if not args.quiet and not args.json:
        for message in report.warnings:
            err.write("warning: %s\n" % message)
    if report.latest_valid is not None:
        return EXIT_OK
    return EXIT_NONE if report.empty else EXIT_INVALID

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where `make test`'s time goes: tables in Markdown from the JUnit XML files its suites wrote.

    python3 tests/durations.py [--top N] [JUNIT_DIR]     (default: .cache/test-logs/junit)

tests/run-all.sh gives each pytest suite ``--junitxml=<JUNIT_DIR>/<suite>.xml`` (``integration-22.05``,
``unit``, ``molecule``, ...). Prints three tables: each suite's test count and summed time, each test
file's (per suite, the files over 1 % of their suite), and the ``N`` slowest tests (default 25). A
test's time is pytest's JUnit ``time``: its setup, call and teardown, so a module fixture's cost
(a cluster reset, a reference training run) counts in the first test that asks for it. Standard
library only; exit status 2 when the folder holds no XML file.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import sys
import xml.etree.ElementTree as ET  # nosec B405  # our own pytest's files, not input from elsewhere
from typing import Dict, List, NamedTuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Case(NamedTuple):
    """One test of one suite: its file (``tests/...py``), its name (with parameters) and seconds."""
    suite: str
    file: str
    name: str
    seconds: float
    outcome: str


def read_suite(path: str) -> List[Case]:
    """The test cases of one JUnit XML file; the suite is the file's name without ``.xml``.
    ``outcome``: ``passed``, ``failed``, ``error`` or ``skipped``."""
    suite = os.path.basename(path)[:-len(".xml")]
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):  # nosec B314  # see the import
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
        module = case.get("classname", "")
        # pytest's classname: the dotted module path, then a class when the test is a method.
        parts = module.split(".")
        while parts and not os.path.exists(os.path.join(REPO, *parts) + ".py"):
            parts.pop()
        file = "/".join(parts) + ".py" if parts else module
        cases.append(Case(suite, file, case.get("name", ""), float(case.get("time", "0") or 0), outcome))
    return cases


def minutes(seconds: float) -> str:
    return "%d s (%.1f min)" % (round(seconds), seconds / 60)


def tables(cases: List[Case], top: int) -> str:
    """The three Markdown tables (suites, files, slowest tests)."""
    lines = ["| suite | tests | skipped | summed time |", "| --- | ---: | ---: | ---: |"]
    by_suite: Dict[str, List[Case]] = collections.defaultdict(list)
    for case in cases:
        by_suite[case.suite].append(case)
    for suite, items in sorted(by_suite.items(), key=lambda kv: -sum(c.seconds for c in kv[1])):
        skipped = sum(c.outcome == "skipped" for c in items)
        lines.append("| %s | %d | %d | %s |" % (suite, len(items), skipped, minutes(sum(c.seconds for c in items))))
    lines += ["", "| suite | file | tests | summed time |", "| --- | --- | ---: | ---: |"]
    for suite, items in sorted(by_suite.items()):
        total = sum(c.seconds for c in items) or 1.0
        by_file: Dict[str, List[Case]] = collections.defaultdict(list)
        for case in items:
            by_file[case.file].append(case)
        for file, group in sorted(by_file.items(), key=lambda kv: -sum(c.seconds for c in kv[1])):
            seconds = sum(c.seconds for c in group)
            if seconds >= total / 100:
                lines.append("| %s | %s | %d | %s |" % (suite, file, len(group), minutes(seconds)))
    lines += ["", "| # | suite | test | time |", "| ---: | --- | --- | ---: |"]
    slowest = sorted(cases, key=lambda c: -c.seconds)[:top]
    for rank, case in enumerate(slowest, 1):
        lines.append("| %d | %s | `%s::%s` | %.0f s |" % (rank, case.suite, case.file, case.name, case.seconds))
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("junit_dir", nargs="?", default=os.path.join(REPO, ".cache", "test-logs", "junit"))
    parser.add_argument("--top", type=int, default=25, help="how many of the slowest tests (default 25)")
    args = parser.parse_args(argv)
    paths = sorted(glob.glob(os.path.join(args.junit_dir, "*.xml")))
    if not paths:
        print("durations.py: no JUnit XML file in %s: run make test first" % args.junit_dir, file=sys.stderr)
        return 2
    cases = [case for path in paths for case in read_suite(path)]
    print(tables(cases, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

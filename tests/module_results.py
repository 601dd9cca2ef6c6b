# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Module results before and after a change, compared: for a restructure that must not change
what the modules return (issue 40).

``python3 tests/module_results.py [--also PATH]... BEFORE [AFTER]`` takes the two revisions' trees
(``git archive``; AFTER defaults to the working tree, as git lists its files; each ``--also`` file of
the working tree, a new scenario, copied into both), runs the unit tests of the modules and
filters in each (``pytest tests/unit -k "modules or filter"``, the recorded scenarios: every Slurm
command's output recorded from the dev clusters) with this file as a pytest plugin, which records
the JSON every module prints (``AnsibleModule.exit_json``/``fail_json``) and every result of the
``remediation_plan`` filter, per test, in order; then compares them and prints one line per
difference and a summary. Exit 1 when a result differs or a test is in one run only.

Values that differ between two runs of the same tree are replaced before comparing, each by a
name: pytest's per-test folders, floats computed from the real clock (4 decimals or more), file
mtimes as ISO times, free disk space, a copy's seconds, ``mkdtemp`` names.

Run it with the Python of the unit tests' venv (``.venv/bin/python3``).
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Where the plugin half (inside pytest) writes, one JSON object a line.
OUT_ENV = "MODULE_RESULTS_OUT"

#: What varies between two runs of the same tree, and its stand-in.
VARYING = [
    (re.compile(r"/tmp/pytest-of-[^/]+/pytest-\d+/(popen-gw\d+/)?[^/\"]+?\d+/"), "<tmp>/"),
    (re.compile(r"\b\d+\.\d{4,}\b"), "<clock>"),
    (re.compile(r'"(free_before|free_after)": \d+'), r'"\1": <bytes>'),
    (re.compile(r'"seconds": \d+\.\d+'), '"seconds": <s>'),
    (re.compile(r'"time": "20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ"'), '"time": "<mtime>"'),
    (re.compile(r"/dev/shm/clusterops-textfile-[^/]+/"), "/dev/shm/clusterops-textfile-<tmp>/"),
]


# ---------------------------------------------------------------------------------------------
# Inside pytest (-p module_results)
# ---------------------------------------------------------------------------------------------

def _write(kind: str, text: str) -> None:
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
    with open(os.environ[OUT_ENV], "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"test": test, "kind": kind, "result": text}) + "\n")


def pytest_configure(config):  # pylint: disable=unused-argument
    """Record every module result: AnsibleModule prints its JSON through ``_return_formatted``."""
    if OUT_ENV not in os.environ:
        return
    from ansible.module_utils import basic  # pylint: disable=import-outside-toplevel
    printed = basic.AnsibleModule._return_formatted  # pylint: disable=protected-access

    def return_formatted(self, kwargs):
        printed(self, kwargs)
        _write("module", self.jsonify(kwargs))
    basic.AnsibleModule._return_formatted = return_formatted  # pylint: disable=protected-access


def pytest_runtest_call(item):
    """Record the remediation_plan filter's results of a test module that imported it."""
    module = getattr(item, "module", None)
    plan = getattr(module, "remediation_plan", None)
    if OUT_ENV not in os.environ or not callable(plan) or getattr(plan, "recorded", False):
        return

    def recorded(*args, **kwargs):
        out = plan(*args, **kwargs)
        _write("filter", json.dumps(out, default=repr))
        return out
    recorded.recorded = True  # type: ignore[attr-defined]
    setattr(module, "remediation_plan", recorded)


# ---------------------------------------------------------------------------------------------
# Outside: two trees, two runs, one comparison
# ---------------------------------------------------------------------------------------------

def tree_of(revision: str, dest: str) -> None:
    """``revision``'s files (None: the working tree's, as git lists them) written below ``dest``."""
    if revision:
        archive = subprocess.run(["git", "-C", ROOT, "archive", revision], check=True, capture_output=True).stdout
    else:
        names = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                               check=True, capture_output=True).stdout.split(b"\0")
        existing = b"\0".join(n for n in names if n and os.path.lexists(os.path.join(ROOT, n.decode())))
        archive = subprocess.run(["tar", "-C", ROOT, "--null", "-T", "-", "-cf", "-"], input=existing,
                                 check=True, capture_output=True).stdout
    subprocess.run(["tar", "-C", dest, "-xf", "-"], input=archive, check=True)


def record(tree: str, out: str) -> int:
    """Run the modules' and filters' unit tests of ``tree``, their results into ``out``; pytest's rc."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)), ANSIBLE_CONFIG=os.path.join(tree, "ansible.cfg"))
    env[OUT_ENV] = out
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "module_results", "tests/unit", "-k", "modules or filter",
                           "-q", "-n", "2", "-p", "no:cacheprovider"], cwd=tree, env=env,
                          stdout=subprocess.DEVNULL, check=False).returncode


def load(path: str) -> Dict[Tuple[str, str], List[str]]:
    """``{(test, kind): [result, ...]}`` of one run, each result with :data:`VARYING` replaced."""
    out: Dict[Tuple[str, str], List[str]] = collections.OrderedDict()
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            item = json.loads(line)
            text = item["result"]
            for pattern, name in VARYING:
                text = pattern.sub(name, text)
            out.setdefault((item["test"], item["kind"]), []).append(text)
    return out


def compare(before: Dict[Tuple[str, str], List[str]], after: Dict[Tuple[str, str], List[str]]) -> List[str]:
    """One line per test whose results differ or that is in one run only."""
    lines = []
    for key in sorted(set(before) | set(after)):
        if key not in before or key not in after:
            lines.append("only %s: %s (%s)" % ("after" if key in after else "before", key[0], key[1]))
        elif before[key] != after[key]:
            lines.append("differs: %s (%s)" % key)
    return lines


def main(argv: List[str]) -> int:
    also = []
    while len(argv) > 1 and argv[0] == "--also":
        also.append(argv[1])
        argv = argv[2:]
    if not 1 <= len(argv) <= 2 or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1])
        return 2
    runs = []
    with tempfile.TemporaryDirectory(prefix="module-results-") as work:
        for name, revision in (("before", argv[0]), ("after", argv[1] if len(argv) > 1 else "")):
            tree = os.path.join(work, name)
            os.mkdir(tree)
            tree_of(revision, tree)
            for path in also:
                shutil.copyfile(os.path.join(ROOT, path), os.path.join(tree, path))
            out = os.path.join(work, name + ".jsonl")
            open(out, "w", encoding="utf-8").close()
            rc = record(tree, out)
            runs.append(load(out))
            print("%s (%s): pytest rc %d, %d results of %d tests" % (
                name, revision or "working tree", rc, sum(len(v) for v in runs[-1].values()), len(runs[-1])))
    lines = compare(runs[0], runs[1])
    for line in lines:
        print(line)
    same = sum(len(v) for k, v in runs[0].items() if runs[1].get(k) == v)
    print("identical: %d results of %d tests; differing or in one run only: %d tests" % (
        same, sum(1 for k in runs[0] if runs[1].get(k) == runs[0][k]), len(lines)))
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

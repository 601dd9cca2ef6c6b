# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The code's size limits, as issue 26 part 5 sets them, over every Python file of the repository
outside ``tests/`` (programs without a ``.py`` name, such as the health check, by their first line):

- no function or method over ``MAX_FUNCTION_LINES`` lines (``def`` to its last line, decorators
  left out, docstring included);
- no file over ``MAX_FILE_LINES`` lines;
- inside a package, no file imports a private name (``_name``) of another file of the package: what
  the package's files share is public within it.

``python3 tests/code_limits.py`` prints one line per offender (``path:line: what``) and exits 1 when
there is one that ``KNOWN`` does not list, or a ``KNOWN`` entry that no longer offends (so the list
only shrinks). ``tests/unit/code/test_code_limits.py`` runs it in ``make test``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from typing import Iterator, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 600

#: Offenders not mended yet (issue 26, part 5), by their key (``path`` for a file, ``path::name``
#: for a function, ``path->imported module:name`` for a private import). Mended ones must leave.
KNOWN = frozenset((
))


def python_files() -> List[str]:
    """The repository's Python files outside tests/, as paths relative to ``ROOT`` (git's list of
    tracked and untracked-but-not-ignored files)."""
    listed = subprocess.run(["git", "-C", ROOT, "ls-files", "--cached", "--others", "--exclude-standard"],
                            check=True, capture_output=True, text=True).stdout.splitlines()
    found = []
    for path in sorted(set(listed)):
        if path.startswith("tests/") or not os.path.isfile(os.path.join(ROOT, path)):
            continue
        if path.endswith(".py"):
            found.append(path)
            continue
        with open(os.path.join(ROOT, path), "rb") as handle:
            first = handle.readline(200)
        # A program without .py: a python shebang, or the collection's Python header (a role's
        # file whose shebang the role writes when it installs it).
        if (first.startswith(b"#!") and b"python" in first) or first.startswith(b"# -*- coding: utf-8 -*-"):
            found.append(path)
    return found


def _package_of(path: str) -> str:
    """The folder of ``path`` when it is a package (holds ``__init__.py``), else ''."""
    folder = os.path.dirname(path)
    return folder if os.path.isfile(os.path.join(ROOT, folder, "__init__.py")) else ""


def offenders(path: str) -> Iterator[Tuple[str, int, str]]:
    """``(key, line, what)`` for each limit ``path`` (relative to ROOT) breaks."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        text = handle.read()
    lines = len(text.splitlines())
    if lines > MAX_FILE_LINES:
        yield path, 1, "file of %d lines (limit %d)" % (lines, MAX_FILE_LINES)
    tree = ast.parse(text, filename=path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                yield ("%s::%s" % (path, node.name), node.lineno,
                       "function %s of %d lines (limit %d)" % (node.name, length, MAX_FUNCTION_LINES))
    package = _package_of(path)
    if not package:
        return
    dotted = package.replace(os.sep, ".")
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        relative_sibling = node.level == 1
        absolute_sibling = node.level == 0 and node.module.rpartition(".")[0].endswith(dotted)
        if not (relative_sibling or absolute_sibling):
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                module = node.module.rpartition(".")[2]
                yield ("%s->%s:%s" % (path, module, alias.name), node.lineno,
                       "imports the private %s of %s.py" % (alias.name, module))


def check() -> Tuple[List[str], List[str], List[str]]:
    """Every offender's line, those ``KNOWN`` does not list, and the ``KNOWN`` keys that no longer offend."""
    report, new, seen = [], [], set()
    for path in python_files():
        for key, line, what in offenders(path):
            seen.add(key)
            report.append("%s:%d: %s%s" % (path, line, what, "" if key in KNOWN else " [new]"))
            if key not in KNOWN:
                new.append(key)
    return report, new, sorted(KNOWN - seen)


def main() -> int:
    report, new, mended = check()
    for line in report:
        print(line)
    for key in mended:
        print("%s: no longer offends; take it out of KNOWN" % key)
    print("%d offender(s), %d not in KNOWN, %d KNOWN mended" % (len(report), len(new), len(mended)))
    return 1 if new or mended else 0


if __name__ == "__main__":
    sys.exit(main())

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The code's size limits, as issue 26 part 5 sets them, over every Python file of the repository
outside ``tests/`` (programs without a ``.py`` name, such as the health check, by their first line):

- no function or method over ``MAX_FUNCTION_LINES`` lines (``def`` to its last line, decorators
  left out, docstring included);
- no file over ``MAX_FILE_LINES`` lines (:data:`FILE_LIMITS`: fewer for some);
- inside a package, no file imports a private name (``_name``) of another file of the package: what
  the package's files share is public within it;
- a policy module (:data:`POLICY_MODULES`: each ``policy.py`` of ``plugins/module_utils`` and the
  other pure planners named there) imports no command runner (:data:`COMMAND_RUNNERS`), neither
  itself nor through the collection's modules it imports (issue 40): a policy decides from what was
  read, it never reads or acts.

``python3 tests/code_limits.py`` prints one line per offender (``path:line: what``) and exits 1 when
there is one that ``KNOWN`` does not list, or a ``KNOWN`` entry that no longer offends (so the list
only shrinks). ``tests/unit/code/test_code_limits.py`` runs it in ``make test``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from typing import Iterator, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 600
#: Files held to less than ``MAX_FILE_LINES``: the runners, which only run their steps in order (issue 40).
FILE_LIMITS = {
    "plugins/module_utils/_training_remediation/runner.py": 200,
}
#: The pure planners besides every ``plugins/module_utils/**/policy.py``: given what was read, they
#: decide; nothing they import may run a command.
POLICY_MODULES = (
    "plugins/module_utils/_node_changes.py",
    "plugins/module_utils/_training_remediation/records.py",
    "plugins/module_utils/_training_remediation/report.py",
)
#: What runs a command: the collection's command layer and privilege separation (a forked child),
#: and the standard library's process modules.
COMMAND_RUNNERS = frozenset((
    "plugins/module_utils/_slurm_cli.py",
    "plugins/module_utils/_privsep.py",
    "subprocess",
    "pty",
    "multiprocessing",
))
#: The collection's import path, as its modules spell it.
COLLECTION = "ansible_collections.clusterops.slurm."

#: Offenders not mended yet (issue 26, part 5), by their key (``path`` for a file, ``path::name``
#: for a function, ``path->imported module:name`` for a private import, ``path=>runner`` for a policy
#: module that imports a command runner). Mended ones must leave.
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
    limit = FILE_LIMITS.get(path, MAX_FILE_LINES)
    if lines > limit:
        yield path, 1, "file of %d lines (limit %d)" % (lines, limit)
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


def is_policy(path: str) -> bool:
    """Whether ``path`` (relative to ROOT) is a policy module: it must import no command runner."""
    return (path.startswith("plugins/module_utils/") and os.path.basename(path) == "policy.py") or path in POLICY_MODULES


def _module_file(dotted: str) -> Optional[str]:
    """The repository file (relative to ROOT) of a module of the collection (``dotted``, absolute),
    or None: a module outside the collection, or a package's ``__init__.py`` for a package."""
    if not dotted.startswith(COLLECTION):
        return None
    base = os.path.join(*dotted[len(COLLECTION):].split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(os.path.join(ROOT, candidate)):
            return candidate
    return None


def imports_of(path: str) -> List[str]:
    """What ``path`` imports: the collection's files it loads (relative to ROOT, packages'
    ``__init__.py`` on the way included) and the top-level names of the other modules."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=path)
    package = os.path.dirname(path).replace(os.sep, ".")
    found: List[str] = []
    for node in ast.walk(tree):
        names: List[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = COLLECTION + ".".join(parts[:len(parts) - node.level + 1])
                module = base + ("." + node.module if node.module else "")
            else:
                module = node.module or ""
            names = [module] + [module + "." + alias.name for alias in node.names]
        for name in names:
            if not name.startswith(COLLECTION):
                found.append(name.partition(".")[0])
                continue
            parts = name[len(COLLECTION):].split(".")
            for end in range(1, len(parts) + 1):   # each package on the way, then the module
                target = _module_file(COLLECTION + ".".join(parts[:end]))
                if target:
                    found.append(target)
    return found


def command_runner_chain(path: str) -> Optional[List[str]]:
    """The import chain from ``path`` to a command runner (``[path, ..., runner]``), or None."""
    seen = {path}
    queue: List[List[str]] = [[path]]
    while queue:
        chain = queue.pop(0)
        if not chain[-1].endswith(".py"):
            continue
        for target in imports_of(chain[-1]):
            if target in COMMAND_RUNNERS:
                return chain + [target]
            if target not in seen and target.endswith(".py"):
                seen.add(target)
                queue.append(chain + [target])
    return None


def policy_offenders(path: str) -> Iterator[Tuple[str, int, str]]:
    """``(key, line, what)`` when ``path`` is a policy module that imports a command runner."""
    if not is_policy(path):
        return
    chain = command_runner_chain(path)
    if chain:
        yield ("%s=>%s" % (path, chain[-1]), 1,
               "a policy module imports a command runner: %s" % " -> ".join(chain))


def check() -> Tuple[List[str], List[str], List[str]]:
    """Every offender's line, those ``KNOWN`` does not list, and the ``KNOWN`` keys that no longer offend."""
    report, new, seen = [], [], set()
    for path in python_files():
        for key, line, what in list(offenders(path)) + list(policy_offenders(path)):
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

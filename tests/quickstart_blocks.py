# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The blocks of docs/quickstart.md that tests/integration/test_quickstart.py runs as written, read
from the page itself; tests/unit/code/test_quickstart_blocks.py checks them without a cluster.

The marker scheme: an HTML comment alone on its line, outside any fenced block,

    <!-- quickstart-test: ROLE -->

and on the very next line the fenced block (```LANG) it marks. The roles, each exactly once and
in this order (the order the operator follows), and the language each block must have:

    install    sh    one command, ``ansible-galaxy collection install <the tarball>``: run by a
                     non-root operator on the controller (the page says root is not needed)
    inventory  yaml  the inventory: written to the file the playbook commands name with ``-i``
    plan       sh    one command, ``ansible-playbook -i FILE ... --check``: the plan
    act        sh    one command, ``ansible-playbook -i FILE ...`` without ``--check``: the run
    summary    text  the output the page tells the operator to read: its quoted message lines
                     (``"..."``) must be in the output of ``act``

A command block holds one command per line (a line ending in a backslash goes on on the next);
``#`` comments and blank lines do not count; no shell runs it (the words are split as a shell
would, ``shlex``). A line that begins with ``<!--`` and names ``quickstart-test`` but is not a
well-formed marker is an error, so that a typo never silently drops a step from the test.

    python3 tests/quickstart_blocks.py [PAGE]   -> prints each block's role, line, language and body
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from typing import Any, Dict, List

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "quickstart.md")

#: role -> the language of its block, in the order the page must have them.
ROLES = {"install": "sh", "inventory": "yaml", "plan": "sh", "act": "sh", "summary": "text"}

MARKER = re.compile(r"^<!--\s*quickstart-test:\s*([\w-]+)\s*-->\s*$")
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)\s*$")
#: A message line of Ansible's debug output: ``"text",`` (the text as JSON writes it).
MESSAGE = re.compile(r'^\s*"(.*)",?\s*$')


class PageError(ValueError):
    """The page's marked blocks are not what the test can run; the message names the line."""


def _fenced(lines: List[str], start: int):
    """The fenced block opening at ``lines[start]``: ``(language, body, index after it)``."""
    opening = FENCE.match(lines[start])
    fence = opening.group(1)
    for end in range(start + 1, len(lines)):
        closing = FENCE.match(lines[end])
        if closing and closing.group(2) == "" and closing.group(1)[0] == fence[0] \
                and len(closing.group(1)) >= len(fence):
            return opening.group(2), "\n".join(lines[start + 1:end]) + "\n", end + 1
    raise PageError("line %d: the fenced block never closes" % (start + 1))


def blocks(text: str) -> Dict[str, Dict[str, Any]]:
    """The marked blocks of the page ``text``: ``{role: {"language", "body", "line"}}`` (``line``:
    the marker's, 1-based).

    Raises:
        PageError: a malformed or unknown marker, a marker not followed by a fenced block, a block
            of another language than its role's, a role missing, repeated or out of order.
    """
    lines = text.splitlines()
    found: Dict[str, Dict[str, Any]] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        if FENCE.match(line):
            index = _fenced(lines, index)[2]
            continue
        marker = MARKER.match(line)
        if not marker:
            if line.lstrip().startswith("<!--") and "quickstart-test" in line:
                raise PageError("line %d: not a marker of the form <!-- quickstart-test: ROLE -->: %s"
                                % (index + 1, line.strip()))
            index += 1
            continue
        role = marker.group(1)
        if role not in ROLES:
            raise PageError("line %d: unknown role %r (known: %s)" % (index + 1, role, ", ".join(ROLES)))
        if role in found:
            raise PageError("line %d: role %r marked twice (first at line %d)"
                            % (index + 1, role, found[role]["line"]))
        if index + 1 >= len(lines) or not FENCE.match(lines[index + 1]):
            raise PageError("line %d: the marker of %r is not followed by a fenced block on the next line"
                            % (index + 1, role))
        marked = index + 1
        language, body, index = _fenced(lines, index + 1)
        if language != ROLES[role]:
            raise PageError("line %d: the %r block is ```%s, it must be ```%s"
                            % (marked, role, language, ROLES[role]))
        found[role] = {"language": language, "body": body, "line": marked}
    missing = [role for role in ROLES if role not in found]
    if missing:
        raise PageError("no block marked for %s" % ", ".join(missing))
    order = sorted(found, key=lambda role: found[role]["line"])
    if order != list(ROLES):
        raise PageError("the marked blocks come in the order %s, not %s" % (", ".join(order), ", ".join(ROLES)))
    return found


def commands(body: str) -> List[List[str]]:
    """The commands of a ``sh`` block, each as its words (:mod:`shlex`, ``#`` comments dropped)."""
    result, pending = [], ""
    for line in body.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        words = shlex.split(pending + line, comments=True)
        pending = ""
        if words:
            result.append(words)
    if pending.strip():
        result.append(shlex.split(pending, comments=True))
    return result


def message_lines(body: str) -> List[str]:
    """The quoted message lines of a ``summary`` block, as they appear between the quotes."""
    return [m.group(1) for m in (MESSAGE.match(line) for line in body.splitlines()) if m]


def inventory_file(words: List[str]) -> str:
    """The file an ansible-playbook command names with ``-i`` (or ``--inventory``)."""
    for flag in ("-i", "--inventory"):
        if flag in words[:-1]:
            return words[words.index(flag) + 1]
    raise PageError("%s names no inventory (-i FILE)" % " ".join(words))


def _one(found: Dict[str, Dict[str, Any]], role: str, program: str) -> List[str]:
    listed = commands(found[role]["body"])
    if len(listed) != 1 or listed[0][0] != program:
        raise PageError("the %r block (line %d) must hold one %s command, not %s"
                        % (role, found[role]["line"], program, listed))
    return listed[0]


def check(found: Dict[str, Dict[str, Any]], version: str) -> Dict[str, Any]:
    """What the test takes from the blocks (:func:`blocks`), checked: ``{"install", "plan",
    "act"}`` (each a command's words), ``"tarball"`` (the file the install names: the one
    ``ansible-galaxy collection build`` writes for ``version``, galaxy.yml's), ``"inventory_file"``,
    ``"inventory"`` (the YAML, parsed), ``"host"`` (its one controller host) and ``"summary"``
    (:func:`message_lines`).

    Raises:
        PageError: a block the test cannot run as the page means it.
    """
    install = _one(found, "install", "ansible-galaxy")
    tarball = "clusterops-slurm-%s.tar.gz" % version
    if install[1:3] != ["collection", "install"] or tarball not in install[3:]:
        raise PageError("the install block must be `ansible-galaxy collection install %s ...` (galaxy.yml's "
                        "version), not %s" % (tarball, " ".join(install)))
    plan, act = _one(found, "plan", "ansible-playbook"), _one(found, "act", "ansible-playbook")
    if "--check" not in plan or "--check" in act or "-C" in act:
        raise PageError("the plan runs with --check and the act block without it: %s / %s"
                        % (" ".join(plan), " ".join(act)))
    if inventory_file(plan) != inventory_file(act) or os.path.basename(inventory_file(plan)) != inventory_file(plan):
        raise PageError("plan and act must name the same inventory file in the current folder")
    inventory = yaml.safe_load(found["inventory"]["body"])
    try:
        group = inventory["all"]["children"]["slurm_controller"]
        hosts, variables = group["hosts"], group["vars"]
    except (KeyError, TypeError):
        raise PageError("the inventory has no all.children.slurm_controller with hosts and vars")
    if not isinstance(hosts, dict) or len(hosts) != 1:
        raise PageError("the inventory must list one host in slurm_controller, not %s" % hosts)
    for name in ("slurm_conf", "remediate_training_registry"):
        if name not in variables:
            raise PageError("the inventory's slurm_controller vars must set %s (the test substitutes it)" % name)
    summary = message_lines(found["summary"]["body"])
    if not any(line.startswith("cluster ") for line in summary):
        raise PageError("the summary block shows no fleet summary line (\"cluster <name>: ...\")")
    return {"install": install, "plan": plan, "act": act, "tarball": tarball, "inventory": inventory,
            "inventory_file": inventory_file(plan), "host": next(iter(hosts)), "summary": summary}


def line_pattern(line: str, names: Dict[str, str]) -> "re.Pattern[str]":
    """A message line of the page as a pattern for the real output: each of ``names`` (the page's
    example names: cluster, host, nodes, paths) replaced by the real one, every other number any
    number (the page's cluster has other sizes), runs of white space as one."""
    words = sorted(names, key=len, reverse=True)
    token = re.compile("|".join(["(?<![\\w.-])%s(?![\\w-])" % re.escape(w) for w in words] + [r"\d+"]))
    parts, position = [], 0
    line = " ".join(line.split())
    for match in token.finditer(line):
        parts.append(re.escape(line[position:match.start()]))
        parts.append(re.escape(names[match.group()]) if match.group() in names else r"\d+")
        position = match.end()
    parts.append(re.escape(line[position:]))
    return re.compile("".join(parts).replace("\\ ", r"\s+"))


def main(path: str) -> int:
    with open(path, encoding="utf-8") as handle:
        found = blocks(handle.read())
    for role, block in found.items():
        print("--- %s (line %d, %s)\n%s" % (role, block["line"], block["language"], block["body"]), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else PAGE))

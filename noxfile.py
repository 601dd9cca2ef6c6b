# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The ansible-core matrix: unit tests and ``ansible-test sanity`` on every ansible-core line that
``requires_ansible`` in meta/runtime.yml claims and this machine's Python (3.11) runs.

One session per line and kind, each in its own virtual environment under .nox/ with that line's ansible-core:
``unit(2.17)``, ``sanity(2.17)``, ``unit(2.18)``, ... (``nox -l`` lists them). ``make matrix`` runs them all
(nox comes from requirements-nox.txt, in .venv-nox); ``make matrix NOXFLAGS='-s "sanity(2.18)"'`` runs one.

The pinned line is requirements.txt's ansible-core: ``make unit`` and ``make sanity`` run it in .venv (with torch
for the tests that need it: the matrix's unit sessions skip those, they do not depend on ansible-core). ``make test``
runs those two and the sessions tagged ``unpinned`` here, so that no line is tested twice.

Sanity runs tests/sanity/run.sh with this session's ansible-test; ansible-test reads
tests/sanity/ignore-<line>.txt itself.
"""

from __future__ import annotations

import pathlib
import re

import nox
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = pathlib.Path(__file__).resolve().parent

# The newest patch release of each older line that supports Python 3.11 (ansible-core 2.20 needs 3.12).
# The pinned line comes from requirements.txt.
OLDER_LINES = {
    "2.17": "2.17.14",
    "2.18": "2.18.19",
}

nox.options.default_venv_backend = "virtualenv"
# The venvs are kept between runs (pip then only checks the pins); `--reuse-venv=no` or `rm -r .nox` makes them
# anew.
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True


def _controller_requirements() -> tuple[str, list[str]]:
    """requirements.txt as (the pinned ansible-core version, every other requirement line)."""
    pinned = None
    others = []
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        if req.name == "ansible-core":
            (spec,) = req.specifier
            pinned = spec.version
        else:
            others.append(line)
    if pinned is None:
        raise RuntimeError("requirements.txt pins no ansible-core")
    return pinned, others


def _line(version: str) -> str:
    return "%d.%d" % Version(version).release[:2]


PINNED, CONTROLLER_REQUIREMENTS = _controller_requirements()
PINNED_LINE = _line(PINNED)
LINES = {**OLDER_LINES, PINNED_LINE: PINNED}


def _check_claim() -> None:
    """Every line from requires_ansible's lowest up to the pinned one has a session, and no session is for a line
    requires_ansible excludes: the claim and the matrix cannot drift apart."""
    runtime = (ROOT / "meta" / "runtime.yml").read_text(encoding="utf-8")
    match = re.search(r"""^requires_ansible:\s*["']?([^"'\n]+)""", runtime, re.MULTILINE)
    if not match:
        raise RuntimeError("meta/runtime.yml: no requires_ansible")
    claim = SpecifierSet(match.group(1))
    for line, version in LINES.items():
        if _line(version) != line or version not in claim:
            raise RuntimeError("ansible-core %s (line %s) is not in requires_ansible %s" % (version, line, claim))
    lowest = min(Version(s.version) for s in claim if s.operator in (">=", "==", "~="))
    pinned = Version(PINNED)
    for minor in range(lowest.minor, pinned.minor + 1):
        line = "%d.%d" % (lowest.major, minor)
        if line not in LINES:
            raise RuntimeError("requires_ansible %s claims ansible-core %s, which the matrix does not test"
                               % (claim, line))


_check_claim()

PARAMS = [nox.param(line, id=line, tags=[] if line == PINNED_LINE else ["unpinned"]) for line in sorted(LINES)]


@nox.session(python="3.11")
@nox.parametrize("line", PARAMS)
def unit(session: nox.Session, line: str) -> None:
    """tests/unit with this line's ansible-core and requirements.txt's other pins."""
    session.install("ansible-core==%s" % LINES[line], *CONTROLLER_REQUIREMENTS, "-r", "requirements-unit.txt")
    session.run("python", "-m", "pytest", "tests/unit", "-q", "-p", "no:cacheprovider", *session.posargs)


#: Sanity tests a line cannot pass and no ignore file may name: 2.17's empty-init wants every module_utils
#: __init__.py empty, while _checkpoint/ and _training_remediation/ re-export their package's names (2.18 and later
#: allow it, and AnsiballZ ships the file on 2.17 too); ansible-lint refuses empty-init in ignore files.
SKIPPED_SANITY_TESTS = {"2.17": ["empty-init"]}


@nox.session(python="3.11")
@nox.parametrize("line", PARAMS)
def sanity(session: nox.Session, line: str) -> None:
    """ansible-test sanity of this line (tests/sanity/run.sh; SANITY_ARGS as there)."""
    session.install("ansible-core==%s" % LINES[line])
    env = {"VENV": session.virtualenv.location}
    skipped = SKIPPED_SANITY_TESTS.get(line)
    if skipped:
        env["SANITY_ARGS"] = " ".join("--skip-test %s" % test for test in skipped)
    session.run("bash", str(ROOT / "tests" / "sanity" / "run.sh"), env=env, external=True)

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/durations.py: the duration tables of `make test` from the JUnit XML files its suites write
(pytest's own XML, written here by a real pytest run of two small tests)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


@pytest.fixture(scope="module")
def durations(tests_script):
    return tests_script("durations")


def write_junit(tmp_path, name, source):
    """A real pytest run of ``source`` (a test file under tests/ of the repository is not needed:
    the file is found by its classname) writing ``<tmp>/junit/<name>.xml``."""
    tests = tmp_path / "src"
    tests.mkdir(exist_ok=True)
    (tests / "test_sample.py").write_text(textwrap.dedent(source))
    junit = tmp_path / "junit"
    junit.mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests),
                    "--junitxml=%s" % (junit / ("%s.xml" % name))], cwd=str(tmp_path), check=False,
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return junit


def test_suites_files_and_slowest_tests_from_real_junit(durations, tmp_path):
    junit = write_junit(tmp_path, "integration-22.05", """
        import time
        import pytest

        def test_slow():
            time.sleep(0.3)

        @pytest.mark.parametrize("n", ["a b", "c"])
        def test_quick(n):
            pass

        def test_skipped():
            pytest.skip("no cluster")

        def test_failing():
            assert False
        """)
    cases = durations.read_suite(str(junit / "integration-22.05.xml"))
    assert sorted((c.name, c.outcome) for c in cases) == [
        ("test_failing", "failed"), ("test_quick[a b]", "passed"), ("test_quick[c]", "passed"),
        ("test_skipped", "skipped"), ("test_slow", "passed")]
    assert {c.suite for c in cases} == {"integration-22.05"}
    slow = [c for c in cases if c.name == "test_slow"][0]
    assert 0.3 <= slow.seconds < 5
    text = durations.tables(cases, top=2)
    lines = text.splitlines()
    assert lines[2].startswith("| integration-22.05 | 5 | 1 | ")
    slowest = [line for line in lines if line.startswith("| 1 |")]
    assert slowest and "test_slow" in slowest[0], text
    assert not [line for line in lines if line.startswith("| 3 |")], "more than --top rows:\n" + text


def test_no_junit_file_is_exit_2(durations, tmp_path, capsys):
    assert durations.main([str(tmp_path)]) == 2
    assert "no JUnit XML file" in capsys.readouterr().err

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ContainerCluster's reading of a container podman calls running (dev/cluster/devcluster/container.py).

A container whose conmon was killed with the session that started it stays "running" in podman's
records while `podman exec` answers "cannot exec in a stopped container" (.ci/run on 26.05 failed
that way in cluster-up's groupadd); a container of the same name may serve another clone's state
dir. A stand-in ``podman`` on PATH answers as podman 4.3 did in those cases and logs each call."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "dev", "cluster"))

from devcluster.container import ContainerCluster  # noqa: E402 pylint: disable=wrong-import-position

PODMAN = r'''#!/usr/bin/env python3
import json, os, sys
world = json.load(open(os.environ["FAKE_PODMAN_WORLD"]))
with open(os.environ["FAKE_PODMAN_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
args = sys.argv[1:]
if args[:2] == ["container", "inspect"]:
    if world["state"] is None:
        sys.stderr.write("Error: no such container\n"); sys.exit(125)
    fmt = args[3]
    print("true" if "Running" in fmt and world["state"] == "running" else
          "false" if "Running" in fmt else world["label"])
    sys.exit(0)
if args[0] == "exec" and not world["answers"]:
    sys.stderr.write("Error: OCI runtime error: runc: exec failed: cannot exec in a stopped container\n")
    sys.exit(255)
sys.exit(0)
'''


@pytest.fixture
def podman(tmp_path, monkeypatch):
    """Sets the stand-in's world (state, label, answers) and returns the calls it got."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "podman"
    script.write_text(PODMAN)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
    monkeypatch.setenv("FAKE_PODMAN_WORLD", str(tmp_path / "world.json"))
    monkeypatch.setenv("FAKE_PODMAN_LOG", str(tmp_path / "calls.log"))

    def world(**values):
        (tmp_path / "world.json").write_text(json.dumps(values))
        return lambda: [json.loads(line) for line in (tmp_path / "calls.log").read_text().splitlines()]
    return world


def removed(calls):
    return [c for c in calls() if c[0] == "rm"]


def test_a_running_container_that_answers_and_serves_this_state_dir_is_kept(tmp_path, podman):
    cluster = ContainerCluster(str(tmp_path / "state"), "26.05")
    calls = podman(state="running", label=cluster.p.root, answers=True)
    assert cluster.clear_unusable() == "running"
    assert not removed(calls)


def test_a_running_container_that_does_not_answer_exec_is_removed(tmp_path, podman):
    cluster = ContainerCluster(str(tmp_path / "state"), "26.05")
    calls = podman(state="running", label=cluster.p.root, answers=False)
    assert cluster.clear_unusable() is None
    assert removed(calls) == [["rm", "--force", "--time", "10", "clusterops-slurm-26.05"]]


def test_a_container_of_another_clone_is_removed_before_up(tmp_path, podman):
    cluster = ContainerCluster(str(tmp_path / "state"), "26.05")
    calls = podman(state="running", label="/elsewhere/.devcluster-26.05", answers=True)
    assert cluster.clear_unusable() is None
    assert len(removed(calls)) == 1


def test_a_stopped_container_is_left_to_up(tmp_path, podman):
    cluster = ContainerCluster(str(tmp_path / "state"), "26.05")
    calls = podman(state="stopped", label=cluster.p.root, answers=False)
    assert cluster.clear_unusable() == "stopped"
    assert not removed(calls)


def test_down_removes_a_container_that_does_not_answer_without_a_cluster_down_inside(tmp_path, podman, capsys):
    cluster = ContainerCluster(str(tmp_path / "state"), "26.05")
    calls = podman(state="running", label=cluster.p.root, answers=False)
    cluster.down()
    assert [c for c in calls() if c[0] == "exec" and c[-1] == "down"] == []
    assert len(removed(calls)) == 1
    assert "does not answer podman exec" in capsys.readouterr().out


def test_down_leaves_another_clones_container_alone(tmp_path, podman, capsys):
    cluster = ContainerCluster(str(tmp_path / "state"), "26.05")
    calls = podman(state="running", label="/elsewhere/.devcluster-26.05", answers=True)
    cluster.down()
    assert not removed(calls)
    assert "left alone" in capsys.readouterr().out

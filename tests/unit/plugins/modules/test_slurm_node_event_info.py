# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_node_event_info as data: the one sacctmgr call it must make, answered with what real
Slurm 22.05, 24.11 and 26.05 printed (dev/cluster/record-node-events.sh)."""

from __future__ import annotations

import io
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.modules import slurm_node_event_info

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")
RELEASES = ("22.05", "24.11", "26.05")
FORMAT = "format=NodeName,TimeStart,TimeEnd,State,User,Reason"


def recorded(release, scenario):
    base = os.path.join(FIXTURES, "slurm-" + release, "node-events-" + scenario, "sacctmgr-show-event")
    with io.open(base + ".rc", encoding="ascii") as handle:
        rc = int(handle.read().strip())
    with io.open(base + ".out", encoding="utf-8", errors="replace") as handle:
        out = handle.read()
    err = ""
    if os.path.exists(base + ".err"):
        with io.open(base + ".err", encoding="utf-8", errors="replace") as handle:
            err = handle.read()
    return rc, out, err


def sacctmgr(start, nodes=None):
    args = ["/usr/bin/sacctmgr", "--noheader", "--parsable2", "show", "event", "event=node",
            "start=" + start]
    return args + (["nodes=" + nodes] if nodes else []) + [FORMAT]


def with_release(scenario):
    return [pytest.param(r, id=r) for r in RELEASES
            if os.path.isdir(os.path.join(FIXTURES, "slurm-" + r, "node-events-" + scenario))]


def utc_environment(argv, kwargs):
    assert kwargs["environ_update"]["TZ"] == "UTC"
    assert kwargs["environ_update"]["SLURM_TIME_FORMAT"] == "%s"


@pytest.mark.parametrize("release", with_release("reboot"))
def test_reboot_episode_from_start(run_module, release):
    rc, out, err = recorded(release, "reboot")
    result = run_module(slurm_node_event_info, {"nodes": ["n3"], "start": "1796075206"},
                        [(sacctmgr("2026-11-30T21:46:46", "n3"), rc, out, err)], utc_environment)
    assert result["changed"] is False
    assert result["start"] == 1796075206
    assert result["commands"] == [sacctmgr("2026-11-30T21:46:46", "n3")]
    assert [e["state"] for e in result["events"]] == ["DRAIN", "BOOT^"]
    assert len(result["episodes"]) == 1
    assert result["episodes"][0]["reasons"][1] == "clusterops.slurm remediation: reboot : reboot issued"


@pytest.mark.parametrize("release", with_release("flapping"))
def test_window_and_hostlist(run_module, monkeypatch, release):
    monkeypatch.setattr(slurm_node_event_info.time, "time", lambda: 1796075206 + 86400)
    rc, out, err = recorded(release, "flapping")
    result = run_module(slurm_node_event_info, {"nodes": ["n[2-3]"], "window": 86400},
                        [(sacctmgr("2026-11-30T21:46:46", "n[2-3]"), rc, out, err)])
    assert len(result["episodes"]) == 2
    assert all(e["end"] is not None for e in result["episodes"])


@pytest.mark.parametrize("release", with_release("slurmdbd-down"))
def test_slurmdbd_down_fails_the_task(run_module, release):
    rc, out, err = recorded(release, "slurmdbd-down")
    result = run_module(slurm_node_event_info, {"start": "1796075206"},
                        [(sacctmgr("2026-11-30T21:46:46"), rc, out, err)])
    assert result["failed"] is True
    assert "sacctmgr failed" in result["msg"] and result["rc"] == rc
    assert "events" not in result and "episodes" not in result


def test_garbage_fails_the_task(run_module):
    result = run_module(slurm_node_event_info, {"start": "1796075206"},
                        [(sacctmgr("2026-11-30T21:46:46"), 0, "n1|1|2|DRAIN\n", "")])
    assert result["failed"] is True and "fields" in result["msg"]
    assert result["commands"] == [sacctmgr("2026-11-30T21:46:46")]


def test_window_and_start_exclusive(run_module):
    result = run_module(slurm_node_event_info, {"start": "now", "window": 5}, [])
    assert result["failed"] is True and "mutually exclusive" in result["msg"]


def test_bad_start(run_module):
    result = run_module(slurm_node_event_info, {"start": "yesterday-ish"}, [])
    assert result["failed"] is True and result["msg"].startswith("start:")

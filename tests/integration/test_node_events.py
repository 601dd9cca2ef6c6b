# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_node_event_info against the real dev cluster: the history comes from slurmdbd."""

from __future__ import annotations

import time

import pytest

from conftest import module, scontrol

pytestmark = pytest.mark.every_release


def test_drained_and_resumed_twice_reads_two_closed_episodes(healthy):
    # A test before may have drained and resumed n2 a moment ago: events less than the module's
    # EPISODE_GAP (2 s) apart are one episode, so n2 stays in service longer than that first.
    time.sleep(3)
    start = int(time.time()) - 1
    for reason in ("Prolog error", "Prolog error"):
        scontrol("update", "NodeName=n2", "State=DRAIN", "Reason=" + reason)
        time.sleep(3)
        scontrol("update", "NodeName=n2", "State=RESUME")
        time.sleep(4)

    def read():
        rc, result = module("clusterops.slurm.slurm_node_event_info",
                            {"nodes": ["n[2-3]"], "start": str(start)}, check_mode=True)
        assert rc == 0, result
        return result
    # slurmctld sends events to slurmdbd asynchronously (within a second or two).
    deadline = time.time() + 30
    while True:
        result = read()
        closed = [e for e in result["episodes"] if e["end"] is not None]
        if len(closed) >= 2 or time.time() > deadline:
            break
        time.sleep(1)
    assert [(e["node"], e["reasons"]) for e in result["episodes"]] == [
        ("n2", ["Prolog error"]), ("n2", ["Prolog error"])]
    assert all(e["end"] is not None and e["end"] > e["start"] >= start for e in result["episodes"])
    assert len(result["commands"]) == 1 and result["commands"][0][1:4] == [
        "--noheader", "--parsable2", "show"]

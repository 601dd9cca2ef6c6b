# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parsers fed with outputs recorded from the real dev cluster (tests/unit/fixtures/devcluster)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import (
    TEXT_SEP,
    parse_sinfo_json,
    parse_sinfo_text,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._remediation import plan_remediation

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "devcluster")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def text_from_pipes(name):
    """The recorded ``sinfo -N -h -o '%N|%P|%T|%E'`` in the text source's own format."""
    lines = []
    for line in fixture(name).splitlines():
        node, partition, state, reason = line.split("|", 3)
        lines.append(TEXT_SEP.join([node, partition, state, "2", "1024", "(null)", "(null)",
                                    "Unknown", "Unknown", reason]))
    return "\n".join(lines)


# scenario -> {node: (base, flags, reason)} as the recorded JSON says
SCENARIOS = {
    "all_idle": {"n1": ("IDLE", [], ""), "n2": ("IDLE", [], "")},
    "crashed_n2": {"n2": ("DOWN", ["NOT_RESPONDING"], "Not responding"), "n1": ("IDLE", [], "")},
    "crashed_reboot_requested_n2": {
        "n2": ("DOWN", ["DRAIN", "NOT_RESPONDING", "REBOOT_ISSUED"], "clusterops: test : reboot issued")},
    "powered_on_down_n2": {"n2": ("DOWN", [], "Node unexpectedly rebooted")},
    "reboot_timed_out_n2": {
        "n2": ("DOWN", ["NOT_RESPONDING"], "clusterops: test : reboot issued : reboot timed out")},
    "drained_n3": {"n3": ("IDLE", ["DRAIN"], "Kill task failed")},
    # only slurmd died: DOWN+NOT_RESPONDING; back with the same boot time: DOWN, responding
    "slurmd_dead_n4": {"n4": ("DOWN", ["NOT_RESPONDING"], "Not responding")},
    "slurmd_back_down_n4": {"n4": ("DOWN", [], "Not responding")},
    "mixed": {"n1": ("MIXED", ["DRAIN", "REBOOT_REQUESTED"], "clusterops: Not responding"),
              "n3": ("IDLE", ["DRAIN"], "maintenance: swap DIMM"),
              "n2": ("DOWN", ["NOT_RESPONDING"], "Not responding")},
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_recorded_json(scenario):
    nodes = dict((n["name"], n) for n in parse_sinfo_json(fixture("sinfo_json_%s.json" % scenario)))
    assert sorted(nodes) == ["n1", "n2", "n3", "n4"]
    for name, (base, flags, reason) in SCENARIOS[scenario].items():
        node = nodes[name]
        assert node["state"] == base, name
        assert node["flags"] == sorted(flags), name
        if reason is not None:
            assert node["reason"] == reason
        assert node["partitions"] == ["debug", "train"]
        assert isinstance(node["boot_time"], int)


WITH_TEXT = [s for s in sorted(SCENARIOS) if os.path.exists(os.path.join(FIXTURES, "sinfo_N_%s.txt" % s))]


def test_most_scenarios_have_a_text_recording():
    assert len(WITH_TEXT) >= 7


@pytest.mark.parametrize("scenario", WITH_TEXT)
def test_recorded_text_agrees_with_json(scenario):
    from_json = dict((n["name"], n) for n in parse_sinfo_json(fixture("sinfo_json_%s.json" % scenario)))
    from_text = parse_sinfo_text(text_from_pipes("sinfo_N_%s.txt" % scenario))
    assert [n["name"] for n in from_text] == ["n1", "n2", "n3", "n4"]
    for node in from_text:
        other = from_json[node["name"]]
        assert sorted(node["partitions"]) == sorted(other["partitions"])
        assert node["reason"] == other["reason"]
        # sinfo's one word is lossy: "drained" hides the base, "reboot^" hides DRAIN and
        # NOT_RESPONDING. What the text does show must be true.
        assert set(node["flags"]) <= set(other["flags"])
        if node["state"] is not None:
            assert node["state"] == other["state"]
    # ... and the decisions taken from either source are the same.
    by_json = plan_remediation(list(from_json.values()), max_nodes=100, max_percent=100)
    by_text = plan_remediation(from_text, max_nodes=100, max_percent=100)
    for key in ("reboot", "resume"):
        assert by_text[key] == by_json[key]
    assert [s["name"] for s in by_text["skipped"]] == [s["name"] for s in by_json["skipped"]]


def test_recorded_policy_decisions():
    """The real states Slurm showed after each failure lead to the right action."""
    def plan(scenario):
        nodes = parse_sinfo_json(fixture("sinfo_json_%s.json" % scenario))
        return plan_remediation(nodes, max_nodes=100, max_percent=100)
    assert plan("crashed_n2")["reboot"] == ["n2"]
    assert plan("powered_on_down_n2")["resume"] == ["n2"]
    pending = plan("crashed_reboot_requested_n2")
    assert pending["reboot"] == [] and pending["skipped"][0]["why"] == "a reboot is already in progress"
    # a reboot that timed out is for a human
    timed_out = plan("reboot_timed_out_n2")
    assert timed_out["reboot"] == [] and timed_out["resume"] == []
    assert "allowlist" in timed_out["skipped"][0]["why"]
    assert plan("drained_n3")["reboot"] == ["n3"]
    assert plan("slurmd_dead_n4")["reboot"] == ["n4"]
    # slurmd restarted, node responds again: it only needs returning to service
    assert plan("slurmd_back_down_n4")["resume"] == ["n4"]
    mixed = plan("mixed")
    assert mixed["reboot"] == ["n2"]
    assert [s["name"] for s in mixed["skipped"]] == ["n1", "n3"]

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""sinfo parsers: the JSON and text sources give the same node records."""

from __future__ import annotations

import json

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import (
    NodeParseError,
    parse_nodes_json,
    parse_sinfo_text,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import SEP


def text_line(name, partition, state, reason="none", user="Unknown", when="Unknown", cpus="2",
              memory="1000", gres="(null)", features="(null)"):
    return SEP.join([name, partition, state, cpus, memory, gres, features, user, when, reason])


REASONS = [
    "Kill task failed [root@2026-09-21T15:02:11]",
    "prolog instance=i-0123 job=42: fabricmanager down",
    "NHC: check_fs_mount: /scratch not mounted",
    "a|pipe|in|it " + SEP + " and the separator itself",
]


@pytest.mark.parametrize("reason", REASONS)
def test_text_reason_kept_whole(reason):
    out = text_line("node01", "gpu*", "drained", reason=reason, user="root", when="2026-09-21T15:02:11")
    (node,) = parse_sinfo_text(out + "\n")
    assert node["reason"] == reason
    assert node["reason_user"] == "root"
    assert isinstance(node["reason_time"], int)


def test_text_one_node_many_partitions():
    out = "\n".join([
        text_line("node01", "gpu*", "idle"),
        text_line("node02", "gpu*", "mixed-"),
        text_line("node01", "normal", "idle"),
        text_line("node01", "hep", "idle"),
    ])
    result = parse_sinfo_text(out)
    assert [n["name"] for n in result] == ["node01", "node02"]
    assert result[0]["partitions"] == ["gpu", "normal", "hep"]
    assert result[1]["flags"] == ["PLANNED"]


@pytest.mark.parametrize("state, base, flags, responding", [
    ("idle*", "IDLE", ["NOT_RESPONDING"], False),
    ("mixed-", "MIXED", ["PLANNED"], True),
    ("idle~", "IDLE", ["POWERED_DOWN"], True),
    ("inval", None, ["DRAIN", "INVALID_REG"], True),
    ("allocated+", "ALLOCATED", ["COMPLETING"], True),
])
def test_text_states(state, base, flags, responding):
    (node,) = parse_sinfo_text(text_line("node01", "p", state))
    assert (node["state"], node["flags"], node["responding"]) == (base, flags, responding)
    assert node["reason"] == ""
    assert node["gres"] == "" and node["features"] == []


@pytest.mark.parametrize("out", [
    "node01 idle\n",                                     # not our format
    text_line("node01", "p", "sleepy"),                  # not a state
])
def test_text_errors(out):
    with pytest.raises(NodeParseError):
        parse_sinfo_text(out)


def json_doc(*nodes):
    return json.dumps({"meta": {}, "errors": [], "nodes": list(nodes)})


def test_json_2205_state_flags():
    out = json_doc({"name": "n2", "state": "down", "state_flags": ["DRAIN", "NOT_RESPONDING"],
                    "reason": "Not responding", "reason_set_by_user": "slurm",
                    "reason_changed_at": 1764500000, "partitions": ["debug", "train"],
                    "cpus": 2, "real_memory": 1000, "gres": "", "boot_time": 1764400000,
                    "slurmd_start_time": 1764400010, "features": "a,b"})
    (node,) = parse_nodes_json(out)
    assert node["state"] == "DOWN"
    assert node["flags"] == ["DRAIN", "NOT_RESPONDING"]
    assert node["drained"] and not node["responding"]
    assert node["partitions"] == ["debug", "train"]
    assert node["reason_time"] == 1764500000
    assert node["boot_time"] == 1764400000
    assert node["features"] == ["a", "b"]


def test_json_later_releases_state_list_and_number_objects():
    out = json_doc({"name": "n3", "state": ["IDLE", "DRAIN"], "reason": "Kill task failed",
                    "reason_changed_at": {"set": True, "infinite": False, "number": 1764500000},
                    "boot_time": {"set": False, "infinite": False, "number": 0},
                    "partitions": ["debug"], "cpus": 8, "real_memory": 64000, "gres": "gpu:h100:8"})
    (node,) = parse_nodes_json(out)
    assert (node["state"], node["flags"]) == ("IDLE", ["DRAIN"])
    assert node["reason_time"] == 1764500000
    assert node["boot_time"] is None
    assert node["gres"] == "gpu:h100:8"


@pytest.mark.parametrize("records", [
    # 22.05: one state word, flags apart; later: one list. Spellings that differ only in flags or
    # order are different states, and each node keeps its own even when a spelling repeats.
    [{"name": "n1", "state": "idle"}, {"name": "n2", "state": "idle", "state_flags": ["DRAIN"]},
     {"name": "n3", "state": "down", "state_flags": ["DRAIN"]}, {"name": "n4", "state": "idle"}],
    [{"name": "n1", "state": ["IDLE"]}, {"name": "n2", "state": ["IDLE", "DRAIN"]},
     {"name": "n3", "state": ["DOWN", "DRAIN"]}, {"name": "n4", "state": ["IDLE"]}],
])
def test_json_states_parsed_once_per_spelling_stay_per_node(records):
    nodes = parse_nodes_json(json_doc(*records))
    assert [(n["name"], n["state"], n["flags"]) for n in nodes] == [
        ("n1", "IDLE", []), ("n2", "IDLE", ["DRAIN"]), ("n3", "DOWN", ["DRAIN"]), ("n4", "IDLE", [])]


def test_json_unhashable_state_is_refused_not_crashed():
    with pytest.raises(NodeParseError):
        parse_nodes_json(json_doc({"name": "n1", "state": [{"odd": 1}]}))


@pytest.mark.parametrize("out", ["not json", "{}", json_doc({"state": "idle"}),
                                 json_doc({"name": "x", "state": "sleepy"})])
def test_json_errors(out):
    with pytest.raises(NodeParseError):
        parse_nodes_json(out)


def test_2411_text_user_without_reason_is_none():
    """24.11's sinfo %u prints root for a node with no reason (22.05: Unknown)."""
    line = SEP.join(["n1", "debug*", "idle", "1", "100", "(null)", "(null)", "root",
                     "Unknown", "none"])
    (node,) = parse_sinfo_text(line)
    assert (node["reason"], node["reason_user"], node["reason_time"]) == ("", None, None)


@pytest.mark.parametrize("state, kept", [
    (["IDLE"], False), (["MIXED"], False), (["ALLOCATED", "COMPLETING"], False),
    (["IDLE", "DRAIN"], True), (["DOWN"], True), (["IDLE", "FAIL"], True),
    (["IDLE", "REBOOT_REQUESTED"], True), (["IDLE", "POWERED_DOWN"], True),
    (["DOWN", "DRAIN", "INVALID_REG"], True),
])
def test_reason_is_kept_only_where_slurm_keeps_one(state, kept):
    (node,) = parse_nodes_json(json_doc({"name": "n1", "state": state, "reason": "r",
                                         "reason_set_by_user": "root", "reason_changed_at": 5}))
    assert (node["reason"], node["reason_user"], node["reason_time"]) == (
        ("r", "root", 5) if kept else ("", None, None))


@pytest.mark.parametrize("doc, match", [
    ({"meta": {"Slurm": {"release": "22.05.8"}},
      "errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []},
     r"Slurm 22\.05\.8\) answered with errors.*Unspecified error"),
    ({"meta": {"slurm": {"release": "24.11.5"}}, "errors": [], "nodes": []},
     r"Slurm 24\.11\.5\) listed no node at all"),
    ({"meta": {"slurm": {"release": "26.05.5"}}, "errors": [], "sinfo": []},
     r"Slurm 26\.05\.5\) lists node groups"),
    ({"meta": {"slurm": {"release": "27.05.0"}}, "errors": [], "node_records": []},
     r"Slurm 27\.05\.0\) printed a shape this collection does not know.*node_records"),
    ([], r"not an object"),
])
def test_json_partial_or_unknown_documents_name_the_release(doc, match):
    with pytest.raises(NodeParseError, match=match):
        parse_nodes_json(json.dumps(doc))

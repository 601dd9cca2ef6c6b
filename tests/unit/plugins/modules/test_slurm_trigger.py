# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_trigger and _triggers: strigger --get and scontrol show config as recorded from the dev clusters
(tests/unit/fixtures/slurm-<release>/triggers/, see its README), the module run as data (conftest.py)."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _triggers
from ansible_collections.clusterops.slurm.plugins.modules import slurm_trigger

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")
RELEASES = sorted(r[len("slurm-"):] for r in os.listdir(FIXTURES)
                  if os.path.isdir(os.path.join(FIXTURES, r, "triggers")))
PROGRAM = "/usr/local/libexec/clusterops/clusterops-slurm-event-node_down"


def recorded(release, name):
    with open(os.path.join(FIXTURES, "slurm-" + release, "triggers", name)) as handle:
        return handle.read()


def test_every_release_has_its_recordings():
    assert RELEASES == ["22.05", "24.11", "26.05"]


@pytest.mark.parametrize("release", RELEASES)
def test_the_recorded_triggers_read(release):
    assert _triggers.parse_triggers(recorded(release, "get-none.txt")) == []
    listed = _triggers.parse_triggers(recorded(release, "get-set.txt"))
    ours = [t for t in listed if os.path.basename(t["program"]).startswith("clusterops-slurm-event-node_")]
    assert sorted(t["type"] for t in ours) == ["down", "drained", "fail"]
    for t in ours:
        assert (t["res_type"], t["res_id"], t["flags"], t["offset"]) == ("node", "*", ["PERM"], 0)
        assert t["program"].endswith("clusterops-slurm-event-node_" + t["type"])
    assert _triggers.slurm_user(recorded(release, "config.txt"))[0]


@pytest.mark.parametrize("text", ["TRIG_ID RES_TYPE\n", "      3     node        *  down      x root PERM /p\n",
                                  "strigger: error: Unable to contact slurm controller\n"])
def test_what_is_no_trigger_list_is_refused(text):
    with pytest.raises(_triggers.TriggerAnswerError):
        _triggers.parse_triggers(text)


def test_flags_are_optional_and_the_program_keeps_its_arguments():
    text = ("TRIG_ID RES_TYPE   RES_ID  TYPE OFFSET USER     FLAGS PROGRAM\n"
            "      7      job      42  fini      0 slurm           /opt/notify --to ops\n")
    assert _triggers.parse_triggers(text) == [dict(id=7, res_type="job", res_id="42", type="fini", offset=0,
                                                   user="slurm", flags=[], program="/opt/notify --to ops")]


@pytest.mark.parametrize("text, user", [("SlurmUser               = slurm(64030)\n", ("slurm", 64030)),
                                        ("SlurmUser               = root(0)\n", ("root", 0))])
def test_slurm_user(text, user):
    assert _triggers.slurm_user("ClusterName = dev\n" + text) == user


def test_the_program_is_refused_unless_only_root_and_slurmuser_can_change_it(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (root-owned folders above the program)")
    folder = tmp_path / "libexec"
    folder.mkdir()
    program = folder / "prog"
    program.write_text("#!/bin/sh\n")
    os.chmod(str(program), 0o755)
    os.chmod(str(folder), 0o755)
    os.chmod(str(tmp_path), 0o755)
    uid = os.geteuid()
    assert _triggers.program_problem(str(program), uid, os.getegid()) is None
    os.chmod(str(program), 0o775)
    assert "can be changed by others" in _triggers.program_problem(str(program), uid, os.getegid())
    os.chmod(str(program), 0o644)
    assert "not executable" in _triggers.program_problem(str(program), 12345, 12345)
    assert "not an absolute path" in _triggers.program_problem("prog", uid, 0)
    assert "white space" in _triggers.program_problem("/opt/my prog", uid, 0)
    assert "cannot be read" in _triggers.program_problem(str(folder / "missing"), uid, 0)
    os.chmod(str(program), 0o755)
    os.chmod(str(folder), 0o777)
    assert "can be changed by others" in _triggers.program_problem(str(program), uid, os.getegid())
    os.chmod(str(folder), 0o777 | stat.S_ISVTX)  # sticky: others cannot replace root's program
    assert _triggers.program_problem(str(program), uid, os.getegid()) is None


@pytest.fixture
def program(tmp_path):
    """A program only root can change, in folders only root can change (as the role installs it)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (root-owned files)")
    for folder in (tmp_path, tmp_path.parent):
        os.chmod(str(folder), 0o755)
    path = tmp_path / "clusterops-slurm-event-node_down"
    path.write_text("#!/bin/sh\n")
    os.chmod(str(path), 0o755)
    return str(path)


def calls_for(release, program, present):
    """strigger --get as recorded, with ``program`` as the node_down trigger's when ``present``."""
    text = recorded(release, "get-set.txt" if present else "get-none.txt")
    recorded_down = [t["program"] for t in _triggers.parse_triggers(text) if t["type"] == "down"]
    return text.replace(recorded_down[0], program) if recorded_down else text


@pytest.mark.parametrize("release", RELEASES)
def test_present_sets_one_trigger_then_changes_nothing(run_module, program, release):
    config = _force_root(recorded(release, "config.txt"))
    get_none, get_set = calls_for(release, program, False), calls_for(release, program, True)
    result = run_module(slurm_trigger, {"event": "node_down", "program": program, "_ansible_diff": True}, [
        (["/usr/bin/scontrol", "show", "config"], 0, config, ""),
        (["/usr/bin/strigger", "--get"], 0, get_none, ""),
        (["/usr/bin/strigger", "--set", "--node", "--down", "--flags=PERM", "--program=%s" % program], 0, "", ""),
        (["/usr/bin/strigger", "--get"], 0, get_set, ""),
    ])
    assert result["changed"] is True and [t["type"] for t in result["triggers"]] == ["down"]
    assert result["diff"]["before"] == "" and "down PERM %s" % program in result["diff"]["after"]
    again = run_module(slurm_trigger, {"event": "node_down", "program": program}, [
        (["/usr/bin/scontrol", "show", "config"], 0, config, ""),
        (["/usr/bin/strigger", "--get"], 0, get_set, ""),
    ])
    assert again["changed"] is False and again["commands_planned"] == []


@pytest.mark.parametrize("release", RELEASES)
def test_check_mode_plans_and_absent_clears_exactly_its_own(run_module, program, release):
    config = _force_root(recorded(release, "config.txt"))
    get_set = calls_for(release, program, True)
    planned = run_module(slurm_trigger, {"event": "node_down", "program": program, "state": "absent",
                                         "_ansible_check_mode": True}, [
        (["/usr/bin/scontrol", "show", "config"], 0, config, ""),
        (["/usr/bin/strigger", "--get"], 0, get_set, ""),
    ])
    ours = [t for t in _triggers.parse_triggers(get_set) if t["program"] == program]
    assert planned["changed"] is True and planned["commands_planned"] == [
        ["/usr/bin/strigger", "--clear", "--id=%d" % ours[0]["id"]]]
    result = run_module(slurm_trigger, {"event": "node_down", "program": program, "state": "absent"}, [
        (["/usr/bin/scontrol", "show", "config"], 0, config, ""),
        (["/usr/bin/strigger", "--get"], 0, get_set, ""),
        (["/usr/bin/strigger", "--clear", "--id=%d" % ours[0]["id"]], 0, "", ""),
        (["/usr/bin/strigger", "--get"], 0, get_set.replace(program, "/opt/elsewhere/gone"), ""),
    ])
    assert result["changed"] is True and result["triggers"] == []


def test_a_program_others_can_change_is_refused(run_module, program):
    os.chmod(program, 0o777)
    config = _force_root(recorded(RELEASES[0], "config.txt"))
    result = run_module(slurm_trigger, {"event": "node_down", "program": program}, [
        (["/usr/bin/scontrol", "show", "config"], 0, config, ""),
        (["/usr/bin/strigger", "--get"], 0, calls_for(RELEASES[0], program, False), ""),
    ])
    assert result["failed"] is True and "refusing the trigger program" in result["msg"]


def test_an_unreadable_trigger_list_fails_and_changes_nothing(run_module, program):
    config = _force_root(recorded(RELEASES[0], "config.txt"))
    result = run_module(slurm_trigger, {"event": "node_down", "program": program}, [
        (["/usr/bin/scontrol", "show", "config"], 0, config, ""),
        (["/usr/bin/strigger", "--get"], 0, "TRIG_ID RES_TYPE RES_ID TYPE OFFSET USER FLAGS PROGRAM\n      3  node", ""),
    ])
    assert result["failed"] is True and "no trigger" in result["msg"]


def _force_root(config):
    """The recorded configuration with SlurmUser root (the unit tests run as root, without runuser)."""
    lines = [line for line in config.splitlines() if not line.startswith("SlurmUser")]
    return "\n".join(lines + ["SlurmUser               = root(0)"]) + "\n"


@pytest.mark.parametrize("release", RELEASES)
def test_only_the_events_own_trigger_is_cleared_when_one_program_serves_several(run_module, program, release):
    """A site that points --down and --drained at the same program: node_down's absent leaves --drained's."""
    config = _force_root(recorded(release, "config.txt"))
    text = recorded(release, "get-set.txt")
    for trigger in _triggers.parse_triggers(text):
        text = text.replace(trigger["program"], program)
    down = [t["id"] for t in _triggers.parse_triggers(text) if t["type"] == "down"]
    planned = run_module(slurm_trigger, {"event": "node_down", "program": program, "state": "absent",
                                         "_ansible_check_mode": True}, [
        (["/usr/bin/scontrol", "show", "config"], 0, config, ""),
        (["/usr/bin/strigger", "--get"], 0, text, ""),
    ])
    assert planned["commands_planned"] == [["/usr/bin/strigger", "--clear", "--id=%d" % down[0]]]

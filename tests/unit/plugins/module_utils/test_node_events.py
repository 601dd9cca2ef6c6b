# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node event reader (``sacctmgr show event``) and its failure episodes, on what real Slurm
22.05, 24.11 and 26.05 recorded (tests/unit/fixtures/slurm-<release>/node-events-<scenario>/,
written by dev/cluster/record-node-events.sh; each folder's README says the commands)."""

from __future__ import annotations

import io
import os
import time

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _node_events as ne
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    DECODE_ERRORS,
    SlurmCLI,
    SlurmCommandError,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import node_events

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")
RELEASES = ("22.05", "24.11", "26.05")
FORMAT = "format=NodeName,TimeStart,TimeEnd,State,User,Reason"
REBOOT_REASON = "clusterops.slurm remediation: reboot"


def folder(release, scenario):
    return os.path.join(FIXTURES, "slurm-" + release, "node-events-" + scenario)


def recorded(release, scenario, name="sacctmgr-show-event"):
    """(rc, stdout, stderr) of a recorded read, decoded as the command layer does."""
    base = os.path.join(folder(release, scenario), name)
    out = err = ""
    with io.open(base + ".rc", encoding="ascii") as handle:
        rc = int(handle.read().strip())
    with io.open(base + ".out", encoding="utf-8", errors="replace") as handle:
        out = handle.read()
    if os.path.exists(base + ".err"):
        with io.open(base + ".err", encoding="utf-8", errors="replace") as handle:
            err = handle.read()
    return rc, out, err


def steps(release, scenario):
    """Unix times of the recorded steps, in order (notes left out)."""
    with io.open(os.path.join(folder(release, scenario), "steps.txt"), encoding="utf-8",
                 errors="replace") as handle:
        return [int(line.split(" ", 1)[0]) for line in handle if " # " not in line]


def releases_with(scenario):
    return [pytest.param(r, id=r) for r in RELEASES if os.path.isdir(folder(r, scenario))]


class FakeModule(object):
    """Just what SlurmCLI needs; run_command answers from a list of (argv, rc, out, err)."""

    def __init__(self, answers):
        self.params = {"slurm_conf": None, "slurm_bin_dir": None, "command_timeout": 0}
        self.answers = list(answers)
        self.environ = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/bin/" + name

    def run_command(self, argv, **kwargs):
        assert kwargs.get("use_unsafe_shell") is False
        self.environ.append(kwargs.get("environ_update"))
        want, rc, out, err = self.answers.pop(0)
        assert argv == want
        return rc, out, err

    def fail_json(self, **kwargs):
        raise AssertionError(kwargs)


def argv(start_text, nodes=None):
    args = ["/usr/bin/sacctmgr", "--noheader", "--parsable2", "show", "event", "event=node",
            "start=" + start_text]
    if nodes:
        args.append("nodes=" + nodes)
    return args + [FORMAT]


# --- the command ---------------------------------------------------------------------------------

def test_one_call_with_utc_start_unix_seconds_and_reason_last():
    module = FakeModule([(argv("2026-11-30T21:46:46", "n[1-4]"), 0, "", "")])
    cli = SlurmCLI(module)
    assert ne.read_node_events(cli, 1796075206, "n[1-4]") == []
    assert cli.calls == [argv("2026-11-30T21:46:46", "n[1-4]")]
    env = module.environ[0]
    assert env["SLURM_TIME_FORMAT"] == "%s" and env["TZ"] == "UTC" and env["LC_ALL"] == "C"


def test_start_is_utc_whatever_the_local_zone(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        assert node_events(1796075206, ["n1", "n2"])[1] == argv("2026-11-30T21:46:46", "n1,n2")[1:]
        assert ne.parse_event_time("2026-11-30T21:46:46") == 1796075206
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


# --- parsing, every release ---------------------------------------------------------------------

@pytest.mark.parametrize("release", releases_with("flapping"))
def test_iso_and_unix_seconds_forms_read_alike(release):
    """The ISO form (recorded with TZ=UTC) and the %s form of the same read give the same events,
    whatever this process's own time zone."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "America/Los_Angeles"
    time.tzset()
    try:
        for scenario in ("flapping", "reboot", "admin-open"):
            if not os.path.isdir(folder(release, scenario)):
                continue
            unix = ne.parse_events(recorded(release, scenario)[1])
            iso = ne.parse_events(recorded(release, scenario, "sacctmgr-show-event-iso")[1])
            assert unix and unix == iso
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


@pytest.mark.parametrize("release", releases_with("flapping"))
def test_flapping_two_closed_episodes(release):
    rc, out, err = recorded(release, "flapping")
    assert rc == 0 and not err
    events = ne.parse_events(out)
    t = steps(release, "flapping")
    assert [(e["node"], e["state"], e["reason"]) for e in events] == [
        ("n2", "DRAIN", "Prolog error"), ("n2", "DRAIN", "Prolog error")]
    # Each event spans its drain .. resume (to the second, +-1 s of the recording's own clock).
    for event, (drain, resume) in zip(events, [(t[0], t[1]), (t[2], t[3])]):
        assert abs(event["start"] - drain) <= 1 and abs(event["end"] - resume) <= 1
    got = ne.episodes(events)
    assert [(e["node"], e["reasons"], e["end"] is not None) for e in got] == [
        ("n2", ["Prolog error"], True), ("n2", ["Prolog error"], True)]


@pytest.mark.parametrize("release", releases_with("reboot"))
def test_reboot_after_kill_task_failed_is_one_episode(release):
    """scontrol reboot reason=R on a drained node: Slurm closes the drain event and opens a
    BOOT^ event "R : reboot issued" at the same second; it ends when the node is back."""
    events = ne.parse_events(recorded(release, "reboot")[1])
    assert [e["state"] for e in events] == ["DRAIN", "BOOT^"]
    assert events[0]["end"] == events[1]["start"]
    got = ne.episodes(events)
    assert len(got) == 1
    assert got[0]["node"] == "n3" and got[0]["end"] is not None
    assert got[0]["reasons"][0].startswith("Kill task failed")
    assert got[0]["reasons"][1] == REBOOT_REASON + " : reboot issued"
    assert got[0]["states"] == ["DRAIN", "BOOT^"] and got[0]["events"] == 2


@pytest.mark.parametrize("release", releases_with("crash"))
def test_crash_then_power_on_and_resume_is_one_episode(release):
    """Power lost: DOWN* "Not responding" after SlurmdTimeout; powered on, slurmd registers
    with a new boot time and Slurm closes it and opens DOWN "Node unexpectedly rebooted" at the
    same second (ReturnToService=0); it ends at the resume. The read of 26.05 also holds the
    UNK "cold-start" event that slurmctld opened for the node at its clean start (cluster-up
    just before), closed when the node registered: an episode of its own, no failure."""
    events = ne.parse_events(recorded(release, "crash")[1])
    failures = [e for e in events if e["reason"] != "cold-start"]
    assert [(e["state"], e["reason"]) for e in failures] == [
        ("DOWN*", "Not responding"), ("DOWN", "Node unexpectedly rebooted")]
    assert all(e["state"] == "UNK" for e in events if e["reason"] == "cold-start")
    crash = steps(release, "crash")[0]
    got = ne.episodes(events)
    assert [e["reasons"] for e in got if e["start"] >= crash] == [
        ["Not responding", "Node unexpectedly rebooted"]]
    assert got[-1]["end"] is not None and got[-1]["states"] == ["DOWN*", "DOWN"]


@pytest.mark.parametrize("release", releases_with("admin-open"))
def test_open_admin_drain_with_pipe_in_reason(release):
    events = ne.parse_events(recorded(release, "admin-open")[1])
    assert len(events) == 1
    assert events[0]["end"] is None and events[0]["state"] == "DRAIN"
    assert events[0]["reason"] == "maintenance: rack 7 | PSU swap (CHG-1234)"
    assert events[0]["user"].startswith("root")
    got = ne.episodes(events)
    assert len(got) == 1 and got[0]["end"] is None


@pytest.mark.parametrize("release", releases_with("reason-bytes"))
def test_reason_not_utf8_as_the_database_returns_it(release):
    """A drain reason holding the Latin-1 byte 0xFC ("Wartung f\\xfcr GPU"): slurmdbd's MariaDB
    gives it back converted, never raw - 22.05 (host, MariaDB 10.11) as "?", 24.11 and 26.05
    as U+FFFD in UTF-8 (EF BF BD)."""
    events = ne.parse_events(recorded(release, "reason-bytes")[1])
    expected = u"Wartung f?r GPU" if release == "22.05" else u"Wartung f\ufffdr GPU"
    assert [e["reason"] for e in events] == [expected]


def test_raw_bytes_not_utf8_decoded_by_the_command_layer():
    """Should a database hand the raw byte back, the command layer decodes it as U+FFFD."""
    raw = b"n2|1796075504|1796075506|DRAIN|root(0)|Wartung f\xfcr GPU|x\n"
    events = ne.parse_events(raw.decode("utf-8", DECODE_ERRORS))
    assert events[0]["reason"] == u"Wartung f\ufffdr GPU|x"


@pytest.mark.parametrize("release", releases_with("slurmdbd-down"))
def test_slurmdbd_down_raises_never_empty(release):
    rc, out, err = recorded(release, "slurmdbd-down")
    assert rc != 0 and "error" in err
    cli = SlurmCLI(FakeModule([(argv("2026-11-30T21:46:46", "n1"), rc, out, err)]))
    with pytest.raises(SlurmCommandError) as info:
        ne.read_node_events(cli, 1796075206, "n1")
    assert "sacctmgr failed (rc=%d)" % rc in info.value.msg
    assert "Connection refused" in info.value.msg


# --- what no recording shows -------------------------------------------------------------------

def test_error_on_stderr_with_rc_0_raises():
    line = "n2|1796075235|1796075238|DRAIN|root(0)|Prolog error\n"
    cli = SlurmCLI(FakeModule([(argv("2026-11-30T21:46:46"), 0, line,
                                "sacctmgr: error: Problem talking to the database\n")]))
    with pytest.raises(SlurmCommandError, match="exited 0 but reported an error"):
        ne.read_node_events(cli, 1796075206)


@pytest.mark.parametrize("text", [
    "garbage\n",
    "n2|1796075235|1796075238|DRAIN|root(0)\n",            # cut short: no reason field
    "n2|yesterday|1796075238|DRAIN|root(0)|x\n",          # start not a time
    "n2|1796075235|soon|DRAIN|root(0)|x\n",               # end neither a time nor Unknown
    "|1796075235|1796075238|DRAIN|root(0)|x\n",           # no node
    "n2|1796075238|1796075235|DRAIN|root(0)|x\n",         # ends before it starts
], ids=["garbage", "cut-short", "bad-start", "bad-end", "no-node", "backwards"])
def test_line_that_is_no_event_raises(text):
    good = "n1|1796075235|Unknown|DRAIN|root(0)|ok\n"
    cli = SlurmCLI(FakeModule([(argv("2026-11-30T21:46:46"), 0, good + text, "")]))
    with pytest.raises(ne.NodeEventParseError):
        ne.read_node_events(cli, 1796075206)


def test_reason_with_pipes_split_only_five_times():
    events = ne.parse_events("n1|10|Unknown|DRAIN|slurm(64030)|a|b||c|\n")
    assert events[0]["reason"] == "a|b||c|" and events[0]["user"] == "slurm(64030)"


# --- episodes -----------------------------------------------------------------------------------

def ev(node, start, end, reason, state="DRAIN"):
    return {"node": node, "start": start, "end": end, "state": state, "user": "root(0)", "reason": reason}


def test_episodes_gap_overlap_open_and_order():
    events = [
        ev("n2", 100, 110, "Prolog error"),
        ev("n1", 50, 60, "Kill task failed"),
        ev("n2", 112, 120, "x : reboot issued", "BOOT^"),  # 2 s later: same episode
        ev("n2", 123, 130, "Prolog error"),                  # 3 s later: a new one
        ev("n2", 125, None, "overlapping, open"),            # overlaps: joins, episode open
        ev("n1", 60, 70, "y : reboot issued", "BOOT^"),
    ]
    got = ne.episodes(events)
    assert [(e["node"], e["start"], e["end"], e["reasons"], e["events"]) for e in got] == [
        ("n1", 50, 70, ["Kill task failed", "y : reboot issued"], 2),
        ("n2", 100, 120, ["Prolog error", "x : reboot issued"], 2),
        ("n2", 123, None, ["Prolog error", "overlapping, open"], 2),
    ]
    assert got[1]["states"] == ["DRAIN", "BOOT^"]
    assert len(ne.episodes(events, gap=0)) == 4
    assert ne.episodes([]) == []

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_node_event_info against the real dev cluster: the history comes from slurmdbd."""

from __future__ import annotations

import json
import os
import time

import pytest

from conftest import is_healthy, module, scontrol, shared_tmpdir, wait_for

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
    # slurmctld sends events to slurmdbd asynchronously (within a second or two; more when busy):
    # a poll of Slurm's record, which ends as soon as it holds both episodes.
    deadline = time.time() + 120
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


def test_cluster_goodput_counts_a_kill_task_drain_healed_by_remediation(healthy):
    """n3 drained "Kill task failed", left so for a while, then healed by the node remediation (a
    reboot through Slurm): cluster_goodput_info counts the span under kill_task_failed (the
    drain and the reboot that healed it) within a tolerance of the measured span, and the reboot
    as a heal; the journal, first written by that run, knows no trip before it."""
    time.sleep(3)  # events of a test before end first (the module counts from start)
    start = int(time.time()) - 1
    # where the modules run (the controller: in the container of a release in podman) and this test reads
    journal = os.path.join(shared_tmpdir("goodput-"), "devcluster.json")
    # The span Slurm records lies between what this test can bound from both sides: the drain between
    # before and after its scontrol, the return between the last poll that saw n3 out of service and the
    # first that saw it back (each call a podman exec where the release runs in a container: seconds apart
    # on a loaded machine).
    before_drain = time.time()
    scontrol("update", "NodeName=n3", "State=DRAIN", "Reason=Kill task failed")
    after_drain = time.time()
    time.sleep(20)
    rc, result = module("clusterops.slurm.slurm_node_remediation",
                        {"journal": journal, "heal_since": start, "lock_timeout": 0})
    assert rc == 0 and result["rebooted"] == ["n3"], result
    polls = []

    def back(ns):
        polls.append(time.time())
        return is_healthy(ns["n3"])
    wait_for(back, "n3 rebooted and back in service", timeout=120, interval=0.5)
    back_at = time.time()
    shortest = (polls[-2] if len(polls) > 1 else after_drain) - after_drain
    longest = measured = back_at - before_drain

    def read():
        code, answer = module("clusterops.slurm.cluster_goodput_info", {"start": str(start), "journal": journal},
                              check_mode=True)
        assert code == 0, answer
        return answer
    deadline = time.time() + 120  # slurmdbd writes events seconds late (more when busy): a poll
    while True:
        answer = read()
        row = dict((r["class"], r) for r in answer["by_class"]).get("kill_task_failed")
        if (row is not None and row["open"] == 0) or time.time() > deadline:
            break
        time.sleep(1)
    assert row is not None and row["open"] == 0, answer
    # whole seconds in accounting, slurmctld's reboot bookkeeping: 3 s more either side
    assert shortest - 3 <= row["node_seconds"] <= longest + 3, (row, shortest, longest)
    assert row["hostlist"] == "n3" and row["by_state"]["drain"] >= 19 and row["by_state"]["reboot"] > 0, row
    assert answer["heals"]["rebooted"] == 1 and answer["heals"]["hostlist"] == "n3", answer["heals"]
    assert answer["holds"]["flapping"]["count"] == 0
    assert answer["circuit"]["trips"] is None
    assert any(u["figure"] == "circuit" and "records trips since" in u["why"] for u in answer["unknown"])
    assert [c[1:4] for c in answer["commands"]] == [["--noheader", "--parsable2", "show"], ["show", "configuration"]]
    print("cluster_goodput: kill_task_failed %s node-seconds (%s), measured %.1f s; heals %s"
          % (row["node_seconds"], row["by_state"], measured, answer["heals"]))


def test_cluster_goodput_counts_a_trip_and_a_flapping_hold_from_the_journal(healthy):
    """The node remediation's own records on the dev cluster: a run with a threshold of 0 finds n2
    drained "Prolog error" and trips the circuit breaker (the journal opens a trip), the next run
    resumes n2 (the trip ends), n2 fails again and a run with a healing budget of 1 holds it as
    flapping. cluster_goodput_info, from the journal's first run on, counts 1 trip, its open
    seconds, the hold and the time under prolog_error and clusterops_hold."""
    time.sleep(3)
    # where the modules run (the controller: in the container of a release in podman) and this test reads
    journal = os.path.join(shared_tmpdir("goodput-"), "devcluster.json")

    def remediate(**options):
        rc, result = module("clusterops.slurm.slurm_node_remediation",
                            dict({"journal": journal, "heal_since": since, "lock_timeout": 0}, **options))
        return result
    since = int(time.time())
    first = remediate()  # nothing to do: the journal starts recording trips now
    assert not first.get("failed") and os.path.exists(journal), first
    with open(journal) as handle:
        trips_since = json.load(handle)["trips_since"]
    scontrol("update", "NodeName=n2", "State=DRAIN", "Reason=Prolog error")
    time.sleep(2)
    tripped = remediate(circuit={"window": 86400, "min_nodes": 0})
    assert tripped["plan"]["circuit"]["open"] is True and tripped["resumed"] == [], tripped
    tripped_at = time.time()
    time.sleep(5)
    resumed = remediate()
    assert resumed["resumed"] == ["n2"], resumed
    closed_at = time.time()
    time.sleep(4)  # back in service for longer than a join of two events
    scontrol("update", "NodeName=n2", "State=DRAIN", "Reason=Prolog error")
    time.sleep(2)
    held = remediate(heal_budget=1)
    assert held["drained"] == ["n2"], held
    time.sleep(5)

    def read():
        code, answer = module("clusterops.slurm.cluster_goodput_info",
                              {"start": str(trips_since), "journal": journal}, check_mode=True)
        assert code == 0, answer
        return answer
    deadline = time.time() + 120  # slurmdbd writes events seconds late (more when busy): a poll
    while True:
        answer = read()
        if answer["holds"]["flapping"]["count"] >= 1 or time.time() > deadline:
            break
        time.sleep(1)
    circuit = answer["circuit"]
    assert circuit["trips"] == 1 and circuit["open_now"] is False, circuit
    assert circuit["list"][0]["classes"] == ["prolog_error"] and circuit["list"][0]["broken"] == 1
    # the trip opened at the tripping run's start and closed at the next run's
    assert 0 < circuit["open_seconds"] <= closed_at - tripped_at + 15, (circuit, closed_at - tripped_at)
    assert answer["holds"]["flapping"] == {"count": 1, "nodes": 1, "hostlist": "n2"}, answer["holds"]
    by_class = dict((r["class"], r) for r in answer["by_class"])
    assert by_class["prolog_error"]["node_seconds"] >= 7 and by_class["clusterops_hold"]["open"] == 1, by_class
    assert answer["heals"]["returned_to_service"] == 1, answer["heals"]
    print("cluster_goodput: circuit %s; holds %s; by class %s" % (
        circuit, answer["holds"], [(r["class"], r["node_seconds"]) for r in answer["by_class"]]))

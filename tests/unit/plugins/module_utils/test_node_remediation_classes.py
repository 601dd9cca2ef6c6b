# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reason classes, the healing budget, the circuit breaker and reboots in flight."""

from __future__ import annotations

import io
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import expand_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._node_events import parse_events
from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import parse_state
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import (
    DEFAULT_REASON_CLASSES,
    classes_from_allowlist,
    compile_classes,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.heals import (
    count_heals,
    flapping_reason,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.policy import (
    circuit_threshold,
    plan_remediation,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import PolicySettings, RemediationError


def skipped_by_name(plan):
    """{name: its group} from the plan's summarised ``skipped`` ({why, reason, count, hostlist})."""
    groups = {}
    for group in plan["skipped"]:
        names = expand_hostlist(group["hostlist"])
        assert len(names) == group["count"]
        groups.update((name, group) for name in names)
    return groups


def skipped_names(plan):
    return sorted(skipped_by_name(plan), key=lambda name: (len(name), name))


NOW = 1_800_000_000
DAY = 86400
NO_CIRCUIT = {"window": 0}


def node(name, state, reason="", reason_time=NOW - 60):
    parsed = parse_state(state)
    return {"name": name, "state": parsed.base, "flags": sorted(parsed.flags), "state_raw": state,
            "reason": reason, "reason_time": reason_time, "partitions": ["gpu"]}


def event(name, start, end, reason, state="DRAIN"):
    return {"node": name, "start": start, "end": end, "state": state, "user": "slurm", "reason": reason}


def plan(nodes, events=None, now=NOW, **settings):
    settings.setdefault("max_nodes", 100)
    settings.setdefault("max_percent", 100)
    return plan_remediation(nodes, PolicySettings(**settings), events=events, now=now)


# Reasons the node_health HealthCheckProgram writes (docs/node-health.md) and what the default
# classes do with them; the Xid numbers follow NVIDIA's catalogue (docs/node-remediation.md).
@pytest.mark.parametrize("reason, action, klass", [
    ("clusterops-health: gpu_xid: Xid 79 (PCI:0000:3b:00): GPU has fallen off the bus", "reboot", "gpu_xid_reset"),
    ("clusterops-health: gpu_xid: Xid 48 (PCI:0000:3b:00): An uncorrectable double bit error", "reboot", "gpu_xid_reset"),
    ("clusterops-health: gpu_xid: Xid 95 (PCI:0000:3b:00): Uncontained: FBHUB", "reboot", "gpu_xid_reset"),
    ("clusterops-health: gpu_xid: Xid 119 (PCI:0000:3b:00): Timeout waiting for RPC from GSP", "reboot", "gpu_xid_reset"),
    ("clusterops-health: gpu_xid: Xid 154 (PCI:0000:3b:00): GPU recovery action changed", "reboot", "gpu_xid_reset"),
    ("clusterops-health: gpu_xid: Xid 64 (PCI:0000:3b:00): Row Remapper: Failed to remap row", "human", "health_other"),
    ("clusterops-health: gpu_xid: Xid 92 (PCI:0000:3b:00): High single-bit ECC error rate", "human", "health_other"),
    ("clusterops-health: gpu_xid: Xid 790 (PCI:0000:3b:00): not a real Xid", "human", "health_other"),
    ("clusterops-health: gpu_xid: Xid 7 (PCI:0000:3b:00): unused", "human", "health_other"),
    ("clusterops-health: gpu_count: expected 8 found 7", "reboot", "gpu_count"),
    # nvidia-smi's exit status (docs/node-health.md): what a reboot may repair, what needs a person
    ("clusterops-health: gpu_count: expected 8, nvidia-smi failed rc=15 (the GPU has fallen off the bus or "
     "has otherwise become inaccessible): Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost",
     "reboot", "gpu_nvidia_smi_reset"),
    ("clusterops-health: gpu_count: expected 8, nvidia-smi failed rc=9 (the NVIDIA driver is not loaded): "
     "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver", "reboot", "gpu_nvidia_smi_reset"),
    ("clusterops-health: gpu_state: nvidia-smi failed rc=18 (the driver and the NVML library versions do not "
     "match): Failed to initialize NVML: Driver/library version mismatch", "reboot", "gpu_nvidia_smi_reset"),
    ("clusterops-health: gpu_count: expected 8, nvidia-smi failed rc=6 (a query to find an object was "
     "unsuccessful (no devices were found)): No devices were found", "reboot", "gpu_nvidia_smi_reset"),
    ("clusterops-health: gpu_state: nvidia-smi failed rc=255 (other error or internal driver error): x",
     "reboot", "gpu_nvidia_smi_reset"),
    ("clusterops-health: gpu_count: expected 8, nvidia-smi failed rc=14 (the infoROM is corrupted): "
     "WARNING: infoROM is corrupted at gpu 0000:0B:00.0", "human", "gpu_nvidia_smi_other"),
    ("clusterops-health: gpu_state: nvidia-smi failed rc=8 (a device's external power cables are not properly "
     "attached): x", "human", "gpu_nvidia_smi_other"),
    ("clusterops-health: gpu_count: expected 8, nvidia-smi failed rc=12 (the NVML shared library could not be "
     "found or loaded): NVIDIA-SMI couldn't find libnvidia-ml.so library in your system.", "human",
     "gpu_nvidia_smi_other"),
    ("clusterops-health: gpu_count: expected 8, nvidia-smi failed rc=4 (no permission to access the device or "
     "perform the operation): Insufficient Permissions", "human", "gpu_nvidia_smi_other"),
    ("clusterops-health: gpu_count: expected 8, nvidia-smi failed rc=127 (unknown exit status): "
     "[Errno 2] No such file or directory: 'nvidia-smi'", "human", "gpu_nvidia_smi_other"),
    ("clusterops-health: gpu_state: nvidia-smi failed rc=155 (unknown exit status): x", "human",
     "gpu_nvidia_smi_other"),
    ("clusterops-health: gpu_count: expected 8, nvidia-smi timed out after 30s", "reboot", "gpu_count"),
    ("clusterops-health: gpu_state: GPU 0000:3b:00.0: ecc.errors.uncorrected.volatile.total 2", "reboot", "gpu_state"),
    ("clusterops-health: mount: /data not mounted", "reboot", "mount"),
    ("clusterops-health: disk_free: /tmp has 1.0 GiB free, needs 10.0 GiB", "human", "health_other"),
    ("clusterops-health: command: ib-check exited 1", "human", "health_other"),
    ("clusterops: flapping: healed 3 times in 24h, last: Prolog error", "human", "clusterops_hold"),
    ("clusterops: suspect: runs a,b failed on it (jobs 12,15)", "human", "clusterops_hold"),
])
def test_health_check_reasons_have_a_class(reason, action, klass):
    result = plan([node("n1", "IDLE+DRAIN", reason)], circuit=NO_CIRCUIT)
    if action == "human":
        assert [h["hostlist"] for h in result["human"]] == ["n1"] and result["human"][0]["class"] == klass
        item = result["needs_human"][0]
        assert [dict(i, next=None) for i in result["needs_human"]] == [
            {"name": "n1", "count": 1, "why": "class %s: %s" % (klass, reason), "next": None}]
        # the next step names the nodes and ends with the runbook's section
        assert item["next"].startswith("next: ") and "NodeName=n1 State=RESUME" in item["next"]
        assert item["next"].endswith("(docs/node-remediation.md#when-it-says-needs-a-human)")
        assert result["reboot"] == result["resume"] == []
    else:
        assert result[action] == ["n1"] and result["actions"][0]["class"] == klass
        assert result["needs_human"] == []


@pytest.mark.parametrize("reason", [
    "NHC: check_fs_mount: /scratch not mounted",      # LBNL NHC drains by itself; NHC owns it
    "clusterops-healthcheck: gpu_count: expected 8",  # not the documented prefix
    "admin: clusterops-health: gpu_count: expected 8 found 7",
    "RMA ticket 42 (was clusterops-health: gpu_xid: Xid 79)",
    "clusterops: flapping is being investigated by bob",
])
def test_reasons_of_others_are_never_classified(reason):
    result = plan([node("n1", "IDLE+DRAIN", reason)], circuit=NO_CIRCUIT)
    assert result["skipped"][0]["why"].startswith("reason matches no class")
    assert result["needs_human"] == [] and result["actions"] == []


@pytest.mark.parametrize("classes, message", [
    ("^Prolog", "must be a list"),
    ([{"name": "a", "match": "x"}], "missing action"),
    ([{"name": "a", "match": "x", "action": "reboot", "when": "now"}], "unknown key(s) when"),
    ([{"name": "a", "match": "x", "action": "drain"}], "action must be one of reboot, resume, human"),
    ([{"name": "a", "match": "(x", "action": "reboot"}], "not a valid regular expression"),
    ([{"name": "a", "match": "x", "action": "reboot"}, {"name": "a", "match": "y", "action": "resume"}],
     "defined twice"),
    (["^Prolog error$"], "must be a dict"),
])
def test_bad_classes_are_refused_with_the_class_named(classes, message):
    with pytest.raises(RemediationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compile_classes(classes)


def test_default_classes_compile_and_the_first_match_wins():
    names = [c["name"] for c in compile_classes(DEFAULT_REASON_CLASSES)]
    # health_other is a catch-all for the health prefix: every specific health class is before it
    assert names.index("health_other") > max(names.index(n) for n in ("gpu_xid_reset", "gpu_count", "gpu_state", "mount"))


def test_allowlist_migration_keeps_the_old_meaning():
    classes = classes_from_allowlist(["^Prolog error$", "^Kill task failed$"], ["^Kill task failed$", "^never$"])
    assert [(c["match"], c["action"]) for c in classes] == [("^Prolog error$", "resume"), ("^Kill task failed$", "reboot")]
    result = plan([node("n1", "IDLE+DRAIN", "Prolog error"), node("n2", "IDLE+DRAIN", "Kill task failed"),
                   node("n3", "IDLE+DRAIN", "never")], classes=classes, circuit=NO_CIRCUIT)
    assert result["resume"] == ["n1"] and result["reboot"] == ["n2"]
    assert skipped_names(result) == ["n3"]


# --- healing budget ----------------------------------------------------------------------

FLAPPING_HISTORY = [
    # Prolog error three times, each resumed (recorded on 22.05/24.11/26.05 as one closed event each)
    event("n2", NOW - 3000, NOW - 2900, "Prolog error"),
    event("n2", NOW - 2000, NOW - 1900, "Prolog error"),
    event("n2", NOW - 1000, NOW - 900, "Prolog error"),
    # the open event of the drain now
    event("n2", NOW - 60, None, "Prolog error"),
]


def test_count_heals_counts_closed_failures_of_acting_classes():
    classes = compile_classes(DEFAULT_REASON_CLASSES)
    assert count_heals(FLAPPING_HISTORY, classes, NOW - DAY) == {"n2": {"heals": 3, "last": "Prolog error"}}
    # the window: only what ended after `since`
    assert count_heals(FLAPPING_HISTORY, classes, NOW - 1500) == {"n2": {"heals": 1, "last": "Prolog error"}}


FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures")


def recorded_events(release, scenario):
    path = os.path.join(FIXTURES, "slurm-" + release, "node-events-" + scenario, "sacctmgr-show-event.out")
    if not os.path.exists(path):
        pytest.skip("no %s recording of %s" % (release, scenario))
    with io.open(path, encoding="utf-8", errors="replace") as handle:
        return parse_events(handle.read())


# What real Slurm recorded (dev/cluster/record-node-events.sh): a drained node resumed twice is two
# heals; "Kill task failed" then remediation's reboot is one; a crash ("Not responding", replaced
# in the same second by "Node unexpectedly rebooted" at power-on) then a resume is one; an admin's
# drain and slurmctld's cold-start events are none.
@pytest.mark.parametrize("release", ["22.05", "24.11", "26.05"])
@pytest.mark.parametrize("scenario, node, heals", [
    ("flapping", "n2", 2), ("reboot", "n3", 1), ("crash", "n4", 1), ("admin-open", None, 0),
])
def test_count_heals_on_recorded_histories(release, scenario, node, heals):
    events = recorded_events(release, scenario)
    counted = count_heals(events, compile_classes(DEFAULT_REASON_CLASSES), 0)
    assert sum(v["heals"] for v in counted.values()) == heals, (events, counted)
    if node:
        assert counted[node]["heals"] == heals


# n2 of the 22.05 dev cluster with an emulated GPU fallen off the bus, rebooted 3 times by
# remediate.yml (tests/integration/test_node_remediation_policy.py), as sacctmgr showed it. After the
# third reboot Slurm completed the reboot (clearing the health check's drain made at slurmd start)
# and the health check drained the node again a second later: still 3 heals, not 4.
GPU_CYCLE = """\
n2|1796077808|1796077812|DOWN*|root(0)|Not responding
n2|1796077812|1796077815|BOOT^|root(0)|clusterops.slurm remediation: reboot : reboot issued
n2|1796077825|1796077829|DRAIN|root(0)|clusterops-health: gpu_xid: Xid 79 (PCI:0000:44:00): GPU has fallen off the bus
n2|1796077829|1796077832|BOOT^|root(0)|clusterops.slurm remediation: reboot : reboot issued
n2|1796077832|1796077836|BOOT^|root(0)|clusterops-health: gpu_xid: Xid 79 (PCI:0000:44:00): GPU has fallen off the bus
n2|1796077836|1796077839|BOOT^|root(0)|clusterops.slurm remediation: reboot : reboot issued
n2|1796077839|1796077842|BOOT^|root(0)|clusterops-health: gpu_xid: Xid 79 (PCI:0000:44:00): GPU has fallen off the bus
n2|1796077842|1796077844|BOOT^|root(0)|clusterops.slurm remediation: reboot : reboot issued
n2|1796077844|1796077844|BOOT^|root(0)|clusterops-health: gpu_xid: Xid 79 (PCI:0000:44:00): GPU has fallen off the bus
n2|1796077845|Unknown|DRAIN|root(0)|clusterops-health: gpu_xid: Xid 79 (PCI:0000:44:00): GPU has fallen off the bus
"""


def test_count_heals_gpu_reboot_cycles_recorded():
    events = parse_events(GPU_CYCLE)
    classes = compile_classes(DEFAULT_REASON_CLASSES)
    xid79 = "clusterops-health: gpu_xid: Xid 79 (PCI:0000:44:00): GPU has fallen off the bus"
    assert count_heals(events, classes, 1796077820) == {"n2": {"heals": 3, "last": xid79}}
    # with the earlier crash (not responding, then remediation's reboot) in the window: 4
    assert count_heals(events, classes, 1796077800)["n2"]["heals"] == 4


def test_count_heals_reboot_cycle_and_rerecorded_events():
    classes = compile_classes(DEFAULT_REASON_CLASSES)
    history = [
        # health check drain, replaced by remediation's reboot reason, then drained again at boot
        event("n3", NOW - 900, NOW - 800, "clusterops-health: gpu_xid: Xid 79 (PCI:0000:3b:00): GPU has fallen off the bus"),
        event("n3", NOW - 800, NOW - 700, "clusterops.slurm remediation: reboot", state="DOWN+DRAIN+REBOOT_ISSUED"),
        event("n3", NOW - 700, None, "clusterops-health: gpu_xid: Xid 79 (PCI:0000:3b:00): GPU has fallen off the bus"),
        # the same failure re-recorded when only the state changed (DOWN -> DOWN+DRAIN): one failure
        event("n4", NOW - 500, NOW - 400, "Kill task failed", state="DOWN"),
        event("n4", NOW - 400, NOW - 100, "Kill task failed"),
        # a power cycle outside Slurm, then the health check's drain at slurmd start replaces the
        # reason: the node never came back in between, no heal
        event("n6", NOW - 500, NOW - 490, "Node unexpectedly rebooted", state="DOWN"),
        event("n6", NOW - 490, None, "clusterops-health: gpu_count: expected 8 found 7"),
        # an admin's drain and a human class are not heals
        event("n5", NOW - 500, NOW - 400, "maintenance CHG-1"),
        event("n5", NOW - 300, NOW - 200, "clusterops-health: disk_free: /tmp has 1.0 GiB free, needs 10.0 GiB"),
    ]
    heals = count_heals(list(reversed(history)), classes, NOW - DAY)  # any input order
    assert heals == {"n3": {"heals": 1, "last": history[0]["reason"]}, "n4": {"heals": 1, "last": "Kill task failed"}}


def test_flapping_node_is_left_for_a_human_after_the_budget():
    nodes = [node("n2", "IDLE+DRAIN", "Prolog error"), node("n3", "IDLE+DRAIN", "Prolog error")]
    result = plan(nodes, events=FLAPPING_HISTORY, heal_budget=3, heal_window=DAY, circuit=NO_CIRCUIT)
    assert result["resume"] == ["n3"]
    assert [(f["hostlist"], f["count"], f["heals"]) for f in result["flapping"]] == [("n2", 1, 3)]
    reason = "clusterops: flapping: healed 3 times in 24h, last: Prolog error"
    assert result["flapping_groups"] == [{"reason": reason, "nodes": ["n2"], "hostlist": "n2"}]
    assert result["needs_human"] == [{"name": "n2", "count": 1, "why": "flapping: healed 3 times in 24h, last: Prolog error",
                                      "next": "next: find why healing does not help (sacctmgr show event nodes=n2), "
                                              "repair, then scontrol update NodeName=n2 State=RESUME: its healing "
                                              "budget starts afresh (docs/node-remediation.md#when-it-says-needs-a-human)"}]
    # the reason set is one that no acting class matches: the next run leaves it to a human
    after = plan([node("n2", "IDLE+DRAIN", reason)], events=FLAPPING_HISTORY, circuit=NO_CIRCUIT)
    assert after["human"][0]["class"] == "clusterops_hold" and after["actions"] == []


@pytest.mark.parametrize("budget, window, events, flapping", [
    (4, DAY, FLAPPING_HISTORY, False),      # under the budget
    (3, 1500, FLAPPING_HISTORY, False),     # older heals are outside the window
    (0, DAY, FLAPPING_HISTORY, False),      # budget off
    (3, DAY, None, False),                  # no history given: not checked
    (1, DAY, FLAPPING_HISTORY[:1], True),
])
def test_budget_settings(budget, window, events, flapping):
    result = plan([node("n2", "IDLE+DRAIN", "Prolog error")], events=events, heal_budget=budget,
                  heal_window=window, circuit=NO_CIRCUIT)
    assert bool(result["flapping"]) is flapping
    assert result["resume"] == ([] if flapping else ["n2"])


def test_a_repair_by_a_person_starts_the_count_afresh():
    classes = compile_classes(DEFAULT_REASON_CLASSES)
    flapping = "clusterops: flapping: healed 3 times in 24h, last: Prolog error"
    repaired = FLAPPING_HISTORY[:3] + [
        event("n2", NOW - 800, NOW - 700, flapping),      # held, then resumed by a person
        event("n2", NOW - 500, NOW - 400, "Prolog error"),  # healed once since
        event("n2", NOW - 60, None, "Prolog error"),
    ]
    assert count_heals(repaired, classes, NOW - DAY) == {"n2": {"heals": 1, "last": "Prolog error"}}
    result = plan([node("n2", "IDLE+DRAIN", "Prolog error")], events=repaired, circuit=NO_CIRCUIT)
    assert result["resume"] == ["n2"] and not result["flapping"]
    # still held (the event is open): nothing starts afresh
    held = FLAPPING_HISTORY[:3] + [event("n2", NOW - 800, None, flapping)]
    assert count_heals(held, classes, NOW - DAY)["n2"]["heals"] == 3
    # any human class counts as a repair (a GPU Xid that needs one); an admin's own reason does not
    xid64 = "clusterops-health: gpu_xid: Xid 64 (PCI:0000:3b:00): Row Remapper: Failed to remap row"
    assert count_heals(FLAPPING_HISTORY[:3] + [event("n2", NOW - 800, NOW - 700, xid64)], classes, NOW - DAY) == {}
    admin = FLAPPING_HISTORY[:3] + [event("n2", NOW - 800, NOW - 700, "maintenance CHG-1")]
    assert count_heals(admin, classes, NOW - DAY)["n2"]["heals"] == 3
    # other nodes keep their own count
    other = [dict(e, node="n3") for e in FLAPPING_HISTORY[:3]] + [event("n2", NOW - 800, NOW - 700, flapping)]
    assert count_heals(other, classes, NOW - DAY) == {"n3": {"heals": 3, "last": "Prolog error"}}


@pytest.mark.parametrize("since, flapping", [
    (0, True),                # no limit: the three heals of the day count
    (NOW - 1950, False),      # after the first heal: two left
    (NOW + 60, False),        # in the future: nothing counts
])
def test_heal_since_drops_older_heals(since, flapping):
    result = plan([node("n2", "IDLE+DRAIN", "Prolog error")], events=FLAPPING_HISTORY, heal_since=since,
                  circuit=NO_CIRCUIT)
    assert bool(result["flapping"]) is flapping


def test_bad_heal_since_is_refused():
    with pytest.raises(RemediationError, match="heal_since must be >= 0"):
        plan([], events=FLAPPING_HISTORY, heal_since=-1)


def test_flapping_reason_is_safe_for_scontrol():
    reason = flapping_reason(3, 3600, 'x' * 200 + '"quoted"')
    assert '"' not in reason and reason.startswith("clusterops: flapping: healed 3 times in 1h, last: ")
    assert len(reason) < 160


# --- circuit breaker ----------------------------------------------------------------------

def cluster(broken, total=100, reason="Kill task failed", age=60):
    nodes = [node("n%d" % i, "IDLE") for i in range(1, total + 1)]
    for i in range(broken):
        nodes[i] = node("n%d" % (i + 1), "IDLE+DRAIN", reason, reason_time=NOW - age)
    return nodes


@pytest.mark.parametrize("considered, expected", [(8, 3), (100, 10), (320, 32), (16384, 32), (0, 3)])
def test_circuit_threshold(considered, expected):
    assert circuit_threshold(considered, 32, 10, 3) == expected


def test_circuit_opens_when_too_many_break_at_once():
    result = plan(cluster(11), circuit={"window": 1800})
    assert result["circuit"]["open"] and result["circuit"]["broken"] == 11 and result["circuit"]["threshold"] == 10
    assert result["reboot"] == result["resume"] == [] and result["flapping_groups"] == []
    assert [(g["hostlist"], g["count"]) for g in result["held"]] == [("n[1-11]", 11)] and result["overflow"] == []
    assert result["room"] == 0 and result["counts"]["held"] == 11 and result["needs_human"][0]["count"] == 11
    assert result["circuit"]["groups"] == [{"class": "kill_task_failed", "count": 11, "hostlist": "n[1-11]",
                                            "reason": "Kill task failed"}]
    why = result["needs_human"][0]["why"]
    assert why.startswith("cluster-wide failure suspected: 11 nodes broke within 30min (more than 10)")
    assert "kill_task_failed n[1-11]" in why


def test_circuit_stays_closed_at_the_threshold_and_for_old_failures():
    assert not plan(cluster(10), circuit={"window": 1800})["circuit"]["open"]
    old = plan(cluster(11, age=4000), circuit={"window": 1800})
    assert not old["circuit"]["open"] and old["circuit"]["broken"] == 0
    assert len(old["reboot"]) == 11
    assert not plan(cluster(50), circuit={"window": 0})["circuit"]["open"]


def test_circuit_counts_unknown_reason_times_and_groups_by_class():
    mount = "clusterops-health: mount: /data not mounted"
    nodes = cluster(2, total=8) + [node("m1", "IDLE+DRAIN", mount, None), node("m2", "IDLE+DRAIN", mount, None)]
    result = plan(nodes, circuit={"window": 1800, "min_nodes": 3})
    assert result["circuit"]["open"]
    assert [(g["class"], g["hostlist"]) for g in result["circuit"]["groups"]] == [
        ("kill_task_failed", "n[1-2]"), ("mount", "m[1-2]")]


def test_circuit_ignores_nodes_already_held_by_clusterops():
    nodes = [node("n%d" % i, "IDLE+DRAIN", "clusterops: flapping: healed 3 times in 24h, last: Prolog error")
             for i in range(1, 6)]
    result = plan(nodes, circuit={"window": 1800, "min_nodes": 3})
    assert not result["circuit"]["open"]


@pytest.mark.parametrize("circuit, message", [
    ({"window": -1}, "circuit window"), ({"max_nodes": "x"}, "circuit max_nodes"), ({"size": 3}, "unknown key"),
])
def test_bad_circuit_settings(circuit, message):
    with pytest.raises(RemediationError, match=message):
        plan(cluster(1), circuit=circuit)


# --- reboots in flight ---------------------------------------------------------------------

def test_reboots_in_flight_use_up_the_blast_radius():
    rebooting = [node("r%d" % i, "DOWN+DRAIN+REBOOT_ISSUED", "clusterops.slurm remediation: reboot") for i in range(1, 3)]
    # booted but not yet registered: still broken with remediation's own reason
    booting = [node("r3", "DOWN", "clusterops.slurm remediation: reboot : reboot issued")]
    broken = [node("k%d" % i, "IDLE+DRAIN", "Kill task failed", reason_time=NOW - 100 + i) for i in range(1, 4)]
    result = plan(rebooting + booting + broken, max_nodes=4, circuit=NO_CIRCUIT)
    assert result["in_flight"] == {"count": 3, "hostlist": "r[1-3]"}
    assert result["reboot"] == ["k1"] and [o["hostlist"] for o in result["overflow"]] == ["k[2-3]"]
    full = plan(rebooting + booting + broken, max_nodes=3, circuit=NO_CIRCUIT)
    assert full["reboot"] == [] and full["counts"]["overflow"] == 3


def test_documented_default_classes_equal_the_code():
    """docs/node-remediation.md's class table: the same classes in the same order, each with its
    regex and action; the Xid numbers its gpu_xid_reset row explains are those of the regex."""
    import re
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs", "node-remediation.md")
    with open(path) as f:
        text = f.read()
    table = text[text.index("### Default reason classes and their sources"):].split("\n\n")[1]
    documented = []
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        names = re.findall(r"`([a-z_]+)`", cells[0])
        regexes = [r.replace("\\|", "|") for r in re.findall(r"`([^`]+)`", cells[1])]
        assert len(names) == len(regexes), line
        documented += [(name, regex, cells[2].split()[0], cells[3]) for name, regex in zip(names, regexes)]
    assert [d[0] for d in documented] == [c["name"] for c in DEFAULT_REASON_CLASSES]
    for (name, regex, action, _source), klass in zip(documented, DEFAULT_REASON_CLASSES):
        assert action == klass["action"], name
        # the docs may write a number as N (boot_time=N)
        assert re.sub(r"\[0-9\]\+", "N", regex) == re.sub(r"\[0-9\]\+", "N", klass["match"]), name
    source = dict((d[0], d[3]) for d in documented)["gpu_xid_reset"]
    xids = re.search(r"\(([0-9|]+)\)", dict((c["name"], c["match"]) for c in DEFAULT_REASON_CLASSES)["gpu_xid_reset"])
    explained = [int(n) for n in re.findall(r"(?:: |, )([0-9]+)(?:/[0-9]+)? ", source)]
    explained += [int(n) for n in re.findall(r"[0-9]+/([0-9]+) ", source)]
    assert sorted(explained) == sorted(int(n) for n in xids.group(1).split("|"))

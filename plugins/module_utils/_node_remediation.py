# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""Node remediation policy: which broken nodes to reboot, which to resume, which to leave.

Pure functions over the node dicts of ``slurm_node_info`` (see ``_nodes``) and the node events of
``slurm_node_event_info`` (see ``_node_events``); no Slurm call. The policy, in order, for every
node in scope:

1. A node that is neither drained (DRAIN flag), DOWN, FAIL nor rebooting needs nothing; it is not
   listed. (sinfo's text word ``reboot^`` hides DRAIN and DOWN, so a rebooting node is always
   listed, as skipped.)
2. A node with a reboot already requested or issued, powered down or powering up/down by
   power saving, or in a maintenance reservation is skipped: something else owns it. A node
   rebooting (a reboot requested or issued, or still broken with this collection's reboot
   reason) is *in flight* and counts against the blast radius of this run.
3. A reason to which slurmctld appended that its own recovery failed (`` : reboot timed out``,
   `` : ResumeTimeout reached``) is reported as needing a human (class ``resume_timeout``); it
   is not in flight any more.
4. The reason Slurm started with (the reason without the tails slurmctld appends, see
   :func:`reason_origin`) is looked up in the reason classes (first match wins). A node whose
   reason matches no class, or that has no reason, is skipped (an admin or a health check
   drained it on purpose), unless Slurm flags it NOT_RESPONDING or FAIL: then it is reported
   as needing a human (class ``unclassified_failing``), never acted on. A class with action
   ``human`` is reported as needing a human (e.g. a GPU that needs a hardware repair, or a node
   this collection stopped healing).
5. Healing budget: a node healed ``heal_budget`` times within ``heal_window`` seconds (closed
   events of an acting class in Slurm's accounting) is not healed again; it gets the reason
   ``clusterops: flapping: healed N times in W, last: <reason>`` that only a ``human`` class
   matches, and is reported as needing a human. Heals before ``heal_since`` or before the node
   last left a ``human`` class (a person repaired it and returned it to service) do not count.
6. A node that does not respond (NOT_RESPONDING), or whose class says ``reboot``, is rebooted;
   any other node of a ``resume`` class is resumed.
7. Circuit breaker: when more nodes in scope broke within ``circuit_window`` seconds than
   ``min(circuit_max_nodes, max(circuit_min_nodes, floor(considered * circuit_max_percent /
   100)))``, nothing is healed: a cluster-wide failure (file system, fabric) is suspected and
   reported with the reasons grouped by class.

Then the blast radius: at most ``min(max_nodes, max(1, floor(total * max_percent / 100)))``
nodes are rebooting or acted on at once, in-flight reboots included, oldest reason first; the
rest are reported as overflow.
"""

from __future__ import annotations

import re
import sys
import time

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import node_state

try:
    from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass


#: Reasons Slurm itself (or a failed prolog/epilog) sets are anchored at both ends: Slurm writes
#: them as exact strings, while an admin's free text that merely starts with them ("Kill task
#: failed by admin for testing") must not match. A class is matched against the reason Slurm
#: started with: what slurmctld appends later (" : Not responding", " : reboot issued", see
#: ``SLURM_REASON_TAILS``) is taken off first (:func:`reason_origin`). The optional details are
#: those newer releases write in a fixed form: since 25.05 the kill-task drain names the job step
#: ("Kill task failed (JobId=7 batch)"); "Node unexpectedly rebooted" may carry "boot_time=N last
#: response=N".
KILL_TASK_FAILED = r"^Kill task failed( \(JobId=[0-9]+[^()]*\))?$"

#: What slurmctld appends to a reason a node already has: ``" : <message>"``, unless the reason
#: already holds the message (``set_node_reason`` in src/slurmctld/node_mgr.c of 23.02 and later;
#: ``set_node_reboot_reason`` in 22.05, which appends the reboot messages only). The value is None
#: for a tail that tells a state the node's flags show anyway (the class of the reason Slurm
#: started with decides), else what went wrong: Slurm's own recovery failed, a human looks.
#:
#: * ``Not responding``: ping_nodes.c, no answer within SlurmdTimeout (appended since 23.02; 22.05
#:   keeps the old reason and sets only the flag).
#: * ``reboot issued``: controller.c (power_save.c in 25.05+), the reboot went to slurmd.
#: * ``reboot complete``: node_mgr.c, a reboot with ``nextstate=DOWN`` finished.
#: * ``reboot timed out``: node_mgr.c, the node did not register within ResumeTimeout of the reboot.
#: * ``ResumeTimeout reached``: power_save.c, a node resumed by power saving did not come up.
SLURM_REASON_TAILS = {
    "Not responding": None,
    "reboot issued": None,
    "reboot complete": None,
    "reboot timed out": "the reboot did not finish within ResumeTimeout",
    "ResumeTimeout reached": "the node did not power up within ResumeTimeout",
}

#: ``scontrol show node`` prints who set the reason and when after it: ``Reason=Kill task failed
#: [root@2026-09-21T15:02:11]`` (sinfo's ``%E`` and the JSON ``reason`` do not).
_SET_BY_TAIL = re.compile(r" \[[^\[\]@ ]*@[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\]$")

#: Pseudo-classes of the plan (not in the reason classes; a human acts): a reason with a tail of
#: ``SLURM_REASON_TAILS`` that says Slurm's recovery failed, and a reason no class matches on a
#: node Slurm itself flags as failing (NOT_RESPONDING, FAIL): not "drained on purpose".
RESUME_TIMEOUT_CLASS = "resume_timeout"
UNCLASSIFIED_FAILING_CLASS = "unclassified_failing"

#: Prefix of every reason the node_health role's HealthCheckProgram sets
#: (``clusterops-health: <check>: <detail>``, see docs/node-health.md).
HEALTH_PREFIX = "clusterops-health: "

#: Prefix of the reasons this collection sets on nodes it stops healing.
HOLD_PREFIX = "clusterops: "

#: Xids after which NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors, "Resolution
#: Bucket (Immediate Action)") asks for a GPU reset or a reboot of the machine (RESET_GPU,
#: RESTART_BM), which a node reboot performs: 48 double-bit ECC, 63 row remapping pending, 74
#: NVLink, 79 fallen off the bus, 95 uncontained ECC, 119/120 GSP, 140 unrecovered ECC, 154 recovery
#: action changed. Every other Xid the health check reports (e.g. 64 row remapping failure, 92
#: high single-bit ECC rate) falls to ``health_other``: a human decides on a repair.
XID_REBOOT = (48, 63, 74, 79, 95, 119, 120, 140, 154)
GPU_XID_RESET = r"^clusterops-health: gpu_xid: Xid (%s)\b" % "|".join(str(xid) for xid in XID_REBOOT)

#: DCGM health findings (the node_health check ``dcgm_health`` names DCGM's error:
#: ``clusterops-health: dcgm_health: DCGM_FR_<NAME> <entity>: <message>``) a reboot repairs:
#: those whose next step in DCGM (dcgmlib/dcgm_errors.h, DCGM_FR_<NAME>_NEXT) is a GPU reset or a
#: reboot (volatile double-bit ECC, uncontained error, the GPU recovery actions GPU_RESET,
#: NODE_REBOOT, DRAIN_AND_RESET, DRAIN_P2P), the findings DCGM makes of the Xids of XID_REBOOT
#: (79 fallen off the bus, 63 a pending retired page), and DCGM_FR_XID_ERROR for an Xid of
#: XID_REBOOT: the same decision as the gpu_xid check's. Every other DCGM finding (row remapping
#: failure as Xid 64, retired page limits, faulty memory, InfoROM, PCIe replays, NVLink, NvSwitch,
#: dcgmi failing) falls to ``health_other``: a human decides.
DCGM_REBOOT_FINDINGS = ("VOLATILE_DBE_DETECTED", "UNCONTAINED_ERROR", "FALLEN_OFF_BUS", "PENDING_PAGE_RETIREMENTS",
                        "GPU_RECOVERY_RESET", "GPU_RECOVERY_REBOOT", "GPU_RECOVERY_DRAIN_RESET",
                        "GPU_RECOVERY_DRAIN_P2P")
GPU_DCGM_RESET = r"^clusterops-health: dcgm_health: (DCGM_FR_(%s) |DCGM_FR_XID_ERROR [^:]*: Detected XID (%s)\b)" % (
    "|".join(DCGM_REBOOT_FINDINGS), "|".join(str(xid) for xid in XID_REBOOT))

#: nvidia-smi exit statuses a reboot may repair (nvidia-smi(1) RETURN VALUE and NVML's
#: nvmlReturn_t): 6 no devices found, 9 driver not loaded, 10/11 interrupt issue, 15 GPU fallen
#: off the bus, 16 GPU requires a reset, 18 driver/library version mismatch (a driver upgraded
#: without a reboot), 255 internal driver error. Every other status the health check reports
#: (2/3/4/17 the command or its permissions, 8 power cables, 12/13 NVML missing or too old, 14
#: infoROM corrupted, unknown ones) falls to ``gpu_nvidia_smi_other``: a human repairs it.
NVIDIA_SMI_REBOOT_RC = (6, 9, 10, 11, 15, 16, 18, 255)
_NVIDIA_SMI_FAILED = r"^clusterops-health: gpu_(count|state): (expected [0-9]+, )?nvidia-smi failed rc="
GPU_NVIDIA_SMI_RESET = _NVIDIA_SMI_FAILED + r"(%s)\b" % "|".join(str(rc) for rc in NVIDIA_SMI_REBOOT_RC)
GPU_NVIDIA_SMI_OTHER = _NVIDIA_SMI_FAILED

#: Reason classes: what to do about a drained or down node, by its reason. ``match`` is a Python
#: regex (``re.search``, case-insensitive), first match wins; ``action`` is ``reboot``, ``resume``
#: or ``human``. A reason that matches no class is never touched (drained on purpose). The sources
#: of each default are in docs/node-remediation.md.
DEFAULT_REASON_CLASSES = (
    {"name": "kill_task_failed", "match": KILL_TASK_FAILED, "action": "reboot"},
    {"name": "not_responding", "match": r"^Not responding$", "action": "resume"},
    {"name": "unexpected_reboot",
     "match": r"^Node unexpectedly rebooted( boot_time=[0-9]+ last response=[0-9]+)?$",
     "action": "resume"},
    {"name": "batch_complete_failure", "match": r"^batch job complete failure$", "action": "resume"},
    {"name": "prolog_error", "match": r"^Prolog error$", "action": "resume"},
    {"name": "epilog_error", "match": r"^Epilog error$", "action": "resume"},
    {"name": "gpu_xid_reset", "match": GPU_XID_RESET, "action": "reboot"},
    {"name": "gpu_nvidia_smi_reset", "match": GPU_NVIDIA_SMI_RESET, "action": "reboot"},
    {"name": "gpu_nvidia_smi_other", "match": GPU_NVIDIA_SMI_OTHER, "action": "human"},
    {"name": "gpu_dcgm_reset", "match": GPU_DCGM_RESET, "action": "reboot"},
    {"name": "gpu_count", "match": r"^clusterops-health: gpu_count: ", "action": "reboot"},
    {"name": "gpu_state", "match": r"^clusterops-health: gpu_state: ", "action": "reboot"},
    {"name": "mount", "match": r"^clusterops-health: mount: ", "action": "reboot"},
    {"name": "health_other", "match": r"^clusterops-health: ", "action": "human"},
    {"name": "clusterops_hold", "match": r"^clusterops: (flapping|suspect): ", "action": "human"},
)

ACTIONS = ("reboot", "resume", "human")

#: The reason this collection's remediation gives Slurm when it reboots a node.
DEFAULT_REBOOT_REASON = "clusterops.slurm remediation: reboot"

#: Healing budget: a node healed this many times within the window is not healed again.
DEFAULT_HEAL_BUDGET = 3
DEFAULT_HEAL_WINDOW = 24 * 3600
#: Unix seconds before which no heal counts (0: none).
DEFAULT_HEAL_SINCE = 0

#: Blast radius: at most min(max_nodes, max(1, floor(total * max_percent / 100))) nodes rebooting or
#: acted on at once.
DEFAULT_MAX_NODES = 16
DEFAULT_MAX_PERCENT = 10.0

#: JMESPath expression over the node list that selects the nodes to consider ("": every node).
DEFAULT_SCOPE = ""

#: Circuit breaker: more nodes than min(max_nodes, max(min_nodes, percent of scope)) broken
#: within the window (seconds) means a cluster-wide failure: nothing is healed.
DEFAULT_CIRCUIT = {"window": 1800, "max_nodes": 32, "max_percent": 10.0, "min_nodes": 3}

#: An event of a node that starts within this many seconds of the end of the one before follows it
#: directly: the node did not return to service in between. Slurm closes an event and opens the
#: next one in the same second when a reason or the state changes (recorded on 22.05, 24.11 and
#: 26.05: always 0 s), while a node resumed and drained again is at least a second apart in
#: practice (and then it did come back, if only briefly).
EVENT_JOIN_SECONDS = 0

_OWNED_ELSEWHERE = (
    ("REBOOT_REQUESTED", "a reboot is already requested"),
    ("REBOOT_ISSUED", "a reboot is already in progress"),
    ("POWERED_DOWN", "powered down by power saving"),
    ("POWERING_UP", "being powered up"),
    ("POWERING_DOWN", "being powered down"),
    ("POWER_DOWN", "power down pending"),
    ("MAINTENANCE", "in a maintenance reservation"),
)


_REBOOTING = frozenset(("REBOOT_REQUESTED", "REBOOT_ISSUED"))


class RemediationError(ValueError):
    """Bad remediation settings (an invalid regex, scope expression or limit)."""


def blast_radius_limit(total: int, max_nodes: int, max_percent: float) -> int:
    """How many nodes one run may act on: ``min(max_nodes, max(1, floor(total*pct/100)))``.

    ``max_nodes`` 0 allows none (a dry policy); a cluster of any size may always have one node
    healed per run unless ``max_nodes`` or ``max_percent`` is 0.

    Raises:
        RemediationError: a negative limit, or a percent over 100.
    """
    try:
        max_nodes = int(max_nodes)
        max_percent = float(max_percent)
    except (TypeError, ValueError):
        raise RemediationError("max_nodes and max_percent must be numbers")
    if max_nodes < 0 or max_percent < 0 or max_percent > 100:
        raise RemediationError("max_nodes must be >= 0 and max_percent between 0 and 100, got %r and %r"
                               % (max_nodes, max_percent))
    if max_nodes == 0 or max_percent == 0:
        return 0
    by_percent = max(1, int(total * max_percent // 100))
    return min(max_nodes, by_percent)


def compile_classes(classes: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Check reason classes and compile their regexes.

    Args:
        classes: ``[{name, match, action}]``; ``match`` a Python regex, ``action`` one of
            ``reboot``, ``resume``, ``human``.

    Returns:
        The classes in order, each with ``regex`` (compiled, case-insensitive) added.

    Raises:
        RemediationError: not a list of dicts, a missing or unknown key, an unknown action, a
            duplicate name or an invalid regex; the message names the class.
    """
    if not isinstance(classes, (list, tuple)):
        raise RemediationError("reason classes must be a list of {name, match, action}, not %s"
                               % type(classes).__name__)
    compiled = []
    seen = set()
    for index, entry in enumerate(classes):
        if not isinstance(entry, dict):
            raise RemediationError("reason class #%d must be a dict {name, match, action}, not %r"
                                   % (index + 1, entry))
        unknown = sorted(set(entry) - {"name", "match", "action", "description"})
        missing = [key for key in ("name", "match", "action") if not entry.get(key)]
        if unknown or missing:
            raise RemediationError("reason class #%d (%r): %s" % (
                index + 1, entry.get("name"),
                "; ".join((["unknown key(s) %s" % ", ".join(unknown)] if unknown else [])
                          + (["missing %s" % ", ".join(missing)] if missing else []))))
        name = str(entry["name"])
        if name in seen:
            raise RemediationError("reason class %r is defined twice" % name)
        seen.add(name)
        if entry["action"] not in ACTIONS:
            raise RemediationError("reason class %r: action must be one of %s, not %r"
                                   % (name, ", ".join(ACTIONS), entry["action"]))
        try:
            regex = re.compile(entry["match"], re.IGNORECASE)
        except (re.error, TypeError) as exc:
            raise RemediationError("reason class %r: %r is not a valid regular expression: %s"
                                   % (name, entry["match"], exc))
        compiled.append(dict(entry, name=name, regex=regex))
    return compiled


def classes_from_allowlist(allow_reasons: Sequence[str], reboot_reasons: Sequence[str]) -> List[Dict[str, Any]]:
    """Reason classes equivalent to the deprecated allowlist settings.

    Each allowed pattern becomes one class, in order: ``reboot`` when the same pattern is also
    listed in ``reboot_reasons``, ``resume`` otherwise. (Before classes, a reason matched
    the two lists independently; a reboot pattern that is not itself allowed never acted.)
    """
    if isinstance(allow_reasons, str):
        allow_reasons = [allow_reasons]
    if isinstance(reboot_reasons, str):
        reboot_reasons = [reboot_reasons]
    reboot = set(reboot_reasons or ())
    return [{"name": "allow_reasons_%d" % (index + 1), "match": pattern,
             "action": "reboot" if pattern in reboot else "resume"}
            for index, pattern in enumerate(allow_reasons or ())]


def reason_origin(reason: str) -> Tuple[str, Tuple[str, ...]]:
    """Split a node's reason into the reason Slurm started with and the tails slurmctld appended.

    ``"Kill task failed (JobId=4242 StepId=0) : Not responding"`` gives ``("Kill task failed
    (JobId=4242 StepId=0)", ("Not responding",))``. Only the messages of ``SLURM_REASON_TAILS``
    are taken off, from the end, and the `` [user@time]`` scontrol prints after a reason: other
    text after `` : `` belongs to the reason (an admin's ``Kill task failed : keep, bob`` stays
    whole and matches no class).

    Returns:
        ``(base, tails)``: tails oldest first; ``(reason, ())`` when nothing was appended.
    """
    base = _SET_BY_TAIL.sub("", reason or "")
    tails = []
    while True:
        head, sep, last = base.rpartition(" : ")
        if not sep or not head or last not in SLURM_REASON_TAILS:
            break
        tails.append(last)
        base = head
    return base, tuple(reversed(tails))


def recovery_failure(reason: str) -> Optional[str]:
    """What Slurm's own recovery says went wrong in ``reason``'s tails (``SLURM_REASON_TAILS``),
    the newest such tail first, or None."""
    for tail in reversed(reason_origin(reason)[1]):
        if SLURM_REASON_TAILS[tail]:
            return "%s (%s)" % (tail, SLURM_REASON_TAILS[tail])
    return None


def classify(reason: str, classes: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The first compiled class (see ``compile_classes``) whose regex matches the reason Slurm
    started with (``reason`` without the tails slurmctld appended, :func:`reason_origin`), or None."""
    base = reason_origin(reason)[0]
    if not base:
        return None
    for entry in classes:
        if entry["regex"].search(base):
            return entry
    return None


def reason_classifier(classes: Sequence[Dict[str, Any]]) -> Callable[[str], Optional[Dict[str, Any]]]:
    """:func:`classify` against ``classes`` (compiled), each distinct reason searched once: a
    cluster of thousands of nodes, and their events, hold a handful of distinct reasons."""
    cache: Dict[str, Optional[Dict[str, Any]]] = {}

    def lookup(reason: str) -> Optional[Dict[str, Any]]:
        if reason not in cache:
            cache[reason] = classify(reason, classes)
        return cache[reason]
    return lookup


def count_heals(events: List[Dict[str, Any]],
                classes: Sequence[Dict[str, Any]],
                since: int,
                reboot_reason: str = DEFAULT_REBOOT_REASON) -> Dict[str, Dict[str, Any]]:
    """Count, per node, how often it was healed (rebooted by remediation, or returned to service
    from a failure that a class heals).

    Two kinds of heal, both read from Slurm's accounting:

    * a reboot by remediation: an event whose reason is ``reboot_reason`` (Slurm extends it with
      " : reboot issued"), started at or after ``since``, whether or not the node came back;
    * a return to service: a closed event (``end`` at or after ``since``) whose reason belongs to a
      ``reboot`` or ``resume`` class and after which no event of the node starts in the same second
      (resumed by this collection, an admin or Slurm itself).

    Not heals: a failure whose reason was replaced by another one in the same second (a crash's
    "Not responding" by "Node unexpectedly rebooted" at power-on), a failure recorded again when
    only the state changed, and a failure found again while the node boots from remediation's
    reboot (the event right after the reboot's): that reboot was counted already.

    A node's count starts afresh when an event of a ``human`` class (e.g. ``clusterops:
    flapping``) closes: a person repaired the node and returned it to service, so heals up to
    that moment no longer tell anything about the node as it is now.

    Args:
        events: ``slurm_node_event_info`` ``events``: ``{node, start, end, state, reason}``
            (Unix seconds, ``end`` None while the event is open), any order.
        classes: compiled classes (``compile_classes``).
        since: Unix seconds; older heals do not count.
        reboot_reason: the reason remediation gives the nodes it reboots.

    Returns:
        ``{node: {"heals": int, "last": the failure healed last}}`` for nodes healed at least once.
    """
    def ours(event):
        return bool(reboot_reason) and (event.get("reason") or "").startswith(reboot_reason)

    def touching(first, second):
        return first["end"] is not None and abs(second["start"] - first["end"]) <= EVENT_JOIN_SECONDS

    classified = reason_classifier(classes)

    def action_of(event):
        entry = classified(event.get("reason") or "")
        return entry["action"] if entry is not None else None

    by_node: Dict[str, List[Dict[str, Any]]] = {}
    for event in events or ():
        by_node.setdefault(event["node"], []).append(event)
    result: Dict[str, Dict[str, Any]] = {}
    for node, node_events in by_node.items():
        node_events.sort(key=lambda e: (e["start"], e["end"] is None, e["end"] or 0))
        actions = [action_of(e) for e in node_events]  # each event classified once
        node_since = max([since] + [e["end"] + 1 for e, action in zip(node_events, actions)
                                    if e["end"] is not None and action == "human"])
        for index, event in enumerate(node_events):
            before = node_events[index - 1] if index else None
            if ours(event):
                if event["start"] < node_since:
                    continue
                failure = before["reason"] if before is not None and touching(before, event) else event["reason"]
                when = event["start"]
            else:
                if event["end"] is None or event["end"] < node_since:
                    continue
                if actions[index] in (None, "human"):
                    continue
                if any(touching(event, later) for later in node_events[index + 1:]):
                    continue
                if before is not None and ours(before) and touching(before, event):
                    continue
                failure, when = event["reason"], event["end"]
            seen = result.setdefault(node, {"heals": 0, "last": "", "last_time": -1})
            seen["heals"] += 1
            if when >= seen["last_time"]:
                seen["last"], seen["last_time"] = failure, when
    for seen in result.values():
        del seen["last_time"]
    return result


def circuit_threshold(considered: int, max_nodes: int, max_percent: float, min_nodes: int) -> int:
    """Most nodes that may break within the circuit window before nothing is healed:
    ``min(max_nodes, max(min_nodes, floor(considered * max_percent / 100)))``."""
    return min(int(max_nodes), max(int(min_nodes), int(considered * float(max_percent) // 100)))


def _duration(seconds: int) -> str:
    if seconds % 86400 == 0:
        return "%dd" % (seconds // 86400) if seconds != 86400 else "24h"
    if seconds % 3600 == 0:
        return "%dh" % (seconds // 3600)
    if seconds % 60 == 0:
        return "%dmin" % (seconds // 60)
    return "%ds" % seconds


def flapping_reason(heals: int, window: int, last_reason: str) -> str:
    """The reason set on a node whose healing budget is spent (no acting class matches it).

    Double quotes are replaced (scontrol drops them from a reason) and the last reason is cut
    at 100 characters.
    """
    last = (last_reason or "").replace('"', "'")
    if len(last) > 100:
        last = last[:97] + "..."
    return "%sflapping: healed %d times in %s, last: %s" % (HOLD_PREFIX, heals, _duration(int(window)), last)


def _int_setting(value, what, minimum=0):
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise RemediationError("%s must be an integer, not %r" % (what, value))
    if number < minimum:
        raise RemediationError("%s must be >= %d, not %d" % (what, minimum, number))
    return number


def group_nodes(entries: List[Dict[str, Any]], keys: Sequence[str]) -> List[Dict[str, Any]]:
    """Node entries ``{name, <keys>...}`` as one ``{<keys>..., count, hostlist}`` per distinct value
    of ``keys``, largest group first (then by the keys): what the plan returns instead of one entry
    per node, so that its size does not grow with the cluster (thousands of nodes drained for the
    same reason say the same)."""
    groups: Dict[Tuple[Any, ...], List[str]] = {}
    for entry in entries:
        groups.setdefault(tuple(entry[key] for key in keys), []).append(entry["name"])
    return [dict(zip(keys, values), count=len(names), hostlist=compress_hostlist(sorted(names, key=_name_order)))
            for values, names in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]


_DIGITS_RE = re.compile(r"(\d+)")


def _name_order(name: str) -> Tuple[Any, ...]:
    """Sort key of a node name that puts its numbers in numeric order (``n2`` before ``n10``), so
    that a group's hostlist is as short as Slurm's own (``n[1-11]``, not ``n[1,10-11,2-9]``)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS_RE.split(name) if part)


def summarise_skipped(skipped: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The skipped nodes ``{name, why, reason, ...}`` as ``{why, reason, count, hostlist}``, one per
    distinct why and reason (:func:`group_nodes`)."""
    return group_nodes(skipped, ("why", "reason"))


def resolve_classes(classes: Optional[Sequence[Dict[str, Any]]] = None,
                    allow_reasons: Optional[Sequence[str]] = None,
                    reboot_reasons: Optional[Sequence[str]] = None) -> Tuple[Sequence[Dict[str, Any]], bool]:
    """The reason classes to plan with, and whether the deprecated allowlist gave them.

    ``classes`` None means ``DEFAULT_REASON_CLASSES``. ``allow_reasons`` or ``reboot_reasons`` set
    (deprecated): each allowed pattern becomes one class (``classes_from_allowlist``); the one not
    given defaults to the default classes' acting (resp. reboot) patterns.

    Raises:
        RemediationError: classes and the allowlist both given.
    """
    if allow_reasons is None and reboot_reasons is None:
        return (DEFAULT_REASON_CLASSES if classes is None else classes), False
    if classes is not None:
        raise RemediationError("give classes or the deprecated allow_reasons/reboot_reasons, not both")
    if allow_reasons is None:
        allow_reasons = [c["match"] for c in DEFAULT_REASON_CLASSES if c["action"] != "human"]
    if reboot_reasons is None:
        reboot_reasons = [c["match"] for c in DEFAULT_REASON_CLASSES if c["action"] == "reboot"]
    return classes_from_allowlist(allow_reasons, reboot_reasons), True


#: The deprecation notice of the allowlist settings (filter and module).
ALLOWLIST_DEPRECATION = (
    "allow_reasons and reboot_reasons (role variables remediate_nodes_allow_reasons and "
    "remediate_nodes_reboot_reasons) are replaced by reason classes (classes, role variable "
    "remediate_nodes_reason_classes); each allowed pattern is used as one class now, reboot when the "
    "same pattern is in reboot_reasons, else resume")


def scope_names(nodes: List[Dict[str, Any]], expression: str) -> List[str]:
    """Names of the nodes a JMESPath ``expression`` selects from ``nodes`` (node dicts).

    The expression must give a list of nodes or of names.

    Raises:
        RemediationError: no jmespath library, an invalid expression, or a result that is not
            a list of nodes or names.
    """
    try:
        import jmespath  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise RemediationError(
            "scope needs the jmespath Python library on the host that reads the nodes (%s): "
            "install Debian's python3-jmespath or 'pip install jmespath' there, or leave scope "
            "empty" % sys.executable)
    try:
        selected = jmespath.search(expression, nodes)
    except jmespath.exceptions.JMESPathError as exc:
        raise RemediationError("scope %r is not a valid JMESPath expression: %s" % (expression, exc))
    if not isinstance(selected, list):
        raise RemediationError("scope %r must give a list of nodes or names, not %s"
                               % (expression, "null" if selected is None else type(selected).__name__))
    names = []
    for item in selected:
        if isinstance(item, dict) and "name" in item:
            names.append(item["name"])
        elif isinstance(item, str):
            names.append(item)
        else:
            raise RemediationError("scope %r gave %r, which is neither a node nor a name" % (expression, item))
    return names


def _n_nodes(count: int) -> str:
    return "%d node%s" % (count, "" if count == 1 else "s")


def heal_candidates(nodes: List[Dict[str, Any]],
                    classes: Sequence[Dict[str, Any]],
                    in_scope: Optional[Sequence[str]] = None) -> List[str]:
    """The names of the nodes in scope whose reason falls in a class that acts (``reboot`` or
    ``resume``): the only nodes whose heals :func:`plan_remediation` counts, so the only ones whose
    events it needs. A superset of the nodes it may heal (the node's state is not looked at).

    Args:
        nodes: as for :func:`plan_remediation`.
        classes: compiled classes (:func:`compile_classes`).
        in_scope: names in scope; None means every node.
    """
    scope = None if in_scope is None else set(in_scope)
    classified = reason_classifier(classes)
    names = []
    for node in nodes:
        reason = node.get("reason") or ""
        if not reason or (scope is not None and node["name"] not in scope):
            continue
        entry = classified(reason)
        if entry is not None and entry["action"] != "human":
            names.append(node["name"])
    return names


def plan_from_options(nodes: List[Dict[str, Any]],
                      classes: Optional[Sequence[Dict[str, Any]]] = None,
                      allow_reasons: Optional[Sequence[str]] = None,
                      reboot_reasons: Optional[Sequence[str]] = None,
                      scope: str = DEFAULT_SCOPE,
                      on_allowlist: Optional[Callable[[str], None]] = None,
                      events_of: Optional[Callable[[List[str]], List[Dict[str, Any]]]] = None,
                      **policy: Any) -> Dict[str, Any]:
    """The one way the filter ``remediation_plan`` and the module ``slurm_node_remediation`` plan:
    their options as the user gave them, resolved here, then :func:`plan_remediation`.

    Args:
        nodes: as for :func:`plan_remediation`.
        classes, allow_reasons, reboot_reasons: see :func:`resolve_classes`; when the deprecated
            allowlist gave the classes, ``on_allowlist`` (if given) is called once with
            :data:`ALLOWLIST_DEPRECATION`.
        scope: a JMESPath expression over ``nodes`` (:func:`scope_names`); empty means every node.
        events_of: instead of ``events``, a function that reads the events of the nodes it is given
            (:func:`heal_candidates`, never empty); not called when there is no such node (no event
            is needed then). A cluster whose admins drained thousands of nodes holds as many
            events, none of which a plan reads.
        policy: the other keyword arguments of :func:`plan_remediation` (limits, events, budget,
            circuit, reboot_reason, now).

    Returns:
        The plan (:func:`plan_remediation`).

    Raises:
        RemediationError: classes and the allowlist both given, a bad scope, or invalid settings.
        Whatever ``events_of`` raises.
    """
    resolved, deprecated = resolve_classes(classes, allow_reasons, reboot_reasons)
    if deprecated and on_allowlist is not None:
        on_allowlist(ALLOWLIST_DEPRECATION)
    in_scope = scope_names(nodes, scope) if scope else None
    if events_of is not None:
        names = heal_candidates(nodes, compile_classes(resolved), in_scope)
        policy["events"] = events_of(names) if names else []
    return plan_remediation(nodes, classes=resolved, in_scope=in_scope, **policy)


#: What groups the nodes to act on (and those over the blast radius or held) in the plan.
_ACTION_KEYS = ("action", "class", "state", "reason")


def plan_remediation(nodes: List[Dict[str, Any]],
                     classes: Sequence[Dict[str, Any]] = DEFAULT_REASON_CLASSES,
                     in_scope: Optional[Sequence[str]] = None,
                     max_nodes: int = DEFAULT_MAX_NODES,
                     max_percent: float = DEFAULT_MAX_PERCENT,
                     events: Optional[List[Dict[str, Any]]] = None,
                     heal_budget: int = DEFAULT_HEAL_BUDGET,
                     heal_window: int = DEFAULT_HEAL_WINDOW,
                     circuit: Optional[Dict[str, Any]] = None,
                     reboot_reason: str = DEFAULT_REBOOT_REASON,
                     now: Optional[float] = None,
                     heal_since: int = DEFAULT_HEAL_SINCE,
                     ) -> Dict[str, Any]:
    """Plan one remediation run.

    Args:
        nodes: every node of the cluster (``slurm_node_info`` ``nodes``); ``total`` for the
            percent limit is ``len(nodes)``.
        classes: reason classes ``[{name, match, action}]`` (see ``DEFAULT_REASON_CLASSES``).
        in_scope: names of the nodes to consider at all (e.g. from a JMESPath scope); None
            means every node.
        max_nodes: most nodes rebooting or acted on at once (blast radius).
        max_percent: the same, as percent of the whole cluster.
        events: node events of Slurm's accounting (``slurm_node_event_info`` ``events``) covering
            at least ``heal_window``; None skips the healing budget.
        heal_budget: heals within ``heal_window`` after which a node is left for a human
            (0: no budget).
        heal_window: seconds.
        heal_since: Unix seconds; heals before it do not count either (e.g. the end of a
            maintenance that removed a cause shared by many nodes). 0: no such limit.
        circuit: ``{window, max_nodes, max_percent, min_nodes}`` (missing keys from
            ``DEFAULT_CIRCUIT``); ``window`` 0 turns the circuit breaker off.
        reboot_reason: the reason remediation gives reboots (recognises reboots in flight).
        now: Unix seconds (default: the clock).

    Returns:
        A dict whose size does not grow with the cluster beyond the names to act on: every list of
        nodes is grouped (:func:`group_nodes`: one entry per distinct value of its keys, with
        ``count`` and ``hostlist``, largest first). ``reboot`` and ``resume`` (names to act on now)
        with ``reboot_hostlist`` and ``resume_hostlist``; ``actions``, ``overflow`` (over the blast
        radius) and ``held`` (by the circuit breaker) as ``{action, class, state, reason, count,
        hostlist}``; ``flapping`` (``{state, reason, heals, new_reason, count, hostlist}``) and
        ``flapping_groups`` (``{reason, nodes, hostlist}``: one drain call each, none while the
        breaker is open); ``human`` (``{class, state, reason, count, hostlist}``, a class says a
        human must act); ``skipped`` (``{why, reason, count, hostlist}``); ``in_flight``
        (``{count, hostlist}``: rebooting, from this or earlier runs); ``circuit`` (``{open, broken,
        threshold, window, groups: [{class, count, hostlist, reason}]}``); ``needs_human``
        (``{name, count, why}``, ``name`` a hostlist: circuit open (``count``: the nodes it holds),
        human classes, flapping); ``total``, ``considered``, ``limit`` (blast radius), ``room``
        (what is left of it after this run: 0 while the breaker is open), ``counts`` (nodes:
        ``acted``, ``overflow``, ``held``, ``human``, ``flapping``, ``in_flight``, ``skipped``,
        ``needs_human``) and ``report`` (lines for people, one per group).

    Raises:
        RemediationError: invalid classes, limits or settings.
    """
    compiled = compile_classes(classes)
    limit = blast_radius_limit(len(nodes), max_nodes, max_percent)
    heal_budget = _int_setting(heal_budget, "heal_budget")
    heal_window = _int_setting(heal_window, "heal_window", 1)
    heal_since = _int_setting(heal_since, "heal_since")
    settings = dict(DEFAULT_CIRCUIT, **(circuit or {}))
    unknown = sorted(set(settings) - set(DEFAULT_CIRCUIT))
    if unknown:
        raise RemediationError("circuit: unknown key(s) %s" % ", ".join(unknown))
    window = _int_setting(settings["window"], "circuit window")
    circuit_max = _int_setting(settings["max_nodes"], "circuit max_nodes")
    circuit_min = _int_setting(settings["min_nodes"], "circuit min_nodes")
    try:
        circuit_pct = float(settings["max_percent"])
    except (TypeError, ValueError):
        raise RemediationError("circuit max_percent must be a number, not %r" % settings["max_percent"])
    now = time.time() if now is None else float(now)
    scope = None if in_scope is None else set(in_scope)
    heal_start = max(int(now) - heal_window, heal_since)
    heals = count_heals(events, compiled, heal_start, reboot_reason) if events is not None else {}

    candidates = []
    skipped = []
    human = []
    flapping = []
    in_flight = []
    broken = []
    considered = 0
    classified = reason_classifier(compiled)
    for node in nodes:
        if scope is not None and node["name"] not in scope:
            continue
        considered += 1
        state = node_state(node)
        if not (state.drained or state.down or "FAIL" in state.flags
                or state.flags & _REBOOTING):
            continue
        reason = node.get("reason") or ""
        view = {"name": node["name"], "state": state.compound(), "reason": reason}
        # Slurm appends " : reboot issued" (and more) to the reason a reboot was given; one that
        # timed out is no longer in flight.
        failure = recovery_failure(reason)
        if state.flags & _REBOOTING or (reboot_reason and failure is None
                                        and reason_origin(reason)[0] == reboot_reason):
            in_flight.append(node["name"])
        owned = [why for flag, why in _OWNED_ELSEWHERE if flag in state.flags]
        if owned:
            skipped.append(dict(view, why=owned[0]))
            continue
        if failure is not None:
            human.append(dict(view, **{"class": RESUME_TIMEOUT_CLASS}))
            continue
        entry = classified(reason)
        if entry is None and (not state.responding or "FAIL" in state.flags):
            human.append(dict(view, **{"class": UNCLASSIFIED_FAILING_CLASS}))
            continue
        if not reason:
            skipped.append(dict(view, why="no reason recorded; left for a human"))
            continue
        if entry is None:
            skipped.append(dict(view, why="reason matches no class (drained on purpose?)"))
            continue
        if entry["name"] != "clusterops_hold":
            reason_time = node.get("reason_time")
            # A node whose reason time is unknown counts as recent: the breaker errs on acting less.
            if window and (reason_time is None or reason_time >= now - window):
                broken.append(dict(view, **{"class": entry["name"]}))
        if entry["action"] == "human":
            human.append(dict(view, **{"class": entry["name"]}))
            continue
        seen = heals.get(node["name"])
        if heal_budget and seen and seen["heals"] >= heal_budget:
            flapping.append(dict(view, heals=seen["heals"],
                                 new_reason=flapping_reason(seen["heals"], heal_window, reason)))
            continue
        action = "reboot" if not state.responding or entry["action"] == "reboot" else "resume"
        candidates.append(dict(view, action=action, reason_time=node.get("reason_time") or 0,
                               **{"class": entry["name"]}))

    threshold = circuit_threshold(considered, circuit_max, circuit_pct, circuit_min)
    circuit_open = bool(window) and len(broken) > threshold
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for entry in broken:
        groups.setdefault(entry["class"], []).append(entry)
    circuit_view = {
        "open": circuit_open, "broken": len(broken), "threshold": threshold, "window": window,
        "groups": [{"class": name, "count": len(members),
                    "hostlist": compress_hostlist([m["name"] for m in members]),
                    "reason": members[0]["reason"]}
                   for name, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))],
    }

    # Oldest problem first, then by name, so a long-broken node is not starved by new ones.
    candidates.sort(key=lambda c: (c["reason_time"], c["name"]))
    room = 0 if circuit_open else max(0, limit - len(in_flight))
    acted = candidates[:room]
    overflow = candidates[room:] if not circuit_open else []
    held = candidates if circuit_open else []
    for entry in candidates:
        del entry["reason_time"]
    if circuit_open:
        flapping_now = []  # nothing at all changes while the breaker is open
    else:
        flapping_now = flapping

    acted_groups = group_nodes(acted, _ACTION_KEYS)
    overflow_groups = group_nodes(overflow, _ACTION_KEYS)
    held_groups = group_nodes(held, _ACTION_KEYS)
    human_groups = group_nodes(human, ("class", "state", "reason"))
    flapping_view = group_nodes(flapping, ("state", "reason", "heals", "new_reason"))

    needs_human = []
    if circuit_open:
        grouped = "; ".join("%s %s (%d, e.g. %r)" % (g["class"], g["hostlist"], g["count"], g["reason"])
                            for g in circuit_view["groups"])
        needs_human.append({"name": compress_hostlist([b["name"] for b in broken]), "count": len(held),
                            "why": "cluster-wide failure suspected: %d nodes broke within %s (more than %d); "
                                   "nothing healed: %s" % (len(broken), _duration(window), threshold, grouped)})
    needs_human += [{"name": h["hostlist"], "count": h["count"], "why": "class %s: %s" % (h["class"], h["reason"])}
                    for h in human_groups]
    needs_human += [{"name": f["hostlist"], "count": f["count"], "why": "flapping: healed %d times in %s, last: %s"
                     % (f["heals"], _duration(heal_window), f["reason"])} for f in flapping_view]

    flapping_groups: Dict[str, List[str]] = {}
    for entry in flapping_now:
        flapping_groups.setdefault(entry["new_reason"], []).append(entry["name"])

    report = []
    if circuit_open:
        report.append(needs_human[0]["why"])
    report += ["%s: %s (%s, %s, class %s, reason %r)"
               % (g["hostlist"], g["action"], _n_nodes(g["count"]), g["state"], g["class"], g["reason"])
               for g in acted_groups]
    report += ["%s: over the blast radius of %d node(s) rebooting or acted on at once (%d in flight), "
               "not acted on (%s, %s)" % (g["hostlist"], limit, len(in_flight), g["action"], _n_nodes(g["count"]))
               for g in overflow_groups]
    report += ["%s: held by the circuit breaker, not acted on (%s, %s)" % (g["hostlist"], g["action"], _n_nodes(g["count"]))
               for g in held_groups]
    report += ["%s: flapping, healed %d times in %s; %s (%s, reason %r) [needs a human]"
               % (f["hostlist"], f["heals"], _duration(heal_window),
                  "set reason %r" % f["new_reason"] if not circuit_open else "held by the circuit breaker",
                  _n_nodes(f["count"]), f["reason"]) for f in flapping_view]
    report += ["%s: class %s needs a human (%s, %s, reason %r) [needs a human]"
               % (h["hostlist"], h["class"], _n_nodes(h["count"]), h["state"], h["reason"]) for h in human_groups]
    skipped_groups = summarise_skipped(skipped)
    report += ["%s: skipped, %s (%s, reason %r)" % (g["hostlist"], g["why"], _n_nodes(g["count"]), g["reason"])
               for g in skipped_groups]
    reboot_names = [c["name"] for c in acted if c["action"] == "reboot"]
    resume_names = [c["name"] for c in acted if c["action"] == "resume"]
    return {
        "reboot": reboot_names,
        "resume": resume_names,
        "reboot_hostlist": compress_hostlist(reboot_names),
        "resume_hostlist": compress_hostlist(resume_names),
        "actions": acted_groups,
        "flapping": flapping_view,
        "flapping_groups": [{"reason": reason, "nodes": names, "hostlist": compress_hostlist(names)}
                            for reason, names in sorted(flapping_groups.items())],
        "human": human_groups,
        "skipped": skipped_groups,
        "overflow": overflow_groups,
        "held": held_groups,
        "in_flight": {"count": len(in_flight), "hostlist": compress_hostlist(in_flight)},
        "circuit": circuit_view,
        "needs_human": needs_human,
        "total": len(nodes),
        "considered": considered,
        "limit": limit,
        "room": 0 if circuit_open else max(0, limit - len(in_flight) - len(acted)),
        "counts": {"acted": len(acted), "overflow": len(overflow), "held": len(held), "human": len(human),
                   "flapping": len(flapping), "in_flight": len(in_flight), "skipped": len(skipped),
                   "needs_human": sum(item["count"] for item in needs_human)},
        "report": report,
    }

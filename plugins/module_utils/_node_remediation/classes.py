# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reason classes: what to do about a drained or down node, by the reason Slurm gives it.

The default classes and the source of each, every reason prefix this collection writes (named
constants: the health check's, the holds'), compiling and checking classes, and classifying a
reason by the reason Slurm started with (without the tails slurmctld appends).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import RemediationError


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


#: The holds: reasons this collection sets on nodes it stops healing, each a kind after
#: ``HOLD_PREFIX``. ``flapping``: the healing budget is spent (:func:`.heals.flapping_reason`);
#: ``suspect``: training runs failed on the node again and again (``_training_remediation``).
FLAPPING_PREFIX = HOLD_PREFIX + "flapping: "
SUSPECT_PREFIX = HOLD_PREFIX + "suspect: "
HOLD_KINDS = ("flapping", "suspect")


#: The class of the holds: it needs a human, and a held node does not count as broken for the
#: circuit breaker (it broke long ago; the hold is this collection's own doing).
HOLD_CLASS = "clusterops_hold"


#: Xids after which NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors, "Resolution
#: Bucket (Immediate Action)") asks for a GPU reset or a reboot of the machine (RESET_GPU,
#: RESTART_BM), which a node reboot performs: 48 double-bit ECC, 63 row remapping pending, 74
#: NVLink, 79 fallen off the bus, 95 uncontained ECC, 119/120 GSP, 140 unrecovered ECC, 154 recovery
#: action changed. Every other Xid the health check reports (e.g. 64 row remapping failure, 92
#: high single-bit ECC rate) falls to ``health_other``: a human decides on a repair.
XID_REBOOT = (48, 63, 74, 79, 95, 119, 120, 140, 154)


GPU_XID_RESET = r"^%sgpu_xid: Xid (%s)\b" % (HEALTH_PREFIX, "|".join(str(xid) for xid in XID_REBOOT))


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


GPU_DCGM_RESET = r"^%sdcgm_health: (DCGM_FR_(%s) |DCGM_FR_XID_ERROR [^:]*: Detected XID (%s)\b)" % (
    HEALTH_PREFIX, "|".join(DCGM_REBOOT_FINDINGS), "|".join(str(xid) for xid in XID_REBOOT))


#: nvidia-smi exit statuses a reboot may repair (nvidia-smi(1) RETURN VALUE and NVML's
#: nvmlReturn_t): 6 no devices found, 9 driver not loaded, 10/11 interrupt issue, 15 GPU fallen
#: off the bus, 16 GPU requires a reset, 18 driver/library version mismatch (a driver upgraded
#: without a reboot), 255 internal driver error. Every other status the health check reports
#: (2/3/4/17 the command or its permissions, 8 power cables, 12/13 NVML missing or too old, 14
#: infoROM corrupted, unknown ones) falls to ``gpu_nvidia_smi_other``: a human repairs it.
NVIDIA_SMI_REBOOT_RC = (6, 9, 10, 11, 15, 16, 18, 255)


_NVIDIA_SMI_FAILED = r"^%sgpu_(count|state): (expected [0-9]+, )?nvidia-smi failed rc=" % HEALTH_PREFIX


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
    {"name": "gpu_count", "match": r"^%sgpu_count: " % HEALTH_PREFIX, "action": "reboot"},
    {"name": "gpu_state", "match": r"^%sgpu_state: " % HEALTH_PREFIX, "action": "reboot"},
    {"name": "mount", "match": r"^%smount: " % HEALTH_PREFIX, "action": "reboot"},
    {"name": "health_other", "match": r"^%s" % HEALTH_PREFIX, "action": "human"},
    {"name": HOLD_CLASS, "match": r"^%s(%s): " % (HOLD_PREFIX, "|".join(HOLD_KINDS)), "action": "human"},
)


ACTIONS = ("reboot", "resume", "human")


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

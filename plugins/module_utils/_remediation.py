# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""Node remediation policy: which broken nodes to reboot, which to resume, which to leave.

Pure functions over the node dicts of ``slurm_node_info`` (see ``_nodes``); no Slurm call.
The policy, in order, for every node in scope:

1. A node that is neither drained (DRAIN flag), DOWN, FAIL nor rebooting needs nothing; it is not
   listed. (sinfo's text word ``reboot^`` hides DRAIN and DOWN, so a rebooting node is always
   listed, as skipped.)
2. A node with a reboot already requested or issued, powered down or powering up/down by
   power saving, or in a maintenance reservation is skipped: something else owns it.
3. A node whose reason matches no allowlist pattern is skipped: an admin or a health check
   drained it on purpose. So is a node with no reason at all.
4. A node that does not respond (NOT_RESPONDING), or whose reason matches a reboot pattern
   (default: "Kill task failed", a process stuck in the kernel), is rebooted.
5. Any other node, responding and only needing to return to service, is resumed.

Then the blast radius: at most ``min(max_nodes, max(1, floor(total * max_percent / 100)))``
nodes are acted on in one run, oldest reason first; the rest are reported as overflow.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import node_state

try:
    from typing import Any, Dict, List, Optional, Sequence  # noqa: F401
except ImportError:  # pragma: no cover
    pass


#: Reasons Slurm itself (or a failed prolog/epilog) sets, safe to fix automatically. Anchored at
#: both ends: Slurm writes them as exact strings, while an admin's free text that merely starts
#: with them ("Kill task failed by admin for testing") or a reason Slurm extended after a failed
#: reboot ("... : reboot issued : reboot timed out") must not match. The optional tails are the
#: details newer releases append in a fixed form: since 25.05 the kill-task drain names the job
#: step ("Kill task failed (JobId=7 batch)"); "Node unexpectedly rebooted" may carry
#: "boot_time=N last response=N".
KILL_TASK_FAILED = r"^Kill task failed( \(JobId=[0-9]+[^()]*\))?$"
DEFAULT_ALLOW_REASONS = (
    KILL_TASK_FAILED,
    r"^Not responding$",
    r"^Node unexpectedly rebooted( boot_time=[0-9]+ last response=[0-9]+)?$",
    r"^batch job complete failure$",
    r"^Prolog error$",
    r"^Epilog error$",
)

#: Reasons that need a reboot rather than a plain resume.
DEFAULT_REBOOT_REASONS = (
    KILL_TASK_FAILED,
)

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


def _compile(patterns, what):
    # type: (Sequence[str], str) -> List[Any]
    if isinstance(patterns, str):
        patterns = [patterns]
    compiled = []
    for pattern in patterns or ():
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error as exc:
            raise RemediationError("%s: %r is not a valid regular expression: %s"
                                   % (what, pattern, exc))
    return compiled


def blast_radius_limit(total, max_nodes, max_percent):
    # type: (int, int, float) -> int
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


def plan_remediation(nodes, allow_reasons=DEFAULT_ALLOW_REASONS,
                     reboot_reasons=DEFAULT_REBOOT_REASONS, in_scope=None,
                     max_nodes=16, max_percent=10.0):
    # type: (List[Dict[str, Any]], Sequence[str], Sequence[str], Optional[Sequence[str]], int, float) -> Dict[str, Any]
    """Plan one remediation run.

    Args:
        nodes: every node of the cluster (``slurm_node_info`` ``nodes``); ``total`` for the
            percent limit is ``len(nodes)``.
        allow_reasons: regexes (``re.search``, case-insensitive) of reasons safe to fix.
        reboot_reasons: regexes of reasons that need a reboot, not a resume.
        in_scope: names of the nodes to consider at all (e.g. from a JMESPath scope); None
            means every node.
        max_nodes: most nodes acted on in this run.
        max_percent: most nodes acted on, as percent of the whole cluster.

    Returns:
        A dict: ``reboot`` and ``resume`` (lists of names, to act on now), ``reboot_hostlist``
        and ``resume_hostlist``, ``actions`` (one ``{name, action, state, reason}`` each),
        ``skipped`` (``{name, state, reason, why}``, left alone on purpose), ``overflow``
        (``{name, action, state, reason}``, over the blast-radius limit, not acted on),
        ``total``, ``considered`` (nodes in scope), ``limit``, and ``report`` (one line of
        text per node acted on, over the limit or skipped, for people).

    Raises:
        RemediationError: invalid regex or limits.
    """
    allow = _compile(allow_reasons, "allow_reasons")
    reboot = _compile(reboot_reasons, "reboot_reasons")
    limit = blast_radius_limit(len(nodes), max_nodes, max_percent)
    scope = None if in_scope is None else set(in_scope)

    candidates = []
    skipped = []
    considered = 0
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
        owned = [why for flag, why in _OWNED_ELSEWHERE if flag in state.flags]
        if owned:
            skipped.append(dict(view, why=owned[0]))
            continue
        if not reason:
            skipped.append(dict(view, why="no reason recorded; left for a human"))
            continue
        if not any(p.search(reason) for p in allow):
            skipped.append(dict(view, why="reason not in the allowlist (drained on purpose?)"))
            continue
        if not state.responding or any(p.search(reason) for p in reboot):
            action = "reboot"
        else:
            action = "resume"
        candidates.append(dict(view, action=action, reason_time=node.get("reason_time") or 0))

    # Oldest problem first, then by name, so a long-broken node is not starved by new ones.
    candidates.sort(key=lambda c: (c["reason_time"], c["name"]))
    acted = candidates[:limit]
    overflow = candidates[limit:]
    for entry in candidates:
        del entry["reason_time"]
    report = ["%s: %s (%s, reason %r)" % (c["name"], c["action"], c["state"], c["reason"])
              for c in acted]
    report += ["%s: over the blast radius of %d node(s) per run, not acted on (%s)"
               % (c["name"], limit, c["action"]) for c in overflow]
    report += ["%s: skipped, %s (%s, reason %r)" % (s["name"], s["why"], s["state"], s["reason"])
               for s in skipped]
    reboot_names = [c["name"] for c in acted if c["action"] == "reboot"]
    resume_names = [c["name"] for c in acted if c["action"] == "resume"]
    return {
        "reboot": reboot_names,
        "resume": resume_names,
        "reboot_hostlist": compress_hostlist(reboot_names),
        "resume_hostlist": compress_hostlist(resume_names),
        "actions": acted,
        "skipped": skipped,
        "overflow": overflow,
        "total": len(nodes),
        "considered": considered,
        "limit": limit,
        "report": report,
    }

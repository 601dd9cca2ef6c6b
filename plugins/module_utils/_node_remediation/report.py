# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the plan says to people: nodes grouped into hostlists (so that the plan's size does not
grow with the cluster), durations and counts in words, one line per group."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Sequence, Tuple

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist


def duration(seconds: int) -> str:
    """``seconds`` in the largest unit that divides it: ``24h`` for a day, ``2d``, ``30min``, ``45s``."""
    if seconds % 86400 == 0:
        return "%dd" % (seconds // 86400) if seconds != 86400 else "24h"
    if seconds % 3600 == 0:
        return "%dh" % (seconds // 3600)
    if seconds % 60 == 0:
        return "%dmin" % (seconds // 60)
    return "%ds" % seconds


def n_nodes(count: int) -> str:
    """``1 node``, ``3 nodes``."""
    return "%d node%s" % (count, "" if count == 1 else "s")


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


#: What groups the nodes to act on (and those over the blast radius or held) in the plan.
ACTION_KEYS = ("action", "class", "state", "reason")


def circuit_why(circuit: Dict[str, Any]) -> str:
    """Why nothing is healed while the circuit breaker is open, with the broken nodes' reasons by class.

    Args:
        circuit: the plan's ``circuit`` (``{open, broken, threshold, window, groups}``).
    """
    grouped = "; ".join("%s %s (%d, e.g. %r)" % (g["class"], g["hostlist"], g["count"], g["reason"])
                        for g in circuit["groups"])
    return ("cluster-wide failure suspected: %d nodes broke within %s (more than %d); nothing healed: %s"
            % (circuit["broken"], duration(circuit["window"]), circuit["threshold"], grouped))


#: Where the runbook of a node that needs a human is (docs/node-remediation.md, its section).
RUNBOOK = "docs/node-remediation.md#when-it-says-needs-a-human"


def next_step(kind: str, hostlist: str, class_name: str = "") -> str:
    """What a person does next about the nodes ``hostlist`` that need a human for ``kind``: the
    circuit breaker (``circuit``), healing that did not help (``flapping``), or a reason class whose
    action is ``human`` (``class``, its name ``class_name``: ``resume_timeout`` and
    ``unclassified_failing`` have their own step); one line that ends with the runbook's section
    (:data:`RUNBOOK`)."""
    resume = "scontrol update NodeName=%s State=RESUME" % hostlist
    steps = {
        "circuit": "find the shared cause (file system, fabric, power) in the grouped reasons; once fixed, "
                   "the next run heals them",
        "flapping": "find why healing does not help (sacctmgr show event nodes=%s), repair, then %s: its healing "
                    "budget starts afresh" % (hostlist, resume),
        "class resume_timeout": "the node did not come back from its reboot: check its console or BMC; once it is up, "
                                + resume,
        "class unclassified_failing": "look at the node (sinfo -R); add a reason class if its failure is safe to heal, "
                                      "or put a node taken away on purpose in a MAINT reservation",
    }
    step = steps.get(kind if kind != "class" else "class " + class_name,
                     "repair the node, then %s; or set a reason of your own (e.g. 'RMA ticket 42') to acknowledge it" % resume)
    return "next: %s (%s)" % (step, RUNBOOK)


def needs_human_items(groups: Dict[str, List[Dict[str, Any]]], circuit: Dict[str, Any],
                      broken: Sequence[str], heal_window: int) -> List[Dict[str, Any]]:
    """The plan's ``needs_human``: ``{name (a hostlist), count, why, next}``, the open circuit
    breaker first (``count``: the nodes it holds), then the human classes' groups, then the flapping
    ones; ``next`` is what a person does about them (:func:`next_step`).

    Args:
        groups: the plan's grouped lists (``held``, ``human``, ``flapping``, as :func:`group_nodes` gives).
        circuit: the plan's ``circuit``.
        broken: names of the nodes that broke within the circuit window.
        heal_window: seconds.
    """
    items = []
    if circuit["open"]:
        held = compress_hostlist(list(broken))
        items.append({"name": held, "count": sum(g["count"] for g in groups["held"]),
                      "why": circuit_why(circuit), "next": next_step("circuit", held)})
    items += [{"name": h["hostlist"], "count": h["count"], "why": "class %s: %s" % (h["class"], h["reason"]),
               "next": next_step("class", h["hostlist"], h["class"])} for h in groups["human"]]
    items += [{"name": f["hostlist"], "count": f["count"], "why": "flapping: healed %d times in %s, last: %s"
               % (f["heals"], duration(heal_window), f["reason"]), "next": next_step("flapping", f["hostlist"])}
              for f in groups["flapping"]]
    return items


def report_lines(groups: Dict[str, List[Dict[str, Any]]], circuit: Dict[str, Any], limit: int,
                 in_flight: int, heal_window: int) -> List[str]:
    """The plan's ``report``: one line for people per group, what is done first, then what is not
    (over the blast radius, held by the circuit breaker), what needs a human, what is skipped.

    Args:
        groups: the plan's grouped lists ``actions``, ``overflow``, ``held``, ``flapping``,
            ``human``, ``skipped``.
        circuit: the plan's ``circuit``.
        limit: the blast radius (nodes).
        in_flight: nodes rebooting from this or earlier runs.
        heal_window: seconds.
    """
    lines = [circuit_why(circuit)] if circuit["open"] else []
    lines += ["%s: %s (%s, %s, class %s, reason %r)"
              % (g["hostlist"], g["action"], n_nodes(g["count"]), g["state"], g["class"], g["reason"])
              for g in groups["actions"]]
    lines += ["%s: over the blast radius of %d node(s) rebooting or acted on at once (%d in flight), "
              "not acted on (%s, %s)" % (g["hostlist"], limit, in_flight, g["action"], n_nodes(g["count"]))
              for g in groups["overflow"]]
    lines += ["%s: held by the circuit breaker, not acted on (%s, %s)" % (g["hostlist"], g["action"], n_nodes(g["count"]))
              for g in groups["held"]]
    lines += ["%s: flapping, healed %d times in %s; %s (%s, reason %r) [needs a human]"
              % (f["hostlist"], f["heals"], duration(heal_window),
                 "set reason %r" % f["new_reason"] if not circuit["open"] else "held by the circuit breaker",
                 n_nodes(f["count"]), f["reason"]) for f in groups["flapping"]]
    lines += ["%s: class %s needs a human (%s, %s, reason %r) [needs a human]"
              % (h["hostlist"], h["class"], n_nodes(h["count"]), h["state"], h["reason"]) for h in groups["human"]]
    lines += ["%s: skipped, %s (%s, reason %r)" % (g["hostlist"], g["why"], n_nodes(g["count"]), g["reason"])
              for g in groups["skipped"]]
    return lines

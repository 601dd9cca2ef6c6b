# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node remediation plan: each node in scope triaged, then the circuit breaker and the blast
radius; the one way the filter and the module plan (:func:`plan_from_options`).

Pure: nodes, settings (:class:`.settings.PolicySettings`) and events in, a plan out; nothing here
reads or calls Slurm, nor imports what does (``tests/code_limits.py`` checks): :mod:`.runner` reads the
nodes and the events :func:`event_nodes` names, then plans.

The policy, in order, for every node in scope (the node dicts of ``slurm_node_info``, ``_nodes``;
the node events of ``slurm_node_event_info``, ``_node_events``):

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
   :func:`.classes.reason_origin`) is looked up in the reason classes (first match wins). A node whose
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

import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import node_state
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import (
    HOLD_CLASS,
    RESUME_TIMEOUT_CLASS,
    UNCLASSIFIED_FAILING_CLASS,
    ALLOWLIST_DEPRECATION,
    compile_classes,
    reason_classifier,
    reason_origin,
    recovery_failure,
    resolve_classes,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.heals import count_heals, flapping_reason, heal_candidates
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.report import (
    ACTION_KEYS,
    group_nodes,
    needs_human_items,
    report_lines,
    summarise_skipped,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import (
    PolicySettings,
    RemediationError,
    circuit_settings,
    int_setting,
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


def circuit_threshold(considered: int, max_nodes: int, max_percent: float, min_nodes: int) -> int:
    """Most nodes that may break within the circuit window before nothing is healed:
    ``min(max_nodes, max(min_nodes, floor(considered * max_percent / 100)))``."""
    return min(int(max_nodes), max(int(min_nodes), int(considered * float(max_percent) // 100)))


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


def is_rebooting(node: Dict[str, Any], reboot_reason: str) -> bool:
    """Whether ``node`` (a ``slurm_node_info`` node dict) is rebooting: Slurm flags it
    REBOOT_REQUESTED or REBOOT_ISSUED, or it is still broken with remediation's ``reboot_reason``
    (Slurm appends `` : reboot issued`` and more to it) and that reboot has not failed (timed out)."""
    reason = node.get("reason") or ""
    return bool(node_state(node).flags & _REBOOTING) or bool(
        reboot_reason and recovery_failure(reason) is None and reason_origin(reason)[0] == reboot_reason)


def out_of_service(state: Any) -> bool:
    """Whether a node in ``state`` (its :class:`._node_state.NodeState`) is drained, DOWN, FAIL or rebooting:
    the nodes the triage looks at, and those not back in service."""
    return bool(state.drained or state.down or "FAIL" in state.flags or state.flags & _REBOOTING)


def in_service(node: Dict[str, Any]) -> bool:
    """Whether ``node`` takes jobs again: responding, neither drained, DOWN, FAIL nor rebooting."""
    state = node_state(node)
    return state.responding and not out_of_service(state)


def reboot_outcomes(rebooting: Sequence[Dict[str, Any]], nodes: List[Dict[str, Any]],
                    reboot_reason: str, since: int = 0) -> Tuple[List[str], List[Dict[str, Any]]]:
    """What became of the reboots remediation requested on earlier runs (the heal journal's
    ``rebooting``, ``[{node, time}]``), from the nodes read now: ``(returned, waiting)``, the names of
    the nodes back in service (healed: the run that sees it says so) and the entries of those still
    rebooting (:func:`is_rebooting`), kept for the next run. A node broken again for another reason,
    whose reboot failed, or that is no longer in the cluster is neither: it is dropped (the triage
    judges it anew). So is a reboot requested before ``since`` (Unix seconds: the heals before it do not
    count, ``heal_window`` and ``heal_since``)."""
    by_name = dict((node["name"], node) for node in nodes)
    returned: List[str] = []
    waiting: List[Dict[str, Any]] = []
    for entry in rebooting:
        node = by_name.get(entry["node"])
        if node is None or entry["time"] < since:
            continue
        if is_rebooting(node, reboot_reason):
            waiting.append(entry)
        elif in_service(node):
            returned.append(entry["node"])
    return returned, waiting


class Triage(object):
    """The nodes in scope sorted, one at a time (:meth:`add`), into the plan's lists.

    Attributes (each entry ``{name, state, reason}`` plus what its list says):
        candidates: to heal now or later: ``action`` (``reboot``/``resume``), ``class``,
            ``reason_time`` (Unix seconds, 0 when unknown).
        skipped: ``why``: owned elsewhere (a reboot, power saving, maintenance), no reason, or a
            reason no class matches (drained on purpose).
        human: ``class``: a class that needs a human, ``resume_timeout`` or ``unclassified_failing``.
        flapping: ``heals``, ``new_reason``: the healing budget is spent.
        in_flight: names of the nodes rebooting (a reboot requested or issued, or still broken
            with ``reboot_reason``).
        broken: ``class``: broke within the circuit window (every class but the holds).
        considered: how many nodes in scope were looked at.
    """

    def __init__(self, classes: Sequence[Dict[str, Any]], heals: Dict[str, Dict[str, Any]],
                 heal_budget: int, heal_window: int, circuit_window: int, reboot_reason: str,
                 now: float) -> None:
        self.classified = reason_classifier(classes)
        self.heals = heals
        self.heal_budget = heal_budget
        self.heal_window = heal_window
        self.circuit_window = circuit_window
        self.reboot_reason = reboot_reason
        self.now = now
        self.candidates: List[Dict[str, Any]] = []
        self.skipped: List[Dict[str, Any]] = []
        self.human: List[Dict[str, Any]] = []
        self.flapping: List[Dict[str, Any]] = []
        self.in_flight: List[str] = []
        self.broken: List[Dict[str, Any]] = []
        self.considered = 0

    def add(self, node: Dict[str, Any]) -> None:
        """Sort one node in scope (a ``slurm_node_info`` node dict) into its list, or none when it
        is neither drained, DOWN, FAIL nor rebooting."""
        self.considered += 1
        state = node_state(node)
        if not out_of_service(state):
            return
        reason = node.get("reason") or ""
        view = {"name": node["name"], "state": state.compound(), "reason": reason}
        failure = recovery_failure(reason)
        if is_rebooting(node, self.reboot_reason):
            self.in_flight.append(node["name"])
        entry = self._healing_class(state, view, failure)
        if entry is None:
            return
        if entry["name"] != HOLD_CLASS and self._broke_recently(node):
            self.broken.append(dict(view, **{"class": entry["name"]}))
        if entry["action"] == "human":
            self.human.append(dict(view, **{"class": entry["name"]}))
            return
        seen = self.heals.get(node["name"])
        if self.heal_budget and seen and seen["heals"] >= self.heal_budget:
            self.flapping.append(dict(view, heals=seen["heals"],
                                      new_reason=flapping_reason(seen["heals"], self.heal_window, reason)))
            return
        action = "reboot" if not state.responding or entry["action"] == "reboot" else "resume"
        self.candidates.append(dict(view, action=action, reason_time=node.get("reason_time") or 0,
                                    **{"class": entry["name"]}))

    def _healing_class(self, state: Any, view: Dict[str, Any], failure: Optional[str]) -> Optional[Dict[str, Any]]:
        """The class of a broken node, or None once the node is listed as skipped or needing a human."""
        owned = [why for flag, why in _OWNED_ELSEWHERE if flag in state.flags]
        if owned:
            self.skipped.append(dict(view, why=owned[0]))
            return None
        if failure is not None:
            self.human.append(dict(view, **{"class": RESUME_TIMEOUT_CLASS}))
            return None
        entry = self.classified(view["reason"])
        if entry is None and (not state.responding or "FAIL" in state.flags):
            self.human.append(dict(view, **{"class": UNCLASSIFIED_FAILING_CLASS}))
            return None
        if not view["reason"]:
            self.skipped.append(dict(view, why="no reason recorded; left for a human"))
            return None
        if entry is None:
            self.skipped.append(dict(view, why="reason matches no class (drained on purpose?)"))
        return entry

    def _broke_recently(self, node: Dict[str, Any]) -> bool:
        """Whether the node broke within the circuit window; a node whose reason time is unknown
        counts as recent: the breaker errs on acting less."""
        reason_time = node.get("reason_time")
        return bool(self.circuit_window) and (reason_time is None or reason_time >= self.now - self.circuit_window)


def circuit_breaker(broken: List[Dict[str, Any]], considered: int, settings: Dict[str, Any]) -> Dict[str, Any]:
    """The plan's ``circuit``: open when more nodes broke within the window than
    :func:`circuit_threshold` allows (a cluster-wide failure is suspected).

    Args:
        broken: :attr:`Triage.broken`.
        considered: the nodes in scope.
        settings: :func:`.settings.circuit_settings`; ``window`` 0 never opens it.

    Returns:
        ``{open, broken, threshold, window, groups: [{class, count, hostlist, reason}]}``, the
        broken nodes grouped by class, largest group first, ``reason`` the first node's.
    """
    threshold = circuit_threshold(considered, settings["max_nodes"], settings["max_percent"], settings["min_nodes"])
    by_class: Dict[str, List[Dict[str, Any]]] = {}
    for entry in broken:
        by_class.setdefault(entry["class"], []).append(entry)
    return {
        "open": bool(settings["window"]) and len(broken) > threshold, "broken": len(broken),
        "threshold": threshold, "window": settings["window"],
        "groups": [{"class": name, "count": len(members),
                    "hostlist": compress_hostlist([m["name"] for m in members]),
                    "reason": members[0]["reason"]}
                   for name, members in sorted(by_class.items(), key=lambda kv: (-len(kv[1]), kv[0]))],
    }


def within_limits(candidates: List[Dict[str, Any]], limit: int, in_flight: int,
                  circuit_open: bool) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]], List[Dict[str, Any]]]:
    """The candidates split into ``(acted, overflow, held)``: while the breaker is open every one is
    held; else the oldest problems first (then by name, so a long-broken node is not starved by new
    ones) fill what the blast radius ``limit`` leaves after the ``in_flight`` reboots. The
    candidates' ``reason_time`` is taken off."""
    candidates.sort(key=lambda c: (c["reason_time"], c["name"]))
    for entry in candidates:
        del entry["reason_time"]
    if circuit_open:
        return [], [], candidates
    room = max(0, limit - in_flight)
    return candidates[:room], candidates[room:], []


def plan_from_options(nodes: List[Dict[str, Any]],
                      settings: PolicySettings,
                      events: Optional[List[Dict[str, Any]]] = None,
                      now: Optional[float] = None,
                      on_allowlist: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
    """The one way the filter ``remediation_plan`` and the module ``slurm_node_remediation`` plan:
    :func:`plan_remediation`, and when the deprecated allowlist gave the classes, ``on_allowlist``
    (if given) is called once with :data:`.classes.ALLOWLIST_DEPRECATION`.

    Raises:
        RemediationError: classes and the allowlist both given, a bad scope, or invalid settings.
    """
    dummy, deprecated = resolve_classes(settings.classes, settings.allow_reasons, settings.reboot_reasons)
    if deprecated and on_allowlist is not None:
        on_allowlist(ALLOWLIST_DEPRECATION)
    return plan_remediation(nodes, settings, events=events, now=now)


def event_nodes(nodes: List[Dict[str, Any]], settings: PolicySettings) -> List[str]:
    """The nodes whose node events a plan with ``settings`` needs (:func:`.heals.heal_candidates`: in
    scope, of a class that heals), what the runner reads from accounting before planning (with a
    healing budget). A cluster whose admins drained thousands of nodes holds as many
    events, none of which a plan reads.

    Raises:
        RemediationError: classes and the allowlist both given, a bad scope or classes.
    """
    resolved, dummy = resolve_classes(settings.classes, settings.allow_reasons, settings.reboot_reasons)
    return heal_candidates(nodes, compile_classes(resolved), scope_names(nodes, settings.scope) if settings.scope else None)


def plan_remediation(nodes: List[Dict[str, Any]],
                     settings: PolicySettings = PolicySettings(),
                     in_scope: Optional[Sequence[str]] = None,
                     events: Optional[List[Dict[str, Any]]] = None,
                     now: Optional[float] = None,
                     ) -> Dict[str, Any]:
    """Plan one remediation run: pure, nodes and events in, a plan out.

    Args:
        nodes: every node of the cluster (``slurm_node_info`` ``nodes``); ``total`` for the
            percent limit is ``len(nodes)``.
        settings: :class:`.settings.PolicySettings`: the reason classes (``[{name, match, action}]``,
            see ``DEFAULT_REASON_CLASSES``, or the deprecated allowlist), the scope (a JMESPath
            expression over ``nodes``, :func:`scope_names`), the blast radius (``max_nodes``, also
            as ``max_percent`` of the whole cluster), the healing budget (``heal_budget`` heals within
            ``heal_window`` seconds, not before ``heal_since``, after which a node is left for a
            human; 0: no budget), the circuit breaker (``circuit``, ``window`` 0 turns it off) and the
            ``reboot_reason`` remediation gives reboots (recognises reboots in flight).
        in_scope: names of the nodes to consider at all; None: those ``settings.scope`` selects.
        events: node events of Slurm's accounting (``slurm_node_event_info`` ``events``) covering
            at least ``heal_window`` (those of :func:`event_nodes` suffice); None skips the budget.
        now: Unix seconds (default: the clock).

    Returns:
        A dict whose size does not grow with the cluster beyond the names to act on: every list of
        nodes is grouped (:func:`.report.group_nodes`: one entry per distinct value of its keys, with
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
    classes, dummy = resolve_classes(settings.classes, settings.allow_reasons, settings.reboot_reasons)
    if in_scope is None and settings.scope:
        in_scope = scope_names(nodes, settings.scope)
    reboot_reason = settings.reboot_reason
    compiled = compile_classes(classes)
    limit = blast_radius_limit(len(nodes), settings.max_nodes, settings.max_percent)
    heal_budget = int_setting(settings.heal_budget, "heal_budget")
    heal_window = int_setting(settings.heal_window, "heal_window", 1)
    heal_since = int_setting(settings.heal_since, "heal_since")
    breaker = circuit_settings(settings.circuit)
    now = time.time() if now is None else float(now)
    heal_start = max(int(now) - heal_window, heal_since)
    heals = count_heals(events, compiled, heal_start, reboot_reason) if events is not None else {}
    triage = Triage(compiled, heals, heal_budget, heal_window, breaker["window"], reboot_reason, now)
    scope = None if in_scope is None else set(in_scope)
    for node in nodes:
        if scope is None or node["name"] in scope:
            triage.add(node)
    circuit_view = circuit_breaker(triage.broken, triage.considered, breaker)
    acted, overflow, held = within_limits(triage.candidates, limit, len(triage.in_flight), circuit_view["open"])
    return _plan(triage, circuit_view, acted, overflow, held, total=len(nodes), limit=limit, heal_window=heal_window)


def _plan(triage: Triage, circuit_view: Dict[str, Any], acted: List[Dict[str, Any]], overflow: List[Dict[str, Any]],
          held: List[Dict[str, Any]], total: int, limit: int, heal_window: int) -> Dict[str, Any]:
    """The plan :func:`plan_remediation` returns, from the triage and the limits."""
    circuit_open = circuit_view["open"]
    groups = {"actions": group_nodes(acted, ACTION_KEYS), "overflow": group_nodes(overflow, ACTION_KEYS),
              "held": group_nodes(held, ACTION_KEYS), "human": group_nodes(triage.human, ("class", "state", "reason")),
              "flapping": group_nodes(triage.flapping, ("state", "reason", "heals", "new_reason")),
              "skipped": summarise_skipped(triage.skipped)}
    needs_human = needs_human_items(groups, circuit_view, [b["name"] for b in triage.broken], heal_window)
    flapping_groups: Dict[str, List[str]] = {}
    for entry in [] if circuit_open else triage.flapping:  # nothing at all changes while the breaker is open
        flapping_groups.setdefault(entry["new_reason"], []).append(entry["name"])
    reboot_names = [c["name"] for c in acted if c["action"] == "reboot"]
    resume_names = [c["name"] for c in acted if c["action"] == "resume"]
    in_flight = len(triage.in_flight)
    return dict(
        groups,
        reboot=reboot_names, resume=resume_names,
        reboot_hostlist=compress_hostlist(reboot_names), resume_hostlist=compress_hostlist(resume_names),
        flapping_groups=[{"reason": reason, "nodes": names, "hostlist": compress_hostlist(names)}
                         for reason, names in sorted(flapping_groups.items())],
        in_flight={"count": in_flight, "hostlist": compress_hostlist(triage.in_flight)},
        circuit=circuit_view, needs_human=needs_human,
        total=total, considered=triage.considered, limit=limit,
        room=0 if circuit_open else max(0, limit - in_flight - len(acted)),
        counts={"acted": len(acted), "overflow": len(overflow), "held": len(held), "human": len(triage.human),
                "flapping": len(triage.flapping), "in_flight": in_flight, "skipped": len(triage.skipped),
                "needs_human": sum(item["count"] for item in needs_human)},
        report=report_lines(groups, circuit_view, limit, in_flight, heal_window),
    )

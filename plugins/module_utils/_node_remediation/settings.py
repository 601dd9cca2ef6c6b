# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node remediation policy's settings: their defaults, :class:`PolicySettings` (the one object
the policy, the runner and the filter ``remediation_plan`` pass) and their checks.

The one home of every default of the policy: the filter ``remediation_plan``, the module
``slurm_node_remediation``, the doc fragment ``remediation_policy``, the role ``remediate_nodes``
(defaults and argument spec) and docs/node-remediation.md repeat them; a unit test keeps them
equal. The reason classes' defaults live with the classes (:mod:`.classes`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Dict, Mapping, Optional, Sequence


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


class RemediationError(ValueError):
    """Bad remediation settings (an invalid regex, scope expression or limit), or a heal journal it
    cannot use; ``cause`` (``_causes``) is ``configuration`` unless the raiser says otherwise."""

    def __init__(self, message: str, cause: str = "configuration") -> None:
        super(RemediationError, self).__init__(message)
        self.cause = cause


def int_setting(value: Any, what: str, minimum: int = 0) -> int:
    """``value`` as an int of at least ``minimum``.

    Raises:
        RemediationError: not an integer, or below ``minimum``; the message names ``what``.
    """
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise RemediationError("%s must be an integer, not %r" % (what, value))
    if number < minimum:
        raise RemediationError("%s must be >= %d, not %d" % (what, minimum, number))
    return number


def circuit_settings(circuit: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The circuit breaker's settings checked, missing keys from ``DEFAULT_CIRCUIT``.

    Args:
        circuit: ``{window, max_nodes, max_percent, min_nodes}`` (any subset) or None.

    Returns:
        ``{window, max_nodes, min_nodes}`` as ints (seconds, nodes) and ``max_percent`` as a float.

    Raises:
        RemediationError: an unknown key, or a value that is not a number of the right kind.
    """
    settings = dict(DEFAULT_CIRCUIT, **(circuit or {}))
    unknown = sorted(set(settings) - set(DEFAULT_CIRCUIT))
    if unknown:
        raise RemediationError("circuit: unknown key(s) %s" % ", ".join(unknown))
    checked: Dict[str, Any] = {"window": int_setting(settings["window"], "circuit window"),
                               "max_nodes": int_setting(settings["max_nodes"], "circuit max_nodes"),
                               "min_nodes": int_setting(settings["min_nodes"], "circuit min_nodes")}
    try:
        checked["max_percent"] = float(settings["max_percent"])
    except (TypeError, ValueError):
        raise RemediationError("circuit max_percent must be a number, not %r" % settings["max_percent"])
    return checked


@dataclass(frozen=True)
class PolicySettings:
    """The settings of one node remediation plan, as the user gave them (checked when the plan is
    made: :func:`.policy.plan_remediation` raises :class:`RemediationError` for a wrong one).

    ``classes`` (None: ``classes.DEFAULT_REASON_CLASSES``), or the deprecated ``allow_reasons`` and
    ``reboot_reasons`` (``classes.resolve_classes``); ``scope`` a JMESPath expression over the nodes
    ("": every node); ``max_nodes``/``max_percent`` the blast radius; ``heal_budget`` heals within
    ``heal_window`` seconds (and not before ``heal_since``, Unix seconds) after which a node is left
    for a human; ``circuit`` the circuit breaker (``{window, max_nodes, max_percent, min_nodes}``, any
    subset, :func:`circuit_settings`); ``reboot_reason`` the reason remediation's reboots carry.
    """

    classes: Optional[Sequence[Dict[str, Any]]] = None
    allow_reasons: Optional[Sequence[str]] = None
    reboot_reasons: Optional[Sequence[str]] = None
    scope: str = DEFAULT_SCOPE
    max_nodes: int = DEFAULT_MAX_NODES
    max_percent: float = DEFAULT_MAX_PERCENT
    heal_budget: int = DEFAULT_HEAL_BUDGET
    heal_window: int = DEFAULT_HEAL_WINDOW
    heal_since: int = DEFAULT_HEAL_SINCE
    circuit: Optional[Dict[str, Any]] = None
    reboot_reason: str = DEFAULT_REBOOT_REASON

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> "PolicySettings":
        """The settings among ``options`` (a module's parameters, the filter's keyword arguments),
        each by its field's name; those not given keep their defaults."""
        return cls(**dict((f.name, options[f.name]) for f in fields(cls) if f.name in options))

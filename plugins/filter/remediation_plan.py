# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: remediation_plan
short_description: Decide which broken Slurm nodes to reboot, resume or leave for a human
version_added: 0.1.0
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - clusterops.slurm.remediation_policy
description:
  - Takes every node as returned by M(clusterops.slurm.slurm_node_info) and plans one
    remediation run. It changes nothing; M(clusterops.slurm.slurm_node) acts on the plan.
  - Only nodes that are drained, DOWN or FAIL are looked at. A node with a reboot already
    requested or issued, a node in power saving and a node in a maintenance reservation are
    skipped; a node rebooting counts against the blast radius (in flight).
  - "Each node's reason is looked up in O(classes), first match wins, without the tails slurmctld
    appends to a reason (C( : Not responding), C( : reboot issued), C( : reboot complete)) and
    the C( [user@time]) of C(scontrol show node): the class of the reason Slurm started with
    decides. A reason that matches no class, or no reason at all, is skipped, as an admin or a
    health check drained the node on purpose, unless Slurm flags the node NOT_RESPONDING or FAIL:
    then it needs a human (class C(unclassified_failing)). Action V(human) reports the node as
    needing a human (RV(_value.needs_human))."
  - "A reason to which slurmctld appended C( : reboot timed out) or C( : ResumeTimeout reached)
    needs a human (class C(resume_timeout)); the node is no longer a reboot in flight."
  - A node that does not respond (NOT_RESPONDING), or whose class says V(reboot), is to be
    rebooted (C(scontrol reboot ASAP nextstate=resume)); a node of a V(resume) class is to
    be resumed.
  - "Healing budget: with O(events) given, a node healed O(heal_budget) times within
    O(heal_window) seconds is not healed again but gets the reason
    C(clusterops: flapping: healed N times in W, last: <reason>) (RV(_value.flapping_groups))."
  - "Circuit breaker: when more nodes in scope broke within O(circuit.window) seconds than
    C(min(max_nodes, max(min_nodes, floor(considered * max_percent / 100)))), nothing is
    planned and RV(_value.circuit.open) is true."
  - At most C(min(max_nodes, max(1, floor(total * max_percent / 100)))) nodes are rebooting
    or acted on at once, oldest reason first; the rest are returned as RV(_value.overflow).
options:
  _input:
    description: Every node of the cluster (C(slurm_node_info) RV(clusterops.slurm.slurm_node_info#module:nodes)).
    type: list
    elements: dict
    required: true
  classes:
    default:
      - name: kill_task_failed
        match: '^Kill task failed( \(JobId=[0-9]+[^()]*\))?$'
        action: reboot
      - name: not_responding
        match: '^Not responding$'
        action: resume
      - name: unexpected_reboot
        match: '^Node unexpectedly rebooted( boot_time=[0-9]+ last response=[0-9]+)?$'
        action: resume
      - name: batch_complete_failure
        match: '^batch job complete failure$'
        action: resume
      - name: prolog_error
        match: '^Prolog error$'
        action: resume
      - name: epilog_error
        match: '^Epilog error$'
        action: resume
      - name: gpu_xid_reset
        match: '^clusterops-health: gpu_xid: Xid (48|63|74|79|95|119|120|140|154)\b'
        action: reboot
      - name: gpu_nvidia_smi_reset
        match: '^clusterops-health: gpu_(count|state): (expected [0-9]+, )?nvidia-smi failed rc=(6|9|10|11|15|16|18|255)\b'
        action: reboot
      - name: gpu_nvidia_smi_other
        match: '^clusterops-health: gpu_(count|state): (expected [0-9]+, )?nvidia-smi failed rc='
        action: human
      - name: gpu_dcgm_reset
        match: "^clusterops-health: dcgm_health: (DCGM_FR_(VOLATILE_DBE_DETECTED|UNCONTAINED_ERROR|FALLEN_OFF_BUS|\
          PENDING_PAGE_RETIREMENTS|GPU_RECOVERY_RESET|\
          GPU_RECOVERY_REBOOT|GPU_RECOVERY_DRAIN_RESET|GPU_RECOVERY_DRAIN_P2P) |\
          DCGM_FR_XID_ERROR [^:]*: Detected XID (48|63|74|79|95|119|120|140|154)\\b)"
        action: reboot
      - name: gpu_count
        match: '^clusterops-health: gpu_count: '
        action: reboot
      - name: gpu_state
        match: '^clusterops-health: gpu_state: '
        action: reboot
      - name: mount
        match: '^clusterops-health: mount: '
        action: reboot
      - name: health_other
        match: '^clusterops-health: '
        action: human
      - name: clusterops_hold
        match: '^clusterops: (flapping|suspect): '
        action: human
  events:
    description:
      - Node events of Slurm's accounting covering at least O(heal_window)
        (M(clusterops.slurm.slurm_node_event_info) RV(clusterops.slurm.slurm_node_event_info#module:events)).
      - Omitted, the healing budget is not checked.
    type: list
    elements: dict
seealso:
  - module: clusterops.slurm.slurm_node_info
  - module: clusterops.slurm.slurm_node_event_info
  - module: clusterops.slurm.slurm_node
"""

EXAMPLES = r"""
- name: Read every node once
  clusterops.slurm.slurm_node_info:
  register: cluster

- name: Read a day of node events (healing budget)
  clusterops.slurm.slurm_node_event_info:
    window: 86400
  register: history

- name: Plan, for the gpu partition only
  ansible.builtin.set_fact:
    plan: >-
      {{ cluster.nodes | clusterops.slurm.remediation_plan(events=history.events,
           scope="[?contains(partitions, 'gpu')]", max_nodes=8) }}

- name: Reboot what needs a reboot, in one scontrol call
  clusterops.slurm.slurm_node:
    nodes: "{{ plan.reboot }}"
    state: reboot
    reason: "clusterops.slurm remediation: reboot"
  when: plan.reboot | length > 0
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    reboot:
      description: Names of the nodes to reboot now.
      type: list
      elements: str
    resume:
      description: Names of the nodes to resume now.
      type: list
      elements: str
    reboot_hostlist:
      description: RV(_value.reboot) as a hostlist expression.
      type: str
    resume_hostlist:
      description: RV(_value.resume) as a hostlist expression.
      type: str
    actions:
      description:
        - The nodes acted on, grouped - one C({action, class, state, reason, count, hostlist}) per distinct action, class, state and reason, largest first
          (the plan's size does not grow with the cluster).
      sample: [{"action": "reboot", "class": "kill_task_failed", "state": "IDLE+DRAIN", "reason": "Kill task failed", "count": 2, "hostlist": "n[3-4]"}]
      type: list
      elements: dict
    flapping:
      description: Nodes whose healing budget is spent, grouped - C({state, reason, heals, new_reason, count, hostlist}).
      type: list
      elements: dict
    flapping_groups:
      description: The flapping nodes by new reason, C({reason, nodes, hostlist}), one drain call each; empty while the circuit is open.
      type: list
      elements: dict
    human:
      description:
        - Nodes whose class says a human must act, grouped - C({class, state, reason, count, hostlist}).
        - C(class) is one of O(classes), or C(resume_timeout) (a reboot through Slurm timed out) or
          C(unclassified_failing) (no class matches, and Slurm flags the node NOT_RESPONDING or FAIL).
      type: list
      elements: dict
    skipped:
      description:
        - The broken nodes left alone on purpose, summarised (their number grows with the cluster) -
          one C({why, reason, count, hostlist}) per distinct why and reason, largest first.
      type: list
      elements: dict
      sample: [{"why": "reason matches no class (drained on purpose?)", "reason": "RMA 4711", "count": 2, "hostlist": "n[7,9]"}]
    overflow:
      description: Nodes that would be acted on but exceed the blast-radius limit, grouped as RV(_value.actions).
      type: list
      elements: dict
    held:
      description: Nodes that would be acted on but the circuit breaker is open, grouped as RV(_value.actions).
      type: list
      elements: dict
    in_flight:
      description:
        - Nodes rebooting now (a reboot requested or issued, or still broken with O(reboot_reason)); they count against
          the blast radius. C({count, hostlist}).
      type: dict
      sample: {"count": 2, "hostlist": "n[5-6]"}
    circuit:
      description: The circuit breaker.
      type: dict
      contains:
        open:
          description: True when more nodes broke within the window than the threshold; then nothing is planned.
          type: bool
        broken:
          description: Nodes in scope that broke within the window (this collection's holds not counted).
          type: int
        threshold:
          description: The most nodes that may break within the window.
          type: int
        window:
          description: Seconds; V(0) when the breaker is off.
          type: int
        groups:
          description: The nodes that broke within the window by class, C({class, count, hostlist, reason}), largest first.
          type: list
          elements: dict
    needs_human:
      description:
        - What needs a human, C({name, count, why, next}); C(name) is a hostlist (one item per human class and reason,
          per flapping reason, and one for an open circuit breaker, whose C(count) is the nodes it holds); C(next) is
          what a person does next (a line that begins with C(next) and ends with the runbook's section).
      type: list
      elements: dict
    total:
      description: Nodes in the cluster.
      type: int
    considered:
      description: Nodes in scope.
      type: int
    limit:
      description: Most nodes rebooting or acted on at once.
      type: int
    room:
      description:
        - What this run leaves of RV(_value.limit) (limit less the nodes in flight and acted on; V(0) while the circuit
          is open); the training part's suspect drains take at most this many.
      type: int
    counts:
      description: Nodes (not groups) C(acted), C(overflow), C(held), C(human), C(flapping), C(in_flight), C(skipped), C(needs_human).
      type: dict
    report:
      description: One line of text per group of nodes acted on, over the limit, held, flapping, needing a human or skipped.
      type: list
      elements: str
      sample: ["n2: reboot (1 node, DOWN+NOT_RESPONDING, class not_responding, reason 'Not responding')"]
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native
from ansible.utils.display import Display

from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.policy import plan_from_options
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import (
    DEFAULT_HEAL_BUDGET,
    DEFAULT_HEAL_SINCE,
    DEFAULT_HEAL_WINDOW,
    DEFAULT_MAX_NODES,
    DEFAULT_MAX_PERCENT,
    DEFAULT_REBOOT_REASON,
    DEFAULT_SCOPE,
    PolicySettings,
    RemediationError,
)

display = Display()


def _deprecate(message):
    display.deprecated("remediation_plan: " + message, version="2.0.0", collection_name="clusterops.slurm")


def remediation_plan(nodes, classes=None, scope=DEFAULT_SCOPE, max_nodes=DEFAULT_MAX_NODES,
                     max_percent=DEFAULT_MAX_PERCENT, events=None,
                     heal_budget=DEFAULT_HEAL_BUDGET, heal_window=DEFAULT_HEAL_WINDOW, circuit=None,
                     reboot_reason=DEFAULT_REBOOT_REASON, allow_reasons=None, reboot_reasons=None,
                     heal_since=DEFAULT_HEAL_SINCE):
    """Plan one remediation run over ``nodes`` (see DOCUMENTATION)."""
    if not isinstance(nodes, list) or not all(isinstance(n, dict) and "name" in n for n in nodes):
        raise AnsibleFilterError("remediation_plan: input must be the node list of slurm_node_info")
    if events is not None and not isinstance(events, list):
        raise AnsibleFilterError("remediation_plan: events must be the event list of slurm_node_event_info")
    try:
        settings = PolicySettings(
            classes=classes, allow_reasons=allow_reasons, reboot_reasons=reboot_reasons, scope=scope,
            max_nodes=max_nodes, max_percent=max_percent, heal_budget=heal_budget, heal_window=heal_window,
            heal_since=heal_since, circuit=circuit, reboot_reason=reboot_reason)
        return plan_from_options([dict(n) for n in nodes], settings, events=events, on_allowlist=_deprecate)
    except (RemediationError, KeyError, TypeError) as exc:
        raise AnsibleFilterError("remediation_plan: %s" % to_native(exc))


class FilterModule(object):
    """Node remediation planning filter."""

    def filters(self):
        return {"remediation_plan": remediation_plan}

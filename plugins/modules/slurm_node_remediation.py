#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: slurm_node_remediation
short_description: Heal broken Slurm nodes in one task - read, plan and act where the node list is
version_added: 0.2.0
description:
  - One remediation run, as the P(clusterops.slurm.remediation_plan#filter) filter plans it and
    M(clusterops.slurm.slurm_node) acts, in one task on the Slurm host, so that the list of every
    node never travels through Ansible (at 16,384 nodes that list cost more than Slurm's own read).
  - Reads every node once (as M(clusterops.slurm.slurm_node_info)) and, with a healing budget,
    the node events of O(heal_window) from Slurm's accounting (as
    M(clusterops.slurm.slurm_node_event_info)) of the nodes whose reason a healing class matches
    (none read when there is no such node); plans (the policy is the filter's, in the
    collection's C(docs/node-remediation.md)); then runs one C(scontrol reboot ASAP
    nextstate=resume) for all nodes to reboot, one C(scontrol update State=RESUME) for all nodes
    to resume and one drain per distinct flapping reason, from the state it read.
  - Returns the plan, not the nodes; its C(skipped) nodes are summarised by why and reason.
  - A read that may be partial (controller or slurmdbd unreachable, an answer with errors or no
    nodes) fails the task before anything acts. A change Slurm refuses does not fail it - the
    nodes are in RV(failed_nodes) and Slurm's words in RV(errors) - so that the other changes
    and the report still happen; the role C(clusterops.slurm.remediate_nodes) fails afterwards.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
requirements:
  - C(jmespath) (Debian's C(python3-jmespath)) on the host the module runs on, only when O(scope) is set.
options:
  journal:
    description:
      - The heal journal of this cluster on the target, a JSON file where each run records the
        nodes it rebooted or resumed, so that the next run counts those heals against
        O(heal_budget) while Slurm's accounting does not show them yet (slurmctld hands node events
        to slurmdbd seconds late, and without the journal runs seconds apart can heal a node once more
        than the budget allows). A heal leaves the journal once a node event matches it (same node,
        within 30 s) or when it is older than O(heal_window). One file per cluster; its folder is
        made (mode 0700) when missing.
      - Also the one durable record of the circuit breaker's trips - a run that finds the breaker
        open opens a trip (when, the most nodes broken, the threshold, their classes), the first run
        that finds it closed again ends it; M(clusterops.slurm.cluster_goodput_info) reads them.
        The newest 500 trips are kept.
      - And the reboots it requested whose node it has not seen back in service yet (RV(rebooting)); the
        run that finds such a node in service reports it healed (RV(returned)). One requested before
        O(heal_window) or O(heal_since) is forgotten, like a heal.
      - Also the lock of the cluster's node remediation (C(<journal>.lock)) - while one run holds
        it, another waits up to O(lock_timeout) seconds and then fails, having read and changed
        nothing. Check mode reads the journal but neither takes the lock nor writes the journal.
      - A journal that exists but cannot be read fails the task (a lost heal would let a node be
        healed past its budget). Not set - no journal and no lock, heals are read from accounting alone.
    type: path
  lock_timeout:
    description: Seconds to wait for another run of the cluster that holds the journal's lock.
    type: int
    default: 60
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.attributes
  - clusterops.slurm.attributes.IDEMPOTENT
  - clusterops.slurm.remediation_policy
  - clusterops.slurm.slurm_cli
attributes:
  check_mode:
    support: full
    details: Plans, reports the exact commands it would run in RV(changes) and changes nothing.
  diff_mode:
    support: full
    details: Before and after (state and reason) of every node that changes.
  idempotent:
    details:
      - A second run finds the nodes it rebooted in flight, those it resumed in service and those
        it drained as flapping held for a human.
seealso:
  - plugin: clusterops.slurm.remediation_plan
    plugin_type: filter
  - module: clusterops.slurm.slurm_node
  - module: clusterops.slurm.slurm_node_info
  - module: clusterops.slurm.slurm_node_event_info
'''

EXAMPLES = r'''
- name: Heal the gpu partition, at most 8 nodes at once
  clusterops.slurm.slurm_node_remediation:
    scope: "[?contains(partitions, 'gpu')]"
    max_nodes: 8
  register: remediation

- name: What was done, and what needs a human
  ansible.builtin.debug:
    msg: "{{ remediation.plan.report }}"

- name: Plan only
  clusterops.slurm.slurm_node_remediation:
  check_mode: true
  register: plan
'''

RETURN = r'''
plan:
  description:
    - The plan, as the P(clusterops.slurm.remediation_plan#filter) filter returns it
      (RV(clusterops.slurm.remediation_plan#filter:_value)) - C(reboot), C(resume), C(actions),
      C(flapping), C(flapping_groups), C(human), C(skipped), C(overflow), C(held), C(in_flight),
      C(circuit), C(needs_human), C(total), C(considered), C(limit), C(room), C(counts), C(report);
      every list of nodes grouped C({..., count, hostlist}), so the plan does not grow with the cluster.
  returned: success
  type: dict
rebooted:
  description: Nodes it asked Slurm to reboot (in check mode, would).
  returned: success
  type: list
  elements: str
resumed:
  description: Nodes it returned to service (in check mode, would).
  returned: success
  type: list
  elements: str
returned:
  description:
    - Nodes back in service whose reboot an earlier run requested (the heal journal's reboots waited for, see
      O(journal)) - healed, said on the run that sees it. Always empty without a journal.
  returned: success
  type: list
  elements: str
rebooting:
  description:
    - Nodes whose reboot remediation requested (this run's, unless in check mode, and earlier runs') and that are
      not back in service yet - "reboot requested" until a later run finds them back (then in RV(returned)). Kept
      in the heal journal; without one, only this run's.
  returned: success
  type: list
  elements: str
drained:
  description: >-
    Flapping nodes it drained with their C(clusterops: flapping) reason (in check mode, would).
  returned: success
  type: list
  elements: str
failed_nodes:
  description: Nodes Slurm refused to change, each with Slurm's message.
  returned: success
  type: dict
  sample: {"n1": "slurm_update error: Invalid node state specified"}
errors:
  description: >-
    One message per refused call, C(<what>: <Slurm's words>).
  returned: success
  type: list
  elements: str
errors_cause:
  description: >-
    Why Slurm refused the changes in RV(errors): C(permission) when its words say the account may not make
    them (not an operator, not SlurmUser or root), else C(slurm_refused); null when nothing was refused.
  returned: success
  type: str
  sample: slurm_refused
changes:
  description: Every scontrol call it ran (or would run in check mode), as M(clusterops.slurm.slurm_node) returns them.
  returned: success
  type: list
  elements: dict
commands:
  description: Every Slurm command this task ran (reads and changes), each as an argument list.
  returned: always
  type: list
  elements: list
failed_cause:
  description:
    - Why the task failed, one of C(configuration) (a setting or the host's set-up), C(permission) (the account
      may not do what it needs), C(accounting) (slurmdbd unreachable or no accounting storage), C(slurm_unreadable)
      (the controller did not answer, in time or in full), C(slurm_refused) (Slurm refused a change).
  returned: failure
  type: str
  sample: permission
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.runner import remediate
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import (
    DEFAULT_CIRCUIT,
    DEFAULT_HEAL_BUDGET,
    DEFAULT_HEAL_SINCE,
    DEFAULT_HEAL_WINDOW,
    DEFAULT_MAX_NODES,
    DEFAULT_MAX_PERCENT,
    DEFAULT_REBOOT_REASON,
    DEFAULT_SCOPE,
    RemediationError,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SLURM_COMMAND_OPTIONS, run_module


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            classes=dict(type="list", elements="dict"),
            allow_reasons=dict(type="list", elements="str"),
            reboot_reasons=dict(type="list", elements="str"),
            heal_budget=dict(type="int", default=DEFAULT_HEAL_BUDGET),
            heal_window=dict(type="int", default=DEFAULT_HEAL_WINDOW),
            heal_since=dict(type="int", default=DEFAULT_HEAL_SINCE),
            circuit=dict(type="dict", options=dict(
                window=dict(type="int", default=DEFAULT_CIRCUIT["window"]),
                max_nodes=dict(type="int", default=DEFAULT_CIRCUIT["max_nodes"]),
                max_percent=dict(type="float", default=DEFAULT_CIRCUIT["max_percent"]),
                min_nodes=dict(type="int", default=DEFAULT_CIRCUIT["min_nodes"]),
            )),
            reboot_reason=dict(type="str", default=DEFAULT_REBOOT_REASON),
            scope=dict(type="str", default=DEFAULT_SCOPE),
            max_nodes=dict(type="int", default=DEFAULT_MAX_NODES),
            max_percent=dict(type="float", default=DEFAULT_MAX_PERCENT),
            journal=dict(type="path"),
            lock_timeout=dict(type="int", default=60),
        ),
        mutually_exclusive=[("classes", "allow_reasons"), ("classes", "reboot_reasons")],
    ).merge(SLURM_COMMAND_OPTIONS).module_kwargs())
    run_module(module, remediate, errors=(RemediationError,))


if __name__ == "__main__":
    main()

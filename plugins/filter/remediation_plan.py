# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: remediation_plan
short_description: Decide which broken Slurm nodes to reboot, resume or leave alone
version_added: 0.1.0
author:
  - clusterops.slurm maintainers (!UNKNOWN)
description:
  - Takes every node as returned by M(clusterops.slurm.slurm_node_info) and plans one
    remediation run. It changes nothing; M(clusterops.slurm.slurm_node) acts on the plan.
  - Only nodes that are drained, DOWN or FAIL are looked at. A node with a reboot already
    requested or issued, a node in power saving and a node in a maintenance reservation are
    skipped. A node whose reason matches none of O(allow_reasons), or that has no reason, is
    skipped too, as an admin or a health check drained it on purpose.
  - A node that does not respond (NOT_RESPONDING), or whose reason matches O(reboot_reasons),
    is to be rebooted (C(scontrol reboot ASAP nextstate=resume)); any other allowed node
    only needs to return to service and is to be resumed.
  - At most C(min(max_nodes, max(1, floor(total * max_percent / 100)))) nodes are acted on,
    oldest reason first; the rest are returned as RV(_value.overflow).
options:
  _input:
    description: Every node of the cluster (C(slurm_node_info) RV(clusterops.slurm.slurm_node_info#module:nodes)).
    type: list
    elements: dict
    required: true
  allow_reasons:
    description: Regular expressions (Python C(re.search), case-insensitive) of reasons safe to fix.
    type: list
    elements: str
    default:
      - '^Kill task failed( \(JobId=[0-9]+[^()]*\))?$'
      - "^Not responding$"
      - '^Node unexpectedly rebooted( boot_time=[0-9]+ last response=[0-9]+)?$'
      - "^batch job complete failure$"
      - "^Prolog error$"
      - "^Epilog error$"
  reboot_reasons:
    description: Regular expressions of reasons that need a reboot, not only a resume.
    type: list
    elements: str
    default: ['^Kill task failed( \(JobId=[0-9]+[^()]*\))?$']
  scope:
    description:
      - A JMESPath expression applied to the node list that selects the nodes to consider
        at all, e.g. V([?contains(partitions, 'gpu')]) or V([?starts_with(name, 'rack04')]).
      - It must return a list of nodes or of node names. Empty means every node.
      - Needs the C(jmespath) Python library on the controller.
    type: str
    default: ""
  max_nodes:
    description: Most nodes acted on in one run. V(0) acts on none.
    type: int
    default: 16
  max_percent:
    description: Most nodes acted on in one run, as percent of all nodes of the cluster.
    type: float
    default: 10
seealso:
  - module: clusterops.slurm.slurm_node_info
  - module: clusterops.slurm.slurm_node
"""

EXAMPLES = r"""
- name: Read every node once
  clusterops.slurm.slurm_node_info:
  register: cluster

- name: Plan, for the gpu partition only
  ansible.builtin.set_fact:
    plan: >-
      {{ cluster.nodes | clusterops.slurm.remediation_plan(scope="[?contains(partitions, 'gpu')]", max_nodes=8) }}

- name: Reboot what needs a reboot, in one scontrol call
  clusterops.slurm.slurm_node:
    nodes: "{{ plan.reboot }}"
    state: reboot
    reason: "clusterops.slurm remediation"
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
      description: One C({name, action, state, reason}) per node acted on.
      type: list
      elements: dict
    skipped:
      description: One C({name, state, reason, why}) per broken node left alone on purpose.
      type: list
      elements: dict
    overflow:
      description: Nodes that would be acted on but exceed the blast-radius limit (C({name, action, state, reason})).
      type: list
      elements: dict
    total:
      description: Nodes in the cluster.
      type: int
    considered:
      description: Nodes in scope.
      type: int
    limit:
      description: Most nodes this run may act on.
      type: int
    report:
      description: One line of text per node acted on, over the limit, or skipped.
      type: list
      elements: str
      sample: ["n2: reboot (DOWN+NOT_RESPONDING, reason 'Not responding')"]
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.clusterops.slurm.plugins.module_utils._remediation import (
    DEFAULT_ALLOW_REASONS,
    DEFAULT_REBOOT_REASONS,
    RemediationError,
    plan_remediation,
)

try:
    import jmespath
    HAS_JMESPATH = True
except ImportError:  # pragma: no cover
    HAS_JMESPATH = False


def _scope_names(nodes, expression):
    if not HAS_JMESPATH:
        raise AnsibleFilterError("remediation_plan: scope needs the jmespath Python library on the controller")
    try:
        selected = jmespath.search(expression, nodes)
    except jmespath.exceptions.JMESPathError as exc:
        raise AnsibleFilterError("remediation_plan: scope %r is not a valid JMESPath expression: %s"
                                 % (expression, to_native(exc)))
    if not isinstance(selected, list):
        raise AnsibleFilterError("remediation_plan: scope %r must give a list of nodes or names, not %s"
                                 % (expression, "null" if selected is None else type(selected).__name__))
    names = []
    for item in selected:
        if isinstance(item, dict) and "name" in item:
            names.append(item["name"])
        elif isinstance(item, str):
            names.append(item)
        else:
            raise AnsibleFilterError("remediation_plan: scope %r gave %r, which is neither a node nor a name"
                                     % (expression, item))
    return names


def remediation_plan(nodes, allow_reasons=None, reboot_reasons=None, scope="", max_nodes=16,
                     max_percent=10):
    """Plan one remediation run over ``nodes`` (see DOCUMENTATION)."""
    if not isinstance(nodes, list) or not all(isinstance(n, dict) and "name" in n for n in nodes):
        raise AnsibleFilterError("remediation_plan: input must be the node list of slurm_node_info")
    in_scope = _scope_names(nodes, scope) if scope else None
    try:
        return plan_remediation(
            [dict(n) for n in nodes],
            allow_reasons=DEFAULT_ALLOW_REASONS if allow_reasons is None else allow_reasons,
            reboot_reasons=DEFAULT_REBOOT_REASONS if reboot_reasons is None else reboot_reasons,
            in_scope=in_scope, max_nodes=max_nodes, max_percent=max_percent)
    except (RemediationError, KeyError) as exc:
        raise AnsibleFilterError("remediation_plan: %s" % to_native(exc))


class FilterModule(object):
    """Node remediation planning filter."""

    def filters(self):
        return {"remediation_plan": remediation_plan}

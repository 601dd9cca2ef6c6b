# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):

    # The node remediation policy's settings (module_utils/_node_remediation/settings.py and
    # classes.py, where every default lives), shared by the remediation_plan filter and the slurm_node_remediation module.
    # tests/unit/roles/test_remediate_nodes_defaults.py keeps the defaults equal to the code's.
    DOCUMENTATION = r'''
options:
  classes:
    description:
      - Reason classes, in order, first match wins. C(name) names the class in reports;
        C(match) is a Python regular expression (C(re.search), case-insensitive) of the node's
        reason; C(action) is V(reboot), V(resume) or V(human).
      - Omitted, the collection's default classes; they and their sources are in the collection's
        C(docs/node-remediation.md).
    type: list
    elements: dict
  allow_reasons:
    description:
      - Deprecated, use O(classes). Regular expressions of reasons safe to fix; when given,
        each becomes a class (V(reboot) when the same pattern is in O(reboot_reasons), else
        V(resume)) and O(classes) is not used.
    type: list
    elements: str
  reboot_reasons:
    description: Deprecated, use O(classes). See O(allow_reasons).
    type: list
    elements: str
  heal_budget:
    description:
      - Heals within O(heal_window) after which a node is left for a human. V(0) turns the budget
        off (and M(clusterops.slurm.slurm_node_remediation) does not read Slurm's accounting).
    type: int
    default: 3
  heal_window:
    description:
      - Seconds back from now in which heals count (and in which
        M(clusterops.slurm.slurm_node_remediation) reads the node events).
    type: int
    default: 86400
  heal_since:
    description:
      - Unix seconds; heals before this time do not count either, e.g. the end of a maintenance
        that removed a cause shared by many nodes (and older events are not read). V(0) sets no
        such limit.
      - A node's own count also starts afresh when it leaves a reason of a V(human) class (a person
        repaired it and returned it to service).
    type: int
    default: 0
  circuit:
    description: Circuit breaker settings.
    type: dict
    suboptions:
      window:
        description: Seconds back from now in which broken nodes count. V(0) turns the breaker off.
        type: int
        default: 1800
      max_nodes:
        description: Upper bound of the threshold.
        type: int
        default: 32
      max_percent:
        description: Threshold as percent of the nodes in scope.
        type: float
        default: 10
      min_nodes:
        description: Lower bound of the threshold (a small cluster tolerates this many at once).
        type: int
        default: 3
  reboot_reason:
    description:
      - The reason remediation gives the nodes it reboots; a node still broken with it is a reboot
        in flight.
    type: str
    default: "clusterops.slurm remediation: reboot"
  scope:
    description:
      - A JMESPath expression over the node list (the fields of
        M(clusterops.slurm.slurm_node_info)'s RV(clusterops.slurm.slurm_node_info#module:nodes))
        that selects the nodes to consider at all, e.g. V([?contains(partitions, 'gpu')]) or
        V([?starts_with(name, 'rack04')]).
      - It must return a list of nodes or of node names. Empty means every node.
      - Needs the C(jmespath) Python library where the plan is made (the controller for the
        filter, the target for the module).
    type: str
    default: ""
  max_nodes:
    description: Most nodes rebooting or acted on at once. V(0) acts on none.
    type: int
    default: 16
  max_percent:
    description: Most nodes rebooting or acted on at once, as percent of all nodes of the cluster.
    type: float
    default: 10
'''

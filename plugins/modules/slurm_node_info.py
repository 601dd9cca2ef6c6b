#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: slurm_node_info
short_description: Read the state of Slurm nodes
version_added: 0.1.0
description:
  - Reads every node of the cluster with one Slurm call and returns the nodes that match
    O(nodes) and O(states). The release of the client commands (C(sinfo --version), once per
    task, local) picks the call - C(scontrol show nodes --json) from Slurm 23.02 on (one record
    per node; C(sinfo --json) of those releases groups nodes with one reason per group),
    C(sinfo --json) on 21.08 and 22.05, C(sinfo -N) text before.
  - A read that may be partial fails the task and is never returned as an answer - a JSON
    C(errors) list (22.05's C(sinfo --json) exits 0 with one when slurmctld does not answer),
    rc 0 with an error on stderr, a truncated document, no node at all.
  - Bytes that are not UTF-8 in a reason (typed in Latin-1) are read as U+FFFD.
  - A reason on a node in service (neither drained, down, failing, rebooting nor powered down)
    is left over from before (Slurm 24.11 keeps it after a resume) and returned empty.
  - Each node's state is split into a base state and flags, whatever spelling Slurm used,
    so that a node is drained whenever its C(DRAIN) flag is set, whatever its base state.
  - A node that C(sinfo) lists once per partition is returned once, with all its partitions.
    Reasons are kept whole.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.attributes
  - clusterops.slurm.attributes.IDEMPOTENT
  - clusterops.slurm.attributes.INFO_MODULE
  - clusterops.slurm.slurm_cli
options:
  nodes:
    description:
      - Node names or Slurm hostlist expressions (V(n[1-4]), V(gpu[001-004],cpu01)); one string
        may hold a whole hostlist with commas (V(gpu[001,005])).
      - When empty, every node is returned.
      - Names that the cluster does not know are returned in RV(missing), not as an error.
    type: list
    elements: str
    default: []
  states:
    description:
      - Keep only nodes whose base state or flags include any of these names, compared as
        whole names, never by prefix.
      - Base states (V(IDLE), V(DOWN), V(MIXED), V(ALLOCATED), ...), flags (V(DRAIN),
        V(NOT_RESPONDING), V(FAIL), V(REBOOT_REQUESTED), ...) or sinfo words (V(drained)).
    type: list
    elements: str
    default: []
  source:
    description:
      - Where to read the states from. V(json) is the release's JSON (C(scontrol show nodes --json)
        from 23.02, C(sinfo --json) on 21.08/22.05) and fails on a release without it.
        V(text) is C(sinfo -N -h -o), without boot and slurmd start times. V(auto) is JSON where
        the release has it, else text.
    type: str
    choices: [auto, json, text]
    default: auto
seealso:
  - module: clusterops.slurm.slurm_node
  - plugin: clusterops.slurm.slurm_state
    plugin_type: filter
  - name: sinfo(1)
    description: Slurm's sinfo manual, with the node state codes and suffix symbols.
    link: https://slurm.schedmd.com/sinfo.html
'''

EXAMPLES = r'''
- name: Read every node
  clusterops.slurm.slurm_node_info:
  register: cluster

- name: Nodes of one rack that are drained or down
  clusterops.slurm.slurm_node_info:
    nodes: "rack04-[01-40]"
    states: [DRAIN, DOWN]
  register: broken

- name: Show why each one is out
  ansible.builtin.debug:
    msg: "{{ item.name }}: {{ item.state_raw }} ({{ item.reason }})"
  loop: "{{ broken.nodes }}"

- name: Point at a cluster's own slurm.conf for every clusterops.slurm module
  module_defaults:
    group/clusterops.slurm.slurm:
      slurm_conf: /etc/slurm-prod/slurm.conf
  block:
    - name: Read nodes
      clusterops.slurm.slurm_node_info:
      register: prod
'''

RETURN = r'''
nodes:
  description: The matching nodes, in Slurm's order.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: Node name (JSON C(name), sinfo C(%N)).
      type: str
      sample: n2
    state:
      description: >-
        Base state (V(IDLE), V(DOWN), V(MIXED), V(ALLOCATED), V(UNKNOWN), V(FUTURE)), or
        V(null) when the text source's word does not say it (sinfo prints C(drained) for
        both IDLE+DRAIN and DOWN+DRAIN).
      type: str
      sample: DOWN
    flags:
      description: State flags as C(scontrol) names them, sorted (JSON C(state)/C(state_flags), sinfo suffix symbols).
      type: list
      elements: str
      sample: [DRAIN, NOT_RESPONDING]
    state_raw:
      description: The state as Slurm wrote it.
      type: str
      sample: DOWN+DRAIN+NOT_RESPONDING
    drained:
      description: True when the DRAIN flag is set.
      type: bool
    responding:
      description: False when the NOT_RESPONDING flag is set.
      type: bool
    reason:
      description: >-
        Why the node is down, drained, failing, rebooting or powered down, kept whole; empty when
        none, and on a node in service (JSON C(reason) or C(reason.description), sinfo C(%E)).
      type: str
      sample: "Kill task failed [root@2026-09-21T15:02:11]"
    reason_user:
      description: Who set the reason (JSON C(reason_set_by_user), sinfo C(%u)).
      type: str
      sample: root
    reason_time:
      description: When the reason was set, Unix seconds (JSON C(reason_changed_at), sinfo C(%H)).
      type: int
    partitions:
      description: Every partition of the node, default partition's C(*) removed.
      type: list
      elements: str
      sample: [debug, train]
    cpus:
      description: CPU count (JSON C(cpus), sinfo C(%c)).
      type: int
    real_memory:
      description: Configured memory in MiB (JSON C(real_memory), sinfo C(%m)).
      type: int
    gres:
      description: Generic resources, empty when none (JSON C(gres), sinfo C(%G)).
      type: str
      sample: "gpu:h100:8"
    features:
      description: Node features (JSON C(features), sinfo C(%f)).
      type: list
      elements: str
    boot_time:
      description: Boot time, Unix seconds; V(null) from the text source (JSON C(boot_time)).
      type: int
    slurmd_start_time:
      description: slurmd start time, Unix seconds; V(null) from the text source (JSON C(slurmd_start_time)).
      type: int
hostlist:
  description: The names of the matching nodes as one Slurm hostlist expression.
  returned: success
  type: str
  sample: "n[1-2,4]"
missing:
  description: Names asked for in O(nodes) that the cluster does not know.
  returned: success
  type: list
  elements: str
total:
  description: Number of nodes in the cluster, before any filter.
  returned: success
  type: int
source:
  description: Which output was read, V(json) or V(text).
  returned: success
  type: str
slurm_release:
  description: The release of the Slurm client commands, from C(sinfo --version).
  returned: success
  type: str
  sample: "24.11.5"
commands:
  description: The Slurm commands this task ran, each as an argument list.
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

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import (
    parse_state,
    state_matches,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import (
    node_state,
    read_nodes,
    release_text,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._options import (
    ArgumentSpec,
    hostlist_option,
    state_names_option,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SLURM_COMMAND_OPTIONS,
    run_module,
)


def read(module, cli):
    params = module.params
    hostlist_option(params, "nodes")   # before any call, by the newest release's rules
    states = state_names_option(params, "states", state_matches, parse_state("idle"))
    nodes, source = read_nodes(cli, params["source"])
    # now by the rules of the cluster's own release (e.g. 22.05 has no suffix after the brackets)
    wanted = hostlist_option(params, "nodes", cli.release())
    total = len(nodes)
    missing = []
    if wanted:
        by_name = dict((n["name"], n) for n in nodes)
        missing = [name for name in wanted if name not in by_name]
        seen = set()
        selected = []
        for name in wanted:
            if name in by_name and name not in seen:
                seen.add(name)
                selected.append(by_name[name])
        nodes = selected
    if states:
        nodes = [n for n in nodes if state_matches(node_state(n), states)]
    return dict(changed=False, nodes=nodes, hostlist=compress_hostlist([n["name"] for n in nodes]),
                missing=missing, total=total, source=source, slurm_release=release_text(cli.release()))


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            nodes=dict(type="list", elements="str", default=[]),
            states=dict(type="list", elements="str", default=[]),
            source=dict(type="str", choices=["auto", "json", "text"], default="auto"),
        ),
    ).merge(SLURM_COMMAND_OPTIONS).module_kwargs())
    run_module(module, read)


if __name__ == "__main__":
    main()

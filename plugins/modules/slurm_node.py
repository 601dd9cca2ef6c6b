#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: slurm_node
short_description: Drain, resume, down or reboot Slurm nodes, batched by hostlist
version_added: 0.1.0
description:
  - Sets Slurm nodes to a desired state with C(scontrol) - V(drain), V(resume) (return to
    service), V(down), V(reboot) (C(scontrol reboot), optionally C(ASAP), with a C(nextstate))
    and V(cancel_reboot) (cancel a reboot that is still pending).
  - Reads every node's state once first and changes only the nodes that need it; when all
    already are as asked, nothing runs and RV(ignore:changed) is false.
  - Sends one C(scontrol) call per distinct change, naming all its nodes in one hostlist,
    never one call per node.
  - Names that the cluster does not know fail the task before anything changes.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.attributes
  - clusterops.slurm.attributes.IDEMPOTENT
  - clusterops.slurm.slurm_cli
attributes:
  check_mode:
    support: full
    details: Reports the exact commands it would run in RV(changes) and changes nothing.
  diff_mode:
    support: full
    details: Before and after (state and reason) of every node that changes.
options:
  nodes:
    description:
      - Node names or Slurm hostlist expressions, e.g. V(n[1-4]) or V([gpu001, "cpu[01-02]"]).
      - One string may hold a whole hostlist with commas, V(gpu[001,005],cpu01).
    type: list
    elements: str
    required: true
  state:
    description:
      - V(drain) sets the DRAIN flag (running jobs finish, no new ones start).
      - V(resume) returns drained, down or failed nodes to service.
      - V(down) marks nodes DOWN (their jobs are killed by Slurm).
      - V(reboot) asks Slurm to reboot the nodes through its C(RebootProgram). Nodes with a
        reboot already requested or issued are left alone.
      - V(cancel_reboot) cancels a requested reboot that Slurm has not issued yet.
    type: str
    required: true
    choices: [drain, resume, down, reboot, cancel_reboot]
  reason:
    description:
      - Reason recorded with the state (C(Reason=) / C(reason=)). Required for V(drain) and V(down).
      - Kept whole; spaces, colons, V(=) and brackets are passed to Slurm as data. Double quotes
        are refused, because C(scontrol) drops them from the reason it stores, and so are control
        characters (a line feed, a tab, an escape), which would reach every reader of the reason.
    type: str
  reason_policy:
    description:
      - V(keep) leaves a reason already on a node as it is, so the reason an admin or a
        health check set is not overwritten; a node that already is as asked is not touched.
      - V(replace) sets O(reason) on every node, also on those already drained or down. A node
        already drained is drained again with the new reason (C(State=DRAIN Reason=...)), since Slurm
        records a drain as a node event in its accounting (C(sacctmgr show event)), a reason alone not.
    type: str
    choices: [keep, replace]
    default: keep
  asap:
    description:
      - With O(state=reboot), C(scontrol reboot ASAP) drains the nodes at once and reboots each
        one when its jobs have ended. Without it, Slurm reboots idle nodes at once and busy
        ones when they become idle, and may start new jobs on them meanwhile.
    type: bool
    default: true
  nextstate:
    description:
      - With O(state=reboot), the state after the reboot (C(nextstate=)).
    type: str
    choices: [resume, down]
    default: resume
seealso:
  - module: clusterops.slurm.slurm_node_info
  - name: scontrol(1)
    description: Slurm's scontrol manual (C(update NodeName=), C(reboot), C(cancel_reboot)).
    link: https://slurm.schedmd.com/scontrol.html
'''

EXAMPLES = r'''
- name: Drain a rack for maintenance
  clusterops.slurm.slurm_node:
    nodes: "rack04-[01-40]"
    state: drain
    reason: "maintenance CHG-1234"

- name: Reboot nodes once their jobs have ended, then return them to service
  clusterops.slurm.slurm_node:
    nodes: [gpu007, gpu012]
    state: reboot
    asap: true
    nextstate: resume
    reason: "clusterops: reboot after a stuck task"

- name: Return nodes to service
  clusterops.slurm.slurm_node:
    nodes: "gpu[001-004]"
    state: resume

- name: Take the reason over on nodes already drained by someone else
  clusterops.slurm.slurm_node:
    nodes: gpu[001-004]
    state: drain
    reason: "RMA ticket 42"
    reason_policy: replace
'''

RETURN = r'''
changes:
  description: One entry per scontrol call (made, or in check mode to be made).
  returned: success
  type: list
  elements: dict
  contains:
    action:
      description: V(drain), V(down), V(resume), V(reason) (reason only), V(reboot) or V(cancel_reboot).
      type: str
    nodes:
      description: The nodes of this call.
      type: list
      elements: str
    hostlist:
      description: The same nodes as the hostlist expression sent to scontrol.
      type: str
      sample: "n[2-3]"
    reason:
      description: The reason sent, if any.
      type: str
    command:
      description: The command as an argument list.
      type: list
      elements: str
      sample: [/usr/bin/scontrol, reboot, ASAP, nextstate=RESUME, "reason=Kill task failed", "n[2-3]"]
  sample:
    - action: reboot
      nodes: [n2, n3]
      hostlist: "n[2-3]"
      reason: "Kill task failed"
      command: [/usr/bin/scontrol, reboot, ASAP, nextstate=RESUME, "reason=Kill task failed", "n[2-3]"]
changed_nodes:
  description: The nodes changed (or that would change in check mode).
  returned: success
  type: list
  elements: str
unchanged_nodes:
  description: The nodes already as asked.
  returned: success
  type: list
  elements: str
failed_nodes:
  description: Nodes Slurm refused to change, each with Slurm's message.
  returned: failure
  type: dict
  sample: {"n1": "scontrol: Invalid node state specified"}
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

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterops.slurm.plugins.module_utils._causes import refused_cause
from ansible_collections.clusterops.slurm.plugins.module_utils._node_actions import (
    NODE_ACTIONS,
    apply_node_changes,
    plan_node_changes,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import read_nodes
from ansible_collections.clusterops.slurm.plugins.module_utils._options import (
    ArgumentSpec,
    hostlist_option,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SLURM_COMMAND_OPTIONS,
    run_module,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure

#: What a reason may not hold: C0 controls and DEL.
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def change(module, cli):
    params = module.params
    if not hostlist_option(params, "nodes"):   # before any call, by the newest release's rules
        raise TaskFailure("nodes: no node names given")
    if params["reason"] and '"' in params["reason"]:
        # scontrol strips double quotes from a reason, so what Slurm stores would never
        # equal what was asked for and every run would change it again.
        raise TaskFailure("reason: Slurm drops double quotes from reasons; use single quotes")
    if params["reason"] and CONTROL.search(params["reason"]):
        # a line feed or an escape would reach scontrol and every reader of the reason as is
        raise TaskFailure("reason: control characters (line feeds, tabs, escapes) are refused: %r" % params["reason"])
    nodes, dummy = read_nodes(cli)
    # now by the rules of the cluster's own release (e.g. 22.05 has no suffix after the brackets)
    names = hostlist_option(params, "nodes", cli.release())
    plan = plan_node_changes(nodes, names, params["state"], reason=params["reason"],
                             reason_policy=params["reason_policy"], asap=params["asap"],
                             nextstate=params["nextstate"])
    if plan["unknown"]:
        raise TaskFailure("unknown nodes, nothing was changed: %s" % ", ".join(plan["unknown"]),
                          unknown_nodes=plan["unknown"])

    applied = apply_node_changes(cli, plan, module.check_mode)
    failed = applied["failed_nodes"]
    result = dict(changed=bool(applied["changed_nodes"]), changes=applied["changes"],
                  changed_nodes=applied["changed_nodes"], unchanged_nodes=plan["unchanged"])
    if module._diff:
        result["diff"] = {"before": plan["before"], "after": plan["after"]}
    if failed:
        raise TaskFailure("Slurm did not change %d node(s): %s" % (
            len(failed), "; ".join("%s: %s" % (k, v) for k, v in sorted(failed.items()))),
            failed_nodes=failed, failed_cause=refused_cause(failed.values()), **result)
    return result


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            nodes=dict(type="list", elements="str", required=True),
            state=dict(type="str", required=True, choices=list(NODE_ACTIONS)),
            reason=dict(type="str"),
            reason_policy=dict(type="str", choices=["keep", "replace"], default="keep"),
            asap=dict(type="bool", default=True),
            nextstate=dict(type="str", choices=["resume", "down"], default="resume"),
        ),
        required_if=[
            ("state", "drain", ["reason"]),
            ("state", "down", ["reason"]),
        ],
    ).merge(SLURM_COMMAND_OPTIONS).module_kwargs())
    run_module(module, change)


if __name__ == "__main__":
    main()

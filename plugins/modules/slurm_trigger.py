#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: slurm_trigger
short_description: A permanent Slurm trigger of every node for a node event, running one program
version_added: 0.2.0
description:
  - Makes slurmctld hold exactly one permanent trigger (C(strigger --set --node --down|--drained|--fail
    --flags=PERM --program=PROGRAM)) for O(event) of every node that runs O(program), or, with
    O(state=absent), none of them. Triggers of other programs, of single nodes or of jobs are never touched.
  - Reads the triggers with one C(strigger --get); sets with one C(strigger --set); removes each of its own
    with C(strigger --clear --id=N) (a second copy of the same trigger too). A second run changes nothing.
  - Slurm runs a trigger's program as the user who set it, and only SlurmUser (or root when SlurmUser is root)
    may set triggers, so the module reads SlurmUser (C(scontrol show config)) and runs strigger as that user.
    It refuses a program SlurmUser could not run, or that anyone but root and SlurmUser could change (the file
    or a folder above it) - whoever can change it runs code as SlurmUser.
  - slurmctld checks triggers every 15 seconds (TriggerInterval is not configurable) and runs the program with
    the node list of the event's nodes as its argument; see the role P(clusterops.slurm.slurm_events#role),
    which installs the collection's trigger program and sets one trigger per event.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.slurm_cli
attributes:
  check_mode:
    support: full
    details: Reads the triggers and lists the strigger commands it would run (RV(commands_planned)).
  diff_mode:
    support: full
    details: The module's own triggers of O(event) before and after, one line each.
  platform:
    platforms: posix
options:
  event:
    description: The node event - V(node_down) (DOWN), V(node_drained) (DRAINED), V(node_fail) (FAILING).
    type: str
    required: true
    choices: [node_down, node_drained, node_fail]
  program:
    description:
      - The program slurmctld runs (absolute path, no white space), with the event's nodes as its one argument.
    type: path
    required: true
  state:
    description: V(present) - one permanent trigger; V(absent) - none of this event and program.
    type: str
    choices: [present, absent]
    default: present
seealso:
  - module: clusterops.slurm.slurm_node_info
'''

EXAMPLES = r'''
- name: Tell the event receiver when a node goes DOWN
  clusterops.slurm.slurm_trigger:
    event: node_down
    program: /opt/clusterops/libexec/clusterops-slurm-event-node_down
'''

RETURN = r'''
triggers:
  description: The module's own triggers of O(event) and O(program) after the task (in check mode, as they would be).
  returned: success
  type: list
  elements: dict
  sample: [{"id": 3, "res_type": "node", "res_id": "*", "type": "down", "offset": 0, "user": "slurm",
            "flags": ["PERM"], "program": "/opt/clusterops/libexec/clusterops-slurm-event-node_down"}]
slurm_user:
  description: SlurmUser, who strigger runs as and who runs the program.
  returned: success
  type: str
commands_planned:
  description: The strigger commands that change something (run, or in check mode not run).
  returned: success
  type: list
  elements: list
commands:
  description: Every Slurm command the task ran.
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

import grp
import os
import pwd

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterops.slurm.plugins.module_utils import _causes as causes
from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SLURM_COMMAND_OPTIONS, run_module
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import (
    TRIGGER_EVENTS,
    configuration,
    trigger_clear,
    trigger_set,
    triggers,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure
from ansible_collections.clusterops.slurm.plugins.module_utils._triggers import (
    TriggerAnswerError,
    parse_triggers,
    program_problem,
    slurm_user,
)


def own(listed, event, program):
    """The listed triggers that are this module's for ``event`` and ``program``: every node, permanent."""
    kind = TRIGGER_EVENTS[event].lstrip("-")
    return [t for t in listed if t["res_type"] == "node" and t["res_id"] == "*" and t["type"] == kind
            and t["program"] == program and "PERM" in t["flags"]]


def _line(trigger):
    return "%(id)s node * %(type)s PERM %(program)s\n" % trigger


def manage(module, cli):
    params = module.params
    event, program = params["event"], params["program"]
    user, uid = slurm_user(cli.run(*configuration(), what="read SlurmUser")[1])
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise TaskFailure("SlurmUser %s is no user on this host" % user)
    runner = cli if entry.pw_uid == os.geteuid() or entry.pw_uid == 0 and os.geteuid() == 0 else cli.as_user(user)
    before = own(parse_triggers(runner.run(*triggers(), what="read the triggers")[1]), event, program)
    planned = []
    if params["state"] == "present":
        if not before:
            groups = tuple(g.gr_gid for g in grp.getgrall() if user in g.gr_mem)
            problem = program_problem(program, entry.pw_uid, entry.pw_gid, groups)
            if problem and module.check_mode and not os.path.lexists(program):
                module.warn("%s does not exist yet (check mode: a task before this one installs it?)" % program)
            elif problem:
                raise TaskFailure("refusing the trigger program: %s" % problem, slurm_user=user)
            planned.append(trigger_set(event, program))
        else:
            planned.extend(trigger_clear(t["id"]) for t in before[1:])  # a duplicate of ours
    else:
        planned.extend(trigger_clear(t["id"]) for t in before)
    after = before
    if planned and not module.check_mode:
        for form in planned:
            runner.run(*form, what="change the triggers")
        after = own(parse_triggers(runner.run(*triggers(), what="read the triggers")[1]), event, program)
        if (params["state"] == "present") != bool(after) or len(after) > 1:
            raise TaskFailure("strigger did not leave one %s trigger for %s (%d now)" % (event, program, len(after)),
                              failed_cause=causes.SLURM_REFUSED)
    elif planned:
        kind = TRIGGER_EVENTS[event].lstrip("-")
        after = [] if params["state"] == "absent" else (before[:1] or [dict(
            id="new", res_type="node", res_id="*", type=kind, offset=0, user=user, flags=["PERM"], program=program)])
    result = dict(changed=bool(planned), triggers=after, slurm_user=user,
                  commands_planned=[cli.command(*form) for form in planned])
    if module._diff:
        result["diff"] = dict(before="".join(_line(t) for t in before), after="".join(_line(t) for t in after),
                              before_header="strigger --get (%s)" % event, after_header="strigger --get (%s)" % event)
    return result


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            event=dict(type="str", required=True, choices=sorted(TRIGGER_EVENTS)),
            program=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        ),
    ).merge(SLURM_COMMAND_OPTIONS).module_kwargs())
    run_module(module, manage, errors=(TriggerAnswerError,))


if __name__ == "__main__":
    main()

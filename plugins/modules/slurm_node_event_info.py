#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: slurm_node_event_info
short_description: Read the history of node failures that Slurm keeps in its accounting
version_added: 0.1.0
description:
  - Reads the node events that slurmctld recorded in the accounting database (slurmdbd) with
    B(one) C(sacctmgr show event event=node) call, and folds them into failure episodes per
    node. The history lives in Slurm, so it survives AWX containers and controller restarts.
  - An event is a span of time a node spent DOWN, DRAIN(ED), FAIL or rebooting with one reason.
    Slurm closes an event and opens a new one at the same second when the reason of such a
    node changes (e.g. C(scontrol reboot ... reason=R) on a node drained C(Kill task failed) -
    Slurm appends C(reboot issued), after a colon, to the reason R) or when a node that did not respond comes back
    unexpectedly rebooted. Such a chain, up to the node's return to service, is one episode.
  - The cost is one call whose answer grows with the events in the window, not with the size
    of the cluster.
  - An answer that may be incomplete fails the task with Slurm's words, never reads as "no
    history" - a non-zero exit status (slurmdbd down or unreachable), an error on stderr with
    exit status 0, a line that is not an event.
  - Times are read and written as UTC (C(TZ=UTC)) and returned as Unix seconds
    (C(SLURM_TIME_FORMAT=%s)), whatever the target's time zone.
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
      - Only these nodes, as names or hostlist expressions (V(n[1-4]), V(gpu[001-128])), passed to
        Slurm as they are. Empty means every node.
    type: list
    elements: str
    default: []
  window:
    description:
      - Events open at any time in the last O(window) seconds (until now). Mutually exclusive
        with O(start); one of the two is required.
    type: int
  start:
    description:
      - Events open at any time at or after this time. Unix seconds, V(YYYY-MM-DD),
        V(YYYY-MM-DDTHH:MM[:SS]) (local time of the target), V(now) or V(now-<n><unit>)
        (V(now-24hours), V(now-7days)). Mutually exclusive with O(window).
    type: str
  gap:
    description:
      - Two events of a node belong to one episode when the second starts at most this many
        seconds after the first ended (Slurm opens the next one at the same second when only
        the reason or state changes). A node back in service for longer starts a new episode.
    type: int
    default: 2
seealso:
  - module: clusterops.slurm.slurm_node_info
  - module: clusterops.slurm.slurm_node
  - name: sacctmgr(1)
    description: Slurm's sacctmgr manual (C(show event), its filters and format fields).
    link: https://slurm.schedmd.com/sacctmgr.html
'''

EXAMPLES = r'''
- name: The failures of the last 24 hours, every node
  clusterops.slurm.slurm_node_event_info:
    window: 86400
  register: history

- name: Nodes with three failure episodes or more in that window
  ansible.builtin.debug:
    msg: "{{ item.0 }}: {{ item.1 | length }} episodes, last: {{ (item.1 | last).reasons | first }}"
  loop: "{{ history.episodes | groupby('node') }}"
  when: item.1 | length >= 3

- name: Episodes of two nodes since a date
  clusterops.slurm.slurm_node_event_info:
    nodes: ["gpu[001-002]"]
    start: "2026-11-30T00:00:00"
  register: two

- name: Their reasons
  ansible.builtin.debug:
    msg: "{{ item.node }}: {{ item.reasons | join(' -> ') }} ({{ 'open' if item.end is none else 'closed' }})"
  loop: "{{ two.episodes }}"
'''

RETURN = r'''
events:
  description: The events, as Slurm keeps them, by node then start time.
  returned: success
  type: list
  elements: dict
  contains:
    node:
      description: Node name (C(NodeName)).
      type: str
      sample: n2
    start:
      description: When the event began (C(TimeStart)), Unix seconds.
      type: int
      sample: 1796075206
    end:
      description: When it ended (C(TimeEnd)), Unix seconds; V(null) while it is open (C(Unknown)).
      type: int
    state:
      description: The node state of the event as sacctmgr prints it (C(State)).
      type: str
      sample: DRAIN
    user:
      description: Who set the reason (C(User)), as sacctmgr prints it.
      type: str
      sample: root(0)
    reason:
      description: The reason (C(Reason)), whole; bytes that are not UTF-8 become U+FFFD.
      type: str
      sample: Kill task failed
episodes:
  description: >-
    Failure episodes: a node's events that follow each other without the node being back in
    service for more than O(gap) seconds, merged. By node, then start time.
  returned: success
  type: list
  elements: dict
  contains:
    node:
      description: Node name.
      type: str
    start:
      description: Start of the first event, Unix seconds.
      type: int
    end:
      description: End of the last event, Unix seconds; V(null) while it is open.
      type: int
    reasons:
      description: The reason of each event, in order.
      type: list
      elements: str
      sample: ["Kill task failed", "clusterops.slurm remediation: reboot : reboot issued"]
    states:
      description: The state of each event, in order.
      type: list
      elements: str
      sample: ["DRAIN", "BOOT^"]
    users:
      description: The user of each event, in order.
      type: list
      elements: str
    events:
      description: How many events were merged.
      type: int
      sample: 2
start:
  description: The start of the window read, Unix seconds.
  returned: success
  type: int
commands:
  description: The commands the module ran, each as an argument list.
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

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterops.slurm.plugins.module_utils._node_events import (
    episodes,
    read_node_events,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._options import (
    ArgumentSpec,
    window_start,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SLURM_COMMAND_OPTIONS,
    run_module,
)


def read(module, cli):
    params = module.params
    start = window_start(params, time.time())
    events = read_node_events(cli, start, params["nodes"] or None)
    return dict(changed=False, events=events, episodes=episodes(events, params["gap"]), start=start)


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            nodes=dict(type="list", elements="str", default=[]),
            window=dict(type="int"),
            start=dict(type="str"),
            gap=dict(type="int", default=2),
        ),
        mutually_exclusive=[("window", "start")],
        required_one_of=[("window", "start")],
    ).merge(SLURM_COMMAND_OPTIONS).module_kwargs())
    run_module(module, read)


if __name__ == "__main__":
    main()

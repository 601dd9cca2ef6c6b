#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: cluster_goodput_info
short_description: What broken nodes cost a cluster - node-hours lost by reason class, heals, holds and circuit breaker trips
version_added: 0.2.0
description:
  - The cluster's side of goodput (M(clusterops.slurm.training_goodput_info) is the runs' side) -
    for a window (O(window) seconds until now, or from O(start)), the node-seconds lost to
    drained, down, failed and rebooting nodes per reason class (the node remediation's own
    classifier, so a C(Kill task failed (JobId=7 batch)) drain counts as V(kill_task_failed)),
    split by state (not responding, rebooting, down, drained), the heals, the holds this
    collection set (flapping, suspect) and the circuit breaker's trips.
  - Reads every node's events with B(one) C(sacctmgr show event) call (as
    M(clusterops.slurm.slurm_node_event_info)) and slurmdbd's C(PurgeEventAfter) with one
    C(sacctmgr show configuration) call, unless O(purge_event_after) gives it; neither answer
    grows with the size of the cluster. The circuit breaker's trips are read from the heal
    journal (O(journal)), the one place they are recorded.
  - Each event is clipped to the window; an event still open counts to now. A reason no class
    matches counts under V(unclassified). The C(cold-start) events slurmctld opens at a clean
    start are not time lost (RV(not_counted)).
  - A figure that cannot be known is V(null) and RV(unknown) says which and why, never guessed -
    no accounting (C(AccountingStorageType) not slurmdbd), a window that starts before slurmdbd's
    C(PurgeEventAfter) (events may have been purged), no heal journal or one that recorded no
    trips for the whole window, and who resumed a node (accounting does not say).
  - A read that may be incomplete fails the task (slurmdbd down or unreachable, an error on stderr
    with exit status 0, a line that is not an event), as for every module of the collection.
  - docs/goodput.md ("Per cluster") defines every figure and its source.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.attributes
  - clusterops.slurm.attributes.IDEMPOTENT
  - clusterops.slurm.attributes.INFO_MODULE
  - clusterops.slurm.slurm_cli
options:
  window:
    description:
      - The last O(window) seconds, until now. Mutually exclusive with O(start); one of the two is
        required.
    type: int
  start:
    description:
      - From this time until now. Unix seconds, V(YYYY-MM-DD), V(YYYY-MM-DDTHH:MM[:SS]) (local time
        of the target), V(now) or V(now-<n><unit>) (V(now-24hours), V(now-7days)). Mutually
        exclusive with O(window).
    type: str
  journal:
    description:
      - The heal journal of the cluster on the target (the node remediation's O(clusterops.slurm.slurm_node_remediation#module:journal),
        role variable C(remediate_nodes_journal), by default
        C(/var/lib/clusterops/node-remediation/<cluster>.json)). It holds the circuit breaker's
        trips and the heals accounting does not show yet. Read only.
      - Not set, or no file there, the trips are unknown (RV(unknown)).
    type: path
  purge_event_after:
    description:
      - slurmdbd.conf's C(PurgeEventAfter) of the cluster (V(NONE), V(12months), V(30days),
        V(720hours); a bare number is months, a month counted as 28 days), so that no
        C(sacctmgr show configuration) call is made. Not set, it is read from slurmdbd.
    type: str
  classes:
    description:
      - The reason classes to count node-seconds by, as the node remediation's O(clusterops.slurm.slurm_node_remediation#module:classes)
        (C([{name, match, action}]), first match wins). Omitted, the collection's default classes.
    type: list
    elements: dict
  reboot_reason:
    description:
      - The reason the node remediation gives the nodes it reboots (its
        O(clusterops.slurm.slurm_node_remediation#module:reboot_reason)) - events with it are its
        reboots, and their time counts under the class of the failure each reboot heals.
    type: str
    default: "clusterops.slurm remediation: reboot"
notes:
  - Run it where the node remediation runs (the Slurm host of the cluster), so that O(journal) is
    the file its runs write.
seealso:
  - module: clusterops.slurm.slurm_node_event_info
  - module: clusterops.slurm.slurm_node_remediation
  - module: clusterops.slurm.training_goodput_info
  - name: Goodput
    description: The definitions and sources of every figure, and what cannot be known (docs/goodput.md, "Per cluster").
    link: https://github.com/clusterops/slurm/blob/main/docs/goodput.md
'''

EXAMPLES = r'''
- name: What broken nodes cost the cluster last week
  clusterops.slurm.cluster_goodput_info:
    start: now-7days
    journal: /var/lib/clusterops/node-remediation/{{ slurm_cluster }}.json
  become: true
  register: cluster_goodput

- name: Node-hours lost per reason class
  ansible.builtin.debug:
    msg: "{{ item.class }}: {{ item.node_hours }} node-hours on {{ item.hostlist }}"
  loop: "{{ cluster_goodput.by_class or [] }}"

- name: Heals, holds and trips of the last 24 hours, without asking slurmdbd for its purge
  clusterops.slurm.cluster_goodput_info:
    window: 86400
    purge_event_after: 12months
    journal: /var/lib/clusterops/node-remediation/{{ slurm_cluster }}.json
  register: today

- name: Say what could not be known
  ansible.builtin.debug:
    msg: "{{ item.figure }}: {{ item.why }}"
  loop: "{{ today.unknown }}"
'''

RETURN = r'''
start:
  description: The window's start, Unix seconds.
  returned: success
  type: int
end:
  description: The window's end (now), Unix seconds; events still open count to it.
  returned: success
  type: int
window:
  description: The window's length, seconds.
  returned: success
  type: int
accounting:
  description: Whether the cluster keeps accounting (V(false) - every figure from events is V(null)).
  returned: success
  type: bool
node_seconds:
  description: >-
    Node-seconds lost in the window - every second a node spent in an event (DOWN, DRAIN(ED),
    FAIL, rebooting) inside the window, each second of a node once; cold-start events left out.
    V(null) when unknown.
  returned: success
  type: int
  sample: 5400
node_hours:
  description: RV(node_seconds) in hours (3 decimals).
  returned: success
  type: float
  sample: 1.5
by_class:
  description: >-
    Node-seconds lost per reason class, largest first. Classes of the node remediation's classifier,
    V(resume_timeout) (Slurm's reboot or resume timed out), V(unclassified) (no class matches, or no
    reason) and V(remediation_reboot) (remediation's reboot whose failure ended before the window).
    V(null) when unknown.
  returned: success
  type: list
  elements: dict
  contains:
    class:
      description: The class.
      type: str
      sample: kill_task_failed
    action:
      description: The class's action (V(reboot), V(resume), V(human)); V(null) for V(unclassified).
      type: str
    node_seconds:
      description: Node-seconds lost in the window.
      type: int
    node_hours:
      description: The same in hours.
      type: float
    by_state:
      description: >-
        The node-seconds by the event's state as sacctmgr prints it - V(not_responding) (C(*)),
        V(reboot) (C(BOOT^)), V(down) (DOWN, FAIL), V(drain) (DRAIN), V(other).
      type: dict
      sample: {"not_responding": 0, "reboot": 120, "down": 0, "drain": 600, "other": 0}
    events:
      description: Events counted.
      type: int
    open:
      description: Of those, still open now.
      type: int
    nodes:
      description: How many nodes.
      type: int
    hostlist:
      description: The nodes, as a hostlist.
      type: str
      sample: gpu[001-003]
by_state:
  description: RV(node_seconds) by state (keys as RV(by_class[].by_state)); V(null) when unknown.
  returned: success
  type: dict
not_counted:
  description: >-
    Event time left out of RV(node_seconds) - C(cold-start) events (C(UNK)), which slurmctld opens
    for every node at a clean start and closes only at the node's next event. C([{why,
    node_seconds, node_hours, events}]); V(null) when unknown.
  returned: success
  type: list
  elements: dict
heals:
  description: >-
    The heals in the window. V(null) when unknown.
  returned: success
  type: dict
  contains:
    total:
      description: RV(heals.rebooted) plus RV(heals.returned_to_service).
      type: int
    rebooted:
      description: Reboots by the node remediation (events with O(reboot_reason)), started in the window.
      type: int
    returned_to_service:
      description: >-
        Returns to service from a failure of a class that heals (V(reboot), V(resume)) - by the
        node remediation, a person or Slurm itself (accounting does not say who); the heals the
        healing budget counts.
      type: int
    from_journal:
      description: Of those, heals of the heal journal that accounting does not show yet.
      type: int
    resumed_by_remediation:
      description: Always V(null) - accounting does not record who resumed a node (RV(unknown)).
      type: int
    nodes:
      description: How many nodes were healed.
      type: int
    hostlist:
      description: The nodes healed.
      type: str
holds:
  description: >-
    The holds this collection set in the window (a reason C(clusterops: flapping: ...) or
    C(clusterops: suspect: ...) starting in it), C({flapping, suspect}), each C({count, nodes,
    hostlist}). V(null) when unknown.
  returned: success
  type: dict
  sample: {"flapping": {"count": 1, "nodes": 1, "hostlist": "n3"}, "suspect": {"count": 0, "nodes": 0, "hostlist": ""}}
circuit:
  description: >-
    The circuit breaker's trips, from O(journal) - C(trips) (trips that began in the window),
    C(open_seconds) (seconds of the window it was open), C(open_now), C(list) (the trips that
    overlap the window, C({start, end, broken, threshold, window, classes}), C(end) V(null) while
    open). Each V(null) when unknown.
  returned: success
  type: dict
unknown:
  description: The figures that cannot be known, C([{figure, why}]).
  returned: success
  type: list
  elements: dict
  sample: [{"figure": "circuit", "why": "no heal journal given (journal): the trips are recorded there only"}]
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
    parse_purge,
    read_cluster_events,
    read_event_purge,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import DEFAULT_REASON_CLASSES
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.goodput import cluster_goodput
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.journal import read_journal_file
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import (
    DEFAULT_REBOOT_REASON,
    RemediationError,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._options import (
    ArgumentSpec,
    option_value,
    window_start,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SLURM_COMMAND_OPTIONS,
    run_module,
)


def read(module, cli):
    params = module.params
    now = int(time.time())
    start = window_start(params, now)
    events = read_cluster_events(cli, start)
    purge_after = None
    if events is not None:
        if params["purge_event_after"] is None:
            purge_after = read_event_purge(cli)
        else:
            purge_after = option_value(params, "purge_event_after", parse_purge)
    journal = None
    if params["journal"]:
        journal = dict(read_journal_file(params["journal"]), path=params["journal"])
    classes = DEFAULT_REASON_CLASSES if params["classes"] is None else params["classes"]
    return dict(cluster_goodput(events, start, now, classes=classes, reboot_reason=params["reboot_reason"],
                                purge_after=purge_after, journal=journal), changed=False)


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            window=dict(type="int"),
            start=dict(type="str"),
            journal=dict(type="path"),
            purge_event_after=dict(type="str"),
            classes=dict(type="list", elements="dict"),
            reboot_reason=dict(type="str", default=DEFAULT_REBOOT_REASON),
        ),
        mutually_exclusive=[("window", "start")],
        required_one_of=[("window", "start")],
    ).merge(SLURM_COMMAND_OPTIONS).module_kwargs())
    run_module(module, read, errors=(RemediationError,))


if __name__ == "__main__":
    main()

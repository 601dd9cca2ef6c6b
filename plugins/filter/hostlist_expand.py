# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: hostlist_expand
short_description: Expand a Slurm hostlist expression to host names
version_added: 0.1.0
author:
  - clusterops.slurm maintainers (!UNKNOWN)
description:
  - Expands a Slurm hostlist expression such as V(nodeA,nodeB[001,003],rack[0-1]node[0-1]) to the list of host
    names, exactly as C(scontrol show hostnames) of the Slurm release O(release) does.
  - Order and duplicates are kept. Zero padding is the width of each range's low bound (V(node[001-002]) gives
    V(node001) and V(node002)). Several bracket groups in one name expand with the first group outermost
    (V(rack[1-2]-node[01-02]) gives V(rack1-node01), V(rack1-node02), V(rack2-node01), V(rack2-node02)).
  - Since Slurm 23.11 the text after the last bracket group is a suffix shared by every host
    (V(node[0001-0002]-int) gives V(node0001-int) and V(node0002-int)); Slurm 22.05 rejects it, and so does this
    filter with O(release=22.05).
  - Items are separated by commas or whitespace; whitespace around items is ignored.
  - Malformed input fails the task with a clear message instead of guessing, where Slurm sometimes accepts it
    silently; empty items (V(a,,b)), unbalanced or nested brackets, descending (V([5-1])), stepped (V([1-9:2]), no
    release has a step syntax) or non-numeric ranges, a range of more than 65536 hosts, and more than 1,000,000
    hosts in all.
  - From Slurm 25.05 an expression holding V({) is a hostlist function (V(feature{gpu}), V(switch{s1})) that only
    slurmctld can expand; the filter fails on it for those releases (ask the cluster with
    C(scontrol show hostnames)).
options:
  _input:
    description:
      - A hostlist expression, or a list of them; the expansions of a list are concatenated.
      - An empty string gives an empty list.
    type: raw
    required: true
  release:
    description:
      - The Slurm release whose rules apply, as V(22.05), V(24.11.5) or the output of C(sinfo --version)
        (V(slurm 24.11.5)). Releases before 22.05 follow the 22.05 rules, releases after 26.05 the 26.05 ones.
      - It decides whether a shared suffix after the brackets is accepted (23.11 and newer) and whether V({)
        starts a hostlist function (25.05 and newer).
    type: str
    default: '26.05'
seealso:
  - plugin: clusterops.slurm.hostlist_compress
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Expand the nodes of a job
  ansible.builtin.debug:
    msg: "{{ 'gpu[001-004],cpu[001-002]' | clusterops.slurm.hostlist_expand }}"
  # -> ['gpu001', 'gpu002', 'gpu003', 'gpu004', 'cpu001', 'cpu002']

- name: Several bracket groups, first group outermost
  ansible.builtin.debug:
    msg: "{{ 'rack[1-2]-node[01-02]' | clusterops.slurm.hostlist_expand }}"
  # -> ['rack1-node01', 'rack1-node02', 'rack2-node01', 'rack2-node02']

- name: A shared suffix after the brackets (Slurm 23.11 and newer)
  ansible.builtin.debug:
    msg: "{{ 'node[0001-0002]-int' | clusterops.slurm.hostlist_expand }}"
  # -> ['node0001-int', 'node0002-int']

- name: Ask the cluster for its release, once
  ansible.builtin.command:
    argv: [sinfo, --version]
  register: sinfo_version
  changed_when: false

- name: Expand with the rules of that release (a suffix such as node[1-2]-int fails on 22.05)
  ansible.builtin.debug:
    msg: "{{ slurm_nodelist | clusterops.slurm.hostlist_expand(release=sinfo_version.stdout) }}"

- name: The first host of a node list (the batch host of a job)
  ansible.builtin.set_fact:
    batch_host: "{{ (slurm_nodelist | clusterops.slurm.hostlist_expand)[0] }}"
  vars:
    slurm_nodelist: nodeA,nodeB[001,003],nodeC
  # -> nodeA

- name: A list of expressions
  ansible.builtin.debug:
    msg: "{{ ['node[1-2]', 'login1'] | clusterops.slurm.hostlist_expand }}"
  # -> ['node1', 'node2', 'login1']
"""

RETURN = r"""
_value:
  description: The host names, in the order of the expression, duplicates kept.
  type: list
  elements: string
  sample: [nodeA, nodeB001, nodeB003, nodeC, node0001-int]
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import (
    DEFAULT_RELEASE,
    HostlistError,
    expand_hostlist,
)


def hostlist_expand(value, release=DEFAULT_RELEASE):
    """Expand a hostlist expression (string or list of strings) to a list of host names, by the rules of the
    Slurm ``release`` (default the newest tested). Raises AnsibleFilterError for any HostlistError."""
    try:
        return expand_hostlist(value, release=release)
    except HostlistError as exc:
        raise AnsibleFilterError('hostlist_expand: %s' % (exc,))


class FilterModule(object):
    """Ansible filter plugin: clusterops.slurm.hostlist_expand."""

    def filters(self):
        return {
            'hostlist_expand': hostlist_expand,
        }

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: hostlist_expand
short_description: Expand a Slurm hostlist expression to host names
version_added: 0.1.0
author:
  - clusterops.slurm maintainers (!UNKNOWN)
description:
  - Expands a Slurm hostlist expression such as V(nodeA,nodeB[001,003],rack[0-1]node[0-1]) to the list of host
    names, exactly as C(scontrol show hostnames) of Slurm 22.05 does.
  - Order and duplicates are kept. Zero padding is the width of each range's low bound (V(node[001-002]) gives
    V(node001) and V(node002)). Several bracket groups in one name expand with the first group outermost.
  - Items are separated by commas or whitespace; whitespace around items is ignored.
  - Malformed input fails the task with a clear message instead of guessing, where Slurm sometimes accepts it
    silently; empty items (V(a,,b)), unbalanced brackets, descending (V([5-1])) or non-numeric ranges, text after
    the last bracket group (V(n[1-2]x), which Slurm 22.05 rejects), a range of more than 65536 hosts, and more than
    1,000,000 hosts in all.
options:
  _input:
    description:
      - A hostlist expression, or a list of them; the expansions of a list are concatenated.
      - An empty string gives an empty list.
    type: raw
    required: true
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
    msg: "{{ 'rack[0-1]node[0-1]' | clusterops.slurm.hostlist_expand }}"
  # -> ['rack0node0', 'rack0node1', 'rack1node0', 'rack1node1']

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
  sample: [nodeA, nodeB001, nodeB003, nodeC]
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import (
    HostlistError,
    expand_hostlist,
)


def hostlist_expand(value):
    """Expand a hostlist expression (string or list of strings) to a list of host names."""
    try:
        return expand_hostlist(value)
    except HostlistError as exc:
        raise AnsibleFilterError('hostlist_expand: %s' % (exc,))


class FilterModule(object):
    """Ansible filter plugin: clusterops.slurm.hostlist_expand."""

    def filters(self):
        return {
            'hostlist_expand': hostlist_expand,
        }

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: hostlist_compress
short_description: Compress host names to a Slurm hostlist expression
version_added: 0.1.0
author:
  - clusterops.slurm maintainers (!UNKNOWN)
description:
  - Compresses a list of host names to a Slurm hostlist expression such as V(gpu[001-004],cpu[001-002]), the same
    string as C(scontrol show hostlist) of Slurm 22.05.
  - The order and duplicates of the list are kept, so that P(clusterops.slurm.hostlist_expand#filter) of the
    result gives back the same list. Only neighbours are merged; sort the list first (for example with
    P(ansible.builtin.sort#filter)) to get the shortest string, and apply P(ansible.builtin.unique#filter) to drop
    duplicates.
  - The number of a name is its last run of digits (V(rack1node3) has prefix V(rack1node)). Names are only merged
    into a range when their zero padding agrees (V(n9,n10) gives V(n[9-10]), V(n1,n01) gives V(n[1,01])). Names
    with text after their digits (V(n1-ib), V(node0001-int)) are written as they are, because
    C(scontrol show hostlist) never writes a shared suffix, not even in Slurm 23.11 and newer, which read one (and
    22.05 rejects it).
  - The result is the same for every Slurm release; O(release) only decides whether names may hold braces.
options:
  _input:
    description:
      - The host names. A single string is refused (expand it first).
      - Names must not be empty or contain commas, brackets or whitespace.
    type: list
    elements: string
    required: true
  release:
    description:
      - The Slurm release the string is for, as V(22.05), V(24.11.5) or the output of C(sinfo --version).
      - From 25.05 names must not hold V({) or V(}), which would make the string a hostlist function.
    type: str
    default: '26.05'
seealso:
  - plugin: clusterops.slurm.hostlist_expand
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Compress a list of hosts for scontrol
  ansible.builtin.debug:
    msg: "{{ ['gpu001', 'gpu002', 'gpu003', 'gpu004', 'cpu001', 'cpu002'] | clusterops.slurm.hostlist_compress }}"
  # -> gpu[001-004],cpu[001-002]

- name: Order is kept; sort and unique first for the shortest form
  ansible.builtin.debug:
    msg:
      - "{{ ['n3', 'n1', 'n2', 'n1'] | clusterops.slurm.hostlist_compress }}"
      - "{{ ['n3', 'n1', 'n2', 'n1'] | unique | sort | clusterops.slurm.hostlist_compress }}"
  # -> ['n[3,1-2,1]', 'n[1-3]']

- name: Names with text after their number are kept as they are, like scontrol show hostlist does
  ansible.builtin.debug:
    msg: "{{ ['node0001-int', 'node0002-int', 'node3', 'node4'] | clusterops.slurm.hostlist_compress }}"
  # -> node0001-int,node0002-int,node[3-4]

- name: The hosts of an inventory group as one Slurm node list
  ansible.builtin.command:
    argv: [scontrol, update, "nodename={{ groups['compute'] | clusterops.slurm.hostlist_compress }}", state=RESUME]
"""

RETURN = r"""
_value:
  description: The hostlist expression; an empty string for an empty list.
  type: string
  sample: gpu[001-004],cpu[001-002]
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import (
    DEFAULT_RELEASE,
    HostlistError,
    compress_hostlist,
)


def hostlist_compress(value, release=DEFAULT_RELEASE):
    """Compress a list of host names to a Slurm hostlist string, keeping order and duplicates. Raises
    AnsibleFilterError for any HostlistError."""
    try:
        return compress_hostlist(value, release=release)
    except HostlistError as exc:
        raise AnsibleFilterError('hostlist_compress: %s' % (exc,))


class FilterModule(object):
    """Ansible filter plugin: clusterops.slurm.hostlist_compress."""

    def filters(self):
        return {
            'hostlist_compress': hostlist_compress,
        }

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: slurm_state
short_description: Split a Slurm node state into its base state and flags
version_added: 0.1.0
author:
  - clusterops.slurm maintainers (!UNKNOWN)
description:
  - Reads any spelling of a Slurm node state and returns its base state and flags.
  - sinfo words with suffix symbols (V(idle*), V(drained*), V(drng), V(mixed-), V(down~),
    V(alloc#), V(reboot^), V(maint$)), compound states (V(IDLE+DRAIN),
    V(DOWN+DRAIN+NOT_RESPONDING)) and JSON values (a string with O(flags), or a list).
  - Matching by whole names afterwards (V('DRAIN' in (s | clusterops.slurm.slurm_state).flags))
    avoids the prefix matches that confuse C(drain), C(drained) and C(draining).
options:
  _input:
    description: The state, a string or a list of names (Slurm 23.02+ JSON C(state)).
    type: raw
    required: true
  flags:
    description: The 22.05 JSON C(state_flags) list, if the state came from there.
    type: list
    elements: str
    default: []
seealso:
  - module: clusterops.slurm.slurm_node_info
"""

EXAMPLES = r"""
- name: A drained node that does not respond
  ansible.builtin.debug:
    msg: "{{ 'drained*' | clusterops.slurm.slurm_state }}"
  # -> {"base": null, "flags": ["DRAIN", "NOT_RESPONDING"], "raw": "drained*",
  #     "drained": true, "responding": false}

- name: A compound state from scontrol
  ansible.builtin.debug:
    msg: "{{ 'DOWN+DRAIN+NOT_RESPONDING' | clusterops.slurm.slurm_state }}"
  # -> {"base": "DOWN", "flags": ["DRAIN", "NOT_RESPONDING"], ...}

- name: Slurm 22.05 JSON
  ansible.builtin.debug:
    msg: "{{ 'idle' | clusterops.slurm.slurm_state(flags=['DRAIN']) }}"
"""

RETURN = r"""
_value:
  description: The state.
  type: dict
  contains:
    base:
      description: Base state, or V(null) when the spelling does not say it (sinfo's V(drained) is printed for IDLE+DRAIN and DOWN+DRAIN).
      type: str
    flags:
      description: Flags as scontrol names them, sorted.
      type: list
      elements: str
    raw:
      description: The input as text.
      type: str
    drained:
      description: True when the DRAIN flag is set.
      type: bool
    responding:
      description: False when the NOT_RESPONDING flag is set.
      type: bool
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import (
    SlurmStateError,
    parse_state,
)


def slurm_state(value, flags=None):
    """``{base, flags, raw, drained, responding}`` for a Slurm node state."""
    try:
        state = parse_state(value, flags or None)
    except SlurmStateError as exc:
        raise AnsibleFilterError("slurm_state: %s" % exc)
    result = state.to_dict()
    result["drained"] = state.drained
    result["responding"] = state.responding
    return result


class FilterModule(object):
    """Slurm node state filter."""

    def filters(self):
        return {"slurm_state": slurm_state}

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: prometheus_textfile
short_description: Write a Prometheus textfile for node_exporter's textfile collector, atomically in its own folder
version_added: 0.2.0
description:
  - Replaces the file O(path) with O(content), so that node_exporter's textfile collector (which reads every
    C(*.prom) file of its folder, C(--collector.textfile.directory)) never reads a part of it, nor a second copy.
  - The content is written to a temporary file in the same folder, named C(.<name>.<random>.tmp) (hidden, and not
    ending in C(.prom), so the collector ignores it), given O(mode) and O(owner)/O(group), fsynced, renamed over
    O(path) (one folder, so one file system, and the rename is atomic), then the folder is fsynced. Unlike
    M(ansible.builtin.template) and M(ansible.builtin.copy), no temporary file of Ansible's is ever created in the
    folder, whatever file system Ansible's own temporary folder is on.
  - A temporary of this naming for O(path) that a killed run left behind (no live writer holds an C(flock) on it)
    is removed; no other file of the folder is touched.
  - The same content, mode and owner change nothing (C(changed=false), the file is not rewritten).
  - Used by the role P(clusterops.slurm.remediate#role) for its textfile (C(templates/remediate.prom.j2), rendered
    on the controller with the P(ansible.builtin.template#lookup) lookup).
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads the file and the folder and reports whether the file would change and which leftovers would be
      removed; writes and removes nothing.
  diff_mode:
    support: full
    details: The file's text before and after.
  platform:
    platforms: posix
options:
  path:
    description:
      - The textfile, in node_exporter's textfile folder; its name should end in C(.prom) (the collector reads no
        other). The folder must exist. A symlink there is refused (neither followed nor replaced).
    type: path
    required: true
    aliases: [dest]
  content:
    description:
      - The whole textfile, in Prometheus' text exposition format (each line ends with a line feed, the last one
        too).
    type: str
    required: true
  mode:
    description:
      - The file's permissions, as an octal string (V("0644")); node_exporter must be able to read it.
    type: raw
    default: "0644"
  owner:
    description:
      - The file's owner, a user name or uid. Unset - an existing file keeps its owner when the module runs as
        root (as M(ansible.builtin.template) does), else the file is the writer's.
    type: str
  group:
    description:
      - The file's group, a group name or gid. Unset - as for O(owner).
    type: str
notes:
  - The folder is fsynced after the rename; on a file system without C(flock), every temporary of this naming is
    taken for a leftover, so two runs writing the same O(path) at once may fail the later rename (never a partial
    file).
seealso:
  - module: ansible.builtin.template
    description: Writes a file atomically too, but through a temporary of its own that may land in the folder.
  - name: node_exporter's textfile collector
    description: Reads every C(*.prom) file of one folder on each scrape.
    link: https://github.com/prometheus/node_exporter#textfile-collector
'''

EXAMPLES = r'''
- name: Write the textfile of a run, rendered on the controller
  clusterops.slurm.prometheus_textfile:
    path: /var/lib/node_exporter/textfile/remediate.prom
    content: "{{ lookup('ansible.builtin.template', 'remediate.prom.j2') }}"
    mode: "0644"

- name: A one-series textfile, owned by node_exporter's user
  clusterops.slurm.prometheus_textfile:
    path: /var/lib/node_exporter/textfile/backup.prom
    content: |
      # HELP backup_last_success_timestamp_seconds When the last backup succeeded.
      # TYPE backup_last_success_timestamp_seconds gauge
      backup_last_success_timestamp_seconds {{ now(utc=true).timestamp() | int }}
    owner: prometheus
    group: prometheus
'''

RETURN = r'''
textfile:
  description: The textfile, O(path).
  returned: success
  type: str
  sample: /var/lib/node_exporter/textfile/remediate.prom
written:
  description: Whether the content was replaced (in check mode, would be); C(false) when only the mode or owner
    changed, or nothing.
  returned: success
  type: bool
  sample: true
mode:
  description: The file's mode, octal.
  returned: success
  type: str
  sample: "0644"
size:
  description: The length of O(content) in bytes (UTF-8).
  returned: success
  type: int
  sample: 4711
leftovers_removed:
  description: The temporaries of a killed run removed from the folder (in check mode, those that would be).
  returned: success
  type: list
  elements: str
  sample: [".remediate.prom.k3j9x0_a.tmp"]
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

from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec
from ansible_collections.clusterops.slurm.plugins.module_utils._prometheus_textfile import (
    apply_textfile,
    parse_mode,
    plan_textfile,
    resolve_id,
    result,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._task import run_task


def argument_spec():
    return ArgumentSpec(dict(
        path=dict(type="path", required=True, aliases=["dest"]),
        content=dict(type="str", required=True),
        mode=dict(type="raw", default="0644"),
        owner=dict(type="str"),
        group=dict(type="str"),
    ))


def manage(module):
    """The task of ``prometheus_textfile`` (for ``_task.run_task``): plan, then act unless in check mode."""
    params = module.params
    if not params["path"].endswith(".prom"):
        module.warn("%s does not end in .prom: node_exporter's textfile collector does not read it" % params["path"])
    plan = plan_textfile(params["path"], params["content"].encode("utf-8"), parse_mode(params["mode"]),
                         resolve_id(params["owner"], "owner"), resolve_id(params["group"], "group"))
    removed = plan.leftovers if module.check_mode else apply_textfile(plan) if plan.changed else []
    return result(plan, removed, module._diff)


def main():
    module = AnsibleModule(**argument_spec().module_kwargs())
    run_task(module, manage)


if __name__ == "__main__":
    main()

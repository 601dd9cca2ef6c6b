#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: training_run
short_description: Register a training run for remediation (its C(run.json) in the run registry), or remove it
version_added: 0.2.0
description:
  - Writes the run spec C(<registry>/<name>/run.json) that M(clusterops.slurm.training_remediation)
    reads, checked by the same validator, or removes the run's registry folder.
  - A value the registry does not know (an unknown O(checkpoint_validate) level or O(progress)
    source, a relative path, a bad O(checkpoint_name_template), a negative budget) fails the task
    and writes nothing; nothing is replaced by a default.
  - The file is replaced atomically (a temporary file in the same folder, C(fsync), rename), so
    a remediation reading the registry at the same time sees the old spec or the new one. It is
    rewritten only when its content changes.
  - Every optional field of C(run.json) is written out, with its default when the task does not
    set it.
  - The role P(clusterops.slurm.torchrun_launcher#role) uses this module; it also writes the
    launcher (C(launcher.sbatch)) into the same folder.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Validates and reports what would change; writes and removes nothing and takes no lock.
  diff_mode:
    support: full
    details: C(run.json) before and after, as JSON text.
  platform:
    platforms: posix
options:
  name:
    description:
      - The run's name - its registry folder's name and the name of its Slurm jobs (C(--job-name)).
        Letters, digits, C(.), C(_) and C(-), starting with a letter or digit.
    type: str
    required: true
  state:
    description:
      - V(present) registers the run (writes C(run.json)). V(absent) removes the run's registry
        folder (C(run.json), remediation's C(state.json), the launcher and anything else in it),
        under the registry lock.
    type: str
    choices: [present, absent]
    default: present
  registry:
    description: The run registry folder on the target (created when missing).
    type: path
    default: /var/lib/clusterops/runs
  lock_timeout:
    description:
      - For O(state=absent), seconds to wait for a remediation holding the registry lock
        (C(<registry>/.remediate.lock)); the task fails when it is still held.
    type: int
    default: 60
  owner:
    description:
      - The user the run's jobs run as (and are resubmitted as), a user of the target host. Required for
        O(state=present). V(root) is refused (a job of root that resumes from a folder users can write would
        run their code as root); so is a user the host does not know.
      - Remediation reads the run's folders as this user, and acts on the entry only while C(run.json) and
        its folder are owned by root or the user remediation runs as, and not writable by the group or others
        (see C(docs/security.md)). This module writes them so.
    type: str
  launcher:
    description:
      - The sbatch launcher remediation submits again (absolute path). Default
        C(<registry>/<name>/launcher.sbatch).
      - Remediation submits it only while it is a regular file (not a symlink) owned by root, the operator or
        O(owner), in a folder owned by one of them, neither writable by the group or others.
    type: path
  checkpoint_dir:
    description:
      - The run's checkpoint folder (absolute path), the I(run folder) that
        M(clusterops.slurm.checkpoint_info) and the checkpoint command read (their
        O(clusterops.slurm.checkpoint_info#module:run_folder)). Required for O(state=present).
    type: path
  workdir:
    description: The run's working folder (absolute path), for the record.
    type: path
  nodes:
    description: The run's node count, for the record. 1 or more.
    type: int
  requeue:
    description: Whether the launcher lets Slurm requeue the job itself (C(--requeue)), for the record.
    type: bool
    default: false
  checkpoint_validate:
    description:
      - How thoroughly a checkpoint is checked before remediation resumes from it - one of the
        validation levels of M(clusterops.slurm.checkpoint_info) (V(structure), V(sizes), V(sha256),
        V(load)). Another value fails the task.
    type: str
    default: sizes
  checkpoint_name_template:
    description:
      - The run's Lightning C(ModelCheckpoint) filename template (e.g. V({epoch}-{step})), which
        tells the step of a checkpoint file. Unset or empty - none.
    type: str
  checkpoint_replicas:
    description:
      - Replica folders of O(checkpoint_dir) (absolute paths), where C(clusterops_checkpoint replicate)
        keeps verified copies of its newest checkpoints (see the role
        C(clusterops.slurm.checkpoint_pruning)).
      - Remediation resumes the run when the run folder or a replica holds a valid checkpoint, and counts the
        newest of them as the run's progress; the launcher resumes from the newest copy (the run folder on a tie).
      - Neither O(checkpoint_dir) nor one folder twice.
    type: list
    elements: path
    default: []
  max_resubmissions:
    description: Most resubmissions remediation makes for this run; then it stops it. 0 or more.
    type: int
    default: 5
  no_progress_limit:
    description:
      - Remediation stops the run when its newest valid checkpoint step has not changed over this
        many consecutive resubmissions (0 - never). 0 or more.
    type: int
    default: 2
  enabled:
    description: V(false) keeps the run registered but leaves it alone.
    type: bool
    default: true
  log_dir:
    description:
      - The folder of the job's logs (absolute path; C(<log_dir>/<name>-<job id>*)). Required when
        O(progress=log) and O(hang_timeout) is set.
    type: path
  hang_timeout:
    description: Seconds without progress after which a RUNNING job is hung. 0 - no hang watchdog.
    type: int
    default: 0
  progress:
    description:
      - What progress is, for the hang watchdog - V(heartbeat) (the mtime of O(heartbeat_file)),
        V(checkpoint) (the newest mtime in O(checkpoint_dir)) or V(log) (the newest mtime of the
        job's log files). Another value fails the task.
    type: str
    default: log
  heartbeat_file:
    description: The file the trainer replaces every step (absolute path). Required when O(progress=heartbeat).
    type: path
  py_spy:
    description: The py-spy command on the nodes, for a hung job's stacks.
    type: str
    default: py-spy
  suspect_nodes:
    description: V(false) opts the run out of suspect nodes (see M(clusterops.slurm.training_remediation)).
    type: bool
    default: true
  suspect_after:
    description:
      - The run's C(k) for suspect nodes - the last C(k) failed jobs sharing a node make it
        suspect. 0 - remediation's (M(clusterops.slurm.training_remediation)'s O(clusterops.slurm.training_remediation#module:suspect_after)).
    type: int
    default: 0
notes:
  - Runs on the host that holds the registry (where M(clusterops.slurm.training_remediation) runs).
    Writing into the default registry needs root (C(become)).
seealso:
  - module: clusterops.slurm.training_remediation
  - name: Training remediation
    description: How runs are registered, resumed and budgeted (docs/training-remediation.md).
    link: https://github.com/clusterops/slurm/blob/main/docs/training-remediation.md
'''

EXAMPLES = r'''
- name: Register a run whose launcher is already in its registry folder
  clusterops.slurm.training_run:
    name: llama-8b
    owner: alice
    checkpoint_dir: /srv/ckpt/llama-8b
    log_dir: /srv/work/llama-8b/logs
    hang_timeout: 1800
    max_resubmissions: 3
  become: true

- name: Keep the run registered but leave it alone
  clusterops.slurm.training_run:
    name: llama-8b
    owner: alice
    checkpoint_dir: /srv/ckpt/llama-8b
    enabled: false
  become: true

- name: Remove the run from the registry
  clusterops.slurm.training_run:
    name: llama-8b
    state: absent
  become: true
'''

RETURN = r'''
run_file:
  description: The run's C(run.json).
  returned: always
  type: str
  sample: /var/lib/clusterops/runs/llama-8b/run.json
run:
  description:
    - The content of C(run.json) after the task (every field, defaults written out), or V(null)
      for O(state=absent).
  returned: always
  type: dict
  sample: {"format": "clusterops.training_run", "format_version": 1, "name": "llama-8b", "owner": "alice",
           "launcher": "/var/lib/clusterops/runs/llama-8b/launcher.sbatch", "checkpoint_dir": "/srv/ckpt/llama-8b",
           "checkpoint_validate": "sizes", "max_resubmissions": 5, "no_progress_limit": 2, "enabled": true}
failed_cause:
  description:
    - Why the task failed, one of C(configuration) (a setting or the host's set-up), C(permission) (the account
      may not do what it needs), C(accounting) (slurmdbd unreachable or no accounting storage), C(slurm_unreadable)
      (the controller did not answer, in time or in full), C(slurm_refused) (Slurm refused a change).
  returned: failure
  type: str
  sample: permission
'''

import json
import os
from typing import Any, Dict

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure, run_task
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry import (
    DEFAULT_REGISTRY,
    FORMAT_VERSION,
    LAUNCHER_FILE,
    RUN_DEFAULTS,
    RUN_FILE,
    RUN_FORMAT,
    RUN_NAME,
    RegistryError,
    owner_uid,
    run_document,
    unregister_run,
    validate_run,
    write_run,
)

#: The module option type of each optional run.json field (their defaults: RUN_DEFAULTS).
FIELD_TYPES = {
    "workdir": "path", "nodes": "int", "requeue": "bool", "checkpoint_validate": "str",
    "checkpoint_name_template": "str", "max_resubmissions": "int", "no_progress_limit": "int",
    "enabled": "bool", "log_dir": "path", "hang_timeout": "int", "progress": "str",
    "heartbeat_file": "path", "py_spy": "str", "suspect_nodes": "bool", "suspect_after": "int",
    "checkpoint_replicas": "list",
}


def argument_spec():
    """The options (an ``ArgumentSpec``): the run's fields with RUN_DEFAULTS as their defaults,
    and the task's own."""
    spec: Dict[str, Dict[str, Any]] = dict(
        name=dict(type="str", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        registry=dict(type="path", default=DEFAULT_REGISTRY),
        lock_timeout=dict(type="int", default=60),
        owner=dict(type="str"),
        launcher=dict(type="path"),
        checkpoint_dir=dict(type="path"),
    )
    for field, kind in FIELD_TYPES.items():
        option: Dict[str, Any] = {"type": kind}
        if kind == "list":
            option["elements"] = "path"
        if RUN_DEFAULTS[field] is not None:
            option["default"] = RUN_DEFAULTS[field]
        spec[field] = option
    return ArgumentSpec(spec, required_if=[("state", "present", ("owner", "checkpoint_dir"))])


def _text(doc):
    return "" if doc is None else json.dumps(doc, indent=1, sort_keys=True) + "\n"


def _current(path):
    """The parsed run.json (None when there is none; its text when it is not JSON)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(1 << 20).decode("utf-8", "replace")
    except (OSError, IOError):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def run_spec(params: Dict[str, Any], folder: str) -> Dict[str, Any]:
    """The run.json the options describe, before validation."""
    spec = {"format": RUN_FORMAT, "format_version": FORMAT_VERSION, "name": params["name"], "owner": params["owner"],
            "launcher": params["launcher"] or os.path.join(folder, LAUNCHER_FILE),
            "checkpoint_dir": params["checkpoint_dir"]}
    for field in FIELD_TYPES:
        spec[field] = params[field]
    return spec


def manage(module):
    """The task of ``training_run`` (for ``_task.run_task``): the run's registry entry as
    ``state`` asks, with its result (RETURN)."""
    params = module.params
    name = params["name"]
    if not RUN_NAME.match(name):
        raise TaskFailure("name %r has characters other than letters, digits, . _ - (or starts with . _ -)" % name)
    folder = os.path.join(params["registry"], name)
    path = os.path.join(folder, RUN_FILE)
    before = _current(path)
    # Not "path": AnsibleModule would add that file's owner, mode and state to the result.
    result: Dict[str, Any] = dict(changed=False, run_file=path, run=None)
    after = None
    try:
        if params["state"] == "absent":
            result["changed"] = os.path.lexists(folder)
            if result["changed"] and not module.check_mode:
                unregister_run(params["registry"], folder, params["lock_timeout"])
        else:
            after = run_document(validate_run(run_spec(params, folder), folder))
            owner_uid(params["owner"], folder)
            result.update(run=after, changed=before != after)
            if result["changed"] and not module.check_mode:
                try:
                    write_run(folder, after)
                except OSError as exc:
                    raise RegistryError("cannot write %s: %s" % (path, exc))
    except RegistryError as exc:
        raise TaskFailure(str(exc), **result)
    if module._diff:
        result["diff"] = {"before": before if isinstance(before, str) else _text(before), "after": _text(after),
                          "before_header": path, "after_header": path}
    return result


def main():
    module = AnsibleModule(**argument_spec().module_kwargs())
    run_task(module, manage)


if __name__ == "__main__":
    main()

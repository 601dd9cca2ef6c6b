#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: checkpoint_prune
short_description: Delete old training checkpoints of a run folder, never one a resume could need
version_added: 0.1.0
description:
  - Deletes the checkpoints of one run folder on the target that a policy no longer keeps (the
    O(keep_last) newest valid ones, every O(keep_every) steps, names matching O(keep)), and temporary
    entries left by crashed saves older than O(tmp_grace).
  - "Never deleted, whatever the policy: the newest valid checkpoint (the resume point) and anything
    newer than it (it may be being written); a checkpoint that a pointer (C(latest) file or symlink,
    Megatron's C(latest_checkpointed_iteration.txt), a C(last.ckpt) symlink) or any symlink of the folder
    names; a checkpoint that a kept one links into; a checkpoint written after the newest valid one
    although its step is lower (another run in the same folder; a warning says so); anything outside
    the folder (symlinks are never followed nor deleted through); temporary entries changed less than
    O(tmp_grace) seconds ago."
  - O(keep_last) V(0) or less keeps every checkpoint; it never means delete everything. With no valid
    checkpoint in the folder no checkpoint is deleted.
  - Checkpoints are ordered by the numbers in their names, never by name or modification time; the
    layouts are those of M(clusterops.slurm.checkpoint_info).
  - A checkpoint is first renamed to C(tmp-deleting-<name>) (from then on no reader chooses it), then
    removed. A lock (C(flock) on C(.prune.lock) in the folder) stops two prunes of one folder at once.
    An error stops the run; nothing more is deleted and the task fails, listing what was deleted.
  - The folder is opened once, and refused when its path holds a symlink anywhere (give its real path). The
    scan, the lock, every rename and every deletion go through that descriptor, and before each deletion the
    path must still lead to it, so a folder swapped for a link to another user's folder never leads the prune
    there (C(docs/security.md)). Run the task as the folder's owner where you can (C(become_user)).
  - The same code runs from cron on hosts without Ansible as
    C(python3 clusterops_checkpoint prune DIR --keep-last N) (role P(clusterops.slurm.checkpoint_pruning#role)).
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.checkpoint
attributes:
  check_mode:
    support: full
    details: Lists what would be deleted (RV(deleted)) and deletes nothing; takes no lock.
  diff_mode:
    support: full
    details: The checkpoints and temporary entries of the folder before and after, one name a line.
  platform:
    platforms: posix
options:
  keep_last:
    description:
      - Keep the O(keep_last) newest valid checkpoints, and every checkpoint newer than the oldest of
        them (valid or not).
      - V(0) or less keeps every checkpoint (temporary entries are still removed after O(tmp_grace)).
      - The newest checkpoints are checked at the O(validate) level down to the O(keep_last)-th valid
        one; the older ones only at V(structure).
    type: int
    required: true
  keep_every:
    description:
      - Also keep the checkpoints whose step is a multiple of this number (milestones). V(0) turns it off.
    type: int
    default: 0
  keep:
    description:
      - Also keep the checkpoints whose name matches one of these shell patterns (C(fnmatch),
        case-sensitive), e.g. V(step_000050000) or V(checkpoint-5*).
    type: list
    elements: str
    default: []
  min_free:
    description:
      - Delete checkpoints only while the file system holding O(run_folder) has less space available than
        this, oldest first, and stop once it has enough. A size with a binary unit (V(500G), V(1.5TiB),
        V(1048576) bytes) or a percent of the file system (V(10%)).
      - Unset, the policy alone decides.
    type: str
  tmp_grace:
    description:
      - Temporary entries (V(tmp-*), V(*.tmp)) unchanged for this many seconds (newest modification time
        of the entry and of anything under it) are removed; younger ones may still be being written.
        Set it above the longest checkpoint write. A negative value keeps every temporary entry.
      - V(tmp-deleting-*) entries left by an interrupted prune are removed at once.
    type: int
    default: 86400
  replicas:
    description:
      - Replica folders of O(run_folder) (M(clusterops.slurm.checkpoint_replicate)). No checkpoint newer than every
        replica's newest verified copy is deleted, so each checkpoint stays until every replica holds it or a newer
        one. A replica that holds no verified copy or cannot be read keeps every checkpoint (a warning says so).
    type: list
    elements: path
    default: []
  lock_file:
    description:
      - The lock file. Defaults to C(.prune.lock) in O(run_folder). Set it to a local path where the
        folder's file system has no C(flock) (Lustre mounted without C(-o flock)); then only prunes on
        the same host are kept apart.
    type: path
notes:
  - C(docs/checkpoint-pruning.md) in the collection describes the policy, the log and the cron role.
  - Each deletion is also written to the target's system log (C(AnsibleModule.log)).
seealso:
  - module: clusterops.slurm.checkpoint_info
'''

EXAMPLES = r'''
- name: Keep the 10 newest valid checkpoints and every 10000th step
  clusterops.slurm.checkpoint_prune:
    run_folder: /lustre/runs/llama-8b
    keep_last: 10
    keep_every: 10000
  register: pruned

- name: What went, and why
  ansible.builtin.debug:
    msg: "{{ pruned.deleted | map(attribute='name') | list }}"

- name: Only when the file system has less than 10 % available; pin a hand-picked checkpoint
  clusterops.slurm.checkpoint_prune:
    run_folder: /lustre/runs/llama-8b
    keep_last: 3
    min_free: 10%
    keep: [step_000050000]

- name: What would go (check mode), with the before/after lists
  clusterops.slurm.checkpoint_prune:
    run_folder: /lustre/runs/llama-8b
    keep_last: 5
  check_mode: true
  diff: true
'''

RETURN = r'''
run_folder:
  description: The run folder (O(run_folder)), absolute.
  returned: always
  type: str
  sample: /lustre/runs/llama-8b
latest_valid:
  description: Name of the newest valid checkpoint (the resume point, never deleted), V(null) when none.
  returned: success
  type: str
  sample: step_000010400
deleted:
  description: >-
    What was deleted, in order (in check mode: what would be), oldest checkpoint first after the
    temporary entries. Also returned when an error stopped the run.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The entry's name in the run folder.
      type: str
      sample: step_000009400
    kind:
      description: V(checkpoint) or V(temporary).
      type: str
      sample: checkpoint
    step:
      description: The checkpoint's step, V(null) for a temporary entry.
      type: int
      sample: 9400
    size:
      description: Bytes of its files as the checks counted them, V(null) when unknown.
      type: int
      sample: 16106127360
    reason:
      description: Why it was deleted.
      type: str
      sample: "older than the 10 newest valid checkpoints (newest valid: step_000010400)"
kept:
  description: Every checkpoint and temporary entry kept, with why.
  returned: success
  type: list
  elements: dict
  sample:
    - {name: step_000010400, kind: checkpoint, step: 10400, reason: "the newest valid checkpoint (the resume point)"}
    - {name: step_000005000, kind: checkpoint, step: 5000, reason: "named by the pointer latest"}
    - {name: tmp-step_000010500.4711.9f2c1a0b, kind: temporary, step: null,
       reason: "temporary, changed 12 s ago (tmp_grace 86400 s): may be being written"}
before:
  description: Checkpoints (oldest first) and temporary entries of the folder before the run.
  returned: success
  type: list
  elements: str
after:
  description: RV(before) less what was deleted (in check mode, what would be).
  returned: success
  type: list
  elements: str
free_before:
  description: Bytes available on the file system before the run, V(null) when not measured.
  returned: success
  type: int
free_after:
  description: Bytes available after the run, V(null) in check mode.
  returned: success
  type: int
min_free_bytes:
  description: The O(min_free) threshold in bytes, V(null) without one.
  returned: success
  type: int
checkpoint_warnings:
  description: >-
    The scan's warnings (pointers that disagree with the disk, invalid newer checkpoints, ...) and the
    prune's own (no valid checkpoint, another run in the folder). Each is also shown as a task warning.
  returned: success
  type: list
  elements: str
failed_cause:
  description:
    - Why the task failed, one of C(configuration) (a setting or the host's set-up), C(permission) (the account
      may not do what it needs), C(accounting) (slurmdbd unreachable or no accounting storage), C(slurm_unreadable)
      (the controller did not answer, in time or in full), C(slurm_refused) (Slurm refused a change).
  returned: failure
  type: str
  sample: permission
'''

from typing import List  # noqa: F401

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import (
    TMP_GRACE,
    CheckpointError,
    parse_min_free,
    prune,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint_options import CHECKPOINT_OPTIONS
from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure, run_task


def prune_folder(module):
    """The task of ``checkpoint_prune`` (for ``_task.run_task``): the run folder pruned (in check
    mode, planned), with its result (RETURN)."""
    params = module.params
    if params["keep_every"] < 0:
        raise TaskFailure("keep_every must be 0 (off) or more, not %d" % params["keep_every"])
    try:
        parse_min_free(params["min_free"])
    except ValueError as exc:
        raise TaskFailure(str(exc))
    lines: List[str] = []
    try:
        result = prune(params["run_folder"], params["keep_last"], params["keep_every"], params["keep"], params["min_free"],
                       None if params["tmp_grace"] < 0 else params["tmp_grace"], params["validate"],
                       dry_run=module.check_mode, log=lines.append, lock_file=params["lock_file"],
                       replicas=params["replicas"])
    except (CheckpointError, ValueError) as exc:
        raise TaskFailure(str(exc), run_folder=params["run_folder"], deleted=[])
    if not module.check_mode:
        for line in lines:
            module.log("checkpoint_prune %s: %s" % (result.path, line))
    for message in result.warnings:
        module.warn(message)
    data = result.to_dict()
    output = dict(changed=result.changed, run_folder=data["path"], latest_valid=data["latest_valid"],
                  deleted=data["deleted"], kept=data["kept"], before=data["before"], after=data["after"],
                  free_before=data["free_before"], free_after=data["free_after"],
                  min_free_bytes=data["min_free_bytes"], checkpoint_warnings=data["warnings"])
    if module._diff:
        output["diff"] = dict(before="".join(n + "\n" for n in result.before),
                              after="".join(n + "\n" for n in result.after),
                              before_header="%s (before)" % result.path, after_header="%s (after)" % result.path)
    if result.error:
        raise TaskFailure("%s; stopped, nothing more deleted (%d deleted before)" % (
            result.error, len(result.deleted)), **output)
    return output


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            keep_last=dict(type="int", required=True),
            keep_every=dict(type="int", default=0),
            keep=dict(type="list", elements="str", default=[]),
            min_free=dict(type="str"),
            tmp_grace=dict(type="int", default=TMP_GRACE),
            lock_file=dict(type="path"),
            replicas=dict(type="list", elements="path", default=[]),
        ),
    ).merge(CHECKPOINT_OPTIONS).module_kwargs())
    run_task(module, prune_folder)


if __name__ == "__main__":
    main()

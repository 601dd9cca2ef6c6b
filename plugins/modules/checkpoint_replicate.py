#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: checkpoint_replicate
short_description: Keep verified copies of a run folder's newest checkpoints in a replica folder on other storage
version_added: 0.2.0
description:
  - Copies the valid checkpoints of one run folder on the target that the replica's retention keeps (the
    O(keep_last) newest valid ones and every O(keep_every) steps) and that the replica folder O(replica) lacks,
    newest first, then removes the copies retention no longer keeps. The replica's newest verified copy is
    never removed.
  - "Each copy is made under a temporary name (C(tmp-replica-<name>.<pid>.<random>), never a candidate), every
    byte hashed (sha256) as it is read from the run folder, flushed (C(fsync)), read back and compared, renamed to
    the checkpoint's own name, checked by its layout at the O(validate) level, and only then entered in the
    replica's manifest C(.clusterops-replica.json) (each file's path, size and sha256). A copy cut short (the
    task killed, the replica's file system full) is a temporary that the next run removes; only copies in the
    manifest count (C(docs/checkpoint-replicas.md))."
  - A lock (C(flock) on C(.replicate.lock) in the replica folder) stops two replications into one replica at
    once. The replica folder is created when missing.
  - The launcher (O(clusterops.slurm.torchrun_launcher#role:main:torchrun_launcher_checkpoint_replicas)), remediation
    (the run's C(checkpoint_replicas), M(clusterops.slurm.training_run)) and
    M(clusterops.slurm.checkpoint_prune) with O(clusterops.slurm.checkpoint_prune#module:replicas) use the
    replica; the same code runs from cron as C(python3 clusterops_checkpoint replicate RUN_DIR REPLICA_DIR)
    (role P(clusterops.slurm.checkpoint_pruning#role), folder entry C(replicas)).
  - Run the task as the folder's owner (C(become_user)); the replica's files are the task user's.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.checkpoint
attributes:
  check_mode:
    support: full
    details: Lists what would be copied (RV(copied)) and removed (RV(deleted)); copies, removes and locks nothing.
  diff_mode:
    support: full
    details: The replica's verified copies (its manifest) before and after, one name a line.
  platform:
    platforms: posix
options:
  replica:
    description:
      - The replica folder (absolute), on other storage than O(run_folder); not O(run_folder) itself.
    type: path
    required: true
  keep_last:
    description:
      - Keep this many newest valid checkpoints in the replica. V(0) or less keeps every copy.
    type: int
    default: 2
  keep_every:
    description:
      - Also keep copies whose step is a multiple of this number (milestones). V(0) turns it off.
    type: int
    default: 0
  bwlimit:
    description:
      - Copy at most this many bytes per second, with a binary unit (V(100M), V(1.5G)) or in bytes.
      - Unset, no limit. For the I/O priority, run the task under C(ionice) or set the cron entry's.
    type: str
  name_template:
    description:
      - The run's Lightning C(ModelCheckpoint) filename template, for names that carry the step without V(step=).
    type: str
seealso:
  - module: clusterops.slurm.checkpoint_prune
  - module: clusterops.slurm.checkpoint_info
'''

EXAMPLES = r'''
- name: Keep the two newest checkpoints of llama-8b on the second file system, as the run's owner
  clusterops.slurm.checkpoint_replicate:
    run_folder: /lustre/runs/llama-8b
    replica: /gpfs/replicas/llama-8b
    keep_last: 2
    keep_every: 10000
    bwlimit: 500M
  become: true
  become_user: alice
  register: replicated

- name: Say how far the replica lags
  ansible.builtin.debug:
    msg: "replica at step {{ replicated.lag.replica_step }}, {{ replicated.lag.checkpoints_behind }} behind"
'''

RETURN = r'''
run_folder:
  description: The run folder (absolute).
  returned: always
  type: str
replica:
  description: The replica folder (absolute).
  returned: always
  type: str
copied:
  description: The checkpoints copied and verified (in check mode, those that would be), newest first.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The checkpoint's name, the same in both folders.
      type: str
    step:
      description: Its step, read from the name.
      type: int
    bytes:
      description: Bytes copied (in check mode, its size where the scan read it, else null).
      type: int
    seconds:
      description: Seconds the copy took, read-back and check included (null in check mode).
      type: float
  sample: [{"name": "step_000002000", "step": 2000, "bytes": 20401094656, "seconds": 41.2}]
deleted:
  description: Copies retention removed from the replica (in check mode, would remove), oldest first.
  returned: success
  type: list
  elements: dict
  sample: [{"name": "step_000001000", "step": 1000, "reason": "older than the 2 newest valid checkpoints"}]
kept:
  description: The replica's copies kept, each with why.
  returned: success
  type: list
  elements: dict
lag:
  description: How far the replica is behind the run folder after the task.
  returned: success
  type: dict
  contains:
    primary_step:
      description: The run folder's newest valid checkpoint's step (null without one).
      type: int
    replica_step:
      description: The replica's newest verified copy's step (null without one).
      type: int
    checkpoints_behind:
      description: Valid checkpoints of the run folder newer than the replica's newest copy.
      type: int
    seconds_behind:
      description: Seconds since the oldest of those was written (modification time); 0 when none.
      type: float
  sample: {"primary_step": 3000, "replica_step": 2000, "checkpoints_behind": 1, "seconds_behind": 312.5}
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
    CheckpointError,
    read_index,
    replicate,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.pruning import parse_size
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint_options import CHECKPOINT_OPTIONS
from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure, run_task


def _verified(replica):
    try:
        return sorted(read_index(replica))
    except CheckpointError:
        return []


def replicate_folder(module):
    """The task of ``checkpoint_replicate`` (for ``_task.run_task``): the replica brought up to date (in
    check mode, planned), with its result (RETURN)."""
    params = module.params
    if params["keep_every"] < 0:
        raise TaskFailure("keep_every must be 0 (off) or more, not %d" % params["keep_every"])
    try:
        rate = parse_size(params["bwlimit"]) if params["bwlimit"] else None
    except ValueError as exc:
        raise TaskFailure("bwlimit: %s" % exc)
    before = _verified(params["replica"])
    lines: List[str] = []
    try:
        result = replicate(params["run_folder"], params["replica"], params["keep_last"], params["keep_every"],
                           params["validate"], rate, dry_run=module.check_mode, log=lines.append,
                           name_template=params["name_template"])
    except (CheckpointError, ValueError, OSError) as exc:
        raise TaskFailure(str(exc), run_folder=params["run_folder"], replica=params["replica"], copied=[])
    for line in lines:
        module.log("checkpoint_replicate %s: %s" % (result.replica, line))
    data = result.to_dict()
    output = dict(changed=result.changed, run_folder=data["run_dir"], replica=data["replica"], copied=data["copied"],
                  deleted=data["deleted"], kept=data["kept"], lag=data["lag"])
    if module._diff:
        gone = set(d["name"] for d in result.deleted)
        after = sorted((set(before) | set(c["name"] for c in result.copied)) - gone)
        output["diff"] = dict(before="".join(n + "\n" for n in before), after="".join(n + "\n" for n in after),
                              before_header="%s (verified copies, before)" % result.replica,
                              after_header="%s (verified copies, after)" % result.replica)
    if result.error:
        raise TaskFailure("%s; the copies verified before stay (%d copied)" % (result.error, len(result.copied)),
                          **output)
    return output


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            replica=dict(type="path", required=True),
            keep_last=dict(type="int", default=2),
            keep_every=dict(type="int", default=0),
            bwlimit=dict(type="str"),
            name_template=dict(type="str"),
        ),
    ).merge(CHECKPOINT_OPTIONS).module_kwargs())
    run_task(module, replicate_folder)


if __name__ == "__main__":
    main()

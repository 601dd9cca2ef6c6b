#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: checkpoint_info
short_description: Find the newest valid training checkpoint in a run folder
version_added: 0.1.0
description:
  - Lists the training checkpoints of one run folder on the target, checks them, and returns the
    newest valid one. It only reads; nothing is changed.
  - "Layouts recognised: this collection's own contract (V(step_<S>/) with a C(manifest.json) written
    last, see C(docs/checkpoint-contract.md)), torch.save files V(checkpoint_epoch_<E>_step_<S>.pth),
    torch.distributed.checkpoint folders (V(step_<S>/) or V(step-<S>/) with C(.metadata)), Hugging Face
    V(checkpoint-<S>/) (C(trainer_state.json)), DeepSpeed V(global_step<S>/) with its C(latest) file,
    Megatron V(iter_<S>/) with C(latest_checkpointed_iteration.txt), and Lightning/NeMo
    C(ModelCheckpoint) files V(*.ckpt) (V(epoch=<E>-step=<S>.ckpt), V(step=<S>.ckpt), any metrics in
    any order, V(-v<N>) versions, V(last.ckpt) and V(last-v<N>.ckpt) as copies or symlinks)."
  - "A Lightning checkpoint is ordered by its global step, read from the name (V(step=<S>), or the
    O(name_template)), else from the file's own C(data.pkl) (C(global_step)), read without torch and
    without running anything from the file. A whole V(.ckpt) whose step neither tells is reported in
    RV(unordered) and no checkpoint is chosen (RV(latest_valid) is V(null)): the order is not guessed."
  - Checkpoints are ordered by the numbers in their names, (epoch, step) where the name has an epoch,
    else step; never by name or modification time. Temporary entries (V(tmp-*), V(*.tmp)) are never
    chosen, and names that match no layout are returned in RV(ignored).
  - When the newest checkpoint is broken, the one before it is chosen, and so on.
  - Pointers (C(latest), C(latest_checkpointed_iteration.txt), C(last.ckpt) symlinks) are checked
    against what is on disk; one naming a missing, broken or older checkpoint gives a warning, and the
    newest valid checkpoint is returned all the same. Symlinks out of the run folder are never followed.
  - The same code runs on cluster hosts without Ansible or torch as
    C(python3 /opt/clusterops/clusterops_checkpoint latest DIR) (the package C(plugins/module_utils/_checkpoint/)
    installed by role P(clusterops.slurm.checkpoint_tool#role)), for job launchers.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.attributes.IDEMPOTENT
  - clusterops.slurm.attributes.INFO_MODULE
  - clusterops.slurm.checkpoint
attributes:
  platform:
    platforms: posix
options:
  name_template:
    description:
      - The C(filename) of the run's Lightning/NeMo C(ModelCheckpoint), such as V({epoch}-{step}), when
        its names carry the step without V(step=) (C(auto_insert_metric_name=False)). V({step}) and
        V({epoch}) mark the numbers, any other V({metric}) matches any value; a field may appear with
        or without its V(name=) prefix.
      - Not needed for Lightning's default names nor for names with V(step=), nor for the other layouts.
    type: str
  validate_all:
    description:
      - Check every checkpoint at the O(validate) level.
      - When V(false), every checkpoint is checked at V(structure) and only the newest ones at
        O(validate), down to the first that passes; RV(checkpoints[].checked) says which level each
        one was checked at.
    type: bool
    default: false
notes:
  - The folder is read as it is at the time of the task. A checkpoint being written under a
    temporary name is not listed until it is renamed into place.
seealso:
  - name: torch.distributed.checkpoint
    description: PyTorch distributed checkpointing, whose C(.metadata) file commits a checkpoint.
    link: https://pytorch.org/docs/stable/distributed.checkpoint.html
'''

EXAMPLES = r'''
- name: Newest valid checkpoint of a run, reading only headers
  clusterops.slurm.checkpoint_info:
    run_folder: /lustre/runs/llama-8b
  register: ckpt

- name: Resume from it, or start from scratch when there is none
  ansible.builtin.debug:
    msg: "{{ ckpt.latest_valid.path if ckpt.latest_valid else 'no checkpoint: start from scratch' }}"

- name: Verify every byte of every checkpoint (a pruning job)
  clusterops.slurm.checkpoint_info:
    run_folder: /lustre/runs/llama-8b
    validate: sha256
    validate_all: true
  register: full

- name: List the broken ones
  ansible.builtin.debug:
    msg: "{{ item.name }}: {{ item.why_invalid }}"
  loop: "{{ full.checkpoints | rejectattr('valid') }}"
  loop_control:
    label: "{{ item.name }}"
'''

RETURN = r'''
run_folder:
  description: The run folder (O(run_folder)), absolute.
  returned: success
  type: str
  sample: /lustre/runs/llama-8b
validate:
  description: The level asked for in O(validate).
  returned: success
  type: str
  sample: sizes
latest_valid:
  description: The newest valid checkpoint (an element of RV(checkpoints)), or V(null) when there is none.
  returned: success
  type: dict
  sample:
    name: step_000002000
    path: /lustre/runs/llama-8b/step_000002000
    layout: clusterops
    step: 2000
    epoch: 1
    valid: true
    why_invalid: null
    checked: sizes
    files: 3
    size: 16106127360
    time: "2026-03-01T12:00:00Z"
    pointed_by: []
checkpoints:
  description: Every checkpoint of the folder, oldest first.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The entry's name in the run folder.
      type: str
      sample: step_000002000
    path:
      description: Absolute path of the checkpoint folder or file.
      type: str
    layout:
      description: >-
        V(clusterops), V(torch_dcp), V(torch_file), V(huggingface), V(deepspeed), V(megatron),
        V(lightning), V(accelerate), V(nemo), V(torchtune), V(nemo_automodel), V(composer) or V(orbax)
        (the table of layouts in docs/checkpoint-contract.md).
      type: str
      sample: clusterops
    step:
      description: Step (iteration) number from the name.
      type: int
      sample: 2000
    epoch:
      description: >-
        Epoch from the name, the manifest or C(trainer_state.json) (where it is fractional), V(null)
        when unknown.
      type: raw
      sample: 1
    valid:
      description: Whether it passed the level in RV(checkpoints[].checked); V(null) when not checked.
      type: bool
    why_invalid:
      description: Why it is not valid, one line; V(null) when valid.
      type: str
      sample: "model.pt: 1048576 bytes on disk, the manifest says 2097152"
    checked:
      description: The level it was checked at.
      type: str
      sample: sizes
    files:
      description: Number of files (for the contract, those listed in the manifest).
      type: int
    size:
      description: Total bytes of those files.
      type: int
    time:
      description: When it was written, from the manifest (contract only), UTC.
      type: str
    pointed_by:
      description: Names of the pointers that resolve to it.
      type: list
      elements: str
      sample: [latest]
    step_from:
      description: >-
        Where the step was read: V(name), V(template) (O(name_template)) or V(metadata) (a Lightning
        file's own C(global_step)).
      type: str
      sample: name
unordered:
  description: >-
    Lightning V(.ckpt) entries whose step neither the name nor the file tells. One with RV(unordered[].valid)
    V(null) (a whole file) means no checkpoint is chosen; a broken one (V(false)) is only reported.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The entry's name.
      type: str
      sample: model.ckpt
    reason:
      description: Why its step is unknown.
      type: str
      sample: "its name has no step and the file does not say it: no global_step inside (not a Lightning checkpoint?)"
    valid:
      description: V(false) when the file is broken, else V(null).
      type: bool
unexplained:
  description: >-
    Entries that look like training state (a state file suffix such as V(.pt), V(.safetensors),
    V(.distcp); framework metadata such as C(.metadata) or C(trainer_state.json); a step, epoch or
    iteration in the name; or such files in the two levels below a folder) that no known layout
    explains. Without a valid checkpoint the folder is "exists, none usable", never empty: the
    launcher does not start from scratch and remediation asks a human.
  returned: success
  type: list
  elements: dict
  sample:
    - name: epoch_0_step_19
      reason: "looks like training state (a progress counter in its name (epoch_0)), but no known layout explains it"
empty:
  description: >-
    V(true) when the folder holds no checkpoint candidate and nothing in RV(unexplained): the only case
    in which a run starts from scratch (C(clusterops_checkpoint latest) exits 1).
  returned: success
  type: bool
  sample: false
ignored:
  description: Entries of the folder that are neither checkpoints nor pointers, with why.
  returned: success
  type: list
  elements: dict
  sample:
    - name: tmp-step_000003000.4711.9f2c1a0b
      reason: temporary (still being written, or left by a crash)
    - name: handpicked
      reason: matches no checkpoint layout
pointers:
  description: Pointer files and symlinks of the folder, each resolved and checked.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The pointer's name.
      type: str
      sample: latest
    kind:
      description: V(deepspeed_latest), V(megatron_tracker), V(lightning_last) or V(symlink).
      type: str
    target:
      description: What it says (file content or symlink target).
      type: str
      sample: global_step1000
    resolves_to:
      description: The checkpoint it names, V(null) when none.
      type: str
    status:
      description: >-
        V(current) (the newest valid), V(older), V(invalid), V(missing), V(escapes) (a symlink out of
        the folder, not followed), V(unrecognised), V(unreadable), V(copy) (a C(last.ckpt) that is not
        a symlink), V(release) (Megatron).
      type: str
      sample: older
    message:
      description: The warning, empty when V(current).
      type: str
checkpoint_warnings:
  description: >-
    Everything an operator should know: pointers that disagree with the disk, newer checkpoints
    skipped as invalid, equal numbers, mixed layouts. Each is also shown as a task warning.
  returned: success
  type: list
  elements: str
  sample: ["latest points to global_step1000, older than the newest valid global_step2000"]
finished:
  description: >-
    Content of the run's C(FINISHED) marker (C({}) when empty or not JSON), or V(null) when the run
    has none.
  returned: success
  type: dict
  sample: {step: 5000, epoch: 3, checkpoint: step_000005000, time: "2026-03-01T12:00:00Z"}
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

from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import CheckpointError, inspect
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint_options import CHECKPOINT_OPTIONS
from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec
from ansible_collections.clusterops.slurm.plugins.module_utils._task import run_task


def report(module):
    """The task of ``checkpoint_info`` (for ``_task.run_task``): the run folder's checkpoints (RETURN)."""
    params = module.params
    found = inspect(params["run_folder"], params["validate"], validate_all=params["validate_all"],
                    name_template=params["name_template"])
    for message in found.warnings:
        module.warn(message)
    result = found.to_dict()
    result["checkpoint_warnings"] = result.pop("warnings")
    # Not "path": AnsibleModule would add the folder's owner, mode, ... to the result.
    result["run_folder"] = result.pop("path")
    result["changed"] = False
    return result


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            validate_all=dict(type="bool", default=False),
            name_template=dict(type="str"),
        ),
    ).merge(CHECKPOINT_OPTIONS).module_kwargs())
    run_task(module, report, errors=(CheckpointError, ValueError))


if __name__ == "__main__":
    main()

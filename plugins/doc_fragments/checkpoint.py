# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):

    # The options of the modules that read one run folder's checkpoints (checkpoint_info,
    # checkpoint_prune): module_utils/_checkpoint_options.py CHECKPOINT_OPTIONS. The levels
    # are module_utils/_checkpoint's LEVELS, each including the ones before it.
    DOCUMENTATION = r'''
options:
  run_folder:
    description:
      - The run folder, the folder holding the checkpoints (not one checkpoint). Returned as
        RV(run_folder), absolute.
    type: path
    required: true
    aliases: [path]
  validate:
    description:
      - What a checkpoint must pass to count as valid. Each level includes the ones before it.
      - V(structure) checks that the commit marker (C(manifest.json), C(.metadata),
        C(trainer_state.json), ...) and the files the layout needs are there and not empty, and that
        the manifest agrees with the folder name.
      - V(sizes) also compares each file's size with the manifest, reads the zip central directory
        and local headers of torch.save files (a file truncated by a few bytes fails), checks
        safetensors headers against the file size, and the data files named by a
        torch.distributed.checkpoint C(.metadata). It reads only headers.
      - V(sha256) also reads every byte once, in chunks, to compare the sha256 of each file with the
        manifest, and the CRC-32 of each entry of torch.save files. This reads the whole checkpoint.
      - V(load) also opens every torch.save file with C(torch.load(weights_only=True)), as the reference
        trainer does; one that fails (a numpy RNG state, a class that is not allowed) is invalid with
        the error as the reason. It needs torch on the target (the task fails without it) and memory
        maps each file; C(torch.distributed.checkpoint) data files are not loaded.
    type: str
    choices: [structure, sizes, sha256, load]
    default: sizes
notes:
  - C(docs/checkpoint-contract.md) in the collection describes how checkpoints are written, each
    layout's commit marker, and the exit codes of the command line.
'''

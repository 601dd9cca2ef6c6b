# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""Training checkpoints on disk: find the newest valid one, verify, and write them safely.

Standard library only, Python 3.8+, and self-contained: the same package (relative imports only)
is the module_utils of ``clusterops.slurm.checkpoint_info``/``checkpoint_prune`` and the command
that runs on cluster hosts without Ansible or torch, installed there as ``clusterops_checkpoint``
by the role ``clusterops.slurm.checkpoint_tool``: ``python3 /opt/clusterops/clusterops_checkpoint
latest DIR`` (or ``python3 -m clusterops_checkpoint`` with its parent folder on ``sys.path``); see
:func:`main` and docs/checkpoint-contract.md.

Modules, one job each (this file re-exports the public API):

==============  =================================================================================
``common``      constants, :class:`CheckpointError`, :class:`Checkpoint`, :class:`Report`
``bounds``      the bounds of every number a user writes (steps, times, sizes), checked where read
``names``       entry names of each layout, Lightning names and name templates
``fsutil``      hashing, fsync, flock, bounded JSON reads, walks inside a folder
``atomic``      files replaced atomically in their own folder, and a killed writer's leftovers removed
``formats``     torch.save zips, safetensors headers, torch.distributed.checkpoint metadata
``layouts``     the checks of each layout at each validation level
``parts``       the parts a save is made of (zips, weights, DCP, DeepSpeed's grid), shared by the layouts
``runs``        run folders: :func:`inspect`, :func:`scan`, :func:`latest_valid`, :func:`verify`
``writer``      :func:`commit_checkpoint`, :class:`CheckpointWriter`, :func:`mark_finished`
``aside``       :func:`set_aside_newer_invalid`: newer invalid checkpoints renamed aside before a resume
``pruning``     :func:`prune` by policy, under the run folder's flock
``replicas``    :func:`replicate` to a replica folder (verified copies, retention, lag)
``replica_index`` a replica folder's manifest: read and checked, written atomically
``copies``      :func:`best_copy` of run folder and replicas, the guard pruning keeps for them
``prune_plan``  what :func:`prune` deletes and why each checkpoint stays (reads, deletes nothing)
``cli``         the command line (:func:`main`); ``__main__`` runs it
==============  =================================================================================

Layouts recognised in a run folder (names matched with anchored regexes, numbers compared as
integers, never names or mtimes):

=================  ==========================================  ====================================
layout             entry                                       complete when
=================  ==========================================  ====================================
``clusterops``     folder ``step_<S>/``                        ``manifest.json`` (written last)
``torch_dcp``      folder ``step_<S>/`` or ``step-<S>/``        ``.metadata`` (written last)
``torch_file``     file ``checkpoint_epoch_<E>_step_<S>.pt[h]``  a whole zip (torch.save)
``huggingface``    folder ``checkpoint-<S>/``                  ``trainer_state.json``
``deepspeed``      folder ``global_step<S>/`` (+ ``latest``)   model states + a full ZeRO rank grid
``megatron``       folder ``iter_<S>/`` (+ tracker file)       ``.metadata``, or a full mp_rank grid
``lightning``      any file ``*.ckpt`` (``ModelCheckpoint``)      a whole zip (torch.save)
=================  ==========================================  ====================================

Lightning/NeMo checkpoints are ordered by their global step, read from the name (``step=<S>``
anywhere, or a ``name_template``), else from the file's ``data.pkl`` (without torch, nothing run);
a whole ``.ckpt`` whose step nothing tells stops the choice (:attr:`Report.unordered`).

Candidates are ordered by ``(epoch, step)`` where the name carries an epoch, else by step (a
missing epoch counts as -1). Temporary entries (``tmp-*``, ``*.tmp``) are never candidates; names
that match no layout are reported as ignored.

Validation levels (each includes the ones before):

* ``structure``: the commit marker and the files the layout needs are there, regular, not empty;
  the manifest (contract) parses and agrees with the folder name.
* ``sizes``: every file's size equals the manifest's (contract); torch.save zips have their end of
  central directory and consistent local headers; safetensors headers cover the file exactly;
  a torch.distributed.checkpoint ``.metadata`` (read without torch) points inside its data files.
* ``sha256``: every byte is read once: sha256 of each file against the manifest (contract), and the
  CRC-32 of each zip entry (torch.save files of the other layouts).
* ``load`` (opt-in, needs torch): every torch.save file opens with ``torch.load(weights_only=True)``
  and :data:`LOAD_SAFE_GLOBALS`, as the reference trainer opens it.
"""

from __future__ import annotations

from .common import (  # noqa: F401
    CHUNK_SIZE,
    CONTRACT,
    DCP,
    DEEPSPEED,
    DELETING_PREFIX,
    EXIT_ERROR,
    EXIT_INVALID,
    EXIT_NONE,
    EXIT_OK,
    FINISHED,
    FORMAT,
    FORMAT_VERSION,
    HUGGINGFACE,
    LAYOUTS,
    LEVELS,
    LIGHTNING,
    LOAD,
    LOAD_SAFE_GLOBALS,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    MAX_PICKLE_BYTES,
    MEGATRON,
    PRUNE_LOCK,
    REPLICA_INDEX,
    REPLICATE_LOCK,
    REPLICA_STAGING_PREFIX,
    SHA256,
    SIZES,
    STRUCTURE,
    TMP_PREFIX,
    TMP_SUFFIX,
    TORCH_FILE,
    Checkpoint,
    CheckpointError,
    Report,
)
from .names import (  # noqa: F401
    checkpoint_name,
    compile_name_template,
    is_temporary,
    lightning_progress,
    parse_lightning_name,
    parse_name,
)
from .atomic import atomic_write_json  # noqa: F401
from .fsutil import (  # noqa: F401
    hash_file,
    open_lock_file,
    try_flock,
)
from .formats import (  # noqa: F401
    check_safetensors,
    check_torch_zip,
    dcp_storage,
)
from .layouts import (  # noqa: F401
    load_error,
    torch_load,
)
from .aside import set_aside_newer_invalid  # noqa: F401
from .runs import (  # noqa: F401
    inspect,
    latest_valid,
    scan,
    verify,
)
from .writer import (  # noqa: F401
    CheckpointWriter,
    commit_checkpoint,
    mark_finished,
    write_checkpoint,
)
from .pruning import (  # noqa: F401
    EXIT_LOCKED,
    TMP_GRACE,
    PruneLocked,
    PruneResult,
    human_size,
    parse_min_free,
    prune,
)
from .replicas import (  # noqa: F401
    ReplicaLocked,
    ReplicateResult,
    newest_verified,
    read_index,
    replicate,
)
from .copies import (  # noqa: F401
    CopyChoice,
    best_copy,
)
from .cli import (  # noqa: F401
    main,
)

__all__ = [
    "CHUNK_SIZE",
    "CONTRACT",
    "DCP",
    "DEEPSPEED",
    "DELETING_PREFIX",
    "EXIT_ERROR",
    "EXIT_INVALID",
    "EXIT_NONE",
    "EXIT_OK",
    "FINISHED",
    "FORMAT",
    "FORMAT_VERSION",
    "HUGGINGFACE",
    "LAYOUTS",
    "LEVELS",
    "LIGHTNING",
    "LOAD",
    "LOAD_SAFE_GLOBALS",
    "MANIFEST",
    "MAX_MANIFEST_BYTES",
    "MAX_PICKLE_BYTES",
    "MEGATRON",
    "PRUNE_LOCK",
    "REPLICA_INDEX",
    "REPLICATE_LOCK",
    "REPLICA_STAGING_PREFIX",
    "SHA256",
    "SIZES",
    "STRUCTURE",
    "TMP_PREFIX",
    "TMP_SUFFIX",
    "TORCH_FILE",
    "Checkpoint",
    "CheckpointError",
    "Report",
    "checkpoint_name",
    "compile_name_template",
    "is_temporary",
    "lightning_progress",
    "parse_lightning_name",
    "parse_name",
    "atomic_write_json",
    "hash_file",
    "open_lock_file",
    "try_flock",
    "check_safetensors",
    "check_torch_zip",
    "dcp_storage",
    "load_error",
    "torch_load",
    "inspect",
    "latest_valid",
    "set_aside_newer_invalid",
    "scan",
    "verify",
    "CheckpointWriter",
    "commit_checkpoint",
    "mark_finished",
    "write_checkpoint",
    "EXIT_LOCKED",
    "TMP_GRACE",
    "PruneLocked",
    "PruneResult",
    "human_size",
    "parse_min_free",
    "prune",
    "CopyChoice",
    "ReplicaLocked",
    "ReplicateResult",
    "best_copy",
    "newest_verified",
    "read_index",
    "replicate",
    "main",
]

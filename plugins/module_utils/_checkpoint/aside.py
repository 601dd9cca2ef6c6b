# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""Newer invalid checkpoints moved out of the way before a run resumes from an older one (renamed, never deleted).

A trainer that numbers its saves writes the next one under the name of the invalid save it falls back past:
Accelerate's automatic naming refuses to (``checkpoint_<N>`` "already exists"), others overwrite parts of it
or mix files of two saves. Before a resubmission resumes from the newest valid checkpoint, every newer
checkpoint that is invalid is renamed to ``tmp-0-invalid-<name>``: a temporary entry, which no layout reads,
which is never training state nobody explains, and which pruning removes once it is older than ``tmp_grace``.
The ``0`` is for Accelerate's automatic naming, which orders every entry of its folder by the first number in
its name (and fails on a name without one): the set-aside entry sorts first, never as the newest.
"""

from __future__ import annotations

import os

try:
    from typing import List, Optional, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .common import SIZES, TMP_PREFIX
from .runs import inspect

#: What a set-aside checkpoint's name starts with (then its own name): a temporary entry (``tmp-``).
ASIDE_PREFIX = TMP_PREFIX + "0-invalid-"


def aside_name(name: str, taken: "set") -> str:
    """The name ``name`` is set aside under: ``tmp-0-invalid-<name>``, then ``-2``, ``-3`` ... while ``taken``."""
    candidate, count = ASIDE_PREFIX + name, 1
    while candidate in taken:
        count += 1
        candidate = "%s%s-%d" % (ASIDE_PREFIX, name, count)
    return candidate


def set_aside_newer_invalid(run_dir: str, validate: str = SIZES,
                            name_template: Optional[str] = None) -> List[Tuple[str, str]]:
    """Rename every checkpoint of ``run_dir`` newer than its newest valid one (all of them when none is valid:
    the run resumes from a replica) and invalid at ``validate``, to :func:`aside_name`. Run as the run's owner.

    Returns ``[(old name, new name)]`` of what was renamed, oldest first; [] when ``run_dir`` does not exist.
    An entry that cannot be renamed (gone meanwhile, no right to) is left where it is.

    Raises:
        CheckpointError, ValueError: :func:`.runs.inspect`'s (a folder that cannot be read, a bad level).
    """
    if not os.path.isdir(run_dir):
        return []
    report = inspect(run_dir, validate, list_all=False, name_template=name_template)
    best = report.latest_valid
    taken = set(os.listdir(run_dir))
    moved: List[Tuple[str, str]] = []
    for ckpt in report.checkpoints:
        if ckpt.valid is not False or (best is not None and ckpt.sort_key() <= best.sort_key()):
            continue
        new = aside_name(ckpt.name, taken)
        try:
            os.rename(ckpt.path, os.path.join(report.path, new))
        except OSError:
            continue
        taken.add(new)
        moved.append((ckpt.name, new))
    return moved

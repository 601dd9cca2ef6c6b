# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The modules of the reference trainer (``reference_trainer.py`` beside this folder, which puts the
folder first on ``sys.path`` while it imports it). One job a module; the first five need no torch,
so that a finished run or a refused resume ends before torch is imported:

- ``common``: the refusal, the exit codes, the one human line of rank 0;
- ``signals``: the USR1 and SIGTERM handlers, which only record;
- ``library``: the collection's checkpoint library (``clusterops_checkpoint``);
- ``arguments``: the command line;
- ``plan``: the rank, world size and where to start (the ``--resume`` checks);
- ``progress``: the heartbeat file, the event log and the injected hang;
- ``dist``: the process group and its few collectives (torch);
- ``state``: a checkpoint's save protocol and its load (torch);
- ``training``: model, data, the training loop and its step boundaries (torch).
"""

from __future__ import annotations

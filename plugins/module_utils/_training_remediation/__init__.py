# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training remediation, private to the collection (the leading underscore): no API promise outside it.

- :mod:`.registry`: the run registry on disk: ``run.json`` (the run spec, its ONE set of defaults
  and its validator) and ``state.json`` (remediation's bookkeeping), atomic writes, the lock.
- :mod:`.policy`: pure decisions: what to do with a run given its jobs, checkpoint, budgets, hangs
  and suspect nodes; the state after an action; the report.
- :mod:`.evidence`: the stacks of a hung job's ranks (py-spy through ``srun --overlap``).
- :mod:`.runner`: the loop of ``training_remediation``: lock, read the registry, ask Slurm, decide,
  act, write the state.
"""

from __future__ import annotations

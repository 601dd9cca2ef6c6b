# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training remediation: restart failed or hung training runs (``training_remediation``), register
them (``training_run``), say what their failures cost (``training_goodput_info``). Observe, decide,
act, report:

- :mod:`.runner` runs the task in that order and builds the result once;
- :mod:`.observe` reads (the runs' jobs, each run's folders as its owner, ``state.json``);
- :mod:`.policy` decides (pure); :mod:`.records` holds what passes between the steps (the run,
  checkpoint status, progress, observation, decision, outcome);
- :mod:`.act` acts (sbatch, scancel after :mod:`.evidence`, the suspect drains, ``state.json``);
- :mod:`.report` says it (lines, next steps, the result's lists);
- :mod:`.registry` and :mod:`.registry_options`: the run registry on disk and its options;
- ``goodput*``: the goodput task, its figures, timeline and HTML page.

Private to the collection (the leading underscore): no API promise outside it. Where a change goes:
docs/architecture.md.
"""

from __future__ import annotations

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Node remediation: which broken nodes to reboot, which to resume, which to leave
(``slurm_node_remediation``, the filter ``remediation_plan``). Read, plan, act:

- :mod:`.runner` reads the nodes and their events, asks the policy, acts through Slurm, reports;
- :mod:`.policy` plans (pure: triage, circuit breaker, blast radius), over :mod:`.settings`
  (``PolicySettings``, the defaults' one home), :mod:`.classes` (reason classes), :mod:`.heals`
  (the healing budget) and :mod:`.report` (hostlists and lines for people);
- :mod:`.journal` keeps the heal journal and the cluster's lock; :mod:`.goodput` says what broken
  nodes cost a cluster (``cluster_goodput_info``).

Private to the collection (the leading underscore): no API promise outside it. Where a change goes:
docs/architecture.md.
"""

from __future__ import annotations

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Node remediation, private to the collection (the leading underscore): no API promise outside it.

Which broken nodes to reboot, which to resume, which to leave.

The planning is pure functions over the node dicts of ``slurm_node_info`` (see ``_nodes``) and
the node events of ``slurm_node_event_info`` (see ``_node_events``); only :mod:`.runner` calls
Slurm. The policy, in order, for every node in scope:

1. A node that is neither drained (DRAIN flag), DOWN, FAIL nor rebooting needs nothing; it is not
   listed. (sinfo's text word ``reboot^`` hides DRAIN and DOWN, so a rebooting node is always
   listed, as skipped.)
2. A node with a reboot already requested or issued, powered down or powering up/down by
   power saving, or in a maintenance reservation is skipped: something else owns it. A node
   rebooting (a reboot requested or issued, or still broken with this collection's reboot
   reason) is *in flight* and counts against the blast radius of this run.
3. A reason to which slurmctld appended that its own recovery failed (`` : reboot timed out``,
   `` : ResumeTimeout reached``) is reported as needing a human (class ``resume_timeout``); it
   is not in flight any more.
4. The reason Slurm started with (the reason without the tails slurmctld appends, see
   :func:`.classes.reason_origin`) is looked up in the reason classes (first match wins). A node whose
   reason matches no class, or that has no reason, is skipped (an admin or a health check
   drained it on purpose), unless Slurm flags it NOT_RESPONDING or FAIL: then it is reported
   as needing a human (class ``unclassified_failing``), never acted on. A class with action
   ``human`` is reported as needing a human (e.g. a GPU that needs a hardware repair, or a node
   this collection stopped healing).
5. Healing budget: a node healed ``heal_budget`` times within ``heal_window`` seconds (closed
   events of an acting class in Slurm's accounting) is not healed again; it gets the reason
   ``clusterops: flapping: healed N times in W, last: <reason>`` that only a ``human`` class
   matches, and is reported as needing a human. Heals before ``heal_since`` or before the node
   last left a ``human`` class (a person repaired it and returned it to service) do not count.
6. A node that does not respond (NOT_RESPONDING), or whose class says ``reboot``, is rebooted;
   any other node of a ``resume`` class is resumed.
7. Circuit breaker: when more nodes in scope broke within ``circuit_window`` seconds than
   ``min(circuit_max_nodes, max(circuit_min_nodes, floor(considered * circuit_max_percent /
   100)))``, nothing is healed: a cluster-wide failure (file system, fabric) is suspected and
   reported with the reasons grouped by class.

Then the blast radius: at most ``min(max_nodes, max(1, floor(total * max_percent / 100)))``
nodes are rebooting or acted on at once, in-flight reboots included, oldest reason first; the
rest are reported as overflow.

The modules of the package, each one job:

- :mod:`.settings`: the policy's settings, their defaults (their one home: the filter, the module,
  the role and its argument spec repeat them, a unit test keeps them equal) and their checks.
- :mod:`.classes`: reason classes: the defaults and their sources, every reason prefix this
  collection writes as a named constant, compiling and classifying reasons, the tails slurmctld
  appends.
- :mod:`.heals`: the healing budget: heals counted from Slurm's node events, the flapping reason.
- :mod:`.journal`: the heal journal (the heals accounting does not show yet, the circuit breaker's
  trips) and the cluster's lock.
- :mod:`.goodput`: what broken nodes cost the cluster over a window (``cluster_goodput_info``), pure.
- :mod:`.policy`: the plan: per-node triage, the blast radius, the circuit breaker.
- :mod:`.report`: grouping nodes into hostlists, the plan's lines for people.
- :mod:`.runner`: the task of ``slurm_node_remediation``: read, plan, act through Slurm.
"""

from __future__ import annotations

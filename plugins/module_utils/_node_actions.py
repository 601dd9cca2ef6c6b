# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Applying node changes: :func:`apply_node_changes` runs the scontrol calls that
``_node_changes.plan_node_changes`` planned (pure; its names are imported here for the modules
that plan and apply: ``slurm_node``, ``slurm_node_remediation``).

Private to the collection (the leading underscore): no API promise outside it.
"""

from __future__ import annotations

from typing import Any, Dict

from ansible_collections.clusterops.slurm.plugins.module_utils._node_changes import (  # noqa: F401 pylint: disable=unused-import
    NODE_ACTIONS,
    Change,
    plan_node_changes,
    reached,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import NodeParseError, read_nodes
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SlurmCommandError, failure_words


def apply_node_changes(cli: Any, plan: Dict[str, Any], check_mode: bool) -> Dict[str, Any]:
    """Run the scontrol calls of a ``plan_node_changes`` plan (not in check mode).

    This one runs commands (``cli`` is a ``_slurm_cli.SlurmCLI``). A call Slurm refuses may have
    changed some nodes of its hostlist: every node is read once more, and each node the change did
    not reach is reported with Slurm's words.

    Returns:
        ``{"changes": [{action, nodes, hostlist, reason, ..., command, error?}], "changed_nodes":
        [name], "unchanged_nodes": [name], "failed_nodes": {name: message}}``; in check mode the
        nodes that would change count as changed.
    """
    changes = []
    failed = dict(plan["refused"])
    for change in plan["changes"]:
        entry = change.to_dict()
        entry["command"] = cli.command(*change.command())
        changes.append(entry)
        if check_mode:
            continue
        try:
            cli.run(*change.command(), what="%s %s" % (change.action, change.hostlist))
        except SlurmCommandError as exc:
            message = failure_words(exc)
            try:
                after, dummy = read_nodes(cli)
            except (SlurmCommandError, NodeParseError):
                after = []
            by_name = dict((n["name"], n) for n in after)
            for name in change.nodes:
                if not reached(by_name.get(name), change):
                    failed[name] = message
            entry["error"] = message
    return {
        "changes": changes,
        "changed_nodes": [name for change in plan["changes"] for name in change.nodes if name not in failed],
        "unchanged_nodes": plan["unchanged"],
        "failed_nodes": failed,
    }

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""Reading Slurm nodes: parsers for ``sinfo --json`` and ``sinfo -N`` text, and one reader.

A node is returned as a plain dict (the ``nodes`` element of ``slurm_node_info``'s RETURN):

``name`` (str), ``state`` (base state or None), ``flags`` (sorted list), ``state_raw`` (str),
``drained`` (bool), ``responding`` (bool), ``reason`` (str, ``""`` when none; kept whole),
``reason_user`` (str or None), ``reason_time`` (int, Unix seconds, or None),
``partitions`` (list, sinfo order, default partition's ``*`` removed), ``cpus`` (int),
``real_memory`` (int, MiB), ``gres`` (str), ``features`` (list), ``boot_time`` and
``slurmd_start_time`` (int, Unix seconds, or None: only the JSON source has them).

Sources of each field: ``sinfo --json`` node keys ``name``, ``state``/``state_flags``, ``reason``,
``reason_set_by_user``, ``reason_changed_at``, ``partitions``, ``cpus``, ``real_memory``, ``gres``,
``features``, ``boot_time``, ``slurmd_start_time``; text: ``sinfo -N -h -o`` fields ``%N`` ``%P``
``%T`` ``%c`` ``%m`` ``%G`` ``%f`` ``%u`` ``%H`` ``%E``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time

from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import (
    NodeState,
    SlurmStateError,
    parse_state,
)

try:
    from typing import Any, Dict, List, Optional, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass


#: Field separator for the text source: ASCII unit separator, which Slurm never prints in
#: a node name, state, partition or GRES. The reason (free text) is the LAST field, so even
#: a reason holding this byte stays whole.
TEXT_SEP = "\x1f"
TEXT_FIELDS = ("%N", "%P", "%T", "%c", "%m", "%G", "%f", "%u", "%H", "%E")
TEXT_FORMAT = TEXT_SEP.join(TEXT_FIELDS)

# What getopt says when this sinfo has no --json (Slurm before 21.08, or built without it).
_NO_JSON_OPTION = re.compile(r"(unrecognized|invalid|unknown) option|--json.*(not supported|plugin)",
                             re.IGNORECASE)


class NodeParseError(ValueError):
    """Slurm output that cannot be read as nodes."""


def _number(value):
    # type: (Any) -> Optional[int]
    """An integer from a Slurm JSON number: plain int, digit string, or the 23.02+ object
    ``{"set": bool, "infinite": bool, "number": int}``. 0 and unset become ``None``."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number


def _time(value):
    # type: (Any) -> Optional[int]
    number = _number(value)
    return number if number else None


def _split_list(value):
    # type: (Any) -> List[str]
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value if str(v)]
    text = str(value).strip()
    if not text or text in ("(null)", "(none)"):
        return []
    return [v for v in text.split(",") if v]


def _node(name, state, reason, reason_user, reason_time, partitions, cpus, memory, gres,
          features, boot_time, slurmd_start_time):
    return {
        "name": name,
        "state": state.base,
        "flags": sorted(state.flags),
        "state_raw": state.raw,
        "drained": state.drained,
        "responding": state.responding,
        "reason": reason or "",
        "reason_user": reason_user or None,
        "reason_time": reason_time,
        "partitions": partitions,
        "cpus": cpus,
        "real_memory": memory,
        "gres": gres or "",
        "features": features,
        "boot_time": boot_time,
        "slurmd_start_time": slurmd_start_time,
    }


def parse_sinfo_json(text):
    # type: (str) -> List[Dict[str, Any]]
    """Nodes from ``sinfo --json`` (Slurm 22.05 data_parser v0.0.38 and later releases).

    Args:
        text: sinfo's whole stdout.

    Returns:
        node dicts (see module docstring), in Slurm's order.

    Raises:
        NodeParseError: not JSON, no ``nodes`` list, a node without a name, or a state that
        is no Slurm node state.
    """
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise NodeParseError("sinfo --json printed no valid JSON: %s" % exc)
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise NodeParseError("sinfo --json output has no 'nodes' list")
    nodes = []
    for raw in doc["nodes"]:
        name = raw.get("name") or raw.get("hostname")
        if not name:
            raise NodeParseError("sinfo --json listed a node without a name: %r" % (raw,))
        try:
            state = parse_state(raw.get("state"), raw.get("state_flags"))
        except SlurmStateError as exc:
            raise NodeParseError("node %s: %s" % (name, exc))
        gres = raw.get("gres")
        if isinstance(gres, list):
            gres = ",".join(str(g) for g in gres)
        nodes.append(_node(
            name=str(name),
            state=state,
            reason=raw.get("reason") or "",
            reason_user=raw.get("reason_set_by_user"),
            reason_time=_time(raw.get("reason_changed_at")),
            partitions=_split_list(raw.get("partitions")),
            cpus=_number(raw.get("cpus")),
            memory=_number(raw.get("real_memory")),
            gres="" if gres in (None, "(null)") else str(gres),
            features=_split_list(raw.get("features")),
            boot_time=_time(raw.get("boot_time")),
            slurmd_start_time=_time(raw.get("slurmd_start_time")),
        ))
    return nodes


def _text_time(value):
    # type: (str) -> Optional[int]
    """sinfo ``%H`` (``2026-09-21T15:02:11``, local time) to Unix seconds; None when unset."""
    value = value.strip()
    if not value or value in ("Unknown", "None", "N/A"):
        return None
    try:
        return int(time.mktime(time.strptime(value, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def parse_sinfo_text(text):
    # type: (str) -> List[Dict[str, Any]]
    """Nodes from ``sinfo -N -h -o TEXT_FORMAT`` (one line per node and partition).

    A node that sinfo lists once per partition is returned once, with all its partitions in
    sinfo's order; the default partition's ``*`` is removed. The reason is the last field and
    is kept whole (spaces, colons, ``=``, brackets, pipes). sinfo prints ``none`` for an empty
    reason and ``(null)`` for empty GRES and features; both become empty.

    Raises:
        NodeParseError: a line with too few fields, or an unreadable state.
    """
    nodes = []  # type: List[Dict[str, Any]]
    by_name = {}  # type: Dict[str, Dict[str, Any]]
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split(TEXT_SEP, len(TEXT_FIELDS) - 1)
        if len(fields) != len(TEXT_FIELDS):
            raise NodeParseError("sinfo line %d has %d fields, expected %d: %r"
                                 % (number, len(fields), len(TEXT_FIELDS), line))
        name, partition, state_text, cpus, memory, gres, features, user, when, reason = fields
        name = name.strip()
        partition = partition.strip().rstrip("*")
        if name in by_name:
            if partition and partition not in by_name[name]["partitions"]:
                by_name[name]["partitions"].append(partition)
            continue
        try:
            state = parse_state(state_text)
        except SlurmStateError as exc:
            raise NodeParseError("node %s: %s" % (name, exc))
        reason = reason.rstrip("\n")
        if reason == "none":
            reason = ""
        user = user.strip()
        node = _node(
            name=name,
            state=state,
            reason=reason,
            reason_user=None if user in ("", "Unknown", "N/A", "(null)") else user,
            reason_time=_text_time(when) if reason else None,
            partitions=[partition] if partition else [],
            cpus=_number(cpus.strip()),
            memory=_number(memory.strip()),
            gres="" if gres.strip() == "(null)" else gres.strip(),
            features=_split_list(features),
            boot_time=None,
            slurmd_start_time=None,
        )
        by_name[name] = node
        nodes.append(node)
    return nodes


def node_state(node):
    # type: (Dict[str, Any]) -> NodeState
    """The :class:`NodeState` of a node dict made by this module's parsers."""
    return NodeState(node["state"], node["flags"], node["state_raw"])


def read_nodes(cli, source="auto"):
    # type: (Any, str) -> Tuple[List[Dict[str, Any]], str]
    """Read every node with ONE sinfo call; return ``(nodes, source)``.

    Args:
        cli: a :class:`SlurmCLI`.
        source: ``json`` (``sinfo --json``, Slurm 21.08+), ``text`` (``sinfo -N -h -o``), or
            ``auto``: JSON, and text only when this sinfo says it has no ``--json`` option
            (one extra call); any other sinfo failure is reported as it is.

    Raises:
        SlurmCommandError: sinfo failed.
        NodeParseError: its output could not be read.
    """
    if source in ("auto", "json"):
        rc, out, err = cli.run("sinfo", ["--json"], check=(source == "json"),
                               what="read node states")
        if rc == 0:
            return parse_sinfo_json(out), "json"
        if not _NO_JSON_OPTION.search(err or ""):
            # sinfo knows --json but failed (controller down, ...): a second call would
            # fail the same way, so report this one.
            raise cli.failure("sinfo", rc, out, err, "read node states")
    rc, out, err = cli.run("sinfo", ["-N", "-h", "-o", TEXT_FORMAT], what="read node states")
    return parse_sinfo_text(out), "text"

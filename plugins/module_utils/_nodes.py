# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Reading Slurm nodes: parsers for node JSON (``scontrol show nodes --json`` of 23.02+,
``sinfo --json`` of 22.05) and ``sinfo -N`` text, and one reader that picks by release.

Private to the collection (the leading underscore): no API promise outside it.

A node is returned as a plain dict (the ``nodes`` element of ``slurm_node_info``'s RETURN):

``name`` (str), ``state`` (base state or None), ``flags`` (sorted list), ``state_raw`` (str),
``drained`` (bool), ``responding`` (bool), ``reason`` (str, ``""`` when none; kept whole),
``reason_user`` (str or None), ``reason_time`` (int, Unix seconds, or None),
``partitions`` (list, sinfo order, default partition's ``*`` removed), ``cpus`` (int),
``real_memory`` (int, MiB), ``gres`` (str), ``features`` (list), ``boot_time`` and
``slurmd_start_time`` (int, Unix seconds, or None: only the JSON source has them).

``reason`` is empty on a node in service (neither drained, down, failing, rebooting nor powered
down): Slurm 24.11 keeps the last reason after a resume, and that stale reason is not reported.

Sources of each field: JSON node keys ``name``, ``state``/``state_flags``, ``reason``,
``reason_set_by_user``, ``reason_changed_at``, ``partitions``, ``cpus``, ``real_memory``, ``gres``,
``features``, ``boot_time``, ``slurmd_start_time``; text: ``sinfo -N -h -o`` fields ``%N`` ``%P``
``%T`` ``%c`` ``%m`` ``%G`` ``%f`` ``%u`` ``%H`` ``%E``.
"""

from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.clusterops.slurm.plugins.module_utils._node_state import (  # noqa: F401 pylint: disable=unused-import
    NodeState,
    SlurmStateError,
    node_state,
    parse_state,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SlurmAnswerError,
    json_errors,
    json_release,
    split_fields,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import (
    SEP,
    SINFO_FIELDS,
    SINFO_JSON_SINCE,
    nodes_json,
    nodes_text,
)


class NodeParseError(SlurmAnswerError):
    """Slurm output that cannot be read as nodes."""


def _number(value: Any) -> Optional[int]:
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


def _time(value: Any) -> Optional[int]:
    number = _number(value)
    return number if number else None


def _split_list(value: Any) -> List[str]:
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
    if not reason or not (state.down or state.flags & _REASON_FLAGS):
        # No reason, or one on a node in service, left over from before (Slurm 24.11 keeps it
        # after State=RESUME): it says nothing about the node now, and neither does its user
        # (24.11's sinfo %u prints "root" for a node without a reason).
        reason, reason_user, reason_time = "", None, None
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


#: Flags that go with a reason Slurm keeps: drained, down, failing, rebooting, powered down.
#: On any other node a reason is stale (24.11 keeps the old one after ``State=RESUME``).
_REASON_FLAGS = frozenset((
    "DRAIN", "FAIL", "INVALID_REG", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWER_DOWN",
    "POWERED_DOWN", "POWERING_DOWN",
))


def release_text(release: Optional[Tuple[int, ...]]) -> str:
    """``(24, 11, 5)`` as ``"24.11.5"``, ``(22, 5, 8)`` as ``"22.05.8"`` (Slurm's own spelling,
    the minor in two digits); ``"unknown"`` for None."""
    if not release:
        return "unknown"
    return ".".join(["%d" % release[0], "%02d" % release[1]] + ["%d" % p for p in release[2:]])


def _reason(raw: Dict[str, Any]) -> Tuple[str, Optional[str], Optional[int]]:
    """(reason, user, time) of a node record: ``reason`` is a string (22.05 sinfo, 23.02+
    scontrol) or an object ``{description, user, time}`` (23.02+ sinfo)."""
    reason = raw.get("reason")
    if isinstance(reason, dict):
        return (str(reason.get("description") or ""), reason.get("user") or None,
                _time(reason.get("time")))
    return (str(reason or ""), raw.get("reason_set_by_user") or None,
            _time(raw.get("reason_changed_at")))


def _node_from_json(raw: Any, where: str, states: Optional[Dict[Any, NodeState]] = None) -> Dict[str, Any]:
    """One node dict from a JSON record. ``states``: parsed states by their JSON spelling, shared
    by the records of one document (a NodeState is immutable; a cluster of 16,384 nodes has a
    handful of distinct states, and parsing each spelling once halves the time of the read)."""
    if not isinstance(raw, dict):
        raise NodeParseError("%s listed a node that is not an object: %r" % (where, raw))
    name = raw.get("name") or raw.get("hostname")
    if not name:
        raise NodeParseError("%s listed a node without a name: %r" % (where, raw))
    value, flags = raw.get("state"), raw.get("state_flags")
    key: Optional[Tuple[Any, Any]] = (tuple(value) if isinstance(value, list) else value,
                                      tuple(flags) if isinstance(flags, list) else flags)
    try:
        state = states.get(key) if states is not None else None
    except TypeError:  # an unhashable spelling (e.g. objects in the list): parse_state refuses it
        key, state = None, None
    if state is None:
        try:
            state = parse_state(value, flags)
        except SlurmStateError as exc:
            raise NodeParseError("%s: node %s: %s" % (where, name, exc))
        if states is not None and key is not None:
            states[key] = state
    gres = raw.get("gres")
    if isinstance(gres, list):
        gres = ",".join(str(g) for g in gres)
    reason, reason_user, reason_time = _reason(raw)
    return _node(
        name=str(name),
        state=state,
        reason=reason,
        reason_user=reason_user,
        reason_time=reason_time,
        partitions=_split_list(raw.get("partitions")),
        cpus=_number(raw.get("cpus")),
        memory=_number(raw.get("real_memory")),
        gres="" if gres in (None, "(null)") else str(gres),
        features=_split_list(raw.get("features")),
        boot_time=_time(raw.get("boot_time")),
        slurmd_start_time=_time(raw.get("slurmd_start_time")),
    )


def parse_nodes_json(text: str, command: str = "scontrol show nodes --json") -> List[Dict[str, Any]]:
    """Nodes from a JSON document with one record per node: ``scontrol show nodes --json``
    (Slurm 23.02 and later: data_parser v0.0.39 to v0.0.44) or ``sinfo --json`` of Slurm
    21.08/22.05 (v0.0.37/v0.0.38). ``doc`` may also be the decoded document.

    Fields per record (both sources): ``name``, ``state`` (a string plus ``state_flags`` in
    22.05, a list later), ``reason`` (string, or ``{description, user, time}``),
    ``reason_set_by_user``, ``reason_changed_at``, ``partitions``, ``cpus``, ``real_memory``,
    ``gres``, ``features``, ``boot_time``, ``slurmd_start_time``; numbers plain or as
    ``{set, infinite, number}`` objects.

    Args:
        text: the command's whole stdout (or the decoded document).
        command: the command that printed it, for messages.

    Returns:
        node dicts (see module docstring), in Slurm's order.

    Raises:
        NodeParseError: not JSON; an ``errors`` list; a shape this module does not know (the
        message names the release from ``meta`` and the keys found); 23.02+ ``sinfo --json``
        node groups; no node at all (a cluster has nodes: an empty list is a partial read);
        a node without a name or with a state that is no Slurm node state.
    """
    if isinstance(text, dict):
        doc = text
    else:
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise NodeParseError("%s printed no valid JSON (truncated?): %s" % (command, exc))
    if not isinstance(doc, dict):
        raise NodeParseError("%s printed JSON that is not an object" % command)
    release = json_release(doc) or "unknown"
    errors = json_errors(doc)
    if errors:
        raise NodeParseError("%s (Slurm %s) answered with errors, so its node list is not "
                             "trusted: %s" % (command, release, "; ".join(errors)))
    if "nodes" not in doc and isinstance(doc.get("sinfo"), list):
        raise NodeParseError(
            "%s (Slurm %s) lists node groups under 'sinfo', one reason per group: it cannot be "
            "read per node; read scontrol show nodes --json instead" % (command, release))
    if not isinstance(doc.get("nodes"), list):
        raise NodeParseError("%s (Slurm %s) printed a shape this collection does not know: no "
                             "'nodes' list (keys: %s)"
                             % (command, release, ", ".join(sorted(doc)) or "none"))
    if not doc["nodes"]:
        raise NodeParseError("%s (Slurm %s) listed no node at all: the controller's answer "
                             "is incomplete, nothing is trusted" % (command, release))
    where = "%s (Slurm %s)" % (command, release)
    states: Dict[Any, NodeState] = {}
    return [_node_from_json(raw, where, states) for raw in doc["nodes"]]


def _text_time(value: str) -> Optional[int]:
    """sinfo ``%H`` (``2026-09-21T15:02:11``, local time) to Unix seconds; None when unset."""
    value = value.strip()
    if not value or value in ("Unknown", "None", "N/A"):
        return None
    try:
        return int(time.mktime(time.strptime(value, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def parse_sinfo_text(text: str) -> List[Dict[str, Any]]:
    """Nodes from ``sinfo -N -h -o SINFO_FORMAT`` (one line per node and partition).

    A node that sinfo lists once per partition is returned once, with all its partitions in
    sinfo's order; the default partition's ``*`` is removed. The reason is the last field and
    is kept whole (spaces, colons, ``=``, brackets, pipes). sinfo prints ``none`` for an empty
    reason and ``(null)`` for empty GRES and features; both become empty.

    Raises:
        NodeParseError: a line with too few fields, or an unreadable state.
    """
    nodes: List[Dict[str, Any]] = []
    by_name: Dict[str, Dict[str, Any]] = {}
    for number, fields in split_fields(text.splitlines(), SEP, SINFO_FIELDS, "sinfo line", NodeParseError):
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
    if not nodes:
        raise NodeParseError("sinfo listed no node at all: the controller's answer is "
                             "incomplete, nothing is trusted")
    return nodes


def read_nodes(cli: Any, source: str = "auto") -> Tuple[List[Dict[str, Any]], str]:
    """Read every node with ONE Slurm call (plus ``sinfo --version`` once per task); return
    ``(nodes, source)``.

    The release of the client commands decides the call: ``scontrol show nodes --json`` from
    23.02 on (one record per node), ``sinfo --json`` on 21.08 and 22.05, ``sinfo -N -h -o``
    text before that. Every read that may be partial fails (see :meth:`SlurmCLI.run_json` and
    :func:`parse_nodes_json`): this never returns an empty or errored list as an answer.

    Args:
        cli: a :class:`SlurmCLI`.
        source: ``json`` (the release's JSON; fails on a release without it), ``text``
            (``sinfo -N -h -o``, loses boot and slurmd start times), or ``auto``: JSON where
            the release has it, else text.

    Returns:
        ``(nodes, source)``; ``source`` is ``json`` or ``text``.

    Raises:
        SlurmCommandError: a command failed, timed out or answered with errors.
        NodeParseError: its output could not be read, or holds no node.
    """
    release = cli.release()
    if source == "text" or (source == "auto" and release < SINFO_JSON_SINCE):
        rc, out, err = cli.run(*nodes_text(), what="read node states")
        return parse_sinfo_text(out), "text"
    if release < SINFO_JSON_SINCE:
        raise NodeParseError("Slurm %s has no JSON output (21.08 and later have); use "
                             "source=text" % release_text(release))
    name, args = nodes_json(release)
    doc = cli.run_json(name, args, what="read node states")
    return parse_nodes_json(doc, " ".join([name] + args)), "json"

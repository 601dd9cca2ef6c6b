# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The burn-in's figures against their floors, the verdict and the drain reason (pure, but for
reading and appending the history file).

A figure's floor is the operator's (``--min-gflops``, ``--min-busbw``) when set, else ``fraction``
of the median of the passing results of the same test and figure on the fleet's other nodes (the
history file, at least :data:`MIN_HISTORY` of them), else none: the figure is recorded, and judged
from the next runs on. Correctness (the product's error, the all-reduce's sum) has no history: it
is right or the node fails.
"""

from __future__ import annotations

import json
import os
import statistics
from typing import Any, Dict, List, Optional, Sequence

#: Results of other nodes a fleet median needs before it is a floor.
MIN_HISTORY = 3
#: The newest lines of the history file read (a result per node and test: a fleet's many runs).
MAX_HISTORY_LINES = 20000
#: The reason's prefix: a class of its own for remediation (a burn-in failure needs a human).
REASON_PREFIX = "clusterops-burnin: "
#: Slurm keeps reasons short; the reason is cut to this many characters.
MAX_REASON = 200


def read_history(path: Optional[str], max_lines: int = MAX_HISTORY_LINES) -> List[Dict[str, Any]]:
    """The newest ``max_lines`` results of the history file ``path`` (JSON lines ``{node, time, test,
    figure, value, passed}``); none when ``path`` is None or missing. Lines that are not such a
    result are skipped (a line cut short by a killed writer)."""
    if not path or not os.path.exists(path):
        return []
    with open(path, "rb") as handle:
        lines = handle.read().splitlines()[-max_lines:]
    out = []
    for line in lines:
        try:
            entry = json.loads(line.decode("utf-8"))
        except ValueError:
            continue
        if (isinstance(entry, dict) and isinstance(entry.get("node"), str) and isinstance(entry.get("test"), str)
                and isinstance(entry.get("figure"), str) and isinstance(entry.get("value"), (int, float))
                and not isinstance(entry.get("value"), bool) and isinstance(entry.get("passed"), bool)):
            out.append(entry)
    return out


def floor_of(test: str, figure: str, node: str, operator_floor: Optional[float],
             history: Sequence[Dict[str, Any]], fraction: float) -> Dict[str, Any]:
    """``{"floor": value or None, "source": "operator" | "fleet median of N" | "none"}`` for
    ``figure`` of ``test`` on ``node`` (its own earlier results never set its floor)."""
    if operator_floor is not None:
        return {"floor": float(operator_floor), "source": "operator"}
    values = [float(e["value"]) for e in history
              if e["test"] == test and e["figure"] == figure and e["passed"] and e["node"] != node]
    if len(values) < MIN_HISTORY:
        return {"floor": None, "source": "none"}
    return {"floor": fraction * statistics.median(values), "source": "%g of the fleet median of %d" % (
        fraction, len(values))}


def judge(node: str, figures: Sequence[Dict[str, Any]], history: Sequence[Dict[str, Any]],
          fraction: float) -> Dict[str, Any]:
    """The verdict over ``figures``: ``[{test, figure, value, operator_floor (or None), correct (or
    None)}]``, each a throughput judged against its floor (:func:`floor_of`) and, where ``correct``
    is given, a correctness that must be true.

    Returns:
        ``{"passed", "failures": [str], "reason": "clusterops-burnin: <first failure>" or None,
        "figures": the figures with ``floor`` and ``source``}``.
    """
    failures = []
    judged = []
    for item in figures:
        floor = floor_of(item["test"], item["figure"], node, item.get("operator_floor"), history, fraction)
        judged.append(dict(item, **floor))
        if item.get("correct") is False:
            failures.append("%s: wrong result (%s %.3g)" % (item["test"], item["figure"], item["value"]))
        elif floor["floor"] is not None and item["value"] < floor["floor"]:
            failures.append("%s: %s %.3g below its floor %.3g (%s)" % (
                item["test"], item["figure"], item["value"], floor["floor"], floor["source"]))
    reason = (REASON_PREFIX + "; ".join(failures))[:MAX_REASON] if failures else None
    return {"passed": not failures, "failures": failures, "reason": reason, "figures": judged}


def append_history(path: Optional[str], node: str, when: float, judged: Sequence[Dict[str, Any]],
                   passed: bool) -> None:
    """Append one line per judged figure to the history file ``path`` (made mode 0644 when
    missing): what the next runs' fleet medians read."""
    if not path:
        return
    lines = [json.dumps({"node": node, "time": int(when), "test": j["test"], "figure": j["figure"],
                         "value": j["value"], "passed": passed}, sort_keys=True) for j in judged]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "a") as handle:
        handle.write("".join(line + "\n" for line in lines))

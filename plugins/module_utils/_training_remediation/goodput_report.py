# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The goodput report of one training run: a single self-contained HTML page (pure).

Private to the collection (the leading underscore of the package): no API promise outside it.

In: one entry of ``training_goodput_info``'s ``runs`` (:func:`.goodput.goodput`'s keys, ``name``,
``owner``, ``finished`` and ``timeline``, :func:`.goodput_timeline.timeline`). Out: the page, a
``str``: the run's figures in tables, and two pictures drawn with matplotlib as inline SVG - the
timeline (each run of a job queued and running, its end, remediation's actions, the checkpoints)
and the progress curve (step over time) with the lost work of each restart shaded in
:data:`LOST_COLOUR`. No script, no style sheet, image or font from elsewhere: the page opens
offline. Every text that comes from a user or from Slurm (run name, owner, states, reasons) is
HTML-escaped; the pictures carry numbers and Slurm's state words only.

matplotlib is imported when a page is rendered, not before (the controller needs it only to
render: requirements.txt pins it); without it :class:`ReportError` says so.
"""

from __future__ import annotations

import datetime
import html
import io
import re

try:
    from typing import Any, Dict, List, Optional, Tuple  # noqa: F401 pylint: disable=unused-import
except ImportError:  # pragma: no cover
    pass

#: The colour of the lost work of each restart, in the progress curve (opaque: the page's tests
#: find it in a screenshot).
LOST_COLOUR = "#f4a582"
#: Colours of the timeline: queued, running, a failure, a remediation action, a checkpoint.
QUEUED_COLOUR, RUNNING_COLOUR, FAILURE_COLOUR = "#c7c7c7", "#2b6cb0", "#c0392b"
ACTION_COLOUR, CHECKPOINT_COLOUR = "#6b3fa0", "#2e8540"

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #1a1a1a; max-width: 72em; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
#restarts { font-size: 0.85em; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.headline { font-size: 1.1em; } .headline span { margin-right: 2em; }
.unknown { color: #7a4b00; } figure { margin: 0.5em 0; } svg { max-width: 100%; height: auto; }
"""


class ReportError(Exception):
    """The page cannot be rendered (matplotlib missing, or not a goodput result)."""


def _e(value: Any) -> str:
    """``value`` as HTML text, escaped (quotes too: the text may land in an attribute)."""
    return html.escape("" if value is None else str(value), quote=True)


def seconds(value: Optional[float]) -> str:
    """A duration for people: ``52.3 s``; from 120 s on also in minutes or hours
    (``3725.0 s (1 h 2 min)``); ``unknown`` for None."""
    if value is None:
        return "unknown"
    text = "%.1f s" % value
    if value >= 7200:
        text += " (%d h %d min)" % (value // 3600, (value % 3600) // 60)
    elif value >= 120:
        text += " (%d min %d s)" % (value // 60, value % 60)
    return text


def _utc(when: Optional[float]) -> str:
    if when is None:
        return "unknown"
    return datetime.datetime.fromtimestamp(when, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cell(value: Any, kind: str = "") -> str:
    """One ``<td>``: numbers right-aligned with their exact value in ``data-value``."""
    if kind == "s":
        raw = "" if value is None else repr(float(value))
        return '<td class="n" data-value="%s">%s</td>' % (_e(raw), _e(seconds(value)))
    if kind == "n":
        return '<td class="n" data-value="%s">%s</td>' % (_e("" if value is None else value),
                                                          _e("unknown" if value is None else value))
    return "<td>%s</td>" % _e(value)


#: The run's totals table: (figure, label, kind) - kind ``s`` seconds, ``n`` a number, ``r`` a ratio.
TOTALS = (
    ("wall_time", "wall time (first submission to now or the end)", "s"),
    ("queued_time", "queued", "s"),
    ("running_time", "running", "s"),
    ("between_jobs_time", "between jobs (no job of the run existed)", "s"),
    ("recompute_time", "recomputing lost steps", "s"),
    ("productive_time", "productive", "s"),
    ("productive_time_at_most", "productive, at most", "s"),
    ("effective_ratio", "effective training time ratio", "r"),
    ("node_seconds", "node seconds running", "n"),
    ("steps_lost", "steps lost", "n"),
    ("restarts", "restarts", "n"),
)

#: The restarts table: (field, heading, kind).
RESTART_COLUMNS = (
    ("job_id", "job", ""), ("state", "ended", ""), ("cause", "cause", ""), ("restarted_by", "restarted by", ""),
    ("next_job_id", "next job", ""), ("reached_step", "step reached", "n"), ("resumed_step", "resumed from", "n"),
    ("steps_lost", "steps lost", "n"), ("detection", "detection", "s"),
    ("waiting_for_remediation", "waiting for remediation", "s"), ("remediation", "remediation", "s"),
    ("queue", "queue", "s"), ("start_to_first_step", "start to first step", "s"),
    ("time_to_training", "time to training again", "s"), ("recompute_time", "recompute", "s"),
)


def _totals_table(run: Dict[str, Any]) -> str:
    rows = []
    for key, label, kind in TOTALS:
        value = run.get(key)
        if key == "productive_time_at_most" and value is None:
            continue
        if kind == "r":
            text = "unknown" if value is None else "%.1f %%" % (100.0 * value)
            cell = '<td class="n" data-value="%s">%s</td>' % (_e("" if value is None else value), _e(text))
        else:
            cell = _cell(value, kind)
        rows.append('<tr id="total-%s"><th>%s</th>%s</tr>' % (_e(key), _e(label), cell))
    causes = run.get("restarts_by_cause") or {}
    rows.append('<tr id="total-restarts_by_cause"><th>restarts by cause</th><td>%s</td></tr>' % _e(
        ", ".join("%s %s" % (k, v) for k, v in sorted(causes.items()) if v) or "none"))
    return '<table id="totals">%s</table>' % "".join(rows)


def _restarts_table(run: Dict[str, Any]) -> str:
    failures = run.get("failures") or []
    if not failures:
        return "<p>No restart: the run's jobs ran without one.</p>"
    head = "".join("<th>%s</th>" % _e(title) for dummy, title, dummy2 in RESTART_COLUMNS)
    body = []
    for index, item in enumerate(failures):
        cells = "".join(_cell(item.get(key), kind) for key, dummy, kind in RESTART_COLUMNS)
        body.append('<tr id="restart-%d">%s</tr>' % (index + 1, cells))
    return '<table id="restarts"><tr>%s</tr>%s</table>' % (head, "".join(body))


def _unknown_list(run: Dict[str, Any]) -> str:
    items = list(run.get("unknown") or [])
    for index, item in enumerate(run.get("failures") or []):
        items.extend({"figure": "restart %d: %s" % (index + 1, u.get("figure")), "why": u.get("why")}
                     for u in item.get("unknown") or [])
    if not items:
        return "<p>Every figure is known.</p>"
    return '<ul class="unknown" id="unknown">%s</ul>' % "".join(
        "<li><b>%s</b>: %s</li>" % (_e(u.get("figure")), _e(u.get("why"))) for u in items)


def _headline(run: Dict[str, Any]) -> str:
    """Steps lost and the time to training again of each restart, the first thing on the page."""
    times = [f.get("time_to_training") for f in run.get("failures") or []]
    ratio = run.get("effective_ratio")
    return ('<p class="headline"><span id="steps-lost" data-value="%s">steps lost: <b>%s</b></span>'
            '<span id="time-to-training" data-value="%s">time to training again: <b>%s</b></span>'
            '<span id="effective-ratio">effective training time: <b>%s</b></span></p>') % (
        _e("" if run.get("steps_lost") is None else run["steps_lost"]),
        _e("unknown" if run.get("steps_lost") is None else run["steps_lost"]),
        _e(" ".join("" if t is None else repr(float(t)) for t in times)),
        _e(", ".join(seconds(t) for t in times) or "no restart"),
        _e("unknown" if ratio is None else "%.1f %%" % (100.0 * ratio)))


def _matplotlib() -> Any:
    """``matplotlib.figure.Figure``, imported now (not when the collection is loaded)."""
    try:
        from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise ReportError("the goodput report needs matplotlib on the controller (pip install -r "
                          "requirements.txt of the collection: matplotlib==3.11.2): %s" % exc)
    return Figure


def _svg(fig: Any) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog, no external reference)."""
    buf = io.StringIO()
    # No metadata: no date (the same result renders the same page) and no RDF block naming URLs.
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
                bbox_inches="tight")
    text = buf.getvalue()
    start = text.find("<svg")
    if start < 0:
        raise ReportError("matplotlib wrote no <svg> element")
    # matplotlib writes each text as a comment beside its glyphs: the pictures carry no user
    # text, and comments are dropped all the same.
    return re.sub(r"<!--.*?-->", "", text[start:], flags=re.S)


def _origin(run: Dict[str, Any]) -> float:
    return float(run.get("first_submit") or (run.get("jobs") or [{}])[0].get("submit_time") or run.get("now") or 0)


def _lost_spans(run: Dict[str, Any]) -> List[Tuple[float, float, Dict[str, Any]]]:
    """``(begin, end, failure)`` of each restart's lost work, Unix seconds: from when the job
    before passed the step it was resumed from (the checkpoint's time, else the progress curve's)
    to when the next job passed the step reached again (its start plus ``recompute_time``); the
    ends not known are the last progress and the first new step. Restarts without either are
    left out."""
    jobs = dict((str(j.get("job_id")), j) for j in run.get("jobs") or [])
    timeline = run.get("timeline") or {}
    points = timeline.get("progress") or []
    marks = timeline.get("checkpoints") or []
    out = []
    runs = run.get("jobs") or []
    for index, item in enumerate(run.get("failures") or []):
        last = item.get("last_progress_time")
        if last is None:
            continue
        begin = last
        resumed = item.get("resumed_step")
        if resumed is not None:
            saved = [c["time"] for c in marks if c.get("step") == resumed and c["time"] <= last]
            passed = [t for t, step in points if step <= resumed and t <= last]
            begin = min(saved) if saved else (max(passed) if passed else last)
        after = runs[index + 1] if index + 1 < len(runs) else jobs.get(str(item.get("next_job_id"))) or {}
        end = None
        if after.get("start_time") is not None and item.get("recompute_time") is not None:
            end = after["start_time"] + item["recompute_time"]
        elif item.get("time_to_training") is not None:
            end = last + item["time_to_training"]
        out.append((begin, end if end is not None else run.get("now") or last, item))
    return out


def _segments(run: Dict[str, Any], points: List[List[float]]) -> List[List[List[float]]]:
    """The curve cut where the training stopped: between two points where a job ended, and at
    each drop of the step; no line is drawn across a restart."""
    ends = sorted(j["end_time"] for j in run.get("jobs") or [] if j.get("end_time") is not None)
    out: List[List[List[float]]] = []
    for point in points:
        if out:
            before = out[-1][-1]
            if point[1] < before[1] or any(before[0] <= end < point[0] for end in ends):
                out.append([])
        else:
            out.append([])
        out[-1].append(point)
    return out


def progress_svg(run: Dict[str, Any]) -> str:
    """The progress curve: step over time (seconds since the first submission), each restart's
    lost work shaded in :data:`LOST_COLOUR`. ``<p>`` saying why when the run has no event log."""
    points = (run.get("timeline") or {}).get("progress")
    if not points:
        return "<p>No progress curve: the run has no trainer event log (or no step in it).</p>"
    fig = _matplotlib()(figsize=(10, 3.6), dpi=96)
    axes = fig.add_subplot(1, 1, 1)
    origin = _origin(run)
    for number, (begin, end, item) in enumerate(_lost_spans(run)):
        axes.axvspan(begin - origin, end - origin, color=LOST_COLOUR, zorder=0,
                     label="lost work (steps %s-%s and the time to regain them)" % (
                         item.get("resumed_step"), item.get("reached_step")) if number == 0 else None)
    for number, segment in enumerate(_segments(run, points)):
        axes.plot([t - origin for t, dummy in segment], [s for dummy, s in segment], color=RUNNING_COLOUR,
                  linewidth=1.6, zorder=2, label="step" if number == 0 else None)
    marks = (run.get("timeline") or {}).get("checkpoints") or []
    if marks:
        axes.scatter([c["time"] - origin for c in marks], [c["step"] for c in marks], marker="v",
                     color=CHECKPOINT_COLOUR, zorder=3, s=28, label="checkpoint written")
    axes.set_xlabel("seconds since the first submission")
    axes.set_ylabel("step")
    axes.grid(True, color="#e5e5e5", zorder=1)
    axes.legend(loc="upper left", fontsize=8)
    return _svg(fig)


def _timeline_rows(run: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [j for j in run.get("jobs") or [] if j.get("submit_time") is not None]


def timeline_svg(run: Dict[str, Any]) -> str:
    """The timeline: one row per run of a job (queued in grey, running in blue, its end state
    in red when a restart followed), a row of remediation's actions and one of checkpoints;
    seconds since the first submission."""
    rows = _timeline_rows(run)
    if not rows:
        return "<p>No job of the run was found.</p>"
    fig = _matplotlib()(figsize=(10, 1.2 + 0.45 * (len(rows) + 2)), dpi=96)
    axes = fig.add_subplot(1, 1, 1)
    origin, now = _origin(run), float(run.get("now") or 0)
    labels = []
    for index, job in enumerate(rows):
        submit, start, end = job["submit_time"], job.get("start_time"), job.get("end_time")
        y = len(rows) + 1 - index
        axes.barh(y, (start if start is not None else now) - submit, left=submit - origin, height=0.5,
                  color=QUEUED_COLOUR, zorder=2)
        if start is not None:
            axes.barh(y, (end if end is not None else now) - start, left=start - origin, height=0.5,
                      color=RUNNING_COLOUR, zorder=2)
        if end is not None and index + 1 < len(rows):
            axes.scatter([end - origin], [y], marker="X", s=60, color=FAILURE_COLOUR, zorder=3)
            axes.annotate(str(job.get("state") or "?"), (end - origin, y), xytext=(4, 6),
                          textcoords="offset points", fontsize=8, color=FAILURE_COLOUR)
        labels.append((y, "job %s%s" % (job.get("job_id"), " (requeued)" if job.get("requeue_of") else "")))
    timeline = run.get("timeline") or {}
    actions = timeline.get("actions") or []
    axes.scatter([a["time"] - origin for a in actions], [1] * len(actions), marker="D", s=40,
                 color=ACTION_COLOUR, zorder=3)
    for action in actions:
        axes.annotate(str(action.get("action")), (action["time"] - origin, 1), xytext=(4, 6),
                      textcoords="offset points", fontsize=8, color=ACTION_COLOUR)
    marks = timeline.get("checkpoints") or []
    axes.scatter([c["time"] - origin for c in marks], [0] * len(marks), marker="v", s=28,
                 color=CHECKPOINT_COLOUR, zorder=3)
    labels += [(1, "remediation"), (0, "checkpoints")]
    axes.set_yticks([y for y, dummy in labels])
    axes.set_yticklabels([text for dummy, text in labels], fontsize=8)
    axes.set_ylim(-0.7, len(rows) + 1.7)
    axes.set_xlabel("seconds since the first submission")
    axes.grid(True, axis="x", color="#e5e5e5", zorder=1)
    return _svg(fig)


def _jobs_table(run: Dict[str, Any]) -> str:
    body = []
    for job in run.get("jobs") or []:
        body.append("<tr>%s%s%s%s%s%s%s</tr>" % (
            _cell(job.get("job_id")), _cell(job.get("state")), _cell(_utc(job.get("submit_time"))),
            _cell(_utc(job.get("start_time"))), _cell(_utc(job.get("end_time"))),
            _cell(job.get("node_list")), _cell(job.get("running"), "s")))
    return ('<table id="jobs"><tr><th>job</th><th>state</th><th>submitted</th><th>started</th><th>ended</th>'
            '<th>nodes</th><th>running</th></tr>%s</table>' % "".join(body))


def render_report(run: Dict[str, Any]) -> str:
    """The page of one run (see the module's docstring), as HTML text.

    Args:
        run: one entry of ``training_goodput_info``'s ``runs``.

    Raises:
        ReportError: ``run`` is not such an entry (no ``name`` or no ``jobs`` list), or
            matplotlib is missing.
    """
    if not isinstance(run, dict) or "name" not in run or not isinstance(run.get("jobs"), list):
        raise ReportError("not a run of training_goodput_info's result (a dict with name and jobs): %r"
                          % (type(run).__name__,))
    state = "finished" if run.get("finished") else ("a job is pending or running" if run.get("active") else
                                                    "no job queued or running")
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        "<title>Goodput of %s</title>" % _e(run["name"]), "<style>%s</style></head><body>" % _STYLE,
        '<h1>Goodput of training run <span id="run-name">%s</span></h1>' % _e(run["name"]),
        "<p>Owner %s; first submission %s; read %s; %s.</p>" % (
            _e(run.get("owner")), _e(_utc(run.get("first_submit"))), _e(_utc(run.get("now"))), _e(state)),
        _headline(run),
        "<h2>Timeline</h2><figure id=\"timeline\">%s</figure>" % timeline_svg(run),
        "<h2>Progress</h2><figure id=\"progress\">%s</figure>" % progress_svg(run),
        "<h2>Goodput</h2>", _totals_table(run),
        "<h2>Restarts</h2>", _restarts_table(run),
        "<h2>Jobs</h2>", _jobs_table(run),
        "<h2>What is not known</h2>", _unknown_list(run),
        "<p>Figures: clusterops.slurm.training_goodput_info (docs/goodput.md defines each).</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"

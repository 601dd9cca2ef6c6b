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
:data:`LOST_COLOUR`. Both pictures share one time axis (:func:`time_axis`: the same range and unit,
the plot area at the same place in each, so one time is at the same x in both), and each failure
is marked on both at the last progress before it (:data:`FAILURE_COLOUR`), the failed node named.
No script, no style sheet, image or font from elsewhere: the page opens offline. Every text that
comes from a user or from Slurm (run name, owner, states, node names, reasons) is HTML-escaped in
the page, and written by matplotlib as escaped SVG text (mathtext off) in the pictures.

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
#: The detection of each failure (the failed job's last progress to its end: lost), in the timeline.
DETECTION_COLOUR = "#e8a09a"

#: The pictures' layout, inches: one width and the same margins left and right, so that the plot
#: areas of the timeline and of the progress curve are at the same x (:func:`time_axis`).
FIGURE_WIDTH, MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 10.0, 1.9, 0.3, 0.35, 0.55
#: The time axis' unit by the run's span: (longest span in seconds, unit, seconds per unit).
TIME_UNITS = ((900.0, "s", 1.0), (36000.0, "min", 60.0), (float("inf"), "h", 3600.0))

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
    if kind == "l":
        return "<td>%s</td>" % _e("unknown" if not value else ", ".join(str(v) for v in value))
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
    ("lost_to_detection", "detection: running after the last progress before a failure (lost)", "s"),
    ("productive_time", "productive (running less recomputing and detection)", "s"),
    ("productive_time_at_most", "productive, at most", "s"),
    ("effective_ratio", "effective training time ratio", "r"),
    ("node_seconds", "node seconds running", "n"),
    ("steps_lost", "steps lost", "n"),
    ("restarts", "restarts", "n"),
)

#: The restarts table: (field, heading, kind).
RESTART_COLUMNS = (
    ("job_id", "job", ""), ("state", "ended", ""), ("cause", "cause", ""), ("node_list", "nodes", ""),
    ("failed_nodes", "failed node", "l"), ("restarted_by", "restarted by", ""),
    ("next_job_id", "next job", ""), ("reached_step", "step reached", "n"), ("resumed_step", "resumed from", "n"),
    ("steps_lost", "steps lost", "n"), ("detection", "detection", "s"),
    ("waiting_for_remediation", "waiting for remediation", "s"), ("remediation", "remediation", "s"),
    ("queue", "queue", "s"), ("start_to_first_step", "start to first step", "s"),
    ("time_to_training", "time to training again", "s"), ("recompute_time", "recompute", "s"),
    ("lost_to_detection", "lost to detection", "s"),
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
    jobs = run.get("jobs") or []
    for index, item in enumerate(failures):
        if item.get("node_list") is None and index < len(jobs):   # a result of before node_list
            item = dict(item, node_list=jobs[index].get("node_list"))
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
    import matplotlib  # pylint: disable=import-outside-toplevel

    buf = io.StringIO()
    # No metadata: no date (the same result renders the same page) and no RDF block naming URLs.
    # No tight bounding box: both pictures keep the fixed margins, their plot areas at the same x.
    # Text as SVG <text> (escaped by matplotlib): the page's tests read the labels back.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "clusterops-goodput"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buf.getvalue()
    start = text.find("<svg")
    if start < 0:
        raise ReportError("matplotlib wrote no <svg> element")
    # No comment survives (matplotlib may write a text beside its glyphs as one).
    return re.sub(r"<!--.*?-->", "", text[start:], flags=re.S)


def _origin(run: Dict[str, Any]) -> float:
    return float(run.get("first_submit") or (run.get("jobs") or [{}])[0].get("submit_time") or run.get("now") or 0)


def _times(run: Dict[str, Any]) -> List[float]:
    """Every time either picture draws (Unix seconds)."""
    found: List[float] = []
    now = run.get("now")
    for job in _timeline_rows(run):
        found += [job[k] for k in ("submit_time", "start_time", "end_time") if job.get(k) is not None]
        if now is not None and (job.get("start_time") is None or job.get("end_time") is None):
            found.append(now)   # a span still open ends now
    timeline = run.get("timeline") or {}
    found += [t for t, dummy in timeline.get("progress") or []]
    found += [c["time"] for c in (timeline.get("checkpoints") or []) + (timeline.get("actions") or [])]
    found += [f["time"] for f in failure_marks(run)]
    found += [end for dummy, end, dummy2 in _lost_spans(run)]
    return [float(t) for t in found]


def time_axis(run: Dict[str, Any]) -> Dict[str, Any]:
    """The one time axis of both pictures: ``{"origin", "unit", "scale", "label", "xlim"}`` -
    ``origin`` the first submission (Unix seconds), ``unit`` ``s``, ``min`` or ``h`` by the run's
    span (:data:`TIME_UNITS`), ``scale`` seconds per unit, ``xlim`` ``(left, right)`` in that unit
    (every time either picture draws, 2 % of room on the right)."""
    origin = _origin(run)
    times = _times(run) or [origin]
    left, right = min(0.0, min(times) - origin), max(times) - origin
    unit, scale = next((u, k) for limit, u, k in TIME_UNITS if right - left <= limit)
    width = max(right - left, scale) / scale
    return {"origin": origin, "unit": unit, "scale": scale, "xlim": (left / scale, left / scale + width * 1.02),
            "label": {"s": "seconds", "min": "minutes", "h": "hours"}[unit] + " since the first submission (%s)"
            % _utc(origin)}


def failure_marks(run: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Where each failure is marked: ``[{"number", "time", "known", "job_id", "state", "step",
    "node", "nodes"}]`` - ``time`` the last progress before it (``last_progress_time``;
    ``known`` False and the job's sacct ``End`` when that is unknown), ``step`` the step reached,
    ``node`` the failed node(s) (``failed_nodes``, joined by commas; None when not known),
    ``nodes`` the failed job's sacct ``NodeList``. One per restart with a time."""
    out = []
    runs = run.get("jobs") or []
    for index, item in enumerate(run.get("failures") or []):
        before = runs[index] if index < len(runs) else {}
        when, known = item.get("last_progress_time"), True
        if when is None:
            when, known = before.get("end_time"), False
        if when is None:
            continue
        failed = item.get("failed_nodes")
        out.append({"number": index + 1, "time": float(when), "known": known, "job_id": item.get("job_id"),
                    "state": item.get("state"), "step": item.get("reached_step"),
                    "node": ", ".join(str(n) for n in failed) if failed else None,
                    "nodes": item.get("node_list") if item.get("node_list") is not None else before.get("node_list")})
    return out


def _mark_text(mark: Dict[str, Any]) -> str:
    """The failure's label on the pictures: ``failure 1: job 1 NODE_FAIL, node n2, step 55``."""
    where = ("node %s" % mark["node"]) if mark["node"] else ("on %s" % mark["nodes"] if mark["nodes"] else "")
    step = ("step %s" % mark["step"]) if mark["step"] is not None else "last progress unknown"
    return "failure %d: job %s %s, %s" % (mark["number"], mark["job_id"], mark["state"] or "?",
                                          ", ".join(p for p in (where, step) if p))


def _mark_failures(axes: Any, axis: Dict[str, Any], marks: List[Dict[str, Any]], label: bool) -> None:
    """A vertical line at each failure mark (dashed where the last progress is unknown), with its
    text when ``label``; each line's SVG group id ``failure-mark-N``."""
    for mark in marks:
        x = (mark["time"] - axis["origin"]) / axis["scale"]
        line = axes.axvline(x, color=FAILURE_COLOUR, linewidth=1.4, zorder=4,
                            linestyle="-" if mark["known"] else "--")
        line.set_gid("failure-mark-%d" % mark["number"])
        if label:
            right = x > sum(axis["xlim"]) / 2.0    # in the right half: the label to the left of the line
            axes.annotate(_mark_text(mark), (x, 1.0), xycoords=("data", "axes fraction"),
                          xytext=(-4 if right else 4, -3), textcoords="offset points",
                          ha="right" if right else "left", va="top", fontsize=8, color=FAILURE_COLOUR,
                          parse_math=False, zorder=5, gid="failure-label-%d" % mark["number"],
                          bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none",
                                "alpha": 0.85})


def _figure(height: float) -> Tuple[Any, Any]:
    """A figure of :data:`FIGURE_WIDTH` and ``height`` inches whose plot area has the fixed margins."""
    fig = _matplotlib()(figsize=(FIGURE_WIDTH, height), dpi=96)
    fig.subplots_adjust(left=MARGIN_LEFT / FIGURE_WIDTH, right=1 - MARGIN_RIGHT / FIGURE_WIDTH,
                        top=1 - MARGIN_TOP / height, bottom=MARGIN_BOTTOM / height)
    return fig, fig.add_subplot(1, 1, 1)


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


def progress_svg(run: Dict[str, Any], axis: Optional[Dict[str, Any]] = None) -> str:
    """The progress curve: step over time (on :func:`time_axis`), each restart's lost work shaded
    in :data:`LOST_COLOUR`, each failure marked at its last progress with the failed node. ``<p>``
    saying why when the run has no event log."""
    points = (run.get("timeline") or {}).get("progress")
    if not points:
        return "<p>No progress curve: the run has no trainer event log (or no step in it).</p>"
    axis = axis or time_axis(run)
    fig, axes = _figure(3.6)
    origin, scale = axis["origin"], axis["scale"]
    for number, (begin, end, item) in enumerate(_lost_spans(run)):
        axes.axvspan((begin - origin) / scale, (end - origin) / scale, color=LOST_COLOUR, zorder=0,
                     label="lost work (steps %s-%s and the time to regain them)" % (
                         item.get("resumed_step"), item.get("reached_step")) if number == 0 else None)
    for number, segment in enumerate(_segments(run, points)):
        axes.plot([(t - origin) / scale for t, dummy in segment], [s for dummy, s in segment], color=RUNNING_COLOUR,
                  linewidth=1.6, zorder=2, label="step" if number == 0 else None)
    marks = (run.get("timeline") or {}).get("checkpoints") or []
    if marks:
        axes.scatter([(c["time"] - origin) / scale for c in marks], [c["step"] for c in marks], marker="v",
                     color=CHECKPOINT_COLOUR, zorder=3, s=28, label="checkpoint written")
    bottom, top = axes.get_ylim()
    axes.set_ylim(bottom, top + 0.12 * (top - bottom))   # room above the curve for the failures' labels
    _mark_failures(axes, axis, failure_marks(run), label=True)
    axes.set_xlim(*axis["xlim"])
    axes.set_gid("progress-axes")
    axes.set_xlabel(axis["label"])
    axes.set_ylabel("step")
    axes.grid(True, color="#e5e5e5", zorder=1)
    axes.legend(loc="lower right", fontsize=8)
    return _svg(fig)


def _timeline_rows(run: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [j for j in run.get("jobs") or [] if j.get("submit_time") is not None]


def timeline_svg(run: Dict[str, Any], axis: Optional[Dict[str, Any]] = None) -> str:
    """The timeline: one row per run of a job (queued in grey, running in blue, the detection of
    its failure - its last progress to its end, lost - in :data:`DETECTION_COLOUR`, its end state
    in red when a restart followed), a row of remediation's actions and one of checkpoints; each
    failure marked at its last progress (:func:`failure_marks`); on :func:`time_axis`."""
    rows = _timeline_rows(run)
    if not rows:
        return "<p>No job of the run was found.</p>"
    axis = axis or time_axis(run)
    fig, axes = _figure(1.4 + 0.45 * (len(rows) + 2))
    origin, now, scale = axis["origin"], float(run.get("now") or 0), axis["scale"]
    marks = dict((m["number"], m) for m in failure_marks(run))
    labels = []
    for index, job in enumerate(rows):
        submit, start, end = job["submit_time"], job.get("start_time"), job.get("end_time")
        y = len(rows) + 1 - index
        axes.barh(y, ((start if start is not None else now) - submit) / scale, left=(submit - origin) / scale,
                  height=0.5, color=QUEUED_COLOUR, zorder=2)
        if start is not None:
            axes.barh(y, ((end if end is not None else now) - start) / scale, left=(start - origin) / scale,
                      height=0.5, color=RUNNING_COLOUR, zorder=2)
        mark = marks.get(index + 1)
        if mark is not None and mark["known"] and end is not None and mark["time"] < end:
            axes.barh(y, (end - mark["time"]) / scale, left=(mark["time"] - origin) / scale, height=0.5,
                      color=DETECTION_COLOUR, zorder=2, gid="detection-%d" % mark["number"])
        if end is not None and index + 1 < len(rows):
            axes.scatter([(end - origin) / scale], [y], marker="X", s=60, color=FAILURE_COLOUR, zorder=3)
            axes.annotate(str(job.get("state") or "?"), ((end - origin) / scale, y), xytext=(4, 6),
                          textcoords="offset points", fontsize=8, color=FAILURE_COLOUR, parse_math=False)
        labels.append((y, "job %s%s" % (job.get("job_id"), " (requeued)" if job.get("requeue_of") else "")))
    timeline = run.get("timeline") or {}
    actions = timeline.get("actions") or []
    axes.scatter([(a["time"] - origin) / scale for a in actions], [1] * len(actions), marker="D", s=40,
                 color=ACTION_COLOUR, zorder=3)
    for action in actions:
        axes.annotate(str(action.get("action")), ((action["time"] - origin) / scale, 1), xytext=(4, 6),
                      textcoords="offset points", fontsize=8, color=ACTION_COLOUR, parse_math=False)
    saved = timeline.get("checkpoints") or []
    axes.scatter([(c["time"] - origin) / scale for c in saved], [0] * len(saved), marker="v", s=28,
                 color=CHECKPOINT_COLOUR, zorder=3)
    labels += [(1, "remediation"), (0, "checkpoints")]
    axes.set_yticks([y for y, dummy in labels])
    axes.set_yticklabels([text for dummy, text in labels], fontsize=8)
    for tick in axes.get_yticklabels():
        tick.set_parse_math(False)
    axes.set_ylim(-0.7, len(rows) + 2.2)   # room above the rows for the failures' labels
    _mark_failures(axes, axis, list(marks.values()), label=True)
    axes.set_xlim(*axis["xlim"])
    axes.set_gid("timeline-axes")
    axes.set_xlabel(axis["label"])
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


def _axis_attributes(axis: Dict[str, Any]) -> str:
    """The shared time axis as a figure's attributes: ``data-unit``, ``data-xlim`` (two numbers)."""
    return 'data-unit="%s" data-xlim="%r %r"' % (_e(axis["unit"]), axis["xlim"][0], axis["xlim"][1])


def _failures_list(run: Dict[str, Any], axis: Dict[str, Any]) -> str:
    """The failures marked on both pictures, in words: ``<ol id="failures">``, each ``<li
    id="failure-N" data-time="...">`` (the mark's Unix time) naming the failed node."""
    marks = failure_marks(run)
    if not marks:
        return ""
    items = []
    for mark in marks:
        at = "%.1f %s" % ((mark["time"] - axis["origin"]) / axis["scale"], axis["unit"])
        when = ("last progress (step %s) at %s, %s" % ("unknown" if mark["step"] is None else mark["step"], at,
                                                       _utc(mark["time"])) if mark["known"]
                else "last progress unknown: marked at the job's end, %s, %s" % (at, _utc(mark["time"])))
        node = ('failed node <b class="node">%s</b> (of the job\'s nodes %s)' % (_e(mark["node"]), _e(mark["nodes"]))
                if mark["node"] else "failed node not known; the job ran on %s" % _e(mark["nodes"] or "no node"))
        items.append('<li id="failure-%d" data-time="%s">job %s ended %s: %s; %s.</li>' % (
            mark["number"], _e(repr(mark["time"])), _e(mark["job_id"]), _e(mark["state"]), _e(when), node))
    return ('<p>Failures, marked on both pictures at the last progress before each (red line; the '
            'detection after it is lost time):</p><ol id="failures">%s</ol>' % "".join(items))


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
    axis = time_axis(run)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        "<title>Goodput of %s</title>" % _e(run["name"]), "<style>%s</style></head><body>" % _STYLE,
        '<h1>Goodput of training run <span id="run-name">%s</span></h1>' % _e(run["name"]),
        "<p>Owner %s; first submission %s; read %s; %s.</p>" % (
            _e(run.get("owner")), _e(_utc(run.get("first_submit"))), _e(_utc(run.get("now"))), _e(state)),
        _headline(run),
        _failures_list(run, axis),
        "<h2>Timeline</h2><figure id=\"timeline\" %s>%s</figure>" % (_axis_attributes(axis), timeline_svg(run, axis)),
        "<h2>Progress</h2><figure id=\"progress\" %s>%s</figure>" % (_axis_attributes(axis), progress_svg(run, axis)),
        "<h2>Goodput</h2>", _totals_table(run),
        "<h2>Restarts</h2>", _restarts_table(run),
        "<h2>Jobs</h2>", _jobs_table(run),
        "<h2>What is not known</h2>", _unknown_list(run),
        "<p>Figures: clusterops.slurm.training_goodput_info (docs/goodput.md defines each).</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"

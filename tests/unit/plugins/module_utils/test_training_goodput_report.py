# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The goodput report (_training_remediation/goodput_report.py, the filter goodput_report) from a
goodput result recorded after ``make demo`` (tests/unit/fixtures/goodput/README.md), opened in
headless Chromium (Debian's ``chromium``): the screenshot (size, not blank, the lost work's colour
in it) and the page's DOM (the numbers of the tables, hostile names inert).

``make test`` installs chromium first (``make deps``: dev/cluster/install-deps.sh) and sets
CLUSTEROPS_REQUIRE_CHROMIUM=1, so there a missing chromium fails these tests; elsewhere it skips
them, saying so (the fixture ``chromium`` below)."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterops.slurm.plugins.filter.goodput_report import goodput_report
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import goodput_report as report

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "goodput", "demo-llm-node-fail.json")
HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>&amp;'


def headless(chromium, tmp_path, page, *args):
    """Chromium, headless, on the file ``page``, with a profile of its own; its stdout."""
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--hide-scrollbars", "--user-data-dir=%s" % (tmp_path / "profile"),
                           "--window-size=1280,1600"] + list(args) + ["file://%s" % page],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def recorded_run():
    with open(FIXTURE) as handle:
        return json.load(handle)


def write(tmp_path, run, name="page.html"):
    path = tmp_path / name
    path.write_text(report.render_report(run), encoding="utf-8")
    return path


def test_the_page_of_the_recorded_run_has_its_figures():
    run = recorded_run()
    page = report.render_report(run)
    (item,) = run["failures"]
    assert 'id="steps-lost" data-value="15"' in page and "steps lost: <b>15</b>" in page
    assert 'data-value="%r"' % item["time_to_training"] in page
    assert "time to training again: <b>%.1f s</b>" % item["time_to_training"] in page
    assert "%.1f s" % item["time_to_training"] == "45.3 s"          # the demo's own printout
    assert "<b>%.1f %%</b>" % (100 * run["effective_ratio"]) in page
    assert page.count("<svg") == 2 and report.LOST_COLOUR in page


def test_the_page_is_self_contained():
    page = report.render_report(recorded_run())
    assert "<script" not in page.lower()
    assert not re.search(r'(?:href|src)\s*=\s*["\']?(?:https?:|//|file:)', page, re.I)
    assert not re.search(r"url\(\s*['\"]?(?:https?:|//)", page, re.I)
    # the only URLs are the SVG namespaces' names, which nothing fetches
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", page))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls


def test_hostile_names_and_reasons_are_escaped():
    run = recorded_run()
    run["name"], run["owner"] = HOSTILE, HOSTILE
    run["failures"][0]["state"] = HOSTILE
    run["unknown"] = [{"figure": HOSTILE, "why": HOSTILE}]
    page = report.render_report(run)
    assert "<script>" not in page and "<img" not in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(2)&gt;&amp;amp;") >= 4


def test_a_run_without_event_log_or_restart_still_renders():
    run = recorded_run()
    run.update(failures=[], restarts=0, steps_lost=0, effective_ratio=None, productive_time=None)
    run["timeline"] = {"progress": None, "checkpoints": None, "actions": []}
    run["jobs"] = run["jobs"][-1:]
    page = report.render_report(run)
    assert "No progress curve" in page and "No restart" in page and "time to training again: <b>no restart" in page
    assert page.count("<svg") == 1


def test_not_a_goodput_run_and_no_matplotlib_are_clear_errors(monkeypatch):
    with pytest.raises(AnsibleFilterError, match="not a run of training_goodput_info"):
        goodput_report({"runs": []})
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(AnsibleFilterError, match="needs matplotlib on the controller"):
        goodput_report(recorded_run())


@pytest.mark.parametrize("change", [
    {"steps_lost": 10 ** 400}, {"effective_ratio": "most"}, {"failures": [{"time_to_training": "soon"}]},
    {"timeline": {"progress": [[1e308 * 10, 10 ** 400]], "checkpoints": None, "actions": []}},
], ids=["huge-int", "string-ratio", "failure-of-another-shape", "progress-out-of-range"])
def test_figures_of_another_shape_are_the_filters_own_clear_error(change):
    """Issue 38, part 3: whatever the page meets in a run's figures, the filter raises only its own
    error, naming the run (never an OverflowError or a TypeError of the renderer in the play)."""
    run = recorded_run()
    run.update(change)
    try:
        page = goodput_report(run)
    except AnsibleFilterError as exc:
        assert str(exc).startswith("goodput_report: ") and repr(run["name"]) in str(exc), exc
    else:
        assert "<svg" in page   # rendered whole: the value was shown as it is


def test_the_lost_work_spans_from_the_checkpoint_resumed_to_the_step_reached_again():
    run = recorded_run()
    (item,) = run["failures"]
    ((begin, end, dummy),) = report._lost_spans(run)
    saved = [c["time"] for c in run["timeline"]["checkpoints"] if c["step"] == item["resumed_step"]]
    assert begin == saved[0]
    assert end == run["jobs"][1]["start_time"] + item["recompute_time"]


def lost_pixels(png):
    from PIL import Image  # matplotlib's own dependency

    want = tuple(int(report.LOST_COLOUR[i:i + 2], 16) for i in (1, 3, 5))
    with Image.open(str(png)) as image:
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20) or []
        size = rgb.size
    lost = sum(n for n, c in colours if all(abs(a - b) <= 3 for a, b in zip(c, want)))
    return size, len(colours), lost


def test_chromium_shows_the_page(chromium, tmp_path):
    run = recorded_run()
    page = write(tmp_path, run)
    png = tmp_path / "shot.png"
    began = time.time()
    headless(chromium, tmp_path, page, "--screenshot=%s" % png)
    dom = headless(chromium, tmp_path, page, "--dump-dom")
    print("chromium: screenshot and DOM in %.1f s; page %d bytes" % (time.time() - began, page.stat().st_size))
    size, colours, lost = lost_pixels(png)
    assert size == (1280, 1600)
    assert colours > 200, "a blank or nearly blank screenshot (%d colours)" % colours
    assert lost > 20000, "the lost work's shading is not on the screen (%d pixels of %s)" % (lost, report.LOST_COLOUR)
    # the DOM Chromium built: the tables' numbers
    (item,) = run["failures"]
    assert re.search(r'<tr id="total-steps_lost"><th>steps lost</th><td class="n" data-value="15">15</td>', dom)
    assert re.search(r'<tr id="restart-1">.*<td class="n" data-value="%r">45\.3 s</td>' % item["time_to_training"],
                     dom)
    assert '<span id="run-name">demo-llm</span>' in dom
    assert "%.1f s" % run["wall_time"] in dom and "%.1f s" % run["running_time"] in dom


def test_chromium_runs_nothing_of_a_hostile_name(chromium, tmp_path):
    run = copy.deepcopy(recorded_run())
    run["name"] = HOSTILE
    run["failures"][0]["state"] = HOSTILE
    dom = headless(chromium, tmp_path, write(tmp_path, run), "--dump-dom")
    assert "<img" not in dom and "<script>alert" not in dom
    assert '<span id="run-name">&lt;script&gt;alert(1)&lt;/script&gt;"&gt;&lt;img src=x onerror=alert(2)&gt;&amp;amp;</span>' \
        in dom


def test_the_curve_is_cut_at_the_restart():
    run = recorded_run()
    (item,) = run["failures"]
    segments = report._segments(run, run["timeline"]["progress"])
    assert len(segments) == 2
    assert segments[0][-1][1] == item["reached_step"] and segments[1][0][1] == item["resumed_step"]
    assert segments[0][-1][0] <= run["jobs"][0]["end_time"] < segments[1][0][0]
    # a restart that lost no step is cut too (at the job's end, not at a drop)
    run["timeline"]["progress"] = [p for p in run["timeline"]["progress"] if not (
        p[0] > run["jobs"][0]["end_time"] and p[1] <= item["reached_step"])]
    assert len(report._segments(run, run["timeline"]["progress"])) == 2


def test_the_playbook_takes_the_registry_s_run_names_only():
    """playbooks/goodput_report.yml names the page's file after the run: it checks the name by
    the registry's own rule (registry.RUN_NAME), so no name climbs out of goodput_report_dir."""
    from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry import RUN_NAME

    path = os.path.join(os.path.dirname(FIXTURE), "..", "..", "..", "..", "playbooks", "goodput_report.yml")
    with open(path) as handle:
        text = handle.read()
    (pattern,) = re.findall(r"goodput_report_run is match\('([^']*)'\)", text)
    assert pattern == RUN_NAME.pattern
    for bad in ("../etc/passwd", ".hidden", "a/b", "", "x y"):
        assert not re.match(pattern, bad)


# ---- one time axis, the failure marked, the failed node named (issue 37 part 5) ------------------

SVG = "{http://www.w3.org/2000/svg}"


def pictures(page):
    """``{figure id: (its data-* attributes, its <svg> parsed)}`` of the page's pictures."""
    out = {}
    for fid, attrs, svg in re.findall(r'<figure id="(\w+)"([^>]*)>(<svg.*?</svg>)\s*</figure>', page, re.S):
        out[fid] = (dict(re.findall(r'(data-[\w-]+)="([^"]*)"', attrs)), ET.fromstring(svg))
    return out


def group(root, gid):
    (found,) = [g for g in root.iter(SVG + "g") if g.get("id") == gid]
    return found


def numbers(path):
    return [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", path.get("d"))]


def plot_area(root, gid):
    """``(left, right)`` of the plot area of the axes with SVG id ``gid`` (its background patch)."""
    patch = next(g for g in group(root, gid) if g.get("id", "").startswith("patch_"))
    xs = numbers(patch.find(SVG + "path"))[0::2]
    return min(xs), max(xs)


def xticks(root, gid):
    """``[(x, label)]`` of the axes' x tick labels."""
    out = []
    for tick in group(root, gid).iter(SVG + "g"):
        if tick.get("id", "").startswith("xtick_"):
            text = next(tick.iter(SVG + "text"))
            out.append((round(float(text.get("x")), 3), text.text))
    return out


def texts(element):
    return ["".join(t.itertext()) for t in element.iter(SVG + "text")]


def test_both_pictures_share_one_time_axis_and_mark_the_failure_at_its_last_progress():
    run = recorded_run()
    (item,) = run["failures"]
    page = report.render_report(run)
    found = pictures(page)
    assert set(found) == {"timeline", "progress"}
    (tattrs, timeline), (pattrs, progress) = found["timeline"], found["progress"]
    # the same range and unit, said on both figures: 0 to the last thing drawn (job 2's end, 87 s) + 2 %
    assert tattrs == pattrs and tattrs["data-unit"] == "s"
    left, right = [float(v) for v in tattrs["data-xlim"].split()]
    assert left == 0.0 and right == pytest.approx(87 * 1.02)
    # the plot areas at the same x, the same ticks at the same places, the same axis label
    assert plot_area(timeline, "timeline-axes") == plot_area(progress, "progress-axes")
    ticks = xticks(timeline, "timeline-axes")
    assert ticks == xticks(progress, "progress-axes") and [t for dummy, t in ticks][:3] == ["0", "10", "20"]
    label = "seconds since the first submission (2026-12-04 21:39:11 UTC)"
    assert label in texts(timeline) and label in texts(progress)
    # the failure: one line on each picture at the last progress (step 55, 21.0 s), the same x
    x0, x1 = plot_area(progress, "progress-axes")
    want = x0 + (item["last_progress_time"] - run["first_submit"] - left) / (right - left) * (x1 - x0)
    for root in (timeline, progress):
        xs = numbers(group(root, "failure-mark-1").find(".//" + SVG + "path"))[0::2]
        assert xs == pytest.approx([want, want], abs=0.01)
        (text,) = texts(group(root, "failure-label-1"))
        assert text == "failure 1: job 1 NODE_FAIL, node n2, step 55"
    # the detection (last progress to the job's end) drawn as lost on job 1's row, from the mark
    detection_xs = numbers(group(timeline, "detection-1").find(".//" + SVG + "path"))[0::2]
    end = x0 + (run["jobs"][0]["end_time"] - run["first_submit"]) / (right - left) * (x1 - x0)
    assert (min(detection_xs), max(detection_xs)) == pytest.approx((want, end), abs=0.01)
    # in words, with the exact time
    li = re.search(r'<li id="failure-1" data-time="([^"]*)">(.*?)</li>', page)
    assert float(li.group(1)) == item["last_progress_time"]
    assert "last progress (step 55) at 21.0 s" in li.group(2)
    assert "failed node <b class=\"node\">n2</b> (of the job's nodes n[1-2])" in li.group(2)
    assert re.search(r'<tr id="restart-1">(<td[^>]*>[^<]*</td>){3}<td>n\[1-2\]</td><td>n2</td>', page)


def test_detection_is_lost_not_productive_on_the_page():
    run = recorded_run()
    (item,) = run["failures"]
    page = report.render_report(run)

    def value(row):
        return float(re.search(r'<tr id="total-%s"><th>[^<]*</th><td class="n" data-value="([^"]*)"' % row,
                               page).group(1))

    assert value("lost_to_detection") == item["lost_to_detection"] == item["detection"]
    assert value("productive_time") == pytest.approx(
        value("running_time") - value("recompute_time") - value("lost_to_detection"))
    assert "productive (running less recomputing and detection)" in page
    assert "effective training time: <b>43.5 %</b>" in page       # 37.9 of 87 s (74.6 % with detection productive)
    assert re.search(r'<tr id="restart-1">.*<td class="n" data-value="%r">27\.0 s</td></tr>' % item["lost_to_detection"],
                     page)


def test_hostile_node_names_are_text_on_the_page_and_in_the_pictures():
    run = recorded_run()
    hostile = HOSTILE + " $x^{2}$ \\"
    run["failures"][0].update(failed_nodes=[hostile], node_list=hostile, state=hostile)
    page = report.render_report(run)
    assert "<script>" not in page and "<img" not in page
    assert '<b class="node">%s</b>' % report._e(hostile) in page
    for dummy, root in pictures(page).values():      # well-formed SVG: the name is text, not markup
        (text,) = texts(group(root, "failure-label-1"))
        assert text == "failure 1: job 1 %s, node %s, step 55" % (hostile, hostile)
        assert not [e for e in root.iter() if e.tag in (SVG + "script", SVG + "foreignObject", SVG + "image")]


def test_a_failure_without_progress_is_marked_at_the_job_end_and_without_node_events_the_nodes_are_said():
    run = recorded_run()
    run["failures"][0].update(last_progress_time=None, failed_nodes=None, reached_step=None)
    page = report.render_report(run)
    for dummy, root in pictures(page).values():
        line = group(root, "failure-mark-1").find(".//" + SVG + "path")
        assert "stroke-dasharray" in line.get("style")          # dashed: not the last progress
        (text,) = texts(group(root, "failure-label-1"))
        assert text == "failure 1: job 1 NODE_FAIL, on n[1-2], last progress unknown"
    li = re.search(r'<li id="failure-1" data-time="([^"]*)">(.*?)</li>', page)
    assert float(li.group(1)) == run["jobs"][0]["end_time"]
    assert "last progress unknown: marked at the job&#x27;s end" in li.group(2)
    assert "failed node not known; the job ran on n[1-2]" in li.group(2)


@pytest.mark.parametrize("span, unit", [(600, "s"), (5 * 3600, "min"), (3 * 86400, "h")])
def test_the_time_unit_follows_the_run_s_span_and_is_the_same_on_both_pictures(span, unit):
    first = 1796420000
    run = {"name": "r", "first_submit": first, "now": first + span, "failures": [], "timeline": {
        "progress": [[first + 10.0, 0], [first + span - 1.0, 50]], "checkpoints": [], "actions": []},
        "jobs": [{"job_id": "1", "state": "RUNNING", "submit_time": first, "start_time": first + 5, "end_time": None}]}
    axis = report.time_axis(run)
    assert axis["unit"] == unit and axis["xlim"][1] == pytest.approx(span / axis["scale"] * 1.02)
    found = pictures(report.render_report(run))
    assert found["timeline"][0] == found["progress"][0] and found["timeline"][0]["data-unit"] == unit
    words = {"s": "seconds", "min": "minutes", "h": "hours"}[unit]
    for dummy, root in found.values():
        assert any(t.startswith(words + " since the first submission") for t in texts(root))

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

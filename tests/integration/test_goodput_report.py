# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The goodput report after a real crash and resume on the dev cluster (issue 25, part 3).

A run of the reference trainer (real torch, 2 nodes, as clusterops-alice, deployed by the role
torchrun_launcher) loses a node for real; remediate.yml heals the node and resubmits the run,
which finishes from its newest checkpoint. Then playbooks/goodput_report.yml writes the run's
page, and its steps lost and time to training again are compared with the same figures computed
here, independently, from the trainer's event log: the highest step of the first job less the
step the second resumed from, and the first job's last step to the second job's first step.
The page names the node the test crashed as the failed node (Slurm's node events).
When chromium is installed the page is opened in it and the numbers are read from its DOM.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO, attempts, make, playbook, read_events, until
from test_training_remediation import (  # noqa: F401 pylint: disable=unused-import
    EVERY,
    active_jobs,
    clean,
    deploy,
    node_list,
    only,
    power_on_after_reboot_issued,
    remediate,
    sacct_state,
    wait_running_with_checkpoint,
    world,
)

pytest.importorskip("torch")


def from_event_log(ckpt):
    """(steps lost, time to training again in seconds) of the run's one restart, from its events."""
    tries = attempts(read_events(ckpt))
    assert len(tries) == 2, [len(t) for t in tries]
    reached = max(e["step"] for e in tries[0] if isinstance(e.get("step"), int))
    last = max(e["time"] for e in tries[0] if isinstance(e.get("step"), int))
    first = min(e["time"] for e in tries[1] if e["event"] == "step")
    return reached - tries[1][0]["step"], first - last


def between_checkpoints(ckpt):
    """True when the trainer's newest step is 2 to 4 steps past a checkpoint: a crash now loses
    steps (at a checkpoint's step it would lose none, and the test would compare nothing)."""
    try:
        steps = [e["step"] for e in read_events(ckpt) if e["event"] == "step"]
    except ValueError:  # a line being written
        return False
    return bool(steps) and 2 <= steps[-1] % EVERY <= 4


def figure(page, element):
    """The ``data-value`` of the element with id ``element``."""
    match = re.search(r'id="%s" data-value="([^"]*)"' % element, page)
    assert match, "no %s in the page" % element
    return html.unescape(match.group(1))


def test_the_report_after_a_crash_and_resume_agrees_with_the_event_log(clean, tmp_path):
    # Half a second a step: 5 s between checkpoints, so the crash lands between two of them.
    r = deploy(clean, "e2e-report", step_time=0.5)
    first = wait_running_with_checkpoint(r)
    until(lambda: between_checkpoints(r["ckpt"]), "the trainer between two checkpoints", 60, interval=0.1)
    victim = node_list(first)[-1]
    make("cluster-crash", NODE=victim)
    until(lambda: sacct_state(first) == "NODE_FAIL", "job %s to end NODE_FAIL" % first, 120)
    remediate(clean["registry"], *only(r["name"]))
    power_on_after_reboot_issued(victim)
    until(lambda: os.path.exists(os.path.join(r["ckpt"], "FINISHED")), "the run to finish", 300)
    until(lambda: not active_jobs(r["name"]), "the second job to leave the queue", 60)

    proc, recap = playbook(os.path.join(REPO, "playbooks", "goodput_report.yml"),
                           "-e", "goodput_report_run=%s" % r["name"],
                           "-e", "goodput_report_registry=%s" % clean["registry"],
                           "-e", "goodput_report_dir=%s" % tmp_path)
    assert recap.get("failed") == 0, proc.stdout
    path = tmp_path / ("%s.html" % r["name"])
    assert "goodput report: %s" % path in proc.stdout
    page = path.read_text(encoding="utf-8")

    lost, to_training = from_event_log(r["ckpt"])
    assert 0 < lost and int(figure(page, "steps-lost")) == lost
    (shown,) = [float(v) for v in figure(page, "time-to-training").split()]
    assert abs(shown - to_training) < 0.01, (shown, to_training)
    assert "time to training again: <b>%.1f s</b>" % to_training in page
    assert "<b>%d</b>" % lost in page and page.count("<svg") == 2
    # issue 37 part 5: the failed node named (the playbook reads its node events), the failure marked
    # on both pictures, which share one time axis
    assert '<b class="node">%s</b>' % victim in page
    assert page.count('id="failure-mark-1"') == 2 and len(set(re.findall(r'data-xlim="([^"]*)"', page))) == 1

    chromium = shutil.which("chromium")
    if chromium:
        dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                              "--user-data-dir=%s" % (tmp_path / "profile"), "--dump-dom", "file://%s" % path],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                             timeout=120, check=True).stdout
        assert int(figure(dom, "steps-lost")) == lost
        assert re.search(r'<tr id="restart-1">.*>%.1f s</td>' % to_training, dom)

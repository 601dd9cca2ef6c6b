# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The timeline of the goodput report (_training_remediation/goodput_timeline.py): bounded lists
that keep what the picture needs."""

from __future__ import annotations

from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import goodput_timeline as tl


def steps(begin, end, t0, dt=1.0, event="step"):
    return [{"event": event, "step": s, "time": t0 + dt * (s - begin)} for s in range(begin, end + 1)]


def test_a_short_curve_is_every_record_with_a_step_in_time_order():
    events = steps(1, 3, 100.0)[::-1] + [{"event": "signal", "name": "USR1", "time": 99.0},
                                         {"event": "step", "step": True, "time": 98.0}]
    assert tl.progress_curve(events) == [[100.0, 1], [101.0, 2], [102.0, 3]]
    assert tl.progress_curve(None) is None
    assert tl.progress_curve([]) == []


def test_a_long_curve_is_bounded_and_keeps_each_restart_where_it_was():
    # 3,000 steps, a crash at step 1,234 that resumed from 1,200, then 1,201 ... 3,000
    events = steps(0, 1234, 0.0) + steps(1200, 3000, 2000.0)
    curve = tl.progress_curve(events, max_points=100)
    assert len(curve) <= 100
    assert curve[0] == [0.0, 0] and curve[-1] == [3800.0, 3000]
    assert [1234.0, 1234] in curve and [2000.0, 1200] in curve   # the step reached, the step resumed from
    assert curve == sorted(curve)
    gaps = [b[0] - a[0] for a, b in zip(curve, curve[1:]) if b[0] - a[0] != 766.0]
    assert max(gaps) < 3 * 3800.0 / 100                           # evenly spread, not bunched


def test_many_restarts_still_fit_the_bound():
    events = []
    for k in range(300):
        events += steps(10 * k, 10 * k + 12, 100.0 * k)      # each job passes 2 steps past the next resume
    curve = tl.progress_curve(events, max_points=50)
    assert len(curve) <= 50 and curve[0] == [0.0, 0] and curve[-1][1] == 3002


def test_checkpoints_oldest_first_the_newest_kept():
    marks = [{"step": s, "time": 1000.0 - s} for s in range(0, 500, 2)] + [{"step": 9, "time": None}]
    out = tl.checkpoint_marks(marks, limit=10)
    assert len(out) == 10 and out[-1] == {"step": 0, "time": 1000.0}
    assert [m["time"] for m in out] == sorted(m["time"] for m in out)
    assert tl.checkpoint_marks(None) is None


def test_remediation_actions_from_state_json():
    state = {"resubmissions": [{"time": 20, "job_id": 3, "after_job": 2, "after_state": "CANCELLED", "step": 40,
                                "hang_step": 55}, {"time": None, "job_id": 9}],
             "hang_cancels": [{"time": 10, "job_id": 2, "step": 55, "idle": 30, "evidence": "/x"}, "junk"]}
    assert tl.remediation_actions(state) == [
        {"action": "hang_cancel", "time": 10.0, "job_id": 2, "step": 55, "after_job": None, "after_state": None,
         "idle": 30},
        {"action": "resubmit", "time": 20.0, "job_id": 3, "step": 40, "after_job": 2, "after_state": "CANCELLED",
         "idle": None}]
    many = {"resubmissions": [{"time": t, "job_id": t} for t in range(300)]}
    assert [a["job_id"] for a in tl.remediation_actions(many, limit=5)] == [295, 296, 297, 298, 299]
    assert tl.remediation_actions({}) == []

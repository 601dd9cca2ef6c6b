# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Suspect nodes end to end on the dev cluster, with real torch (CPU, gloo).

A one-node run of the reference trainer whose program fails on one node only: a test-side
wrapper (the "bad GPU" of that node) exits 1 when Slurm's node name (``SLURMD_NODENAME``; every
slurmd of the dev cluster runs on this host, so the host name would not tell the nodes apart)
is the bad node, else it runs the reference trainer. Slurm puts the first two jobs on that node,
both end FAILED; remediate.yml drains it with the suspect reason, submits the third job with
``--exclude`` and the run finishes elsewhere; a second remediation changes nothing.
"""

from __future__ import annotations

import os

from conftest import nodes, run
from test_training_remediation import (  # noqa: F401 pylint: disable=unused-import
    ALICE, TRAIN_ARGS, clean, deploy, prometheus, only, remediate, sacct_state, squeue, summary_line, until,
    world)

WRAPPER = r'''import os, runpy, sys
bad = %r
if os.environ.get("SLURMD_NODENAME") == bad:
    sys.stderr.write("fault injection: the bad node %%s fails every job\n" %% bad)
    sys.exit(1)
sys.argv[0] = %r
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def scontrol_job(job_id):
    """{key: value} of ``scontrol show job -o <id>`` (values without spaces only)."""
    out = run(["scontrol", "show", "job", "-o", str(job_id)]).stdout
    return dict(part.split("=", 1) for part in out.split() if "=" in part)


def test_a_node_that_fails_the_run_twice_is_drained_and_excluded(clean):
    bad = "n1"  # an idle dev cluster gives a one-node job its first node
    wrapper = os.path.join(clean["base"], "fail_on_%s.py" % bad)
    with open(wrapper, "w") as handle:
        handle.write(WRAPPER % (bad, os.path.join(clean["tools"], "reference_trainer.py")))
    os.chmod(wrapper, 0o644)
    r = deploy(clean, "e2e-suspect", torchrun_launcher_nodes=1, torchrun_launcher_program=wrapper)
    prom = os.path.join(clean["base"], "suspect.prom")
    extra = only(r["name"]) + ["-e", "remediate_prometheus_textfile=%s" % prom]

    # Job 1 fails on n1: one failed job is no suspect (k = 2); plain resubmission.
    first = until(lambda: (squeue(r["name"]) or [[None]])[-1][0], "the first job", 30)
    until(lambda: sacct_state(first) == "FAILED", "job %s to fail" % first, 120)
    assert run(["sacct", "-n", "-X", "-P", "-j", first, "-o", "NodeList"]).stdout.split() == [bad]
    proc, recap = remediate(clean["registry"], *extra)
    line = summary_line(proc, r["name"])
    assert "-> resubmit (job " in line and "excluding" not in line, line
    assert prometheus(prom)["clusterops_remediate_nodes_suspect"] == 0

    # Job 2 fails on n1 too: n1 is suspect, drained with its reason, job 3 excludes it.
    second = until(lambda: [row[0] for row in squeue(r["name"]) if row[0] != first], "the second job", 30)[0]
    until(lambda: sacct_state(second) == "FAILED", "job %s to fail" % second, 120)
    assert run(["sacct", "-n", "-X", "-P", "-j", second, "-o", "NodeList"]).stdout.split() == [bad]
    proc, recap = remediate(clean["registry"], *extra, needs_human=True)
    line = summary_line(proc, r["name"])
    assert "-> resubmit (job " in line and "excluding %s" % bad in line, line
    reason = "clusterops: suspect: run %s failed on it (jobs %s,%s)" % (r["name"], first, second)
    assert nodes()[bad]["reason"] == reason and "DRAIN" in nodes()[bad]["flags"], nodes()[bad]
    assert "suspect node %s: run %s failed on it (jobs %s,%s) -> drained (was IDLE)" % (
        bad, r["name"], first, second) in proc.stdout, proc.stdout
    figures = prometheus(prom)
    assert figures["clusterops_remediate_nodes_suspect"] == 1, figures
    assert figures["clusterops_remediate_nodes_suspect_drained"] == 1, figures
    third = until(lambda: [row[0] for row in squeue(r["name"]) if row[0] not in (first, second)],
                  "the third job", 30)[0]
    assert scontrol_job(third).get("ExcNodeList") == bad, scontrol_job(third)

    # The run finishes elsewhere.
    until(lambda: os.path.exists(os.path.join(r["ckpt"], "FINISHED")), "the run to finish", 240)
    until(lambda: sacct_state(third) == "COMPLETED", "job %s to complete" % third, 60)
    ran_on = run(["sacct", "-n", "-X", "-P", "-j", third, "-o", "NodeList"]).stdout.split()
    assert ran_on and bad not in ran_on, ran_on

    # A second remediation changes nothing: n1 stays drained with its reason (a human's now).
    before = [row[0] for row in squeue(r["name"])]
    proc, recap = remediate(clean["registry"], *extra, needs_human=True)
    assert recap["changed"] == 0, proc.stdout
    line = summary_line(proc, r["name"])
    assert "finished" in line and "-> none" in line, line
    assert nodes()[bad]["reason"] == reason
    assert [row[0] for row in squeue(r["name"])] == before, "remediation submitted a job"
    assert prometheus(prom)["clusterops_remediate_nodes_suspect"] == 0

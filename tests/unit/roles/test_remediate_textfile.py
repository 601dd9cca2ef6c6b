# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The remediate role's Prometheus textfile (roles/remediate/templates/remediate.prom.j2) read by
prometheus_client's text parser, the one node_exporter's format follows: a cluster or training
run name with a backslash, a double quote or a line feed comes back as it was and breaks no other
series; each run's resubmissions so far. The alert rules' tests render it with render()."""

from __future__ import annotations

import datetime
import os

import jinja2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible.module_utils.parsing.convert_bool import boolean

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TEMPLATE = os.path.join(REPO, "roles", "remediate", "templates", "remediate.prom.j2")

SUMMARY = dict(nodes_healed=3, nodes_skipped=4, nodes_overflow=0, nodes_flapping=0, nodes_needing_human=0,
               nodes_in_flight=1, circuit_open=False, nodes_suspect=0, nodes_suspect_drained=0,
               runs_resubmitted=1, runs_hung=0, runs_needing_human=0, slurm_readable=True, needs_human=[],
               duration_seconds=12.5)
FLEET = dict(clusters_needing_human=[], nodes_healed=6, nodes_suspect=0, runs_resubmitted=2, runs_hung=0)


def render(clusters, runs=None, interval=600):
    """The textfile of a run over ``clusters`` (names), each with the summary SUMMARY; ``runs``:
    training_remediation's runs[] entries of every cluster (none: the training part did not run)."""
    # trim_blocks and the last line feed kept, as ansible.builtin.template renders
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.dirname(TEMPLATE)), trim_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["bool"] = lambda value: boolean(value, strict=False)  # Ansible's bool filter
    env.globals["now"] = lambda utc=False: datetime.datetime.now(datetime.timezone.utc)
    training = {} if runs is None else {"training": {"runs": runs}}
    return env.get_template(os.path.basename(TEMPLATE)).render(
        remediate_prom_clusters=[dict(SUMMARY, cluster=name, **training) for name in clusters],
        remediate_prom_fleet=FLEET, remediate_schedule_interval=interval)


def run_entry(name, resubmissions, job_id=None, then=None):
    """A runs[] entry of training_remediation's RETURN, with the keys the textfile reads."""
    entry = dict(name=name, status="failed", action="resubmit" if job_id else "none", needs_human=False,
                 resubmissions=resubmissions, max_resubmissions=5, job_id=job_id)
    if then is not None:
        entry.update(action="cancel_hung", then=then)
    return entry


@pytest.mark.parametrize("hostile", [
    'gpu"a', "gpu\\a", "gpu\na", "gpu\\n", 'a\\"b\nc', "gpu\r\na", "gpü-ä", "} 1\nclusterops_remediate_fake 7"])
def test_every_cluster_name_reads_back_as_it_was(hostile):
    text = render(["green", hostile])
    families = dict((f.name, f) for f in text_string_to_metric_families(text))
    healed = families["clusterops_remediate_nodes_healed"]
    assert sorted(s.labels["cluster"] for s in healed.samples) == sorted(["green", hostile])
    assert all(s.value == 3 for s in healed.samples)
    assert "clusterops_remediate_fake" not in families
    assert families["clusterops_remediate_fleet_clusters"].samples[0].value == 2
    assert len([f for f in families if f.startswith("clusterops_remediate_")]) == 24
    assert families["clusterops_remediate_run_resubmissions"].samples == []
    assert families["clusterops_remediate_schedule_interval_seconds"].samples[0].value == 600


@pytest.mark.parametrize("hostile", ['run"a', "run\\a", "run\na", "} 1\nclusterops_remediate_fake 7"])
def test_every_run_name_reads_back_as_it_was(hostile):
    text = render(["green"], runs=[run_entry("llama", 1), run_entry(hostile, 2)])
    families = dict((f.name, f) for f in text_string_to_metric_families(text))
    samples = families["clusterops_remediate_run_resubmissions"].samples
    assert sorted((s.labels["cluster"], s.labels["run"], s.value) for s in samples) == sorted(
        [("green", "llama", 1), ("green", hostile, 2)])
    assert "clusterops_remediate_fake" not in families


def test_run_resubmissions_count_the_one_made_now():
    """runs[].resubmissions counts those made before this run; a job submitted now (job_id, or
    then.job_id after a hung job was cancelled) adds one; check mode (no job_id) adds none. A run
    without a count has no sample (never a 0, which would read as a counter reset), nor has a run
    left for a human with nothing done (an unreadable state.json is reported with a count of 0); a
    run stopped now keeps its sample."""
    runs = [run_entry("idle", 0), run_entry("now", 2, job_id=57), run_entry("check-mode", 2),
            run_entry("hung", 1, then=dict(action="resubmit", job_id=58)),
            run_entry("hung-check", 1, then=dict(action="resubmit", job_id=None)),
            run_entry("hung-pending", 1, then=None), dict(run_entry("unknown", 0), resubmissions=None),
            dict(run_entry("unreadable", 0), status="ended", needs_human=True),
            dict(run_entry("stopped-now", 5), action="stop", needs_human=True),
            dict(run_entry("failed-resubmit", 3), action="resubmit", needs_human=True, error="sbatch: error")]
    text = render(["a", "b"], runs=runs, interval=3600)
    families = dict((f.name, f) for f in text_string_to_metric_families(text))
    family = families["clusterops_remediate_run_resubmissions"]
    assert family.type == "counter"
    values = dict(((s.labels["cluster"], s.labels["run"]), s.value) for s in family.samples)
    assert values == dict(((cluster, run), value) for cluster in ("a", "b") for run, value in (
        ("idle", 0), ("now", 3), ("check-mode", 2), ("hung", 2), ("hung-check", 1), ("hung-pending", 1),
        ("stopped-now", 5), ("failed-resubmit", 3)))
    assert all(s.name == "clusterops_remediate_run_resubmissions_total" for s in family.samples)
    assert families["clusterops_remediate_schedule_interval_seconds"].samples[0].value == 3600

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
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ansible.module_utils.parsing.convert_bool import boolean

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TEMPLATE = os.path.join(REPO, "roles", "remediate", "templates", "remediate.prom.j2")
with open(os.path.join(REPO, "roles", "remediate", "vars", "main.yml")) as _handle:
    CAUSES = yaml.safe_load(_handle)["remediate_causes"]

SUMMARY = dict(nodes_healed=3, nodes_reboot_requested=1, nodes_skipped=4, nodes_overflow=0, nodes_flapping=0, nodes_needing_human=0,
               nodes_in_flight=1, circuit_open=False, nodes_suspect=0, nodes_suspect_drained=0,
               runs_resubmitted=1, runs_hung=0, runs_needing_human=0, slurm_readable=True, needs_human=[],
               duration_seconds=12.5, causes=[])
FLEET = dict(clusters_needing_human=[], nodes_healed=6, nodes_suspect=0, runs_resubmitted=2, runs_hung=0)


def render(clusters, runs=None, interval=600, goodput=None, causes=None):
    """The textfile of a run over ``clusters`` (names), each with the summary SUMMARY; ``runs``:
    training_remediation's runs[] entries of every cluster (none: the training part did not run);
    ``goodput``: {cluster: training_goodput_info's runs[]} (none: goodput was not read); ``causes``:
    {cluster: the causes of its failure} (none: no failure)."""
    # trim_blocks and the last line feed kept, as ansible.builtin.template renders
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.dirname(TEMPLATE)), trim_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["bool"] = lambda value: boolean(value, strict=False)  # Ansible's bool filter
    env.globals["now"] = lambda utc=False: datetime.datetime.now(datetime.timezone.utc)
    training = {} if runs is None else {"training": {"runs": runs}}
    return env.get_template(os.path.basename(TEMPLATE)).render(
        remediate_prom_clusters=[dict(SUMMARY, cluster=name, causes=(causes or {}).get(name, []), **training)
                                 for name in clusters],
        remediate_prom_fleet=FLEET, remediate_schedule_interval=interval, remediate_causes=CAUSES,
        remediate_prom_goodput=[dict(cluster=name, runs=entries) for name, entries in sorted((goodput or {}).items())])


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
    assert len([f for f in families if f.startswith("clusterops_remediate_")]) == 26
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


def goodput_entry(name, **figures):
    """A runs[] entry of training_goodput_info's RETURN (a run with one node-failure restart), with
    the keys the textfile reads; ``figures`` replace them."""
    entry = dict(name=name, owner="alice", finished=False, accounting=True, active=True, wall_time=3600.0,
                 queued_time=60.0, running_time=3500.0, between_jobs_time=40.0, recompute_time=100.0,
                 productive_time=3400.0, productive_time_at_most=None, node_seconds=7000.0,
                 effective_ratio=0.944444, steps_lost=12, restarts=1,
                 restarts_by_cause=dict(node_failure=1, hang=0, time_limit=0, preemption=0, program_error=0, other=0),
                 jobs=[], failures=[], unknown=[])
    entry.update(figures)
    return entry


GOODPUT_SERIES = ["effective_ratio", "wall_time_seconds", "queued_time_seconds", "running_time_seconds",
                  "between_jobs_time_seconds", "recompute_time_seconds", "productive_time_seconds",
                  "node_seconds", "steps_lost"]


def goodput_samples(text):
    """{(series, cluster, run[, cause]): value} of the clusterops_training_* samples."""
    out = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("clusterops_training_"):
            continue
        assert family.type == "gauge", family.name
        for s in family.samples:
            key = (s.name[len("clusterops_training_"):], s.labels["cluster"], s.labels["run"])
            out[key + ((s.labels["cause"],) if "cause" in s.labels else ())] = s.value
    return out


def test_goodput_series_are_the_known_figures_only():
    """Each known figure of training_goodput_info is a gauge with labels cluster and run; a null
    figure writes no sample (never a 0); a run of which no job was read (restarts 0 there, but
    nothing is known) and a run whose figures cover part of it (no accounting; a state.json job
    outside the history window) write none but finished; a run whose state.json could not be read
    (a hang is told from it) writes no restarts."""
    no_event_log = goodput_entry("no-events", recompute_time=None, productive_time=None, effective_ratio=None,
                                 steps_lost=None, productive_time_at_most=3500.0,
                                 unknown=[dict(figure="events", why="the run has no trainer event log")])
    no_job = goodput_entry("no-job", **dict((key, None) for key in (
        "wall_time", "queued_time", "running_time", "between_jobs_time", "recompute_time", "productive_time",
        "node_seconds", "effective_ratio", "steps_lost")))
    no_job.update(restarts=0, restarts_by_cause=dict((c, 0) for c in no_job["restarts_by_cause"]), active=False,
                  unknown=[dict(figure="wall_time", why="no job of the run was found")])
    no_accounting = goodput_entry("no-accounting", accounting=False, unknown=[dict(figure="jobs", why="...")])
    outside = goodput_entry("outside", unknown=[dict(figure="wall_time", why="job 3 (state.json) is not among")])
    no_state = goodput_entry("no-state", unknown=[dict(figure="state", why="state.json: not JSON")])
    done = goodput_entry("done", finished=True, active=False, effective_ratio=0.5)
    text = render(["a"], goodput={"a": [goodput_entry("llama"), no_event_log, no_job, no_accounting, outside,
                                        no_state, done]})
    samples = goodput_samples(text)
    figures = dict(zip(GOODPUT_SERIES, [0.944444, 3600, 60, 3500, 40, 100, 3400, 7000, 12]))
    restarts = dict(node_failure=1, hang=0, time_limit=0, preemption=0, program_error=0, other=0)

    def run_samples(run):
        return dict((k[0] if len(k) == 3 else (k[0], k[3]), v) for k, v in samples.items() if k[2] == run)

    whole = dict(figures, finished=0)
    whole.update((("restarts", c), n) for c, n in restarts.items())
    assert run_samples("llama") == whole
    assert run_samples("no-events") == dict((k, v) for k, v in whole.items() if k not in (
        "effective_ratio", "recompute_time_seconds", "productive_time_seconds", "steps_lost"))
    assert run_samples("no-job") == {"finished": 0}
    assert run_samples("no-accounting") == {"finished": 0}
    assert run_samples("outside") == {"finished": 0}
    assert run_samples("no-state") == dict(figures, finished=0)
    assert run_samples("done") == dict(whole, effective_ratio=0.5, finished=1)


def test_goodput_series_of_every_cluster_with_hostile_run_names():
    """Every cluster's goodput (read on its acting host) is in the textfile; run names read back
    as they were; no goodput read (the role variable off, or no textfile): no sample, and the
    families stay declared."""
    hostile = 'run"a\\b\nc} 1\nclusterops_training_fake 7'
    text = render(["a", "b"], goodput={"a": [goodput_entry(hostile)], "b": [goodput_entry("llama", effective_ratio=0.5)]})
    samples = goodput_samples(text)
    assert samples[("effective_ratio", "a", hostile)] == 0.944444
    assert samples[("effective_ratio", "b", "llama")] == 0.5
    assert "clusterops_training_fake" not in text.split("\n")[0] and ("fake", "a", hostile) not in samples
    assert len([k for k in samples if k[0] == "effective_ratio"]) == 2
    none = render(["a"])
    assert goodput_samples(none) == {}
    assert "# TYPE clusterops_training_effective_ratio gauge" in none


def test_each_cause_of_a_failure_has_its_series_for_every_cluster():
    """clusterops_remediate_failed{cause, cluster}: 1 for each cause of the cluster's failure, 0 for the others,
    every cause of remediate_causes for every cluster (each alert reads one series)."""
    text = render(["green", "red"], causes={"red": ["permission", "slurm_refused"]})
    samples = dict(((s.labels["cluster"], s.labels["cause"]), s.value)
                   for f in text_string_to_metric_families(text) if f.name == "clusterops_remediate_failed"
                   for s in f.samples)
    assert sorted(CAUSES) == ["accounting", "configuration", "permission", "slurm_refused", "slurm_unreadable",
                              "unexpected"]
    expected = dict((("green", cause), 0) for cause in CAUSES)
    expected.update((("red", cause), 1 if cause in ("permission", "slurm_refused") else 0) for cause in CAUSES)
    assert samples == expected

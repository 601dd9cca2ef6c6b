# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The alert rules the collection ships for the remediate role's textfile
(roles/remediate/files/prometheus/clusterops-remediate.rules.yml), with Debian's promtool (package
prometheus, 2.42): ``promtool check rules``, ``promtool test rules`` of
tests/unit/roles/prometheus/*.test.yml (each alert fires in a test of its own and none fires in
the healthy one), every series the rules and their tests read is in the textfile as the role
renders it, and ``promtool check metrics`` of that textfile.

``make test`` installs promtool first (``make deps``: dev/cluster/install-deps.sh) and sets
CLUSTEROPS_REQUIRE_PROMTOOL=1, so there a missing promtool fails these tests; elsewhere
(``make unit`` or pytest on a machine without it) they are skipped, saying so (the fixture
promtool, tests/unit/conftest.py)."""

from __future__ import annotations

import glob
import os
import re
import subprocess

import yaml
from prometheus_client.parser import text_string_to_metric_families

from test_remediate_textfile import goodput_entry, render, run_entry

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RULES = os.path.join(REPO, "roles", "remediate", "files", "prometheus", "clusterops-remediate.rules.yml")
TESTS = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prometheus", "*.test.yml")))
DOC = os.path.join(REPO, "docs", "alerts.md")
ALERTS = ["ClusteropsRemediateNeedsHuman", "ClusteropsRemediateCircuitOpen", "ClusteropsRemediateNodesFlapping",
          "ClusteropsRemediateSlurmUnreadable", "ClusteropsRemediateStale", "ClusteropsRemediateRestartStorm",
          "ClusteropsTrainingGoodputLow", "ClusteropsRemediateConfigurationError", "ClusteropsRemediatePermissionDenied",
          "ClusteropsRemediateAccountingUnavailable", "ClusteropsRemediateSlurmRefusedChange",
          "ClusteropsRemediateUnexpectedFailure"]
#: A series name of the textfile (the rules' and the tests' selectors).
SERIES = re.compile(r"\bclusterops_[a-z0-9_]+")


def promtool_run(promtool, *args, **kwargs):
    return subprocess.run([promtool] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False, **kwargs)


def load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def rules():
    return [rule for group in load(RULES)["groups"] for rule in group["rules"]]


def sample_textfile():
    """The textfile of a run over two clusters with two training runs, one resubmitted now, and
    their goodput (one finished)."""
    return render(["gpu-a", "gpu-b"], runs=[run_entry("llama-8b", 2, job_id=57), run_entry("gpt-s", 0)],
                  goodput={"gpu-a": [goodput_entry("llama-8b"), goodput_entry("gpt-s", finished=True)]})


def test_promtool_checks_the_shipped_rules(promtool):
    proc = promtool_run(promtool, "check", "rules", RULES)
    assert proc.returncode == 0, proc.stdout
    assert "SUCCESS: %d rules found" % len(ALERTS) in proc.stdout


def test_each_alert_fires_in_its_test_and_none_in_the_healthy_one(promtool):
    assert TESTS, "no tests/unit/roles/prometheus/*.test.yml"
    for path in TESTS:
        proc = promtool_run(promtool, "test", "rules", os.path.basename(path), cwd=os.path.dirname(path))
        assert proc.returncode == 0, proc.stdout
        assert "SUCCESS" in proc.stdout, proc.stdout
    # What the promtool tests cover: each alert fires in a test named after none other, and the
    # healthy test expects every alert to stay silent.
    cases = [case for path in TESTS for case in load(path)["tests"]]
    firing = {}
    for case in cases:
        for check in case["alert_rule_test"]:
            if check.get("exp_alerts"):
                firing.setdefault(check["alertname"], set()).add(case["name"])
    assert sorted(firing) == sorted(ALERTS)
    assert all(len(names) == 1 for names in firing.values()), firing
    assert len(set(name for names in firing.values() for name in names)) == len(ALERTS), firing
    healthy = [case for case in cases if case["name"] == "healthy"]
    assert len(healthy) == 1
    silent = [check["alertname"] for check in healthy[0]["alert_rule_test"] if check.get("exp_alerts") == []]
    assert sorted(set(silent)) == sorted(ALERTS)
    assert all(not check.get("exp_alerts") for check in healthy[0]["alert_rule_test"])


def test_rules_are_the_documented_ones():
    """One group per concern, one alert each; a severity, a `for`, a summary naming the label the
    alert is per (cluster, or instance for the textfile's own staleness) and a runbook_url that
    points at the alert's section of docs/alerts.md in the collection's repository."""
    groups = load(RULES)["groups"]
    assert [len(group["rules"]) for group in groups] == [1] * len(ALERTS)
    assert len(set(group["name"] for group in groups)) == len(groups)
    assert [rule["alert"] for rule in rules()] == ALERTS
    with open(os.path.join(REPO, "galaxy.yml")) as handle:
        repository = yaml.safe_load(handle)["repository"]
    with open(DOC) as handle:
        anchors = set(re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
                      for line in handle if line.startswith("#"))
    for rule in rules():
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        assert re.match(r"^\d+[mh]$", rule["for"]), rule["alert"]
        per = "cluster" if "by (cluster" in rule["expr"] else "instance"
        assert "{{ $labels.%s }}" % per in rule["annotations"]["summary"], rule["alert"]
        assert rule["annotations"]["description"]
        url = rule["annotations"]["runbook_url"]
        assert url == "%s/blob/main/docs/alerts.md#%s" % (repository, rule["alert"].lower())
        assert rule["alert"].lower() in anchors, "docs/alerts.md has no section %s" % rule["alert"]


def test_every_series_the_rules_and_their_tests_read_is_in_the_textfile():
    """A series renamed in the template (or in a rule) breaks this test, not a page at 3 a.m."""
    families = list(text_string_to_metric_families(sample_textfile()))
    names = set(sample.name for family in families for sample in family.samples)
    used = set(name for rule in rules() for name in SERIES.findall(rule["expr"]))
    assert used, "the rules read no clusterops_ series"
    assert sorted(used - names) == []
    for path in TESTS:
        for case in load(path)["tests"]:
            for series in case["input_series"]:
                assert SERIES.match(series["series"]).group(0) in names, (path, case["name"], series["series"])
    # The labels the rules aggregate by are the textfile's.
    labels = dict((sample.name, set(sample.labels)) for family in families for sample in family.samples)
    assert labels["clusterops_remediate_needs_human"] == {"cluster"}
    assert labels["clusterops_remediate_run_resubmissions_total"] == {"cluster", "run"}
    assert labels["clusterops_remediate_last_run_timestamp_seconds"] == set()
    assert labels["clusterops_remediate_schedule_interval_seconds"] == set()
    assert labels["clusterops_training_effective_ratio"] == {"cluster", "run"}
    assert labels["clusterops_training_finished"] == {"cluster", "run"}
    assert labels["clusterops_training_restarts"] == {"cluster", "run", "cause"}


def test_promtool_checks_the_rendered_textfile(promtool):
    text = sample_textfile()
    assert text.endswith("\n")  # as Ansible's template module writes it
    proc = promtool_run(promtool, "check", "metrics", input=text)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout == "", proc.stdout
    assert "clusterops_remediate_run_resubmissions_total{cluster=\"gpu-a\",run=\"llama-8b\"} 3" in text
    assert "clusterops_training_effective_ratio{cluster=\"gpu-a\",run=\"llama-8b\"} 0.944444" in text

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Prometheus for real: the remediate role's textfile, written by a real remediate.yml run on the
dev cluster, read by Debian's prometheus-node-exporter (its textfile collector alone, on a folder
of the test) and scraped every second by Debian's prometheus with the collection's alert rules
loaded; then Prometheus' HTTP API is asked for the series and the alerts.

Both daemons are started by the fixture ``monitoring`` on 127.0.0.1 and free ports, and stopped
(their process ids) when the module ends; the packages' own services are never started (``make
deps``: dev/cluster/install-deps.sh installs them disabled). Where the binaries are missing the
test fails under CLUSTEROPS_REQUIRE_CLUSTER (``make integration``, ``make test``), else it skips.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from conftest import REPO, cluster_name, playbook, run, scontrol, shared_tmpdir, slurm_env
# The training-remediation helpers and fixtures (world, clean): one home for them.
from test_training_remediation import (  # noqa: F401 pylint: disable=unused-import
    active_jobs, clean, deploy, node_list, until, wait_running_with_checkpoint, world)

RULES = os.path.join(REPO, "roles", "remediate", "files", "prometheus", "clusterops-remediate.rules.yml")
NODE_EXPORTER, PROMETHEUS = "prometheus-node-exporter", "prometheus"
#: A reason of the human class clusterops_hold (roles/remediate_nodes/defaults/main.yml): needs a
#: human. Not one of the health check's (clusterops-health: ...): the dev cluster's
#: HealthCheckProgram resumes its own drains within 30 s.
HUMAN_REASON = "clusterops: flapping: healed 3 times in 24h, last: Prolog error"
GOODPUT_TASK = "Read the goodput of the training runs (for the textfile)"


def free_port():
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url, timeout=5):
    """(status, body) of a GET; (None, error) when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, answer.read().decode("utf-8", "replace")
    except OSError as exc:
        return None, str(exc)


@contextlib.contextmanager
def started(argv, ready_url, log_path):
    """``argv`` started in a session of its own (output to ``log_path``) until ``ready_url``
    answers 200; stopped (SIGTERM, then SIGKILL after 10 s) at the end, by its process id."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # pylint: disable=consider-using-with
    try:
        deadline = time.time() + 30
        while get(ready_url)[0] != 200:
            if proc.poll() is not None or time.time() > deadline:
                with open(log_path) as handle:
                    output = handle.read()[-3000:]
                pytest.fail("%s did not answer at %s (rc %s):\n%s" % (argv[0], ready_url, proc.poll(), output))
            time.sleep(0.2)
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture(scope="module")
def monitoring(cluster):
    """node_exporter (textfile collector only, on a folder the playbook writes: under the
    container's shared folder on 24.11/26.05) and Prometheus (scrape and rule evaluation every
    second, the collection's rules file) on 127.0.0.1; {textfile, api, node_exporter, logs}."""
    missing = [name for name in (NODE_EXPORTER, PROMETHEUS) if shutil.which(name) is None]
    if missing:
        message = "%s missing: make deps installs Debian's prometheus and prometheus-node-exporter" % ", ".join(missing)
        if os.environ.get("CLUSTEROPS_REQUIRE_CLUSTER"):
            pytest.fail(message)
        pytest.skip(message)
    textfiles = shared_tmpdir("clusterops-textfile-")
    os.chmod(textfiles, 0o755)
    base = tempfile.mkdtemp(prefix="clusterops-prometheus-")
    exporter_at, prometheus_at = "127.0.0.1:%d" % free_port(), "127.0.0.1:%d" % free_port()
    config = os.path.join(base, "prometheus.yml")
    with open(config, "w") as handle:
        yaml.safe_dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                        "rule_files": [RULES],
                        "scrape_configs": [{"job_name": "node", "static_configs": [{"targets": [exporter_at]}]}]},
                       handle)
    exporter = [NODE_EXPORTER, "--collector.disable-defaults", "--collector.textfile",
                "--collector.textfile.directory=%s" % textfiles, "--web.listen-address=%s" % exporter_at]
    server = [PROMETHEUS, "--config.file=%s" % config, "--storage.tsdb.path=%s" % os.path.join(base, "data"),
              "--web.listen-address=%s" % prometheus_at]
    try:
        with started(exporter, "http://%s/metrics" % exporter_at, os.path.join(base, "node-exporter.log")), \
                started(server, "http://%s/-/ready" % prometheus_at, os.path.join(base, "prometheus.log")):
            yield {"textfile": os.path.join(textfiles, "remediate.prom"), "api": "http://%s/api/v1" % prometheus_at,
                   "node_exporter": "http://%s/metrics" % exporter_at, "base": base}
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(textfiles, ignore_errors=True)


def api(monitoring_, path, **params):
    """The ``data`` of Prometheus' HTTP API answer to GET ``path`` (e.g. ``query``, ``alerts``)."""
    url = "%s/%s" % (monitoring_["api"], path) + ("?" + urllib.parse.urlencode(params) if params else "")
    status, body = get(url)
    assert status == 200, (url, status, body)
    answer = json.loads(body)
    assert answer["status"] == "success", answer
    return answer["data"]


def query(monitoring_, promql):
    """[(labels without __name__, value)] of an instant query."""
    return [(dict((k, v) for k, v in r["metric"].items() if k != "__name__"), float(r["value"][1]))
            for r in api(monitoring_, "query", query=promql)["result"]]


def task_seconds(stdout, name):
    """The seconds ansible.posix.profile_tasks gives task ``name`` in its recap."""
    found = re.findall(r"%s -+ (\d+\.\d+)s$" % re.escape(name), stdout, re.M)
    assert found, "no time for %r in:\n%s" % (name, stdout[-3000:])
    return float(found[-1])


def test_textfile_scraped_series_labelled_and_an_alert_pending(clean, monitoring):
    """A training run deployed and running (2 nodes, its trainer's event log), a node of the
    cluster drained for a reason that needs a human; remediate.yml writes the textfile into
    node_exporter's folder. Prometheus then has the cluster's series with the label cluster, the
    run's goodput with the labels cluster and run, node_exporter read the file without an error,
    every shipped rule is loaded and healthy, and ClusteropsRemediateNeedsHuman (for 5m) is pending
    for the cluster; ClusteropsTrainingGoodputLow is pending exactly when the run's ratio is
    under 0.8. The goodput task's time is measured (ansible.posix.profile_tasks). A second run with
    remediate_prometheus_goodput false runs no goodput task and writes no goodput series."""
    name = cluster_name()
    r = deploy(clean, "prom", step_time=0.25,
               train_args=["--total-steps", "400", "--checkpoint-every", "5", "--seed", "7"])
    job = wait_running_with_checkpoint(r, 5, "the run to train and checkpoint")
    spare = sorted(set(["n1", "n2", "n3", "n4"]) - set(node_list(job)))[0]
    scontrol("update", "NodeName=%s" % spare, "State=DRAIN", "Reason=%s" % HUMAN_REASON)
    env = dict(slurm_env(), ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks", PROFILE_TASKS_TASK_OUTPUT_LIMIT="all")
    took = time.time()
    try:
        proc, recap = playbook(os.path.join(REPO, "playbooks", "remediate.yml"), "-e", json.dumps({
            "remediate_training_registry": clean["registry"], "remediate_prometheus_textfile": monitoring["textfile"],
            "remediate_nodes_max_percent": 50}), check=False, env=env)
        took = time.time() - took
    finally:
        run(["scontrol", "update", "NodeName=%s" % spare, "State=RESUME"], check=False)
    assert recap.get("failed") == 1 and "Remediation needs a human:" in proc.stdout, proc.stdout
    assert HUMAN_REASON in proc.stdout, proc.stdout
    print("goodput task: %.2f s of the remediate run (ansible-playbook: %.1f s)" % (
        task_seconds(proc.stdout, GOODPUT_TASK), took))
    assert active_jobs(r["name"]), "the run's job ended early: its goodput is that of a finished run"

    # node_exporter serves the file's series, and its collector read the file without an error
    status, metrics = get(monitoring["node_exporter"])
    assert status == 200 and 'clusterops_remediate_needs_human{cluster="%s"} 1' % name in metrics, metrics[-3000:]
    assert re.search(r"^node_textfile_scrape_error 0$", metrics, re.M), metrics[-3000:]

    # Prometheus scraped it (every second) and evaluated the rules (every second)
    with open(monitoring["textfile"]) as handle:
        text = handle.read()
    assert 'clusterops_training_effective_ratio{cluster="%s",run="%s"}' % (name, r["name"]) in text, text
    until(lambda: query(monitoring, "clusterops_training_effective_ratio"), "Prometheus to scrape the textfile", 30)
    assert query(monitoring, "clusterops_remediate_needs_human") == [
        ({"cluster": name, "instance": monitoring["node_exporter"].split("/")[2], "job": "node"}, 1.0)]
    assert [labels["cluster"] for labels, _value in query(monitoring, "clusterops_remediate_slurm_readable")] == [name]
    goodput = dict((labels["run"], (labels, value)) for labels, value in
                   query(monitoring, "clusterops_training_effective_ratio"))
    assert set(goodput) == {r["name"]}, goodput
    labels, ratio = goodput[r["name"]]
    assert labels["cluster"] == name and 0 < ratio <= 1, goodput
    wall = query(monitoring, 'clusterops_training_wall_time_seconds{run="%s"}' % r["name"])
    assert len(wall) == 1 and wall[0][0]["cluster"] == name and wall[0][1] > 0, wall
    restarts = query(monitoring, 'sum by (cluster, run) (clusterops_training_restarts{run="%s"})' % r["name"])
    assert restarts == [({"cluster": name, "run": r["name"]}, 0.0)], restarts
    assert query(monitoring, 'clusterops_training_finished{run="%s"}' % r["name"])[0][1] == 0

    with open(RULES) as handle:
        shipped = [rule["alert"] for group in yaml.safe_load(handle)["groups"] for rule in group["rules"]]
    loaded = [rule for group in api(monitoring, "rules")["groups"] for rule in group["rules"]]
    assert sorted(rule["name"] for rule in loaded) == sorted(shipped), loaded
    assert all(rule["health"] == "ok" for rule in loaded), loaded

    def alerts():
        found = api(monitoring, "alerts")["alerts"]
        return found if any(a["labels"]["alertname"] == "ClusteropsRemediateNeedsHuman" for a in found) else None

    found = until(alerts, "ClusteropsRemediateNeedsHuman in /api/v1/alerts", 30)
    human = [a for a in found if a["labels"]["alertname"] == "ClusteropsRemediateNeedsHuman"]
    assert [(a["labels"]["cluster"], a["state"]) for a in human] == [(name, "pending")], found
    low = [a for a in found if a["labels"]["alertname"] == "ClusteropsTrainingGoodputLow"]
    assert [(a["labels"]["cluster"], a["labels"]["run"]) for a in low] == ([(name, r["name"])] if ratio < 0.8 else []), (
        ratio, found)

    # remediate_prometheus_goodput false: no goodput task, no goodput sample, the rest as before
    proc, recap = playbook(os.path.join(REPO, "playbooks", "remediate.yml"), "-e", json.dumps({
        "remediate_training_registry": clean["registry"], "remediate_prometheus_textfile": monitoring["textfile"],
        "remediate_nodes_max_percent": 50, "remediate_prometheus_goodput": False}), check=False)
    skipped = r"TASK \[[^]]*%s\][^\n]*\nskipping:" % re.escape(GOODPUT_TASK)
    assert recap.get("unreachable") == 0 and re.search(skipped, proc.stdout), proc.stdout
    with open(monitoring["textfile"]) as handle:
        text = handle.read()
    assert not re.search(r"^clusterops_training_", text, re.M), text
    assert 'clusterops_remediate_slurm_readable{cluster="%s"} 1' % name in text, text
    run(["scancel", "--quiet", "-u", "clusterops-alice"], check=False)

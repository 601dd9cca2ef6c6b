# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role remediate's election and report (roles/remediate/tasks/elect.yml, report.yml), run by
ansible-playbook on this machine with the two part roles' summaries given as host variables: one
host per cluster, no Slurm. training_restart's needs_human as items {run, why} and as run names
with the report's "[needs a human]" lines give the same line; the fleet's set_stats, the summary
lines, the Prometheus textfile and the failure that names the cluster."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

WHY = "ended, newest valid step 3 -> stop: budget of 1 resubmission(s) used up"
LINE = "run-a: %s [needs a human]" % WHY
NODES = {"rebooted": ["n1"], "resumed": ["n2", "n3"], "skipped_count": 4, "overflow": [], "flapping": [],
         "needs_human": [], "in_flight": ["n1"], "circuit": {"open": False}, "failed": {}, "errors": []}
TRAINING = {"resubmitted": ["run-b"], "hung": [], "suspects": [], "suspect_drained": [],
            "report": ["run-b: ended, newest valid step 7 -> resubmit (job 12): job 11 ended NODE_FAIL"]}
HOSTS = {
    # today's training_restart: names, and the report's lines that end in "[needs a human]"
    "prose": {"remediate_training_summary": dict(TRAINING, needs_human=["run-a"], report=TRAINING["report"] + [LINE])},
    # structured items; the report's line worded otherwise, so only the items can give LINE
    "items": {"remediate_training_summary": dict(TRAINING, needs_human=[{"run": "run-a", "why": WHY}],
                                                 report=TRAINING["report"] + ["run-a: stopped"])},
    "green": {"remediate_training_summary": dict(TRAINING, needs_human=[])},
}


def ansible_playbook(tmp_path):
    link = tmp_path / "collections" / "ansible_collections" / "clusterops" / "slurm"
    link.parent.mkdir(parents=True)
    link.symlink_to(REPO)
    prom = tmp_path / "remediate-%s.prom"
    inventory = {"all": {"children": {"slurm_controller": {"hosts": {
        name: dict(hostvars, slurm_cluster=name, remediate_nodes_summary=NODES,
                   remediate_prometheus_textfile=str(prom) % name)
        for name, hostvars in HOSTS.items()}}},
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "name": "Elect and report", "hosts": "slurm_controller", "gather_facts": False, "tasks": [
            {"name": "Start", "ansible.builtin.set_fact": {"remediate_started": "{{ now(utc=true).timestamp() }}"}},
            {"name": "Elect", "ansible.builtin.include_role": {"name": "clusterops.slurm.remediate",
                                                              "tasks_from": "elect.yml"}},
            {"name": "Report", "ansible.builtin.include_role": {"name": "clusterops.slurm.remediate",
                                                               "tasks_from": "report.yml"}}]}]))
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    env.update(ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "collections"),
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_SHOW_CUSTOM_STATS="1", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")],
                          cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    out = proc.stdout
    return proc.returncode, json.loads(out[out.index("{"):]), prom


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    return ansible_playbook(tmp_path_factory.mktemp("remediate-report"))


def task(result, name):
    tasks = [t for t in result["plays"][0]["tasks"] if t["task"]["name"].split(" : ")[-1] == name]
    assert len(tasks) == 1, name
    return tasks[0]["hosts"]


def test_training_needs_human_items_and_prose_give_the_same_line(played):
    rc, result, _prom = played
    fleet = result["global_custom_stats"]["remediate"]
    assert rc == 2
    assert fleet["needs_human"] == ["cluster items: " + LINE, "cluster prose: " + LINE]
    assert fleet["clusters_needing_human"] == ["items", "prose"]
    assert fleet["clusters"]["items"]["runs_needing_human"] == fleet["clusters"]["prose"]["runs_needing_human"] == 1
    failed = task(result, "Fail when something needs a human")
    assert failed["prose"]["msg"] == "Remediation needs a human: cluster prose: " + LINE
    assert failed["items"]["msg"] == "Remediation needs a human: cluster items: " + LINE
    assert failed["green"].get("skipped")


def test_fleet_totals_summary_lines_and_textfile(played):
    _rc, result, prom = played
    fleet = result["global_custom_stats"]["remediate"]
    assert fleet["nodes_healed"] == 9 and fleet["nodes_skipped"] == 12 and fleet["nodes_in_flight"] == 3
    assert fleet["runs_resubmitted"] == 3 and fleet["runs_needing_human"] == 2 and fleet["slurm_readable"]
    assert sorted(fleet["clusters"]) == ["green", "items", "prose"]
    assert fleet["report"] == [
        "cluster green: green acted; nodes healed 3, skipped 4, overflow 0; runs resubmitted 1",
        "cluster items: items acted; nodes healed 3, skipped 4, overflow 0; runs resubmitted 1 - needs a human",
        "cluster prose: prose acted; nodes healed 3, skipped 4, overflow 0; runs resubmitted 1 - needs a human"]
    assert task(result, "Fleet summary, one line per cluster")["green"]["msg"] == fleet["report"]
    lines = set(open(str(prom) % "green").read().splitlines())
    assert {'clusterops_remediate_nodes_healed{cluster="green"} 3',
            'clusterops_remediate_needs_human{cluster="items"} 1',
            'clusterops_remediate_runs_needing_human{cluster="prose"} 1',
            'clusterops_remediate_slurm_readable{cluster="green"} 1',
            "clusterops_remediate_fleet_clusters 3", "clusterops_remediate_fleet_clusters_needing_human 2",
            "clusterops_remediate_fleet_nodes_healed 9", "clusterops_remediate_fleet_runs_resubmitted 3"} <= lines

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role remediate's election and report (roles/remediate/tasks/elect.yml, report.yml), run by
ansible-playbook on this machine with the two part roles' summaries given as host variables: one
host per cluster, no Slurm. What needs a human comes from training_remediation's needs_human items {run,
why} and its suspect_report, never from the report's words; the fleet's
set_stats, the summary lines, the Prometheus textfile and the failure that names the cluster."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from ansible.release import __version__ as ansible_version

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ansible_version_info = tuple(int(part) for part in ansible_version.split(".")[:2])
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

WHY = "budget of 1 resubmission(s) used up"
NEXT = "next: read the per-node logs; fix it (docs/training-remediation.md#runbook-needs-a-human)"
LINE = "run-a: %s - %s [needs a human]" % (WHY, NEXT)
NODE_NEXT = "next: repair the node (docs/node-remediation.md#when-it-says-needs-a-human)"
NODE_LINE = "node n[7-8]: class gpu_xid_contact: Xid 79 - " + NODE_NEXT
SUSPECT = "suspect node n4: run run-a failed on it (jobs 11,12) -> drained (was IDLE) [needs a human]"
# n1's reboot requested now (not back yet), n2 and n3 resumed, n9 back from a reboot an earlier run requested
NODES = {"rebooted": ["n1"], "resumed": ["n2", "n3"], "returned": ["n9"], "rebooting": ["n1"], "skipped_count": 4, "overflow": [], "flapping": [],
         "needs_human": [], "in_flight": {"count": 1, "hostlist": "n1"}, "circuit": {"open": False}, "failed": {},
         "errors": [], "counts": {"acted": 3, "overflow": 0, "held": 0, "human": 0, "flapping": 0, "in_flight": 1,
                                  "skipped": 4, "needs_human": 0}}
TRAINING = {"resubmitted": ["run-b"], "hung": [], "suspect_drained": ["n4"],
            "suspects": [{"node": "n4", "runs": ["run-a"], "jobs": ["11", "12"], "action": "drain"}],
            "suspect_report": [SUSPECT],
            "report": ["run-b: ended, newest valid step 7 -> resubmit (job 12): job 11 ended NODE_FAIL"],
            # runs[] as training_remediation returns them: run-b resubmitted now (its second)
            "runs": [{"name": "run-b", "status": "failed", "action": "resubmit", "resubmissions": 1,
                      "max_resubmissions": 5, "job_id": 12, "then": None}]}
HOSTS = {
    # report lines that end in "[needs a human]" but no item and no suspect: nothing needs a human
    "report": {"remediate_training_summary": dict(TRAINING, needs_human=[], suspects=[], suspect_drained=[],
                                                  suspect_report=[], report=TRAINING["report"] + [LINE, SUSPECT])},
    # items {run, why}; the report words run-a otherwise, so only the item can give LINE
    "items": {"remediate_training_summary": dict(TRAINING, needs_human=[{"run": "run-a", "why": WHY, "next": NEXT}],
                                                 report=(TRAINING["report"] + [
                                                     "run-a: ended, newest valid step 3 -> stop: %s [needs a human]"
                                                     % WHY, SUSPECT]))},
    # the node plan's needs_human items {name, count, why, next}: one line each with its next step
    "nodes": {"remediate_training_summary": dict(TRAINING, needs_human=[], suspects=[], suspect_drained=[],
                                                 suspect_report=[]),
              "remediate_nodes_summary": dict(NODES, needs_human=[{"name": "n[7-8]", "count": 2, "why": (
                  "class gpu_xid_contact: Xid 79"), "next": NODE_NEXT}])},
    # no run needs a human, a suspect node does (either form)
    "suspect": {"remediate_training_summary": dict(TRAINING, needs_human=[], report=TRAINING["report"] + [SUSPECT])},
    "green": {"remediate_training_summary": dict(TRAINING, needs_human=[], suspects=[], suspect_drained=[],
                                                 suspect_report=[])},
    # stopped by a wrong setting before any node was read (no part role's summary): no counts that read as a result
    "stopped": {"remediate_nodes_summary": None, "remediate_failure": {
        "cause": "configuration", "task": "Read, plan and heal", "message": "max_percent 150 is not between 0 and 100"}},
}


def ansible_playbook(tmp_path):
    link = tmp_path / "collections" / "ansible_collections" / "clusterops" / "slurm"
    link.parent.mkdir(parents=True)
    link.symlink_to(REPO)
    prom = tmp_path / "remediate-%s.prom"
    inventory = {"all": {"children": {"slurm_controller": {"hosts": {
        name: dict((key, value) for key, value in dict(dict(remediate_nodes_summary=NODES), slurm_cluster=name,
                                                       remediate_prometheus_textfile=str(prom) % name,
                                                       **hostvars).items() if value is not None)
        for name, hostvars in HOSTS.items()}}},
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "name": "Elect and report", "hosts": "slurm_controller", "gather_facts": False, "tasks": [
            {"name": "Start", "ansible.builtin.set_fact": {"remediate_started": "{{ now(utc=true).timestamp() }}"}},
            {"name": "Elect", "ansible.builtin.include_role": {
                "name": "clusterops.slurm.remediate", "tasks_from": "elect.yml"}},
            {"name": "Report", "ansible.builtin.include_role": {
                "name": "clusterops.slurm.remediate", "tasks_from": "report.yml"}}]}]))
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    env.update(ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "collections"),
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_SHOW_CUSTOM_STATS="1", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")],
                          cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    out = proc.stdout
    return proc.returncode, json.loads(out[out.index("{"):]), prom


def _has_collection(package):
    try:
        return importlib.util.find_spec(package) is not None
    except ImportError:  # not even the parent namespace (ansible_collections.ansible) is there
        return False


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    if ansible_version_info < (2, 19):
        pytest.skip("these tests read the JSON stdout callback's output as ansible-core 2.19 writes it")
    if not _has_collection("ansible_collections.ansible.posix"):
        # ansible-core redirects ansible.builtin.json to ansible.posix.json: .venv has it (the
        # ansible package), the matrix's bare ansible-core sessions do not.
        pytest.skip("the JSON stdout callback comes with the ansible.posix collection, not installed here")
    return ansible_playbook(tmp_path_factory.mktemp("remediate-report"))


def task(result, name):
    tasks = [t for t in result["plays"][0]["tasks"] if t["task"]["name"].split(" : ")[-1] == name]
    assert len(tasks) == 1, name
    return tasks[0]["hosts"]


def test_training_needs_human_from_items_and_suspect_report_not_from_report_words(played):
    rc, result, _prom = played
    fleet = result["global_custom_stats"]["remediate"]
    assert rc == 2
    assert fleet["needs_human"] == ["cluster items: " + LINE, "cluster items: " + SUSPECT,
                                    "cluster nodes: " + NODE_LINE,
                                    "cluster stopped: configuration error, nothing acted on from then on; fix the "
                                    "setting named below (a task's option: the role variable "
                                    "remediate_nodes_<option> for node healing, remediate_training_<option> for "
                                    "training, as roles/*/meta/argument_specs.yml list them; ansible-playbook --check "
                                    "shows it without acting) (task 'Read, plan and heal'): max_percent 150 is not "
                                    "between 0 and 100", "cluster suspect: " + SUSPECT]
    assert fleet["clusters_needing_human"] == ["items", "nodes", "stopped", "suspect"]
    assert fleet["clusters"]["items"]["runs_needing_human"] == 1
    assert fleet["clusters"]["report"]["runs_needing_human"] == 0
    failed = task(result, "Fail when something needs a human")
    assert failed["report"].get("skipped")
    assert failed["items"]["msg"] == "Remediation needs a human: cluster items: %s; cluster items: %s" % (LINE, SUSPECT)
    assert failed["suspect"]["msg"] == "Remediation needs a human: cluster suspect: " + SUSPECT
    assert failed["nodes"]["msg"] == "Remediation needs a human: cluster nodes: " + NODE_LINE
    assert failed["green"].get("skipped")


def test_fleet_totals_summary_lines_and_textfile(played):
    _rc, result, prom = played
    fleet = result["global_custom_stats"]["remediate"]
    # healed: resumed (2) and back from an earlier reboot (1); the reboot requested now is not healed yet
    assert fleet["nodes_healed"] == 15 and fleet["nodes_reboot_requested"] == 5
    assert fleet["nodes_skipped"] == 20 and fleet["nodes_in_flight"] == 5
    assert fleet["runs_resubmitted"] == 5 and fleet["runs_needing_human"] == 1 and fleet["slurm_readable"]
    assert fleet["nodes_suspect"] == 2 and fleet["nodes_suspect_drained"] == 2
    assert sorted(fleet["clusters"]) == ["green", "items", "nodes", "report", "stopped", "suspect"]
    healed = "acted; nodes healed 3, reboot requested 1, skipped 4, overflow 0"
    assert fleet["report"] == [
        "cluster green: green %s; runs resubmitted 1" % healed,
        "cluster items: items %s, suspect 1 (drained 1); runs resubmitted 1 - needs a human" % healed,
        "cluster nodes: nodes %s; runs resubmitted 1 - needs a human" % healed,
        "cluster report: report %s; runs resubmitted 1" % healed,
        "cluster stopped: stopped stopped (configuration) before any node was read: nothing acted on - needs a human",
        "cluster suspect: suspect %s, suspect 1 (drained 1); runs resubmitted 1 - needs a human" % healed]
    assert task(result, "Fleet summary, one line per cluster")["green"]["msg"] == fleet["report"]
    lines = set(open(str(prom) % "green").read().splitlines())
    assert {'clusterops_remediate_nodes_healed{cluster="green"} 3',
            'clusterops_remediate_nodes_reboot_requested{cluster="green"} 1',
            'clusterops_remediate_needs_human{cluster="items"} 1',
            'clusterops_remediate_runs_needing_human{cluster="report"} 0',
            'clusterops_remediate_nodes_suspect{cluster="suspect"} 1',
            'clusterops_remediate_slurm_readable{cluster="green"} 1',
            "clusterops_remediate_fleet_clusters 6", "clusterops_remediate_fleet_clusters_needing_human 4",
            "clusterops_remediate_fleet_nodes_healed 15", "clusterops_remediate_fleet_runs_resubmitted 5",
            "clusterops_remediate_fleet_nodes_suspect 2",
            'clusterops_remediate_run_resubmissions_total{cluster="green",run="run-b"} 2',
            "clusterops_remediate_schedule_interval_seconds 600"} <= lines


def test_textfile_passes_promtool_check_metrics(played, promtool):
    """The textfile as the role writes it (its trailing line feed included)."""
    _rc, _result, prom = played
    with open(str(prom) % "green") as handle:
        proc = subprocess.run([promtool, "check", "metrics"], stdin=handle, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert (proc.returncode, proc.stdout) == (0, "")


def test_textfile_written_atomically_by_prometheus_textfile(played):
    """Each acting host's textfile is written by clusterops.slurm.prometheus_textfile (a temporary in
    the folder, renamed; tests/unit/plugins/modules/test_prometheus_textfile.py): the folder holds the
    six textfiles and no temporary; the task reports no change (a report, not a change)."""
    _rc, result, prom = played
    written = task(result, "Write the Prometheus textfile")
    assert sorted(written) == ["green", "items", "nodes", "report", "stopped", "suspect"]
    for cluster, outcome in written.items():
        assert outcome["textfile"] == str(prom) % cluster and outcome["written"] is True
        assert outcome["changed"] is False and outcome["leftovers_removed"] == []
    names = os.listdir(os.path.dirname(str(prom)))
    assert sorted(n for n in names if n.endswith(".prom")) == ["remediate-%s.prom" % c for c in sorted(written)]
    assert [n for n in names if n.endswith(".tmp")] == []


def published_keys(role, fact):
    """The keys of the summary fact a part role sets (its "Collect the outcome" set_fact)."""
    with open(os.path.join(REPO, "roles", role, "tasks", "main.yml")) as stream:
        tasks = yaml.safe_load(stream)
    facts = [t["ansible.builtin.set_fact"][fact] for t in tasks if fact in t.get("ansible.builtin.set_fact", {})]
    assert len(facts) == 1, (role, fact)
    return set(facts[0])


@pytest.mark.parametrize("prefix, role, fact", [
    ("nodes_summary", "remediate_nodes", "remediate_nodes_summary"),
    ("training_summary", "remediate_training", "remediate_training_summary"),
])
def test_report_reads_only_what_the_part_roles_publish(prefix, role, fact):
    """The report's tests above give the summaries by hand; this ties them to the roles that make them
    (a key the report reads but the role never sets reads as empty: e.g. no suspect node needing a human)."""
    used = set()
    folder = os.path.join(REPO, "roles", "remediate")
    for sub in ("tasks", "templates"):
        for name in os.listdir(os.path.join(folder, sub)):
            with open(os.path.join(folder, sub, name)) as stream:
                used.update(re.findall(r"\b%s\.(\w+)" % prefix, stream.read()))
    assert used, prefix
    assert used <= published_keys(role, fact), sorted(used - published_keys(role, fact))

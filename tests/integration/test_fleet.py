# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A fleet of two real dev clusters (the default one and ``make cluster-up CLUSTER=b``) healed by
one run of remediate.yml, run the way a scheduled AWX job runs it: ``ansible_runner.run()`` from a
private data dir, asserting on its artifacts (``stdout``, ``status``, ``rc``, the job events and
the ``set_stats`` data under ``remediate`` in the stats event's ``artifact_data``).

The host's release only (the clusters run on the host). The tests bring cluster b up themselves and stop it
afterwards; they skip, saying why, only when it cannot start.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import time

import pytest

import conftest
from conftest import REPO, cluster_name, is_healthy, make, nodes, reset_cluster, run, sdiag_rpc_counts, slurm_env, wait_for
from devcluster.releases import HOST_RELEASE

pytestmark = pytest.mark.skipif(conftest.SLURM_RELEASE != HOST_RELEASE,
                                reason="the dev fleet runs on the host release (%s)" % HOST_RELEASE)

REMEDIATE = os.path.join(REPO, "playbooks", "remediate.yml")
FLEET_INVENTORY = os.path.join(REPO, "dev", "cluster", "fleet_inventory.py")
B_DIR = os.path.join(REPO, ".devcluster-b")
#: cluster.mk derives cluster b's state dir, ports (DEVCLUSTER_PORT_OFFSET 4500) and ClusterName.
B_MAKE = {"CLUSTER": "b"}


@contextlib.contextmanager
def on(state_dir):
    """conftest's helpers (nodes, make, sdiag_rpc_counts, reset_cluster...) aimed at another dev
    cluster for the duration of the block."""
    saved = conftest.STATE_DIR, conftest.SLURM_CONF
    conftest.STATE_DIR = state_dir
    conftest.SLURM_CONF = os.path.join(state_dir, "etc", "slurm.conf")
    try:
        yield
    finally:
        conftest.STATE_DIR, conftest.SLURM_CONF = saved


def make_b(target, **variables):
    with on(B_DIR):
        variables.update(B_MAKE)
        return make(target, **variables)


@pytest.fixture(scope="module")
def cluster_b(cluster):
    """Cluster b next to the default one (own state dir, ports, munge key, MariaDB, ClusterName)."""
    with on(B_DIR):
        env = slurm_env()
        env.pop("DEVCLUSTER_DIR")
        proc = run(["make", "-s", "cluster-up", "SLURM=" + HOST_RELEASE] + ["%s=%s" % kv for kv in B_MAKE.items()],
                   check=False, env=env, timeout=600)
    if proc.returncode != 0:
        pytest.skip("dev cluster b could not start (make cluster-up CLUSTER=b):\n%s" % proc.stdout[-3000:])
    try:
        yield B_DIR
    finally:
        with on(B_DIR):
            run(["make", "-s", "cluster-down", "SLURM=" + HOST_RELEASE] + ["%s=%s" % kv for kv in B_MAKE.items()],
                check=False, env=env, timeout=300)


@pytest.fixture()
def fleet(healthy, cluster_b, tmp_path):
    """Both clusters with every node in service; the fleet inventory of the two (fleet_inventory.py)."""
    with on(B_DIR):
        reset_cluster()
    inventory = str(tmp_path / "fleet.yml")
    run(["/usr/bin/python3", FLEET_INVENTORY, "--output", inventory, conftest.STATE_DIR, B_DIR])
    for state_dir in (conftest.STATE_DIR, B_DIR):
        os.makedirs(os.path.join(state_dir, "runs"), exist_ok=True)
    names = {"a": cluster_name(conftest.STATE_DIR), "b": cluster_name(B_DIR)}
    return dict(names, inventory=inventory, tmp=tmp_path,
                host_a=os.path.basename(conftest.STATE_DIR).lstrip("."), host_b=os.path.basename(B_DIR).lstrip("."))


def extravars(extra=None):
    """As conftest.playbook(): a node history of the test's own, every node may be acted on."""
    return dict(conftest.heal_since(), remediate_nodes_max_percent=100, **(extra or {}))


def runner(tmp_path, ident, inventory, extra=None):
    """remediate.yml through ansible-runner, as AWX runs a job template; returns the artifacts."""
    import ansible_runner  # pylint: disable=import-outside-toplevel
    env = slurm_env()
    private = str(tmp_path / "runner")
    os.makedirs(private, exist_ok=True)
    # SLURM_CONF names no cluster: every Slurm command must get its cluster's slurm_conf from the
    # inventory, as on AWX where the job's environment knows no cluster.
    envvars = {key: env[key] for key in ("ANSIBLE_CONFIG", "ANSIBLE_PYTHON_INTERPRETER", "PATH", "LC_ALL",
                                         "ANSIBLE_NOCOLOR", "ANSIBLE_FORCE_COLOR")}
    envvars["SLURM_CONF"] = "/nonexistent/slurm.conf"
    result = ansible_runner.run(private_data_dir=private, ident=ident, playbook=REMEDIATE, inventory=inventory,
                                extravars=extravars(extra), envvars=envvars, quiet=True)
    folder = os.path.join(private, "artifacts", ident)
    with open(os.path.join(folder, "stdout")) as handle:
        stdout = handle.read()
    with open(os.path.join(folder, "status")) as handle:
        status = handle.read().strip()
    with open(os.path.join(folder, "rc")) as handle:
        rc = int(handle.read().strip())
    events = []
    for path in glob.glob(os.path.join(folder, "job_events", "*.json")):
        with open(path) as handle:
            events.append(json.load(handle))
    events.sort(key=lambda e: e["counter"])
    stats = [e["event_data"] for e in events if e["event"] == "playbook_on_stats"]
    assert len(stats) == 1, stdout
    assert (status, rc) == (result.status, result.rc), (status, rc, result.status, result.rc)
    return {"status": status, "rc": rc, "stdout": stdout, "events": events, "stats": stats[0],
            "remediate": stats[0].get("artifact_data", {}).get("remediate")}


def power_back(node_a, node_b):
    """The reboots remediate.yml asked for, done: a crashed node stays off until powered on (as
    in test_node_remediation). Then every node of both clusters is in service."""
    for state_dir, node in ((conftest.STATE_DIR, node_a), (B_DIR, node_b)):
        with on(state_dir):
            wait_for(lambda ns: "REBOOT_ISSUED" in ns[node]["flags"], "%s REBOOT_ISSUED" % node, timeout=60)
    time.sleep(3)  # Slurm counts only a boot time after the reboot request (whole seconds)
    for state_dir, node in ((conftest.STATE_DIR, node_a), (B_DIR, node_b)):
        with on(state_dir):
            if state_dir == B_DIR:
                make_b("cluster-poweron", NODE=node)
            else:
                make("cluster-poweron", NODE=node)
    for state_dir in (conftest.STATE_DIR, B_DIR):
        with on(state_dir):
            wait_for(lambda ns: all(is_healthy(n) for n in ns.values()),
                     "every node of %s in service" % state_dir, timeout=120)


def test_one_run_heals_every_cluster_and_a_second_changes_nothing(fleet):
    """A crashed node in each cluster: one AWX-like run heals both, reports each cluster on its own
    (summary line, set_stats keyed by cluster), and the next run changes nothing."""
    a, b = fleet["a"], fleet["b"]
    assert a != b
    make("cluster-crash", NODE="n2")
    make_b("cluster-crash", NODE="n3")
    wait_for(lambda ns: "NOT_RESPONDING" in ns["n2"]["flags"] and ns["n2"]["base"] == "DOWN",
             "n2 of cluster a down", timeout=120)
    with on(B_DIR):
        wait_for(lambda ns: "NOT_RESPONDING" in ns["n3"]["flags"] and ns["n3"]["base"] == "DOWN",
                 "n3 of cluster b down", timeout=120)
        before_b = sdiag_rpc_counts()
    before_a = sdiag_rpc_counts()
    job = runner(fleet["tmp"], "first", fleet["inventory"])
    assert (job["status"], job["rc"]) == ("successful", 0), job["stdout"]
    remediate = job["remediate"]
    assert set(remediate["clusters"]) == {a, b}, remediate
    # a reboot is requested, not healed, until a run sees the node back in service (issue 37)
    assert [(remediate["clusters"][c]["nodes_healed"], remediate["clusters"][c]["nodes_reboot_requested"])
            for c in (a, b)] == [(0, 1), (0, 1)], remediate
    assert remediate["clusters"][a]["host"] == fleet["host_a"] and remediate["clusters"][b]["host"] == fleet["host_b"]
    assert remediate["nodes_reboot_requested"] == 2 and remediate["needs_human"] == [] and remediate["slurm_readable"]
    assert "cluster %s: %s acted; nodes healed 0, reboot requested 1," % (a, fleet["host_a"]) in job["stdout"]
    assert "cluster %s: %s acted; nodes healed 0, reboot requested 1," % (b, fleet["host_b"]) in job["stdout"]
    # one reboot request per cluster, each to its own controller
    assert sdiag_rpc_counts().get("REQUEST_REBOOT_NODES", 0) - before_a.get("REQUEST_REBOOT_NODES", 0) == 1
    with on(B_DIR):
        assert sdiag_rpc_counts().get("REQUEST_REBOOT_NODES", 0) - before_b.get("REQUEST_REBOOT_NODES", 0) == 1
    power_back("n2", "n3")
    # the second run: nothing to heal, nothing changed (stats event), still green; it sees both nodes back
    # in service, so it is the run that says they are healed
    job = runner(fleet["tmp"], "second", fleet["inventory"])
    assert (job["status"], job["rc"]) == ("successful", 0), job["stdout"]
    assert sum(job["stats"]["changed"].values()) == 0, job["stats"]
    assert job["remediate"]["nodes_healed"] == 2 and job["remediate"]["nodes_reboot_requested"] == 0
    assert "cluster %s: %s acted; nodes healed 1, reboot requested 0," % (a, fleet["host_a"]) in job["stdout"]
    # and a third says nothing more
    job = runner(fleet["tmp"], "third", fleet["inventory"])
    assert (job["status"], job["rc"]) == ("successful", 0), job["stdout"]
    assert all((c["nodes_healed"], c["nodes_reboot_requested"]) == (0, 0)
               for c in job["remediate"]["clusters"].values()), job["remediate"]


def test_stopped_controller_fails_naming_its_cluster_and_the_other_is_healed(fleet):
    """Cluster b's slurmctld stopped: cluster a is still healed, the job fails (status failed, rc 2)
    and says that cluster b needs a human, in the message and in set_stats."""
    a, b = fleet["a"], fleet["b"]
    conftest.scontrol("update", "NodeName=n1", "State=DRAIN", "Reason=Prolog error")
    make_b("cluster-slurmctld-stop")
    try:
        job = runner(fleet["tmp"], "stopped", fleet["inventory"])
    finally:
        make_b("cluster-slurmctld-start")
    assert (job["status"], job["rc"]) == ("failed", 2), job["stdout"]
    assert "Remediation needs a human: cluster %s: Slurm controller unreachable or answer incomplete" % b \
        in job["stdout"], job["stdout"]
    remediate = job["remediate"]
    assert remediate["clusters_needing_human"] == [b], remediate
    assert remediate["clusters"][a]["nodes_healed"] == 1 and remediate["clusters"][a]["needs_human"] == []
    assert not remediate["clusters"][b]["slurm_readable"] and not remediate["slurm_readable"]
    assert all(line.startswith("cluster %s: " % b) for line in remediate["needs_human"]), remediate
    # the failed task is the fail on cluster b's host; cluster a's host did not fail
    assert job["stats"]["failures"] == {fleet["host_b"]: 1}, job["stats"]
    wait_for(lambda ns: is_healthy(ns["n1"]), "n1 of cluster a resumed", timeout=60)


def test_ha_pair_one_host_acts(fleet, tmp_path):
    """Cluster b listed three times: a backup controller host that does not answer, then two that
    do (their cluster read from Slurm's ClusterName). The first that answers acts, the other is
    standby, the dead one reported; Slurm sees exactly one reboot request; the play is green."""
    b = cluster_name(B_DIR)
    conf = os.path.join(B_DIR, "etc", "slurm.conf")
    local = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
             "slurm_conf": conf, "remediate_training_registry": os.path.join(B_DIR, "runs")}
    inventory = {"all": {"children": {"slurm_controller": {"hosts": {
        # ssh to a port nothing listens on: unreachable at once
        "b-dead": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
                   "slurm_cluster": b},
        "b-one": dict(local),
        "b-two": dict(local)}}}}}
    path = str(tmp_path / "ha.yml")
    with open(path, "w") as handle:
        json.dump(inventory, handle)
    with on(B_DIR):
        conftest.scontrol("update", "NodeName=n2", "State=DRAIN", "Reason=Kill task failed")
        before = sdiag_rpc_counts()
        env = slurm_env()
        env["SLURM_CONF"] = "/nonexistent/slurm.conf"
        proc = run(["ansible-playbook", "-i", path, REMEDIATE, "-e", json.dumps(extravars())],
                   check=False, env=env)
        after = sdiag_rpc_counts()
        assert proc.returncode == 0, proc.stdout
        assert "cluster %s: b-one acted (standby: b-two) (unreachable: b-dead); nodes healed 0, reboot requested 1," % b \
            in proc.stdout, proc.stdout
        assert after.get("REQUEST_REBOOT_NODES", 0) - before.get("REQUEST_REBOOT_NODES", 0) == 1
        assert after.get("REQUEST_UPDATE_NODE", 0) == before.get("REQUEST_UPDATE_NODE", 0)
        wait_for(lambda ns: is_healthy(ns["n2"]), "n2 of cluster b rebooted and back", timeout=120)
        assert nodes()["n2"]["reason"] == ""


def test_cluster_with_no_host_answering_needs_a_human_and_the_others_are_healed(fleet):
    """A third cluster whose only controller host does not answer: the job fails naming it, the
    two others are remediated as usual, and the Prometheus textfile has one series per cluster
    (the dead one included) and the fleet totals."""
    a, b = fleet["a"], fleet["b"]
    conftest.scontrol("update", "NodeName=n1", "State=DRAIN", "Reason=Prolog error")
    with open(fleet["inventory"]) as handle:
        text = handle.read()
    with open(fleet["inventory"], "w") as handle:
        handle.write(text + '        "z-ctl":\n          ansible_connection: "ssh"\n          ansible_host: "127.0.0.1"\n'
                     '          ansible_port: 1\n          slurm_cluster: "z"\n')
    prom = os.path.join(str(fleet["tmp"]), "remediate.prom")  # both dev clusters' hosts are this machine
    job = runner(fleet["tmp"], "dead", fleet["inventory"], {"remediate_prometheus_textfile": prom})
    assert (job["status"], job["rc"]) == ("failed", 2), job["stdout"]
    assert "Remediation needs a human: cluster z: no controller host of the cluster answers (z-ctl)" in job["stdout"]
    remediate = job["remediate"]
    assert remediate["clusters_needing_human"] == ["z"], remediate
    assert remediate["clusters"]["z"]["host"] is None and remediate["clusters"]["z"]["unreachable"] == ["z-ctl"]
    assert remediate["clusters"][a]["nodes_healed"] == 1 and remediate["clusters"][b]["nodes_healed"] == 0
    assert job["stats"]["failures"] == {"z-ctl": 1} and job["stats"]["dark"] == {}, job["stats"]
    with open(prom) as handle:
        lines = set(handle.read().splitlines())
    assert {'clusterops_remediate_slurm_readable{cluster="z"} 0', 'clusterops_remediate_needs_human{cluster="z"} 1',
            'clusterops_remediate_nodes_healed{cluster="%s"} 1' % a,
            'clusterops_remediate_slurm_readable{cluster="%s"} 1' % b,
            # issue 37: the one cause of a cluster no host of which answers, and none of the others'
            'clusterops_remediate_failed{cause="slurm_unreadable",cluster="z"} 1',
            'clusterops_remediate_failed{cause="configuration",cluster="z"} 0',
            'clusterops_remediate_failed{cause="slurm_unreadable",cluster="%s"} 0' % b,
            "clusterops_remediate_fleet_clusters 3", "clusterops_remediate_fleet_clusters_needing_human 1",
            "clusterops_remediate_fleet_nodes_healed 1"} <= lines, lines
    wait_for(lambda ns: is_healthy(ns["n1"]), "n1 of cluster a resumed", timeout=60)

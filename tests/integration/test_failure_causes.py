# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue 37: a failed remediate.yml names its real cause, in check mode as in the real run, on the dev
cluster: a setting of its own (configuration), an account without the rights (permission), slurmdbd stopped
(accounting), jmespath missing on the target (configuration), a controller that hangs (slurm_unreadable). Only
the last sets clusterops_remediate_slurm_readable to 0; each has its own series clusterops_remediate_failed
{cause} and wording. (A controller host Ansible cannot reach: test_fleet.py.)"""

from __future__ import annotations

import json
import os
import re
import signal

import pytest

from conftest import cluster_name, ensure_user, make, playbook, scontrol, shared_tmpdir, wait_for
from test_node_remediation import slurmctld_pids

REMEDIATE = "playbooks/remediate.yml"
CAUSES = ("accounting", "configuration", "permission", "slurm_refused", "slurm_unreadable", "unexpected")


def remediate(*extra, check_mode=False):
    """remediate.yml with a textfile of its own; returns (proc, the textfile's text)."""
    folder = shared_tmpdir("clusterops-cause-")
    os.chmod(folder, 0o777)  # nosec B103  # a test folder: the non-root run writes its textfile here
    textfile = os.path.join(folder, "remediate.prom")
    args = ["-e", json.dumps({"remediate_prometheus_textfile": textfile, "remediate_nodes_max_percent": 100})]
    proc, dummy = playbook(REMEDIATE, *(args + list(extra) + (["--check"] if check_mode else [])), check=False)
    prom = ""
    if os.path.exists(textfile):
        with open(textfile) as handle:
            prom = handle.read()
    return proc, prom


def assert_cause(proc, prom, cause, words, check_mode=False):
    """The run failed for ``cause`` alone, said ``words`` and, in its summary line, the cause, and blamed Slurm
    only when Slurm is the cause; its textfile (the real run's: check mode writes none) says so too."""
    assert proc.returncode != 0, proc.stdout
    assert words in proc.stdout, proc.stdout
    assert ("stopped (%s)" % cause in proc.stdout) or cause == "slurm_unreadable", proc.stdout
    assert ("Slurm controller unreachable or answer incomplete" in proc.stdout) == (cause == "slurm_unreadable")
    if check_mode:
        assert prom == ""
        return
    failed = dict(re.findall(r'^clusterops_remediate_failed\{cause="(\w+)",cluster="[^"]+"\} (\d)$', prom, re.M))
    assert failed == dict((c, "1" if c == cause else "0") for c in CAUSES), (failed, proc.stdout)
    readable = re.findall(r'^clusterops_remediate_slurm_readable\{cluster="[^"]+"\} (\d)$', prom, re.M)
    assert readable == ["0" if cause == "slurm_unreadable" else "1"], prom


CONFIGURATIONS = [
    ("max_percent 150", {"remediate_nodes_max_percent": 150}, "max_percent"),
    ("a class whose regex is (", {"remediate_nodes_reason_classes": [{"name": "x", "match": "(", "action": "resume"}]},
     "x"),
    ("an unknown action", {"remediate_nodes_reason_classes": [{"name": "y", "match": "^y$", "action": "explode"}]},
     "explode"),
    ("max_nodes eight", {"remediate_nodes_max_nodes": "eight"}, "max_nodes"),
]


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
@pytest.mark.parametrize("name, settings, named", CONFIGURATIONS, ids=[c[0] for c in CONFIGURATIONS])
def test_a_wrong_setting_is_a_configuration_error(healthy, check_mode, name, settings, named):
    proc, prom = remediate("-e", json.dumps(settings), check_mode=check_mode)
    assert_cause(proc, prom, "configuration", "configuration error, nothing acted on", check_mode)
    assert named in proc.stdout, (name, proc.stdout)


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
def test_an_account_without_the_rights_is_a_permission_failure(healthy, check_mode):
    """A non-root operator account (become su, Debian's python3): it cannot write the heal journal's folder.
    --check says so too (it takes no lock, so it asks the file system), instead of passing."""
    ensure_user("clusterops-op")
    proc, prom = remediate("-e", "remediate_become=true", "--become-user", "clusterops-op", "--become-method", "su",
                           "-e", "ansible_python_interpreter=/usr/bin/python3", check_mode=check_mode)
    assert_cause(proc, prom, "permission", "permission denied to the account that runs remediation", check_mode)
    assert "clusterops-op" in proc.stdout and "heal journal" in proc.stdout, proc.stdout


def test_slurmdbd_stopped_is_an_accounting_failure(healthy):
    """A node to reboot makes the healing budget read its events from slurmdbd, which is stopped: nothing is
    acted on, and the cause is accounting with the way to run without it."""
    scontrol("update", "NodeName=n1", "State=DRAIN", "Reason=Kill task failed")
    make("cluster-slurmdbd-stop")
    try:
        for check_mode in (True, False):
            proc, prom = remediate(check_mode=check_mode)
            assert_cause(proc, prom, "accounting", "Slurm accounting (slurmdbd) is not available", check_mode)
            assert "remediate_nodes_heal_budget to 0" in proc.stdout
    finally:
        make("cluster-slurmdbd-start")
    node = wait_for(lambda ns: "n1" in ns, "n1 read")["n1"]
    assert node["reason"] == "Kill task failed"  # nothing acted on


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
def test_jmespath_missing_on_the_target_is_a_configuration_error(healthy, check_mode):
    """scope needs the jmespath library where the module runs; Debian's python3 here has none."""
    assert os.system("/usr/bin/python3 -c 'import jmespath' 2>/dev/null") != 0  # nosec B605 B607
    proc, prom = remediate("-e", json.dumps({"remediate_nodes_scope": "[?name=='n1']",
                                             "ansible_python_interpreter": "/usr/bin/python3"}), check_mode=check_mode)
    assert_cause(proc, prom, "configuration", "jmespath", check_mode)


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
def test_a_stopped_controller_is_slurm_unreadable(healthy, check_mode):
    """slurmctld not running at all (a truly unreachable controller): the one cause that says Slurm could not
    be read, in --check as in the run."""
    make("cluster-slurmctld-stop")
    try:
        proc, prom = remediate("-e", json.dumps({"slurm_command_timeout": 20}), check_mode=check_mode)
    finally:
        make("cluster-slurmctld-start")
    assert_cause(proc, prom, "slurm_unreadable", "Slurm controller unreachable or answer incomplete", check_mode)


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
def test_a_hung_controller_is_slurm_unreadable_and_says_how_long_it_waited(healthy, check_mode):
    """slurmctld stopped (SIGSTOP): with slurm_command_timeout 5 every Slurm command of the run, the election's
    included, waits 5 s at most, and the message says what it waited for and how long; the cluster keeps its
    ClusterName (from slurm.conf, as scontrol could not answer)."""
    pids = slurmctld_pids()
    assert len(pids) == 1, pids
    os.kill(pids[0], signal.SIGSTOP)
    try:
        proc, prom = remediate("-e", json.dumps({"slurm_command_timeout": 5}), check_mode=check_mode)
    finally:
        os.kill(pids[0], signal.SIGCONT)
    assert_cause(proc, prom, "slurm_unreadable", "within 5 seconds", check_mode)
    if not check_mode:
        # scontrol could not name the cluster: slurm.conf's ClusterName does, not the host's name
        assert 'clusterops_remediate_slurm_readable{cluster="%s"} 0' % cluster_name() in prom, prom


def test_an_account_slurm_does_not_let_change_nodes_is_a_permission_failure(healthy):
    """The heal journal off, a non-root account that is neither SlurmUser nor a Slurm operator: --check asks
    Slurm (SlurmUser, the account's AdminLevel) and says the run would fail; the real run's scontrol update is
    refused by slurmctld, in words that make it a permission failure too, and the node stays drained."""
    ensure_user("clusterops-op")
    scontrol("update", "NodeName=n1", "State=DRAIN", "Reason=Prolog error")
    as_operator = ["-e", "remediate_become=true", "--become-user", "clusterops-op", "--become-method", "su",
                   "-e", "ansible_python_interpreter=/usr/bin/python3", "-e", json.dumps({"remediate_nodes_journal": ""})]
    proc, prom = remediate(*as_operator, check_mode=True)
    assert_cause(proc, prom, "permission", "neither root, SlurmUser", check_mode=True)
    proc, prom = remediate(*as_operator)
    assert proc.returncode != 0 and "resume n1" in proc.stdout, proc.stdout
    failed = dict(re.findall(r'^clusterops_remediate_failed\{cause="(\w+)",cluster="[^"]+"\} (\d)$', prom, re.M))
    assert failed == dict((c, "1" if c == "permission" else "0") for c in CAUSES), (failed, proc.stdout)
    node = wait_for(lambda ns: "n1" in ns, "n1 read")["n1"]
    assert node["reason"] == "Prolog error" and "DRAIN" in node["flags"]
    print([line for line in proc.stdout.splitlines() if "resume n1" in line][:1])

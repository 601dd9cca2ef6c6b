# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Why a task failed (``_causes``), from Slurm's words as the dev clusters printed them (the fixtures
recorded from real Slurm: tests/unit/fixtures/), and the ``failed_cause`` every module's failure carries
(``_task.run_task``)."""

from __future__ import annotations

import errno
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _causes as causes
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.journal import journal_lock
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import RemediationError
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SlurmCommandError
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure, run_task

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures")


def recorded(name):
    """A devcluster fixture: ``(command, rc, stdout, stderr)`` of its ``# command:``/``# rc:`` header."""
    with open(os.path.join(FIXTURES, "devcluster", name)) as handle:
        lines = handle.read().split("\n")
    command = lines[0].split(": ", 1)[1].split()
    rc = int(lines[1].split(": ", 1)[1])
    at = lines.index("# stderr:")
    return command, rc, "\n".join(lines[3:at]).replace("# stdout:", "").strip(), "\n".join(lines[at + 1:])


def release_file(release, folder, name):
    with open(os.path.join(FIXTURES, "slurm-%s" % release, folder, name)) as handle:
        return handle.read()


CASES = [
    # the controller stopped: every read of 22.05's clients
    ("sinfo stopped", ["sinfo", "-N"], 1, "", release_file("22.05", "controller-stopped", "sinfo-text.err"),
     causes.SLURM_UNREADABLE),
    ("squeue stopped", ["squeue"], 1, "", release_file("22.05", "controller-stopped", "squeue-text.err"),
     causes.SLURM_UNREADABLE),
    ("scontrol show stopped", ["scontrol", "-o", "show", "node"], 1, "",
     release_file("22.05", "controller-stopped", "scontrol-show-node-oneliner.err"), causes.SLURM_UNREADABLE),
    # a change the controller did not hear is not a refusal: it could not be asked
    ("sbatch stopped",) + recorded("sbatch_connect_failure.txt") + (causes.SLURM_UNREADABLE,),
    ("squeue connect",) + recorded("squeue_connect_failure.txt") + (causes.SLURM_UNREADABLE,),
    # accounting: slurmdbd down (26.05's sacctmgr), no accounting storage (sacct, sacctmgr)
    ("slurmdbd down", ["sacctmgr", "show", "configuration"], 1,
     release_file("26.05", "sacctmgr-show-configuration", "slurmdbd-down.out"),
     release_file("26.05", "sacctmgr-show-configuration", "slurmdbd-down.err"), causes.ACCOUNTING),
    ("no accounting storage, sacctmgr", ["sacctmgr", "show", "event"], 1, "",
     release_file("26.05", "sacctmgr-show-configuration", "accounting-disabled.err"), causes.ACCOUNTING),
    ("no accounting storage, sacct",) + recorded("sacct_accounting_disabled.txt") + (causes.ACCOUNTING,),
    # 22.05's sacctmgr with slurmdbd stopped (make cluster-slurmdbd-stop), as the node remediation's read of
    # node events got it in tests/integration/test_failure_causes.py: no word "slurmdbd"
    ("slurmdbd down, 22.05", ["sacctmgr", "--noheader", "--parsable2", "show", "event"], 1, "",
     "sacctmgr: error: slurm_persist_conn_open_without_init: failed to open persistent connection to "
     "host:127.0.0.1:16819: Connection refused\nsacctmgr: error: Sending PersistInit msg: Connection refused\n",
     causes.ACCOUNTING),
    ("sacct, slurmdbd down", ["sacct"], 1, "", "sacct: error: Sending PersistInit msg: Connection refused\n"
     "sacct: error: Problem talking to the database: Connection refused\n", causes.ACCOUNTING),
    # changes Slurm refused
    ("reboot of an unknown node",) + recorded("scontrol_reboot_unknown_node.txt") + (causes.SLURM_REFUSED,),
    ("sbatch to no such partition",) + recorded("sbatch_invalid_partition.txt") + (causes.SLURM_REFUSED,),
    ("resume of an unknown node",) + recorded("scontrol_resume_unknown_node.txt") + (causes.SLURM_REFUSED,),
    # the account's rights: 22.05's scontrol update as a user that is neither SlurmUser nor an operator, as
    # tests/integration/test_failure_causes.py got it
    ("update as no operator", ["scontrol", "update", "nodename=n1", "state=resume"], 1, "",
     "slurm_update error: Invalid user id\n", causes.PERMISSION),
    ("access denied", ["scontrol", "reboot", "n1"], 1, "", "scontrol_reboot_nodes error: Access/permission denied\n",
     causes.PERMISSION),
    # timeouts and commands that could not run
    ("timeout of a read", ["scontrol", "show", "config"], 124, "", "", causes.SLURM_UNREADABLE),
    ("timeout of a change", ["scontrol", "update"], 124, "", "", causes.SLURM_UNREADABLE),
    ("no such command", ["/opt/nowhere/sinfo"], 127, "", "cannot run /opt/nowhere/sinfo: No such file", causes.CONFIGURATION),
    ("runuser wraps a read", ["/usr/sbin/runuser", "-u", "alice", "--", "/usr/bin/squeue"], 1, "", "odd\n",
     causes.SLURM_UNREADABLE),
    ("runuser wraps a change", ["/usr/sbin/runuser", "-u", "alice", "--", "/usr/bin/sbatch"], 1, "", "odd\n",
     causes.SLURM_REFUSED),
]


@pytest.mark.parametrize("name, cmd, rc, out, err, cause", CASES, ids=[c[0] for c in CASES])
def test_the_cause_of_a_slurm_command_from_its_own_words(name, cmd, rc, out, err, cause):
    assert causes.of_slurm_command(cmd, rc, out, err) == cause, name
    assert SlurmCommandError("msg", cmd, rc, out, err).result()["failed_cause"] == cause


def test_sacct_of_no_such_user_is_no_permission():
    """``Invalid user id: <name>`` (sacct -u) names a user that is not there; only slurmctld's bare
    ``Invalid user id`` (an RPC its sender may not make) is the account's rights."""
    cmd, rc, out, err = recorded("sacct_no_such_user.txt")
    assert "Invalid user id:" in err and causes.of_slurm_command(cmd, rc, out, err) != causes.PERMISSION


@pytest.mark.parametrize("code, cause", [(errno.EACCES, causes.PERMISSION), (errno.EPERM, causes.PERMISSION),
                                         (errno.EROFS, causes.PERMISSION), (errno.ENOENT, causes.CONFIGURATION),
                                         (errno.ENOTDIR, causes.CONFIGURATION)])
def test_the_cause_of_an_os_error(code, cause):
    assert causes.of_os_error(OSError(code, os.strerror(code))) == cause


def test_a_heal_journal_the_account_cannot_lock_is_a_permission_failure(tmp_path):
    folder = tmp_path / "journal"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if os.access(str(folder), os.W_OK):
            pytest.skip("root writes anywhere: the integration test runs it as another user")
        with pytest.raises(RemediationError) as failed:
            journal_lock(str(folder / "heals.json"), 1)
        assert failed.value.cause == causes.PERMISSION and "as " in str(failed.value)
    finally:
        folder.chmod(0o700)


class Module(object):
    """What run_task reads of an AnsibleModule: fail_json and exit_json, which end it."""

    def __init__(self):
        self.answer = None

    def fail_json(self, **result):
        self.answer = dict(result, failed=True)
        raise SystemExit

    def exit_json(self, **result):
        self.answer = result
        raise SystemExit


def run(task, errors=()):
    module = Module()
    with pytest.raises(SystemExit):
        run_task(module, task, errors)
    return module.answer


def test_every_failure_carries_its_cause():
    def raiser(exc):
        def task(module):
            raise exc
        return task

    assert run(raiser(TaskFailure("bad value")))["failed_cause"] == causes.CONFIGURATION
    assert run(raiser(TaskFailure("refused", failed_cause=causes.SLURM_REFUSED)))["failed_cause"] == causes.SLURM_REFUSED
    assert run(raiser(RemediationError("x")), (RemediationError,))["failed_cause"] == causes.CONFIGURATION
    assert run(raiser(RemediationError("x", causes.PERMISSION)), (RemediationError,))["failed_cause"] == causes.PERMISSION
    assert run(raiser(PermissionError(errno.EACCES, "no")), (OSError,))["failed_cause"] == causes.PERMISSION
    assert "failed_cause" not in run(lambda module: {"changed": False})


def test_check_mode_finds_the_journal_the_real_run_could_not_write(tmp_path, monkeypatch):
    """``--check`` takes no lock, so it asks the file system whether the account could: a folder it cannot
    write (or a journal or lock file it cannot), up to the nearest folder that exists."""
    from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation import journal
    writable = set()
    monkeypatch.setattr(journal.os, "access", lambda path, mode: path in writable)
    (tmp_path / "state").mkdir()
    target = str(tmp_path / "state" / "sub" / "heals.json")  # sub is made by the real run
    with pytest.raises(RemediationError) as refused:
        journal.check_journal_access(target)
    assert refused.value.cause == causes.PERMISSION and str(tmp_path / "state") in str(refused.value)
    writable.add(str(tmp_path / "state"))
    journal.check_journal_access(target)
    (tmp_path / "state" / "sub").mkdir()
    with pytest.raises(RemediationError):
        journal.check_journal_access(target)  # now its own folder decides
    writable.add(str(tmp_path / "state" / "sub"))
    open(target, "w").close()
    with pytest.raises(RemediationError) as refused:
        journal.check_journal_access(target)  # the journal itself is not writable
    assert target in str(refused.value)
    writable.add(target)
    journal.check_journal_access(target)

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training remediation next to what a hostile owner leaves in their own folders: planted symlinks
and hard links where the hang evidence goes, job logs that link to root's files, FIFOs, run folders
that resolve elsewhere, and a run whose decision raises. Each guard once, on real files."""

from __future__ import annotations

import os
import pwd
import tempfile

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _privsep
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import evidence, observe, runner
from ansible_collections.clusterops.slurm.tests.unit.plugins.module_utils.training_remediation_cases import run

NAME = "hang-7-20261202T030000Z.txt"


@pytest.fixture
def victim(tmp_path):
    """A file the owner must not be able to have overwritten (root's, in real life)."""
    path = tmp_path / "authorized_keys"
    path.write_text("root's own line\n")
    return path


def test_the_evidence_is_never_written_through_a_planted_symlink(tmp_path, victim):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / NAME).symlink_to(victim)
    path = evidence.write_evidence(str(logs), NAME, "ssh-ed25519 AAAA attacker", None, None)
    assert path == str(logs / (NAME + ".1")) and "attacker" in open(path).read()
    assert victim.read_text() == "root's own line\n" and (logs / NAME).is_symlink()
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)


def test_the_evidence_is_never_written_into_a_planted_hard_link(tmp_path, victim):
    logs = tmp_path / "logs"
    logs.mkdir()
    os.link(str(victim), str(logs / NAME))
    evidence.write_evidence(str(logs), NAME, "ssh-ed25519 AAAA attacker", None, None)
    assert victim.read_text() == "root's own line\n"


def test_a_log_folder_that_is_a_symlink_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "logs").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        evidence.write_evidence(str(tmp_path / "logs"), NAME, "stacks", None, None)
    assert os.listdir(str(tmp_path / "elsewhere")) == []


def test_only_regular_job_logs_are_copied_never_what_a_link_leads_to(tmp_path, victim):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "llm-7.out").write_text("rank 0: Thread 0x1 (most recent call first)\n")
    (logs / "llm-7-n1.out").symlink_to(victim)
    os.mkfifo(str(logs / "llm-7-n2.out"))
    path = evidence.write_evidence(str(logs), NAME, "# header", str(logs), "llm-7")
    text = open(path).read()
    assert "most recent call first" in text and "root's own line" not in text
    assert "=== tail of %s" % (logs / "llm-7.out") in text and "llm-7-n1.out" not in text


def test_a_run_folder_that_resolves_elsewhere_is_refused(tmp_path):
    (tmp_path / "bobs").mkdir()
    (tmp_path / "alices").symlink_to(tmp_path / "bobs")
    out = observe.read_folders(run(checkpoint_dir=str(tmp_path / "alices")), None, progress=False)
    assert out["ckpt"]["status"] == "error" and "resolves to %s" % (tmp_path / "bobs") in out["ckpt"]["detail"]


def test_a_fifo_heartbeat_gives_no_step_and_never_blocks(tmp_path):
    os.mkfifo(str(tmp_path / "heartbeat.json"))
    spec = run(checkpoint_dir=str(tmp_path), progress="heartbeat", heartbeat_file=str(tmp_path / "heartbeat.json"),
               hang_timeout=60)
    out = observe.owner_call(dict(spec, owner=None), observe.read_folders, spec, 7)  # in a child, no id change
    assert out["progress"]["step"] is None and out["progress"]["time"] is not None


def test_a_log_folder_that_resolves_elsewhere_gives_no_progress(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "logs").symlink_to(tmp_path / "elsewhere")
    spec = run(checkpoint_dir=str(tmp_path), log_dir=str(tmp_path / "logs"), hang_timeout=60)
    with pytest.raises(ValueError, match="log_dir .* resolves to"):
        observe.read_folders(spec, 7)


@pytest.mark.skipif(os.geteuid() != 0, reason="the owner switch needs root")
def test_as_root_the_evidence_is_written_as_the_owner_who_cannot_read_roots_files(victim):
    user = pwd.getpwnam("nobody")
    base = tempfile.mkdtemp()
    try:
        os.chmod(base, 0o755)
        logs = os.path.join(base, "logs")
        os.mkdir(logs)
        os.chown(logs, user.pw_uid, user.pw_gid)
        secret = os.path.join(base, "secret")
        with open(secret, "w") as handle:
            handle.write("root only\n")
        os.chmod(secret, 0o600)
        with open(os.path.join(logs, "llm-7.out"), "w") as handle:
            handle.write("a log line\n")
        spec = run(owner="nobody", checkpoint_dir=base, log_dir=logs)
        path = observe.owner_call(spec, evidence.write_evidence, logs, NAME, "# stacks", logs, "llm-7")
        assert os.stat(path).st_uid == user.pw_uid and "a log line" in open(path).read()
        # what only root may read stays unread, even under a name the log reader would take
        os.unlink(os.path.join(logs, "llm-7.out"))
        os.rename(secret, os.path.join(logs, "llm-7.out"))   # root's file, mode 0600, in the owner's folder
        path = observe.owner_call(spec, evidence.write_evidence, logs, NAME, "# stacks", logs, "llm-7")
        assert "root only" not in open(path).read()
    finally:
        for dirpath, dirnames, filenames in os.walk(base, topdown=False):
            for name in filenames:
                os.unlink(os.path.join(dirpath, name))
            for name in dirnames:
                os.rmdir(os.path.join(dirpath, name))
        os.rmdir(base)


def test_a_run_whose_decision_raises_is_reported_and_the_others_are_decided(monkeypatch, tmp_path):
    monkeypatch.setattr(_privsep, "switch_user", lambda uid, gid, groups: None)  # tmp_path is root's, 0700
    runs = [run(name=n, owner="nobody", checkpoint_dir=str(tmp_path)) for n in ("a", "b")]
    for spec in runs:
        spec["folder"] = str(tmp_path / spec["name"])
    monkeypatch.setattr(observe, "read_jobs", lambda cli, names, users, start: ([], {}))
    real = runner.decide_observed

    def decide_observed(observation, jobs):
        if observation.run["name"] == "a":
            raise RecursionError("maximum recursion depth exceeded")
        return real(observation, jobs)
    monkeypatch.setattr(runner, "decide_observed", decide_observed)
    jobs, observations = observe.observe_runs(None, runs, 0)
    (oa, da), (ob, db) = runner.decide_all(observations, jobs)
    sa, sb = oa.state, ob.state
    assert sa is None and da["needs_human"] and da["action"] == "none"
    assert "cannot decide: RecursionError" in da["reason"]
    assert (db["status"], db["needs_human"]) == ("not_started", False) and sb is not None, db["reason"]

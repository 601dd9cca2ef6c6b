# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The checkpoint_pruning role applied to this machine, and prunes next to a real trainer.

No Slurm cluster needed. The role runs with ansible-playbook (connection local) into a temporary
install and log folder and the crontabs of root and of the local user clusterops-alice (created when
missing), which are saved first and restored afterwards. The crontab's own command line (read back
with ``crontab -l``, cron's ``\\%`` unescaped) prunes a folder of real torch.save checkpoints written
through the library's CheckpointWriter. Each folder's entry runs as its owner (issue 22): alice's
folder gets its entry in alice's crontab, which prunes it when run as alice; root is refused for it
unless the folder entry sets allow_root. Then prunes run over and over while the reference trainer
(roles/torchrun_launcher/files/reference_trainer.py, 2 ranks under torch.distributed.run) saves, and
after it is killed mid-run.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import pathlib
import pwd
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import REPO, ensure_user, run

LIBRARY = os.path.join(REPO, "plugins", "module_utils", "_checkpoint")  # the package folder
TRAINER = os.path.join(REPO, "roles", "torchrun_launcher", "files", "reference_trainer.py")
CRON_NAME = "clusterops checkpoint prune %s"
ALICE = "clusterops-alice"


def _load_library():
    name = "clusterops_checkpoint_under_test"
    spec = importlib.util.spec_from_file_location(name, os.path.join(LIBRARY, "__init__.py"),
                                                  submodule_search_locations=[LIBRARY])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its modules import each other relatively
    spec.loader.exec_module(module)
    return module


ck = _load_library()


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def crontab_lines(user=None):
    """The lines of root's crontab, or of ``user``'s; [] when there is none."""
    proc = subprocess.run(["crontab", "-l"] + (["-u", user] if user else []), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, check=False)
    return proc.stdout.splitlines() if proc.returncode == 0 else []


def cron_job(name, user=None):
    """The command of the cron entry ``name`` as cron runs it (crontab(5)): the five time fields cut
    off, the command ending at the first unescaped ``%`` (the rest is stdin), ``\\%`` back to ``%``."""
    lines = crontab_lines(user)
    marker = "#Ansible: " + CRON_NAME % name
    assert lines.count(marker) == 1, lines
    entry = lines[lines.index(marker) + 1]
    command = re.split(r"(?<!\\)%", entry.split(None, 5)[5])[0]
    return command.replace("\\%", "%")


def _need_crontab():
    if shutil.which("crontab") is None:
        if os.environ.get("CLUSTEROPS_REQUIRE_CLUSTER"):
            pytest.fail("crontab is not installed (Debian package cron; make deps installs it)")
        pytest.skip("crontab is not installed (Debian package cron; make deps installs it)")


@contextlib.contextmanager
def _crontab_kept(user=None):
    """Save ``user``'s crontab (root's by default) and put it back afterwards."""
    who = ["-u", user] if user else []
    saved = subprocess.run(["crontab", "-l"] + who, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, check=False)
    try:
        yield
    finally:
        if saved.returncode == 0:
            subprocess.run(["crontab"] + who + ["-"], input=saved.stdout, universal_newlines=True, check=True)
        else:
            subprocess.run(["crontab"] + who + ["-r"], stderr=subprocess.DEVNULL, check=False)


@pytest.fixture
def crontab_restored():
    _need_crontab()
    with _crontab_kept():
        yield


@pytest.fixture
def alice(crontab_restored):
    """The local user clusterops-alice (created when missing; the role's tests need root), her crontab
    saved and restored, and a folder in /tmp she can reach (tmp_path is under a 0700 folder), removed after."""
    if os.geteuid() != 0:
        pytest.skip("the role's per-owner entries need root (crontab -u, chown)")
    ensure_user(ALICE)
    top = tempfile.mkdtemp(prefix="clusterops-pruning-", dir="/tmp")
    os.chmod(top, 0o755)
    try:
        with _crontab_kept(ALICE):
            yield {"user": ALICE, "uid": pwd.getpwnam(ALICE).pw_uid, "gid": pwd.getpwnam(ALICE).pw_gid,
                   "top": top}
    finally:
        shutil.rmtree(top, ignore_errors=True)


def chown_tree(top, uid, gid):
    for dirpath, dirnames, filenames in os.walk(str(top)):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)
    os.chown(str(top), uid, gid)


def apply_role(tmp_path, folders, check=True, install_dir=None, ansible_args=(), extra=None):
    """ansible-playbook of the role on this machine; returns (output, recap dict).

    The command goes to tmp_path/opt/clusterops_checkpoint, or with ``install_dir`` through the
    deprecated checkpoint_pruning_install_dir; the logs to tmp_path/log/<user>/. ``extra``: more role
    variables (checkpoint_pruning_cron_user, the deprecated one)."""
    where = ({"checkpoint_pruning_install_dir": install_dir} if install_dir
             else {"checkpoint_tool_dir": str(tmp_path / "opt")})
    play = [{
        "hosts": "localhost", "gather_facts": False,
        "roles": [{"role": "clusterops.slurm.checkpoint_pruning", "vars": dict(where, **dict({
            "checkpoint_pruning_log_dir": str(tmp_path / "log"),
            "checkpoint_pruning_tmp_grace": 3600,
            "checkpoint_pruning_folders": folders}, **(extra or {})))}],
    }]
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps(play))  # JSON is YAML
    proc = run(["ansible-playbook", "-i", "localhost,", "-c", "local", str(playbook)] + list(ansible_args),
               check=check)
    match = re.search(r"^localhost\s*:\s*(.*)$", proc.stdout, re.MULTILINE)
    recap = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", match.group(1))) if match else {}
    return proc.stdout, recap


def tree_digest(top):
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(str(top))):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            digest.update(os.path.relpath(path, str(top)).encode())
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    digest.update(handle.read())
    return digest.hexdigest()


def torch_checkpoints(torch, run_dir, steps):
    for step in steps:
        with ck.CheckpointWriter(str(run_dir), step, epoch=step // 1000) as staging:
            torch.save({"w": torch.full((64,), float(step)), "step": step}, os.path.join(staging, "model.pt"))
            os.mkdir(os.path.join(staging, "optim"))
            torch.save({"lr": 0.001, "step": step}, os.path.join(staging, "optim", "rank0.pt"))


def age(path, seconds):
    when = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (when, when), follow_symlinks=False)
    os.utime(path, (when, when), follow_symlinks=False)


def entries(run_dir):
    return sorted(n for n in os.listdir(str(run_dir)) if n != ck.PRUNE_LOCK)


# ---------------------------------------------------------------------------------------------
# The role
# ---------------------------------------------------------------------------------------------

def test_role_installs_one_cron_entry_whose_command_prunes(tmp_path, crontab_restored):
    torch = pytest.importorskip("torch")
    run_dir, other, outside = tmp_path / "runs" / "llama 8b", tmp_path / "runs" / "other", tmp_path / "outside"
    steps = list(range(9000, 10000, 100)) + list(range(10000, 10500, 100))
    torch_checkpoints(torch, run_dir, steps)
    os.makedirs(str(other))
    os.symlink("step_000009200", str(run_dir / "latest"))  # a pointer lagging behind: kept
    torch_checkpoints(torch, outside, [1])
    os.symlink(str(outside / "step_000000001"), str(run_dir / "step_000000001"))  # out of the folder
    for name, seconds in (("tmp-step_000010500.4711.dead", 7200), ("tmp-step_000010500.4712.busy", 60)):
        (run_dir / name).mkdir()
        (run_dir / name / "model.pt").write_bytes(b"partial")
        age(str(run_dir / name), seconds)
    canary = tree_digest(outside)
    folders = [
        {"name": "llama-8b", "path": str(run_dir), "keep_last": 10, "keep_every": 0, "min_free": "100%"},
        {"name": "other", "path": str(other), "keep_last": 2, "minute": "15", "hour": "3"},
    ]

    output, recap = apply_role(tmp_path, folders)
    assert recap.get("failed") == 0 and recap.get("changed", 0) > 0, output
    output, recap = apply_role(tmp_path, folders)
    assert recap.get("failed") == 0 and recap.get("changed") == 0, output  # idempotent
    lines = crontab_lines()
    for name in ("llama-8b", "other"):
        assert lines.count("#Ansible: " + CRON_NAME % name) == 1
    tool = str(tmp_path / "opt" / "clusterops_checkpoint")
    assert sum(tool + " prune" in line for line in lines) == 2
    assert "15 3 * * * " in lines[lines.index("#Ansible: " + CRON_NAME % "other") + 1]
    assert sorted(n for n in os.listdir(tool) if n.endswith(".py")) == sorted(
        [n for n in os.listdir(LIBRARY) if n.endswith(".py")] + ["__main__.py"])
    job = cron_job("llama-8b")
    assert "100%" in job and "/usr/bin/python3" in job

    # Run the crontab's own command line the way cron does: /bin/sh, a minimal environment.
    cron_env = {"PATH": "/usr/bin:/bin", "HOME": "/root", "SHELL": "/bin/sh", "LOGNAME": "root"}
    proc = subprocess.run(["/bin/sh", "-c", job], env=cron_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), proc.stderr  # --quiet: cron mails nothing
    kept = ["step_%09d" % s for s in range(9500, 10500, 100)]
    assert entries(run_dir) == sorted(kept + ["latest", "step_000000001", "step_000009200",
                                              "tmp-step_000010500.4712.busy"])
    assert tree_digest(outside) == canary
    newest = ck.latest_valid(str(run_dir), "sha256")
    assert newest.name == "step_000010400"
    assert float(torch.load(os.path.join(newest.path, "model.pt"))["w"][0]) == 10400.0
    log = tmp_path / "log" / "root" / "checkpoint-prune-llama-8b.log"  # root owns the folder: root's entry
    logged = log.read_text().splitlines()
    deleted = [line for line in logged if ": deleted " in line]
    assert len(deleted) == 5  # 9000, 9100, 9300, 9400 (9200 is named by latest) and the stale tmp folder
    assert any("deleted tmp-step_000010500.4711.dead: temporary, unchanged for" in line for line in deleted)
    assert any("deleted step_000009000 (step 9000, " in line and "older than the 10 newest valid" in line
               for line in deleted)
    assert logged[-1].split(": ", 1)[1].startswith("5 deleted ")

    # Again: nothing more to delete.
    assert subprocess.run(["/bin/sh", "-c", job], env=cron_env, check=False).returncode == 0
    assert log.read_text().splitlines()[-1].split(": ", 1)[1].startswith("0 deleted")

    # state: absent removes the entry (and only that one).
    folders[0]["state"] = "absent"
    output, recap = apply_role(tmp_path, folders)
    assert recap.get("failed") == 0 and recap.get("changed") == 1, output
    lines = crontab_lines()
    assert "#Ansible: " + CRON_NAME % "llama-8b" not in lines
    assert lines.count("#Ansible: " + CRON_NAME % "other") == 1
    folders[1]["state"] = "absent"
    apply_role(tmp_path, folders)
    assert not any(str(tmp_path) in line for line in crontab_lines())


def test_role_refuses_bad_folder_entries(tmp_path, crontab_restored):
    before = crontab_lines()
    output, recap = apply_role(tmp_path, [{"name": "a b", "path": "/tmp/x", "keep_last": 1}], check=False)
    assert recap.get("failed") == 1 and "the name must be unique" in output
    output, recap = apply_role(tmp_path, [{"name": "a", "path": "/tmp/x"}], check=False)
    assert recap.get("failed") == 1 and "keep_last" in output  # argument_specs: required
    assert crontab_lines() == before


def test_deprecated_install_dir_still_chooses_where_the_command_goes(tmp_path, crontab_restored):
    folders = [{"name": "old-var", "path": str(tmp_path / "run"), "keep_last": 2}]
    (tmp_path / "run").mkdir()  # root's: its entry goes to root's crontab
    output, recap = apply_role(tmp_path, folders, install_dir=str(tmp_path / "opt" / "bin"))
    assert recap.get("failed") == 0, output
    tool = str(tmp_path / "opt" / "bin" / "clusterops_checkpoint")
    assert os.path.isfile(os.path.join(tool, "__main__.py"))
    assert tool + " prune" in cron_job("old-var")


def test_old_copies_of_the_command_are_removed_in_check_mode_never(tmp_path, crontab_restored):
    # Before issue 14: <dir>/bin/_checkpoint.py (checkpoint_pruning), <dir>/clusterops_checkpoint.py
    # (torchrun_launcher). The role checkpoint_tool removes both, and bin/ once empty.
    folders = [{"name": "old-copies", "path": str(tmp_path / "run"), "keep_last": 2}]
    (tmp_path / "run").mkdir()
    opt = tmp_path / "opt"
    (opt / "bin").mkdir(parents=True)
    old = [opt / "bin" / "_checkpoint.py", opt / "clusterops_checkpoint.py"]
    for path in old:
        path.write_text(u"# the old single-file command\n")
    output, recap = apply_role(tmp_path, folders, ansible_args=["--check"])
    assert recap.get("failed") == 0 and recap.get("changed", 0) > 0, output
    assert all(path.exists() for path in old), output  # check mode never acts
    output, recap = apply_role(tmp_path, folders)
    assert recap.get("failed") == 0, output
    assert not any(path.exists() for path in old) and not (opt / "bin").exists(), output
    assert os.path.isfile(str(opt / "clusterops_checkpoint" / "__main__.py"))
    output, recap = apply_role(tmp_path, folders)
    assert recap.get("failed") == 0 and recap.get("changed") == 0, output  # idempotent
    # A bin/ holding something else stays.
    (opt / "bin").mkdir()
    (opt / "bin" / "site-tool").write_text(u"#!/bin/sh\n")
    (opt / "bin" / "_checkpoint.py").write_text(u"# old\n")
    output, recap = apply_role(tmp_path, folders)
    assert recap.get("failed") == 0 and os.listdir(str(opt / "bin")) == ["site-tool"], output


# ---------------------------------------------------------------------------------------------
# Least privilege (issue 22): each entry runs as its folder's owner, never root for another user
# ---------------------------------------------------------------------------------------------

def users_run(alice, name="alice-run", steps=(100, 200, 300, 400)):
    """alice's run folder with contract checkpoints, all of it hers, in a folder root owns."""
    run_dir = os.path.join(alice["top"], "runs", name)
    for step in steps:
        ck.write_checkpoint(run_dir, step, 0, {"model.pt": b"m" * 64}, fsync=False)
    os.chmod(os.path.dirname(run_dir), 0o755)
    chown_tree(run_dir, alice["uid"], alice["gid"])
    return run_dir


def marker(name):
    return "#Ansible: " + CRON_NAME % name


def test_a_users_folder_gets_its_entry_in_that_users_crontab(alice):
    top = alice["top"]
    run_dir = users_run(alice)
    folders = [{"name": "alice-run", "path": run_dir, "keep_last": 2}]
    # As an earlier release installed it: in root's crontab (checkpoint_pruning_cron_user: root).
    old = "\n".join(crontab_lines() + [marker("alice-run"), "*/30 * * * * /usr/bin/python3 /old prune %s" % run_dir])
    subprocess.run(["crontab", "-"], input=old + "\n", universal_newlines=True, check=True)

    output, recap = apply_role(pathlib.Path(top), folders, ansible_args=["--check"])
    assert recap.get("failed") == 0 and recap.get("changed", 0) > 0, output
    assert marker("alice-run") in crontab_lines() and crontab_lines(ALICE) == [], output  # check mode: as it was
    assert not os.path.exists(os.path.join(top, "log", ALICE))

    output, recap = apply_role(pathlib.Path(top), folders)
    assert recap.get("failed") == 0 and recap.get("changed", 0) > 0, output
    assert marker("alice-run") not in crontab_lines(), output  # moved out of root's crontab
    assert crontab_lines(ALICE).count(marker("alice-run")) == 1
    output, recap = apply_role(pathlib.Path(top), folders)
    assert recap.get("failed") == 0 and recap.get("changed") == 0, output  # idempotent
    log_dir = os.path.join(top, "log", ALICE)
    st = os.stat(log_dir)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (alice["uid"], 0o750)
    st = os.stat(os.path.join(top, "log"))
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)

    # Run the entry's command as cron runs it for alice: her uid, /bin/sh, a minimal environment.
    job = cron_job("alice-run", ALICE)
    assert os.path.join(log_dir, "checkpoint-prune-alice-run.log") in job
    home = pwd.getpwnam(ALICE).pw_dir
    proc = subprocess.run(["/bin/sh", "-c", job], env={"PATH": "/usr/bin:/bin", "HOME": home, "SHELL": "/bin/sh",
                                                       "LOGNAME": ALICE}, user=alice["uid"], group=alice["gid"],
                          extra_groups=[], cwd=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), proc.stderr
    assert entries(run_dir) == ["step_000000300", "step_000000400"]
    log = os.path.join(log_dir, "checkpoint-prune-alice-run.log")
    assert os.stat(log).st_uid == alice["uid"]
    with open(log) as handle:
        assert handle.read().splitlines()[-1].split(": ", 1)[1].startswith("2 deleted ")

    # state: absent removes it from her crontab, even once the folder is gone (no owner to read).
    shutil.rmtree(run_dir)
    folders[0]["state"] = "absent"
    output, recap = apply_role(pathlib.Path(top), folders)
    assert recap.get("failed") == 0 and recap.get("changed") == 1, output
    assert marker("alice-run") not in crontab_lines(ALICE) + crontab_lines()


def test_a_folder_with_a_replica_is_copied_then_pruned_as_its_owner(alice):
    """Issue 27: the entry replicates (nice, idle I/O class) before it prunes; the prune keeps what the replica
    does not hold yet; with the run folder's newest checkpoint lost, latest --replica names the replica's copy."""
    top = alice["top"]
    run_dir = users_run(alice, "alice-replicated")
    replica = os.path.join(top, "backup", "alice-replicated")
    os.makedirs(os.path.dirname(replica))
    os.chown(os.path.dirname(replica), alice["uid"], alice["gid"])
    folders = [{"name": "alice-replicated", "path": run_dir, "keep_last": 1, "replicas": [replica],
                "replica_keep_last": 2, "replica_bwlimit": "50M"}]
    output, recap = apply_role(pathlib.Path(top), folders)
    assert recap.get("failed") == 0 and recap.get("changed", 0) > 0, output
    output, recap = apply_role(pathlib.Path(top), folders)
    assert recap.get("failed") == 0 and recap.get("changed") == 0, output  # idempotent
    job = cron_job("alice-replicated", ALICE)
    # issue 37: each command bounded in time (checkpoint_pruning_time_limit), replication's copies too
    assert job.startswith("timeout --kill-after=60 1500 nice -n 19 ionice -c 3 /usr/bin/python3 ") and " replicate " in job
    assert "--time-limit 1200 " in job and " ; timeout --kill-after=60 1500 /usr/bin/python3 " in job
    assert job.index(" replicate ") < job.index(" prune ") and "--replica=" + replica in job
    home = pwd.getpwnam(ALICE).pw_dir

    def cron_run():
        return subprocess.run(["/bin/sh", "-c", job], env={"PATH": "/usr/bin:/bin", "HOME": home, "SHELL": "/bin/sh",
                                                           "LOGNAME": ALICE}, user=alice["uid"], group=alice["gid"],
                              extra_groups=[], cwd=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, check=False)
    proc = cron_run()
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), proc.stderr
    assert entries(replica) == [ck.REPLICA_INDEX, ck.REPLICATE_LOCK, "step_000000300", "step_000000400"]
    assert os.stat(os.path.join(replica, "step_000000400", "model.pt")).st_uid == alice["uid"]
    assert entries(run_dir) == ["step_000000400"]  # 100-300 deleted: the replica holds 400
    # Two new checkpoints; the replica away (unreadable for alice) for one run: nothing is deleted.
    for step in (500, 600):
        ck.write_checkpoint(run_dir, step, 0, {"model.pt": b"m" * 64}, fsync=False)
    chown_tree(run_dir, alice["uid"], alice["gid"])
    os.chmod(replica, 0o000)
    try:
        proc = cron_run()
    finally:
        os.chmod(replica, 0o755)
    assert entries(run_dir) == ["step_000000400", "step_000000500", "step_000000600"]
    proc = cron_run()
    assert proc.returncode == 0, proc.stderr
    assert entries(replica)[2:] == ["step_000000500", "step_000000600"]
    assert entries(run_dir) == ["step_000000600"]
    log = os.path.join(top, "log", ALICE, "checkpoint-prune-alice-replicated.log")
    with open(log) as handle:
        logged = handle.read()
    assert "copied step_000000600" in logged and "deleted the copy step_000000400" in logged
    # The run folder's newest lost: the replica's verified copy is where a resume starts.
    shutil.rmtree(os.path.join(run_dir, "step_000000600"))
    tool = [word for word in job.split(" ") if word.endswith("/clusterops_checkpoint")][0]
    latest = subprocess.run(["/usr/bin/python3", tool, "latest", run_dir, "--replica", replica], user=alice["uid"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert (latest.returncode, latest.stdout.strip()) == (0, os.path.join(replica, "step_000000600")), latest.stderr
    assert "resuming from a replica" in latest.stderr


def test_root_is_refused_for_a_users_folder_unless_allow_root(alice):
    top = pathlib.Path(alice["top"])
    run_dir = users_run(alice)
    before = (crontab_lines(), crontab_lines(ALICE))
    refusals = [
        ([{"name": "as-root", "path": run_dir, "keep_last": 2, "user": "root"}], {},
         "is owned by %s, not root: not run as root (user: root) without allow_root: true" % ALICE),
        ([{"name": "as-root", "path": run_dir, "keep_last": 2}], {"checkpoint_pruning_cron_user": "root"},
         "not root: not run as root (checkpoint_pruning_cron_user) without allow_root"),
        ([{"name": "missing", "path": str(top / "runs" / "nope"), "keep_last": 2}], {},
         "does not exist yet, so it has no owner to run as"),
        ([{"name": "missing", "path": str(top / "runs" / "nope"), "keep_last": 2, "user": "root"}], {},
         "does not exist yet, so it is not known to be root's"),
    ]
    os.symlink(run_dir, str(top / "runs" / "link"))
    refusals += [
        ([{"name": "link", "path": str(top / "runs" / "link"), "keep_last": 2}], {}, "is a symlink"),
        ([{"name": "link", "path": str(top / "runs" / "link" / "sub"), "keep_last": 2, "user": ALICE}], {},
         "is not its real path (%s/sub)" % run_dir),
    ]
    for folders, extra, words in refusals:
        output, recap = apply_role(top, folders, check=False, extra=extra)
        assert recap.get("failed") == 1 and words in output, output
        assert (crontab_lines(), crontab_lines(ALICE)) == before  # refused before anything changed
    assert not os.path.exists(str(top / "opt")) and not os.path.exists(str(top / "log"))

    # Explicit and documented as dangerous: allow_root puts it in root's crontab, logging as root.
    folders = [{"name": "as-root", "path": run_dir, "keep_last": 2, "user": "root", "allow_root": True}]
    output, recap = apply_role(top, folders)
    assert recap.get("failed") == 0, output
    assert str(top / "log" / "root" / "checkpoint-prune-as-root.log") in cron_job("as-root")
    assert crontab_lines(ALICE) == before[1]
    # The deprecated cron user, set to alice: every entry without user: goes to her crontab, as before.
    folders = [{"name": "as-root", "path": run_dir, "keep_last": 2},
               {"name": "missing", "path": str(top / "runs" / "nope"), "keep_last": 1}]
    output, recap = apply_role(top, folders, extra={"checkpoint_pruning_cron_user": ALICE})
    assert recap.get("failed") == 0 and "checkpoint_pruning_cron_user (%s) is deprecated" % ALICE in output, output
    assert marker("as-root") not in crontab_lines()  # moved to alice's
    lines = crontab_lines(ALICE)
    assert lines.count(marker("as-root")) == 1 and lines.count(marker("missing")) == 1


# ---------------------------------------------------------------------------------------------
# Prunes while the reference trainer saves
# ---------------------------------------------------------------------------------------------

def _trainer(run_dir, events, log, *extra):
    env = dict(os.environ)
    for name in ("CLUSTEROPS_CHECKPOINT_TOOL", "WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc_per_node", "2",
           TRAINER, "--checkpoint-dir", str(run_dir), "--events", str(events), "--step-time", "0.05",
           "--checkpoint-every", "5"] + list(extra)
    with open(str(log), "w") as handle:
        return subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _kill_all(proc):
    """SIGKILL the torchrun agent and its workers (each started in a session of its own)."""
    workers = []
    for entry in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % entry) as handle:
                if entry.isdigit() and int(handle.read().rsplit(")", 1)[1].split()[1]) == proc.pid:
                    workers.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    for pid in workers:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait(60)
    return workers


def _saves(events):
    if not os.path.exists(str(events)):
        return []
    with open(str(events)) as handle:
        records = [json.loads(line) for line in handle if line.endswith("\n")]  # a line cut by a kill: skipped
    return [r["step"] for r in records if r.get("event") == "save"]


def _one_prune(run_dir, tool, rng):
    """An in-process prune racing a command-line prune; checks what each deleted."""
    before = ck.latest_valid(str(run_dir))
    if before is None:
        return 0
    cli = subprocess.Popen(["/usr/bin/python3", tool, "prune", str(run_dir), "--keep-last", "2", "--tmp-grace", "30",
                            "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    time.sleep(rng.random() * 0.02)
    results = []
    try:
        results.append(ck.prune(str(run_dir), keep_last=2, tmp_grace=30).to_dict())
    except ck.PruneLocked:
        pass
    out, err = cli.communicate(timeout=60)
    assert cli.returncode in (ck.EXIT_OK, ck.EXIT_LOCKED), err
    if cli.returncode == ck.EXIT_OK:
        results.append(json.loads(out))
    deleted = 0
    for result in results:
        # Judged against the resume point this prune saw in its own scan: the trainer may have
        # saved twice since ``before`` was read, and then deleting ``before`` is right.
        assert result["error"] is None
        resume_step = ck.parse_name(result["latest_valid"])[2]
        assert resume_step >= before.step, result["latest_valid"]
        gone = [d["name"] for d in result["deleted"]]
        assert result["latest_valid"] not in gone
        assert all(d["kind"] == "checkpoint" for d in result["deleted"]), gone  # no staging folder
        assert all(d["step"] < resume_step for d in result["deleted"]), gone
        deleted += len(gone)
    after = ck.latest_valid(str(run_dir))
    assert after is not None and after.step >= before.step  # a resume point at least as new, always
    return deleted


@pytest.mark.skipif(not os.path.exists(TRAINER), reason="no reference trainer")
def test_prunes_while_the_reference_trainer_saves(tmp_path):
    pytest.importorskip("torch")
    tool = str(tmp_path / "clusterops_checkpoint")  # as roles/checkpoint_tool installs it
    shutil.copytree(LIBRARY, tool, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(REPO, "roles", "checkpoint_tool", "files", "__main__.py"), tool)  # as the role does
    run_dir, events, log = tmp_path / "run", tmp_path / "events.jsonl", tmp_path / "trainer.log"
    rng = random.Random(5)
    proc = _trainer(run_dir, events, log, "--total-steps", "160")
    prunes = deleted = 0
    try:
        deadline = time.time() + 240
        while proc.poll() is None and time.time() < deadline:
            if os.path.isdir(str(run_dir)):
                deleted += _one_prune(run_dir, tool, rng)
                prunes += 1
            time.sleep(rng.random() * 0.1)
    finally:
        if proc.poll() is None:
            _kill_all(proc)
    assert proc.wait(60) == 0, log.read_text()[-3000:]  # every save committed: no staging folder vanished
    assert _saves(events)[-1] == 160
    final = ck.latest_valid(str(run_dir), "sha256")
    assert final.name == "step_000000160" and ck.inspect(str(run_dir)).finished["step"] == 160
    assert prunes >= 10 and deleted >= 10, (prunes, deleted)
    deleted += _one_prune(run_dir, tool, rng)
    assert [c.step for c in ck.scan(str(run_dir))] == [155, 160]


@pytest.mark.skipif(not os.path.exists(TRAINER), reason="no reference trainer")
def test_prune_after_the_trainer_is_killed_keeps_its_resume_point(tmp_path):
    pytest.importorskip("torch")
    run_dir, events, log = tmp_path / "run", tmp_path / "events.jsonl", tmp_path / "trainer.log"
    proc = _trainer(run_dir, events, log, "--total-steps", "1000")
    try:
        deadline = time.time() + 180
        while len(_saves(events)) < 4 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(random.Random(7).random() * 0.3)
    finally:
        assert len(_kill_all(proc)) == 2 or proc.returncode is not None
    time.sleep(0.5)
    saved = _saves(events)
    assert len(saved) >= 4, log.read_text()[-3000:]
    resume = ck.latest_valid(str(run_dir))
    assert resume.step in (saved[-1], saved[-1] + 5)  # a commit may beat its event to the kill
    result = ck.prune(str(run_dir), keep_last=1, tmp_grace=0)  # even with no grace at all
    assert result.error is None and result.latest_valid == resume.name
    assert [c.name for c in ck.scan(str(run_dir))] == [resume.name]
    assert not any(n.startswith("tmp-") for n in entries(run_dir))  # the dead writer's staging is gone
    assert ck.latest_valid(str(run_dir)).name == resume.name  # nobody is writing any more
    # The trainer resumes from it.
    proc = _trainer(run_dir, events, log, "--total-steps", str(resume.step + 5), "--resume", resume.path)
    assert proc.wait(180) == 0, log.read_text()[-3000:]
    assert ck.latest_valid(str(run_dir), "sha256").step == resume.step + 5

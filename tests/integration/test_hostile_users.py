# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Hostile cluster users against remediation as root, on the dev cluster (docs/security.md).

Two real unprivileged users: clusterops-alice attacks with everything she can write (her run,
log and checkpoint folders, her own entries in a registry users may write), clusterops-bob just
trains. Their jobs are real sbatch jobs that fail (or hang) on the dev cluster; playbooks/remediate.yml
runs as root, as an operator runs it. Each attack must end with nothing written, read or deleted
outside what alice may touch herself and a clear reason in the report, and bob's run resubmitted
as bob all the same.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import time

import pytest

from conftest import ensure_user, run, shared_tmpdir, until
# The training-remediation helpers (one home): remediate.yml as an operator runs it, the summary.
from test_training_remediation import remediate, summary_line

ALICE, BOB = "clusterops-alice", "clusterops-bob"
VICTIM_TEXT = "root's own line\n"


def as_user(user, *cmd):
    return run(["runuser", "-u", user, "--"] + list(cmd))


def jobs_of(user, name):
    """[(job id, state)] of ``user``'s jobs named ``name``, from accounting (every state)."""
    out = run(["sacct", "-n", "-X", "-P", "-u", user, "--name", name, "-o", "JobIDRaw,State",
               "--starttime", "now-1hour"]).stdout
    return [tuple(line.split("|")[:2]) for line in out.splitlines() if line.strip()]


def launcher(path, name, logs, body):
    """A launcher as the role writes it: root's, mode 0755, in root's registry folder (or the user's own)."""
    with open(path, "w") as handle:
        handle.write("#!/bin/bash\n#SBATCH --job-name=%s\n#SBATCH --output=%s/%s-%%j.out\n#SBATCH --nodes=1\n"
                     "#SBATCH --time=3\n#SBATCH --chdir=/tmp\n%s\n" % (name, logs, name, body))
    os.chmod(path, 0o755)


def user_folder(arena, user, *parts):
    """A folder under the user's own folder, created as that user."""
    path = os.path.join(arena["base"], user, *parts)
    as_user(user, "mkdir", "-p", path)
    return path


def register(registry, name, owner, folders, writer=None, **fields):
    """run.json of ``name`` in ``registry``; ``writer`` given: the file and folder are that user's (a
    registry users may write), else root's, as the module training_run writes them."""
    folder = os.path.join(registry, name)
    os.makedirs(folder, exist_ok=True)
    spec = dict({"format": "clusterops.training_run", "format_version": 1, "name": name, "owner": owner,
                 "launcher": os.path.join(folder, "launcher.sbatch"), "checkpoint_dir": folders["ckpt"],
                 "log_dir": folders["logs"], "max_resubmissions": 3}, **fields)
    path = os.path.join(folder, "run.json")
    with open(path, "w") as handle:
        json.dump(spec, handle)
    os.chmod(path, 0o644)
    os.chmod(folder, 0o755)
    if writer:
        uid = pwd.getpwnam(writer).pw_uid
        for entry in (folder, path):
            os.chown(entry, uid, -1)
    return folder


@pytest.fixture(scope="module")
def arena(cluster):
    for user in (ALICE, BOB):
        ensure_user(user)
    base = shared_tmpdir("clusterops-hostile-")
    os.chmod(base, 0o755)
    for user in (ALICE, BOB):
        os.mkdir(os.path.join(base, user))
        os.chown(os.path.join(base, user), pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    victim = os.path.join(base, "victim")     # stands for /root/.ssh/authorized_keys, /etc/shadow ...
    with open(victim, "w") as handle:
        handle.write(VICTIM_TEXT)
    os.chmod(victim, 0o600)
    registry, open_registry = os.path.join(base, "registry"), os.path.join(base, "open-registry")
    os.mkdir(registry, 0o755)
    os.mkdir(open_registry)
    os.chmod(open_registry, 0o1777)            # a registry users may write: each writes their own entry
    yield {"base": base, "victim": victim, "registry": registry, "open": open_registry, "tag": time.strftime("%H%M%S")}
    for user in (ALICE, BOB):
        run(["scancel", "--quiet", "-u", user], check=False)
    shutil.rmtree(base, ignore_errors=True)


def test_alices_attacks_change_nothing_of_anyone_else_and_bobs_run_is_remediated(arena):
    tag, reg = arena["tag"], arena["registry"]
    names = dict((k, "%s-%s" % (k, tag)) for k in ("bob-ok", "a-swap", "a-junk", "a-hang"))
    folders = {}
    for key, name in names.items():
        owner = BOB if key.startswith("bob") else ALICE
        folders[key] = {"ckpt": user_folder(arena, owner, key, "ckpt"), "logs": user_folder(arena, owner, key, "logs")}
    as_user(BOB, "sh", "-c", "echo bob > %s/notes.txt" % folders["bob-ok"]["ckpt"])
    for key, name in names.items():
        owner = BOB if key.startswith("bob") else ALICE
        extra = {}
        if key == "a-junk":
            extra = {"progress": "heartbeat", "heartbeat_file": os.path.join(folders[key]["ckpt"], "heartbeat.json")}
        if key == "a-hang":
            extra = {"hang_timeout": 5, "progress": "log", "py_spy": "/bin/false"}
        folder = register(reg, name, owner, folders[key], **extra)
        body = "exit 1" if key != "a-hang" else "export RANK=0\nsleep 600"
        launcher(os.path.join(folder, "launcher.sbatch"), name, folders[key]["logs"], body)
        as_user(owner, "sbatch", "--quiet", os.path.join(folder, "launcher.sbatch"))
    until(lambda: all(jobs_of(BOB if k.startswith("bob") else ALICE, n) and
                      jobs_of(BOB if k.startswith("bob") else ALICE, n)[-1][1] == ("RUNNING" if k == "a-hang" else "FAILED")
                      for k, n in names.items()), "the first jobs to fail (and the hanging one to run)", 90)
    hang_job = jobs_of(ALICE, names["a-hang"])[-1][0]

    # alice swaps her checkpoint folder for a link to bob's
    swap = folders["a-swap"]["ckpt"]
    as_user(ALICE, "mv", swap, swap + ".old")
    as_user(ALICE, "ln", "-s", folders["bob-ok"]["ckpt"], swap)
    # a FINISHED marker nested 100,000 deep, a heartbeat that is a FIFO
    junk = folders["a-junk"]["ckpt"]
    as_user(ALICE, "python3", "-c", "open('%s/FINISHED', 'w').write('[' * 100000)" % junk)
    as_user(ALICE, "mkfifo", os.path.join(junk, "heartbeat.json"))
    # links named like the coming hang evidence (every second of the next 3 minutes) to root's file,
    # and a job log that links to it
    logs = folders["a-hang"]["logs"]
    now = int(time.time())
    for second in range(now, now + 180):
        as_user(ALICE, "ln", "-s", arena["victim"], os.path.join(logs, "hang-%s-%s.txt" % (
            hang_job, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second)))))
    as_user(ALICE, "ln", "-s", arena["victim"], os.path.join(logs, "%s-%s-n9.out" % (names["a-hang"], hang_job)))
    time.sleep(6)   # past hang_timeout since the job's start: the log has not moved

    proc, dummy = remediate(reg, "-e", "remediate_training_hang_cancel_wait=60", needs_human=True)

    # bob's run: resubmitted as bob, once
    until(lambda: len(jobs_of(BOB, names["bob-ok"])) == 2, "bob's resubmitted job in accounting", 30)
    assert "resubmit (job" in summary_line(proc, names["bob-ok"])
    # the swap: refused with the reason; bob's folder as it was
    line = summary_line(proc, names["a-swap"])
    assert "resolves to %s" % folders["bob-ok"]["ckpt"] in line and "[needs a human]" in line
    assert sorted(os.listdir(folders["bob-ok"]["ckpt"])) == ["notes.txt"]
    assert len(jobs_of(ALICE, names["a-swap"])) == 1
    # the junk: read without blocking or crashing (a marker that cannot be read still marks finished)
    assert "finished" in summary_line(proc, names["a-junk"])
    # the hang: evidence written as alice under a name of its own, root's file untouched and unread
    with open(arena["victim"]) as handle:
        assert handle.read() == VICTIM_TEXT
    written = [p for p in glob.glob(os.path.join(logs, "hang-%s-*" % hang_job)) if not os.path.islink(p)]
    assert len(written) == 1, sorted(os.listdir(logs))
    assert os.stat(written[0]).st_uid == pwd.getpwnam(ALICE).pw_uid
    with open(written[0]) as handle:
        text = handle.read()
    assert VICTIM_TEXT.strip() not in text and "py-spy failed" in text
    assert "cancel_hung (evidence %s)" % written[0] in summary_line(proc, names["a-hang"])


def test_entries_users_write_bind_their_writer(arena):
    """In a registry users may write (sticky): alice's own entry is remediated as alice; one naming bob
    (with her launcher) or root, with a state.json of the wrong shape, or whose run.json is a FIFO or
    64 MiB, is refused for a human, alone."""
    tag, reg = arena["tag"], arena["open"]
    names = dict((k, "%s-%s" % (k, tag)) for k in ("own", "forge", "as-root", "badstate", "fifo", "huge"))
    for key, name in names.items():
        folders = {"ckpt": user_folder(arena, ALICE, "open", key, "ckpt"),
                   "logs": user_folder(arena, ALICE, "open", key, "logs")}
        owner = {"forge": BOB, "as-root": "root"}.get(key, ALICE)
        script = os.path.join(arena["base"], ALICE, "open", key, "launcher.sbatch")
        launcher(script, name, folders["logs"], "exit 1")
        os.chown(script, pwd.getpwnam(ALICE).pw_uid, -1)
        folder = register(reg, name, owner, folders, writer=ALICE, launcher=script)
        if key == "badstate":
            with open(os.path.join(folder, "state.json"), "w") as handle:
                handle.write('{"format": "clusterops.training_state", "resubmissions": ["x"]}')
            os.chown(os.path.join(folder, "state.json"), pwd.getpwnam(ALICE).pw_uid, -1)
        if key in ("fifo", "huge"):   # a run.json that would block a reader, one of 64 MiB (sparse)
            spec = os.path.join(folder, "run.json")
            os.unlink(spec)
            as_user(ALICE, "mkfifo", spec) if key == "fifo" else as_user(ALICE, "truncate", "-s", "64M", spec)
        if key in ("own", "badstate"):
            as_user(ALICE, "sbatch", "--quiet", script)
    until(lambda: all(jobs_of(ALICE, names[k]) and jobs_of(ALICE, names[k])[-1][1] == "FAILED"
                      for k in ("own", "badstate")), "alice's jobs to fail", 90)

    proc, dummy = remediate(reg, needs_human=True)

    until(lambda: len(jobs_of(ALICE, names["own"])) == 2, "alice's resubmitted job in accounting", 30)
    assert "resubmit (job" in summary_line(proc, names["own"])
    assert jobs_of(BOB, names["forge"]) == [] and jobs_of("root", names["forge"]) == []
    forge = summary_line(proc, names["forge"])
    assert "registry entry unusable" in forge and "the run's owner %s" % BOB in forge
    assert "owner root is root" in summary_line(proc, names["as-root"])
    bad = summary_line(proc, names["badstate"])
    assert "resubmissions[0] is not an object" in bad and "[needs a human]" in bad
    assert len(jobs_of(ALICE, names["badstate"])) == 1
    assert "not a regular file" in summary_line(proc, names["fifo"])
    assert "larger than" in summary_line(proc, names["huge"])

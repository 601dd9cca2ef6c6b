# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_job and slurm_job_info against the real dev cluster: submit once, check mode, cancel,
hold/release/requeue, a job Slurm held itself after a prolog failure, a job on a crashed node,
submitting as another user, and sbatch answers lost on the way back (a proxy in front of
slurmctld)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from conftest import (
    REPO,
    SLURM_CONF,
    cluster_name,
    ensure_user,
    make,
    module,
    run,
    scontrol,
    sdiag_rpc_counts,
    shared_tmpdir,
    slurm_env,
    until,
    wait_for,
)

sys.path.insert(0, os.path.join(REPO, "dev", "cluster"))
import ctld_proxy  # noqa: E402  pylint: disable=wrong-import-position

_COLLECTIONS = os.path.join(REPO, ".collections")
if not os.path.exists(os.path.join(_COLLECTIONS, "ansible_collections", "clusterops", "slurm")):
    os.makedirs(os.path.join(_COLLECTIONS, "ansible_collections", "clusterops"), exist_ok=True)
    os.symlink(REPO, os.path.join(_COLLECTIONS, "ansible_collections", "clusterops", "slurm"))
if _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)

from ansible_collections.clusterops.slurm.plugins.module_utils._job_actions import (  # noqa: E402
    parse_sbatch_output,
)

PREFIX = "clusterops-it-"
ALICE = "clusterops-alice"
SLEEP = "#!/bin/sh\nsleep 600\n"


def job_name(what):
    return "%s%s-%s" % (PREFIX, what, uuid.uuid4().hex[:6])


def squeue(name=None, job_id=None):
    """[{id, name, user, state, reason}] straight from squeue (every state)."""
    cmd = ["squeue", "-h", "--states=all", "-o", "%i|%j|%u|%T|%r"]
    if name:
        cmd += ["-n", name]
    if job_id:
        cmd += ["-j", str(job_id)]
    out = run(cmd, check=False).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) == 5:
            rows.append(dict(zip(("id", "name", "user", "state", "reason"), parts)))
    return rows


def wait_job(predicate, what, name=None, job_id=None, timeout=90):
    deadline = time.time() + timeout
    rows = None
    while time.time() < deadline:
        rows = squeue(name, job_id)
        if predicate(rows):
            return rows
        time.sleep(0.5)
    raise AssertionError("timed out after %ss waiting for %s; squeue: %s" % (timeout, what, rows))


def cancel_ours():
    for row in squeue():
        if row["name"].startswith(PREFIX) and row["state"] not in (
                "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"):
            run(["scancel", row["id"]], check=False)


@pytest.fixture()
def jobs(healthy):
    """A cluster in service; every job these tests submitted is cancelled afterwards."""
    yield healthy
    cancel_ours()


def accounted_steps(job_id):
    """The step names (batch, 0, 1, ...) Slurm's accounting holds for a job that ended FAILED
    (``sacct -P -o JobID,State``), or an empty set while the job's end is not recorded yet."""
    out = run(["sacct", "-n", "-P", "-j", job_id, "-o", "JobID,State"], check=False).stdout
    rows = [line.split("|") for line in out.splitlines() if line.count("|") == 1]
    if not any(jid == job_id and state == "FAILED" for jid, state in rows):
        return set()
    return {jid.split(".", 1)[1] for jid, state in rows if jid.startswith(job_id + ".") and state != "RUNNING"}


def submit_args(name, **extra):
    args = {"name": name, "script_content": SLEEP, "output": "/dev/null", "chdir": "/tmp"}
    args.update(extra)
    return args


def module_as(user, name, args, check_mode=False):
    """Run a module as ``user``: see conftest.module()."""
    return module(name, args, check_mode=check_mode, become_user=user)


@pytest.mark.every_release
def test_submit_twice_gives_one_job(jobs):
    name = job_name("twice")
    rc, first = module("clusterops.slurm.slurm_job", submit_args(name, key="run-1"))
    assert rc == 0 and first["changed"] and first["submitted"], first
    assert isinstance(first["job_id"], int)
    assert first["command"][1:3] == ["--parsable", "--job-name=" + name]
    rc, second = module("clusterops.slurm.slurm_job", submit_args(name, key="run-1"))
    assert rc == 0 and not second["changed"] and not second["submitted"], second
    assert second["job_id"] == first["job_id"]
    assert second["job"]["comment"] == "clusterops-key=run-1"
    assert [c[0].rsplit("/", 1)[1] for c in second["commands"]] == ["squeue"]
    assert len(squeue(name)) == 1
    # another key is another identity
    rc, third = module("clusterops.slurm.slurm_job", submit_args(name, key="run-2"))
    assert rc == 0 and third["changed"] and third["job_id"] != first["job_id"]
    assert len(squeue(name)) == 2


@pytest.mark.every_release
def test_check_mode_submits_nothing(jobs):
    name = job_name("check")
    before = sdiag_rpc_counts().get("REQUEST_SUBMIT_BATCH_JOB", 0)
    rc, result = module("clusterops.slurm.slurm_job",
                        submit_args(name, partition="train", nodes="1", time="5"), check_mode=True)
    assert rc == 0 and result["changed"] and not result["submitted"], result
    assert result["job_id"] is None
    assert result["command"][0].endswith("sbatch")
    assert result["command"][1:] == ["--parsable", "--job-name=" + name, "--partition=train",
                                     "--nodes=1", "--time=5", "--output=/dev/null", "--chdir=/tmp"]
    assert squeue(name) == []
    assert sdiag_rpc_counts().get("REQUEST_SUBMIT_BATCH_JOB", 0) == before


@pytest.mark.every_release
def test_cancel_then_cancel_again_is_no_change(jobs):
    name = job_name("cancel")
    rc, submitted = module("clusterops.slurm.slurm_job", submit_args(name))
    assert rc == 0
    rc, result = module("clusterops.slurm.slurm_job", {"name": name, "state": "absent"})
    assert rc == 0 and result["changed"], result
    assert result["job_ids"] == [str(submitted["job_id"])]
    assert result["command"][0].endswith("scancel")
    wait_job(lambda rows: [r["state"] for r in rows] == ["CANCELLED"], "the job cancelled", name)
    rc, again = module("clusterops.slurm.slurm_job", {"name": name, "state": "absent"})
    assert rc == 0 and not again["changed"] and again["command"] is None, again
    # by id too
    rc, again = module("clusterops.slurm.slurm_job",
                       {"job_id": str(submitted["job_id"]), "state": "absent"})
    assert rc == 0 and not again["changed"]
    deadline = time.time() + 120  # a poll of Slurm's record: ends when sacct has it
    while True:   # "CANCELLED by 0" comes from sacct, which gets the record 1-2.5 s later (more when busy)
        rc, info = module("clusterops.slurm.slurm_job_info", {"job_ids": [str(submitted["job_id"])]})
        assert rc == 0
        (job,) = info["jobs"]
        if job["cancelled_by"] is not None or time.time() > deadline:
            break
        time.sleep(1)
    assert job["state"] == "CANCELLED" and job["cancelled_by"] == 0 and not job["active"], job


@pytest.mark.every_release
def test_hold_release_requeue(jobs):
    name = job_name("hold")
    rc, submitted = module("clusterops.slurm.slurm_job",
                           submit_args(name, extra_args=["--begin=now+1hour"]))
    assert rc == 0
    job_id = str(submitted["job_id"])
    for state, changed in (("held", True), ("held", False), ("released", True), ("released", False)):
        rc, result = module("clusterops.slurm.slurm_job", {"name": name, "state": state})
        assert rc == 0 and result["changed"] is changed, (state, result)
    # released: pending again for its begin time (the reason is "None" until the scheduler ran)
    wait_job(lambda rows: [(r["state"], r["reason"]) for r in rows] == [("PENDING", "BeginTime")],
             "the job waiting for its begin time again", name)
    # a pending job is requeued already
    rc, result = module("clusterops.slurm.slurm_job", {"job_id": job_id, "state": "requeued"})
    assert rc == 0 and not result["changed"]
    # a running one is requeued, once
    name = job_name("requeue")
    rc, submitted = module("clusterops.slurm.slurm_job", submit_args(name))
    wait_job(lambda rows: [r["state"] for r in rows] == ["RUNNING"], "the job running", name)
    rc, result = module("clusterops.slurm.slurm_job", {"name": name, "state": "requeued"})
    assert rc == 0 and result["changed"], result
    assert result["command"][1:] == ["requeue", str(submitted["job_id"])]
    wait_job(lambda rows: [r["state"] for r in rows] == ["PENDING"], "the job requeued", name)
    rc, result = module("clusterops.slurm.slurm_job", {"name": name, "state": "requeued"})
    assert rc == 0 and not result["changed"]
    # a running job is held too: it keeps running, and stays pending when requeued
    name = job_name("hold-running")
    module("clusterops.slurm.slurm_job", submit_args(name))
    wait_job(lambda rows: [r["state"] for r in rows] == ["RUNNING"], "the job running", name)
    for state, changed in (("held", True), ("held", False)):
        rc, result = module("clusterops.slurm.slurm_job", {"name": name, "state": state})
        assert rc == 0 and result["changed"] is changed, (state, result)
    assert [(r["state"], r["reason"]) for r in squeue(name)] == [("RUNNING", "JobHeldAdmin")]
    rc, result = module("clusterops.slurm.slurm_job", {"name": name, "state": "requeued"})
    assert rc == 0 and result["changed"]
    wait_job(lambda rows: [(r["state"], r["reason"]) for r in rows] == [("PENDING", "JobHeldAdmin")],
             "the job requeued and still held", name)


@pytest.mark.every_release
def test_job_held_by_slurm_after_a_prolog_failure(jobs):
    """A prolog that fails on the job's node: Slurm drains the node, requeues the job and holds
    it ("launch failed requeued held"). slurm_job_info says held by Slurm, present submits no
    copy, held is no change, released releases it (then it only waits for its begin time)."""
    name = job_name("prolog")
    make("cluster-prolog-fail", NODE="n2")
    try:
        rc, submitted = module("clusterops.slurm.slurm_job", submit_args(name, extra_args=["--nodelist=n2"]))
        assert rc == 0, submitted
        job_id = submitted["job_id"]
        # Slurm writes the reason while the failed launch is still COMPLETING (a loaded machine
        # reads it there): wait for the requeue itself, the job PENDING again.
        rows = wait_job(lambda rows: len(rows) == 1 and "held" in rows[0]["reason"]
                        and rows[0]["state"] == "PENDING", "Slurm holding the job", name, timeout=180)
        assert [(r["state"], r["reason"]) for r in rows] == [("PENDING", "launch failed requeued held")]
        rc, info = module("clusterops.slurm.slurm_job_info", {"names": [name], "accounting": False})
        assert rc == 0, info
        (job,) = info["jobs"]
        assert (job["state"], job["active"], job["held"], job["held_by"], job["state_known"]) == (
            "PENDING", True, True, "slurm", True), job
        rc, again = module("clusterops.slurm.slurm_job", submit_args(name, extra_args=["--nodelist=n2"]))
        assert rc == 0 and not again["changed"] and again["job_id"] == job_id, again
        rc, held = module("clusterops.slurm.slurm_job", {"name": name, "state": "held"})
        assert rc == 0 and not held["changed"], held
    finally:
        make("cluster-prolog-ok", NODE="n2")
        scontrol("update", "NodeName=n2", "State=RESUME")
    rc, released = module("clusterops.slurm.slurm_job", {"name": name, "state": "released"})
    assert rc == 0 and released["changed"], released
    assert released["command"][1:] == ["release", str(job_id)]
    # no longer held: PENDING for the begin time Slurm gives a requeued job (BeginTime), or running
    wait_job(lambda rows: len(rows) == 1 and "held" not in rows[0]["reason"].lower()
             and rows[0]["state"] in ("PENDING", "RUNNING"), "the job released", name, timeout=30)
    rc, again = module("clusterops.slurm.slurm_job", {"name": name, "state": "released"})
    assert rc == 0 and not again["changed"], again


@pytest.mark.every_release
def test_job_on_crashed_node_is_node_fail_and_requeued(jobs):
    name = job_name("crash")
    rc, submitted = module("clusterops.slurm.slurm_job",
                           submit_args(name, key="k1", extra_args=["--nodelist=n2"]))
    assert rc == 0
    job_id = submitted["job_id"]
    wait_job(lambda rows: [r["state"] for r in rows] == ["RUNNING"], "the job running", name)
    try:
        make("cluster-crash", NODE="n2")
        wait_for(lambda ns: ns["n2"]["base"] == "DOWN", "n2 DOWN", timeout=90)
        wait_job(lambda rows: [r["state"] for r in rows] == ["PENDING"], "Slurm requeued the job",
                 name, timeout=60)
        deadline = time.time() + 120  # a poll of Slurm's record: ends when sacct has it
        while True:   # sacct gets the records 1-2.5 s later (more when busy)
            rc, info = module("clusterops.slurm.slurm_job_info", {"names": [name]})
            assert rc == 0, info
            if info["jobs"] and info["jobs"][0]["history"] or time.time() > deadline:
                break
            time.sleep(1)
        (job,) = info["jobs"]
        assert job["job_id_raw"] == job_id
        assert job["state"] == "PENDING" and job["active"] and job["requeued"], job
        assert job["restart_count"] == 1
        assert [(h["state"], h["nodes"]) for h in job["history"]] == [("NODE_FAIL", ["n2"])]
        rc, nf = module("clusterops.slurm.slurm_job_info", {"names": [name], "states": ["NODE_FAIL"]})
        assert rc == 0 and nf["jobs"] == []   # the current state is PENDING, not NODE_FAIL
        # the restart logic must not resubmit it: present finds it
        rc, again = module("clusterops.slurm.slurm_job", submit_args(name, key="k1"))
        assert rc == 0 and not again["changed"] and again["job_id"] == job_id, again
        assert len(squeue(name)) == 1
    finally:
        make("cluster-poweron", NODE="n2")
        wait_for(lambda ns: "NOT_RESPONDING" not in ns["n2"]["flags"], "n2 answering", timeout=60)
        scontrol("update", "NodeName=n2", "State=RESUME")


@pytest.mark.every_release
def test_submit_as_another_user_with_become(jobs):
    ensure_user(ALICE)
    name = job_name("alice")
    args = submit_args(name, slurm_conf=SLURM_CONF)
    try:
        rc, first = module_as(ALICE, "clusterops.slurm.slurm_job", args)
        assert rc == 0 and first["changed"], first
        (row,) = squeue(name)
        assert row["user"] == ALICE
        rc, second = module_as(ALICE, "clusterops.slurm.slurm_job", args)
        assert rc == 0 and not second["changed"] and second["job_id"] == first["job_id"], second
        assert second["job"]["user"] == ALICE
        # root submitting the same name is another identity (user is part of it)
        rc, result = module("clusterops.slurm.slurm_job", dict(args, user=ALICE))
        assert rc != 0 and "use become_user" in result["msg"]
        rc, info = module("clusterops.slurm.slurm_job_info", {"users": [ALICE], "names": [name]})
        assert rc == 0 and [j["user"] for j in info["jobs"]] == [ALICE]
        rc, cancelled = module_as(ALICE, "clusterops.slurm.slurm_job",
                                  {"name": name, "state": "absent", "slurm_conf": SLURM_CONF})
        assert rc == 0 and cancelled["changed"], cancelled
    finally:
        run(["scancel", "--quiet", "-u", ALICE], check=False)


@pytest.fixture()
def proxy_conf():
    """start(mode, skip, count) -> (proxy, slurm.conf via a proxy in front of slurmctld)."""
    started = []
    folder = shared_tmpdir("clusterops-proxy-")  # the module reads the proxy's slurm.conf

    def start(mode, skip=0, count=1):
        proxy = ctld_proxy.CtldProxy(ctld_proxy.slurmctld_port(SLURM_CONF), mode, count, skip).start()
        started.append(proxy)
        return proxy, ctld_proxy.conf_via_proxy(SLURM_CONF, proxy.port, folder, message_timeout=3)

    yield start
    for proxy in started:
        proxy.close()
    subprocess.call(["rm", "-rf", folder])


@pytest.mark.every_release
def test_sbatch_answer_lost_after_the_job_was_created_gives_one_job(jobs, proxy_conf):
    proxy, conf = proxy_conf("drop-reply")   # sbatch's request reaches slurmctld, its answer is lost
    name = job_name("lost-answer")
    rc, result = module("clusterops.slurm.slurm_job",
                        submit_args(name, slurm_conf=conf, retry_delay=1, submit_retries=2))
    assert rc == 0, result
    assert result["changed"] and result["recovered"] and result["attempts"] == 1, result
    assert [m for t, m in proxy.log if t == ctld_proxy.REQUEST_SUBMIT_BATCH_JOB] == ["drop-reply"]
    assert [c[0].rsplit("/", 1)[1] for c in result["commands"]] == ["squeue", "sbatch", "squeue"]
    rows = squeue(name)
    assert len(rows) == 1 and rows[0]["id"] == str(result["job_id"])
    assert len(result["errors"]) == 1 and "Socket timed out on send/recv operation" in result["errors"][0]
    assert [w for w in result["warnings"] if w.startswith("sbatch attempt 1: ")], result


def test_sbatch_request_lost_is_submitted_again_once(jobs, proxy_conf):
    proxy, conf = proxy_conf("swallow")   # sbatch's request never reaches slurmctld
    name = job_name("lost-request")
    rc, result = module("clusterops.slurm.slurm_job",
                        submit_args(name, slurm_conf=conf, retry_delay=1, submit_retries=2))
    assert rc == 0, result
    assert result["changed"] and not result["recovered"] and result["attempts"] == 2, result
    assert [c[0].rsplit("/", 1)[1] for c in result["commands"]] == ["squeue", "sbatch", "squeue", "sbatch"]
    assert [m for t, m in proxy.log if t == ctld_proxy.REQUEST_SUBMIT_BATCH_JOB] == ["swallow", "pass"]
    assert len(squeue(name)) == 1


@pytest.mark.every_release
def test_controller_unreachable_fails_without_submitting(jobs):
    closed = ctld_proxy.CtldProxy(ctld_proxy.slurmctld_port(SLURM_CONF), "pass")
    closed.close()   # a port nothing listens on
    folder = shared_tmpdir("clusterops-closed-")
    try:
        conf = ctld_proxy.conf_via_proxy(SLURM_CONF, closed.port, folder, message_timeout=2)
        name = job_name("unreachable")
        rc, result = module("clusterops.slurm.slurm_job",
                            submit_args(name, slurm_conf=conf, retry_delay=0, submit_retries=1))
        assert rc != 0
        assert "squeue" in result["msg"] or "Unable to contact" in result["msg"], result
        assert squeue(name) == []
    finally:
        subprocess.call(["rm", "-rf", folder])


def test_job_info_finished_job_steps_and_exit_codes(jobs):
    name = job_name("steps")
    script = "#!/bin/sh\nsrun -N2 true\nsrun -N1 sh -c 'exit 3'\nexit 2\n"
    rc, submitted = module("clusterops.slurm.slurm_job",
                           submit_args(name, script_content=script, nodes="2"))
    assert rc == 0
    job_id = str(submitted["job_id"])
    # Slurm's own record first: slurmdbd writes the job's end and its steps some seconds after
    # the job ends, later on a loaded machine; then the module reads what is there.
    until(lambda: accounted_steps(job_id) >= {"batch", "0", "1"}, "sacct recording the job's 3 steps", timeout=180)
    rc, info = module("clusterops.slurm.slurm_job_info", {"job_ids": [job_id]})
    assert rc == 0, info
    job = info["jobs"][0] if info["jobs"] else None
    assert job["state"] == "FAILED" and job["exit_code"] == 2 and job["signal"] == 0, job
    assert len(info["jobs"]) == 1   # steps are never jobs
    steps = dict((s["step_id"], s) for s in job["steps"])
    # no .extern step: the dev cluster has no PrologFlags=Contain
    assert set(steps) == {"batch", "0", "1"}, sorted(steps)
    assert steps["1"]["exit_code"] == 3 and steps["1"]["state"] == "FAILED"
    assert steps["0"]["state"] == "COMPLETED" and len(steps["0"]["nodes"]) == 2
    assert job["node_list"] and len(job["nodes"]) == 2 and job["end_time"] >= job["start_time"]


def test_sbatch_parser_on_real_outputs(jobs):
    name = job_name("parser")
    base = ["-o", "/dev/null", "--chdir=/tmp", "-J", name, "--hold", "--wrap", "true"]
    forms = {
        "plain": ["sbatch"] + base,
        "parsable": ["sbatch", "--parsable"] + base,
        "on cluster": ["sbatch", "-M", cluster_name()] + base,
        "parsable on cluster": ["sbatch", "--parsable", "-M", cluster_name()] + base,
    }
    seen = {}
    for form, cmd in forms.items():
        proc = subprocess.run(cmd, cwd=REPO, env=slurm_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        seen[form] = parse_sbatch_output(proc.stdout, proc.stderr)
    ids = [job_id for job_id, dummy in seen.values()]
    assert sorted(ids) == sorted(int(r["id"]) for r in squeue(name))
    assert seen["plain"][1] is None and seen["parsable"][1] is None
    assert seen["on cluster"][1] == cluster_name() and seen["parsable on cluster"][1] == cluster_name()

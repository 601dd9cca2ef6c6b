# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training remediation end to end on the dev cluster, with real torch (CPU, gloo).

Each run is deployed by the role clusterops.slurm.torchrun_launcher (ansible-playbook), owned by
the user clusterops-alice, submitted by the role as alice, and trained by the reference trainer
under srun + torch.distributed.run on 2 nodes. Faults are real: a node powered off, a worker
killed, the time limit reached, checkpoints damaged on disk. playbooks/remediate.yml is run as an
operator would run it. The final parameters are compared bit for bit with an uninterrupted run of
the same seed (a local torch.distributed.run of the same world size, 2).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import (INVENTORY, REPO, SLURM_CONF, TEST_STARTED, attempts, cluster_info, ensure_user, is_healthy,
                      job_venv, make, playbook, read_events, reset_cluster, run, shared_tmpdir, slurm_env, until,
                      wait_for)

torch = pytest.importorskip("torch")

ALICE = "clusterops-alice"
TRAINER = os.path.join(REPO, "roles", "torchrun_launcher", "files", "reference_trainer.py")
# The venv the jobs activate: the repo's on the host (22.05), the container's on 24.11/26.05.
VENV = job_venv(os.path.dirname(os.path.dirname(sys.executable)))
STEPS, EVERY = 60, 10
TRAIN_ARGS = ["--total-steps", str(STEPS), "--checkpoint-every", str(EVERY), "--seed", "7"]
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
          "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"}


# ---- helpers -------------------------------------------------------------------------------------

def squeue(name):
    """[(job id, state, node list)] of alice's jobs named ``name`` the controller knows."""
    out = run(["squeue", "-h", "--states=all", "-n", name, "-u", ALICE, "-o", "%i|%T|%N"]).stdout
    return [tuple(line.split("|")) for line in out.splitlines() if line.strip()]


def active_jobs(name):
    return [row for row in squeue(name) if row[1] in ACTIVE]


def sacct_state(job_id):
    out = run(["sacct", "-n", "-X", "-P", "-j", str(job_id), "-o", "State"]).stdout.split()
    return out[0] if out else None


def saved_steps(run_dir):
    return [e["step"] for e in read_events(run_dir) if e["event"] == "save"]


def final_params(ckpt_dir):
    with open(os.path.join(ckpt_dir, "FINISHED")) as handle:
        name = json.load(handle)["checkpoint"]
    return torch.load(os.path.join(ckpt_dir, os.path.basename(name), "model.pt"), map_location="cpu",
                      weights_only=True)


def assert_bitwise_equal(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        assert torch.equal(a[key], b[key]), "parameter %s differs" % key


def remediate(registry, *extra, **kw):
    """Run remediate.yml; ``needs_human=True`` expects the play to fail saying so (an AWX job in red)."""
    needs_human = kw.pop("needs_human", False)
    proc, recap = playbook(os.path.join(REPO, "playbooks", "remediate.yml"),
                           "-e", "remediate_training_registry=%s" % registry,
                           "-e", "remediate_nodes_max_percent=50", *extra, check=False)
    assert recap.get("failed") == (1 if needs_human else 0), proc.stdout
    assert ("Remediation needs a human:" in proc.stdout) == needs_human, proc.stdout
    return proc, recap


def prometheus(path):
    """{metric: value} of a textfile-collector file (one cluster: its cluster label dropped)."""
    with open(path) as handle:
        return dict((line.split()[0].split("{")[0], float(line.split()[1])) for line in handle
                    if line.strip() and not line.startswith("#"))


def only(name):
    """Extra vars limiting remediation's training part to run ``name``."""
    return ["-e", json.dumps({"remediate_training_runs": [name]})]


def summary_line(proc, name):
    lines = [line.strip().strip('",') for line in proc.stdout.splitlines()
             if line.strip().startswith('"%s: ' % name)]
    assert lines, "no summary line for %s in:\n%s" % (name, proc.stdout)
    return lines[-1]


class ActiveJobWatcher(threading.Thread):
    """Samples squeue every 0.3 s: the most jobs of one run active at the same moment."""

    def __init__(self, name):
        super(ActiveJobWatcher, self).__init__(daemon=True)
        self.name, self.most, self.seen, self.stop = name, 0, set(), threading.Event()

    def run(self):
        while not self.stop.is_set():
            rows = active_jobs(self.name)
            self.most = max(self.most, len(rows))
            self.seen.update(r[0] for r in rows)
            time.sleep(0.3)


# ---- fixtures ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def world(cluster):
    """A folder alice can write to, with the registry, the tools and the runs' folders."""
    ensure_user(ALICE)
    container = cluster_info().get("container")
    python = os.path.join(VENV, "bin", "python") if container else sys.executable
    as_alice = ["podman", "exec", "--user", ALICE, container] if container else ["runuser", "-u", ALICE, "--"]
    probe = run(as_alice + [python, "-c", "import torch"], check=False)
    if probe.returncode != 0:
        pytest.fail("%s cannot run %s with torch (%s): the training jobs run as that user; build the "
                    "venv from a python every user can run (make venv uses /usr/bin/python3)"
                    % (ALICE, python, probe.stdout.strip()[-200:]))
    # Under the container's shared folder on 24.11/26.05 (same path inside and out), else in /tmp.
    base = shared_tmpdir("clusterops-e2e-")
    os.chmod(base, 0o755)
    # Run names are unique to this session: jobs of earlier sessions stay in sacct for days.
    tag = time.strftime("%H%M%S")
    yield {"base": base, "registry": os.path.join(base, "registry"), "tools": os.path.join(base, "tools"),
           "tag": tag}
    run(["scancel", "--quiet", "-u", ALICE], check=False)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture()
def clean(world, cluster):
    run(["scancel", "--quiet", "-u", ALICE], check=False)
    until(lambda: not run(["squeue", "-h", "-u", ALICE]).stdout.strip(), "alice's jobs to end", 60)
    reset_cluster()
    # a node history of the test's own, as conftest.healthy gives: the heals and the reboots remediation waits
    # for of earlier tests do not count (remediate_nodes_heal_since)
    TEST_STARTED[0] = time.time()
    return world


@pytest.fixture(scope="module")
def reference(world):
    """Final parameters of an uninterrupted run with the same seed and world size (2), run where
    the jobs run, with their torch: on the host (22.05), else inside the container with its venv
    (a bitwise comparison across two torch builds would be meaningless)."""
    run_dir = os.path.join(world["base"], "reference")
    env = slurm_env()
    env.pop("SLURM_CONF", None)
    container = cluster_info().get("container")
    python = [os.path.join(VENV, "bin", "python")] if container else [sys.executable]
    prefix = ["podman", "exec", container] if container else []
    proc = subprocess.run(prefix + python + ["-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                                             "--nproc_per_node", "2", TRAINER, "--checkpoint-dir",
                                             run_dir] + TRAIN_ARGS,
                          check=False, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300)
    assert proc.returncode == 0, "the reference run failed:\n%s" % proc.stdout[-3000:]
    return final_params(run_dir)


def deploy(world, name, step_time=0.25, train_args=None, submit=True, **role_vars):
    """Deploy run ``name`` with the role (and submit its first job as alice). Returns its folders."""
    name = "%s-%s" % (name, world["tag"])
    workdir = os.path.join(world["base"], name)
    ckpt_dir = os.path.join(workdir, "checkpoints")
    variables = {
        "torchrun_launcher_run_name": name,
        "torchrun_launcher_owner": ALICE,
        "torchrun_launcher_registry_dir": world["registry"],
        "torchrun_launcher_tool_dir": world["tools"],
        "torchrun_launcher_install_reference_trainer": True,
        "torchrun_launcher_workdir": workdir,
        "torchrun_launcher_checkpoint_dir": ckpt_dir,
        "torchrun_launcher_nodes": 2,
        "torchrun_launcher_time": "10",
        "torchrun_launcher_env_activation": "venv",
        "torchrun_launcher_venv": VENV,
        "torchrun_launcher_python": "python",
        "torchrun_launcher_program": os.path.join(world["tools"], "reference_trainer.py"),
        "torchrun_launcher_program_args": ["--checkpoint-dir", ckpt_dir, "--events",
                                           os.path.join(ckpt_dir, "events.jsonl"),
                                           "--step-time", str(step_time)] + (train_args or TRAIN_ARGS),
        "torchrun_launcher_submit": submit,
        "ansible_become_method": "su",
    }
    variables.update(role_vars)
    path = os.path.join(world["base"], "deploy-%s.yml" % name)
    with open(path, "w") as handle:
        handle.write("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                     "    - ansible.builtin.include_role:\n        name: clusterops.slurm.torchrun_launcher\n")
    vars_path = os.path.join(world["base"], "deploy-%s.json" % name)
    with open(vars_path, "w") as handle:
        json.dump(variables, handle)
    proc, recap = playbook(path, "-e", "@" + vars_path, "-e", "slurm_conf=%s" % SLURM_CONF)
    assert recap.get("failed") == 0, proc.stdout
    return {"workdir": workdir, "ckpt": ckpt_dir, "name": name}


def node_list(job_id):
    out = run(["squeue", "-h", "-j", str(job_id), "-o", "%N"]).stdout.strip()
    return run(["scontrol", "show", "hostnames", out]).stdout.split()


def running_with_checkpoint(r, min_step=EVERY):
    rows = active_jobs(r["name"])
    if len(rows) == 1 and rows[0][1] == "RUNNING" and any(s >= min_step for s in saved_steps(r["ckpt"])):
        return rows[0][0]
    return None


def running_job(r):
    """The id of run ``r``'s one job when Slurm says it is RUNNING, else None."""
    rows = active_jobs(r["name"])
    return rows[0][0] if len(rows) == 1 and rows[0][1] == "RUNNING" else None


def wait_running_with_checkpoint(r, min_step=EVERY, what="a running job with a checkpoint", stall=120,
                                 interval=0.5):
    """The id of run ``r``'s RUNNING job once it saved a checkpoint of step ``min_step`` or later.

    Waits on the records of what it waits for, not on a fixed time: Slurm's (squeue: the job
    started, up to 300 s on a loaded machine), then the trainer's own events file, for as long as
    it keeps writing (the wait fails after ``stall`` s without a new event, or after 900 s in all).
    A busy machine makes each step slower, never a stalled run look alive."""
    until(lambda: running_job(r), "Slurm to start a job of %s" % r["name"], 300)
    deadline, seen, moved = time.time() + 900, -1, time.time()
    while True:
        job = running_with_checkpoint(r, min_step)
        if job:
            return job
        count = len(read_events(r["ckpt"]))
        if count != seen:
            seen, moved = count, time.time()
        if time.time() - moved > stall or time.time() > deadline:
            raise TimeoutError("timed out waiting for %s of %s: %d trainer events, none new for %.0f s; squeue %s"
                               % (what, r["name"], count, time.time() - moved, squeue(r["name"])))
        time.sleep(interval)


def power_on_after_reboot_issued(node):
    """What a BMC does: the node comes back a few seconds after Slurm asked for the reboot."""
    wait_for(lambda ns: "REBOOT_ISSUED" in ns[node]["flags"] or is_healthy(ns[node]),
             "%s's reboot to be issued" % node, timeout=60)
    time.sleep(3)
    make("cluster-poweron", NODE=node)


# ---- tests ---------------------------------------------------------------------------------------

@pytest.mark.every_release
def test_node_crash_resumes_from_the_newest_checkpoint_and_matches_an_uninterrupted_run(clean, reference):
    r = deploy(clean, "e2e-crash")
    watcher = ActiveJobWatcher(r["name"])
    watcher.start()
    try:
        first = wait_running_with_checkpoint(r)
        victim = node_list(first)[-1]
        make("cluster-crash", NODE=victim)
        until(lambda: sacct_state(first) == "NODE_FAIL", "job %s to end NODE_FAIL" % first, 120)
        prom = os.path.join(clean["base"], "remediate.prom")
        proc, recap = remediate(clean["registry"], "-e", "remediate_prometheus_textfile=%s" % prom)
        line = summary_line(proc, r["name"])
        assert "-> resubmit (job " in line and "ended NODE_FAIL" in line, line
        assert recap["changed"] >= 2, proc.stdout  # the node reboot and the resubmission
        metrics = prometheus(prom)
        # the victim's reboot is requested, not healed yet (issue 37)
        assert (metrics["clusterops_remediate_nodes_healed"], metrics["clusterops_remediate_nodes_reboot_requested"]) \
            == (0, 1)
        assert metrics["clusterops_remediate_runs_resubmitted"] == 1
        assert metrics["clusterops_remediate_needs_human"] == 0
        power_on_after_reboot_issued(victim)
        until(lambda: os.path.exists(os.path.join(r["ckpt"], "FINISHED")), "the run to finish", 300)
        until(lambda: not active_jobs(r["name"]), "the job to leave the queue", 60)
    finally:
        watcher.stop.set()
        watcher.join()
    assert watcher.most == 1, "more than one job of the run was active at once"
    assert len(watcher.seen) == 2, watcher.seen
    assert_bitwise_equal(final_params(r["ckpt"]), reference)

    tries = attempts(read_events(r["ckpt"]))
    assert len(tries) == 2
    last_before = max(e["step"] for e in tries[0] if e["event"] == "step")
    resumed = tries[1][0]["step"]
    lost = last_before - resumed
    assert 0 <= lost <= EVERY, (last_before, resumed)
    steps = [e["step"] for e in tries[1] if e["event"] == "step"]
    assert steps == list(range(resumed + 1, STEPS + 1)), "a step was skipped or counted twice"

    # Healed and finished: a second run changes nothing.
    wait_for(lambda ns: all(is_healthy(v) for v in ns.values()), "every node in service", 120)
    proc, recap = remediate(clean["registry"], *only(r["name"]))
    assert recap["changed"] == 0, proc.stdout
    assert "%s: finished" % r["name"] in summary_line(proc, r["name"])


def test_slurm_requeue_means_remediation_submits_nothing(clean):
    r = deploy(clean, "e2e-requeue", torchrun_launcher_requeue=True)
    first = wait_running_with_checkpoint(r)
    victim = node_list(first)[-1]
    make("cluster-crash", NODE=victim)

    def requeued():
        rows = squeue(r["name"])
        return rows and rows[0][0] == first and rows[0][1] == "PENDING"
    until(requeued, "Slurm to requeue job %s by itself" % first, 120)
    proc, dummy = remediate(clean["registry"], *only(r["name"]))
    line = summary_line(proc, r["name"])
    assert "-> none" in line and "Slurm requeued it itself" in line, line
    assert [row[0] for row in squeue(r["name"])] == [first], "remediation submitted a second job"
    power_on_after_reboot_issued(victim)


@pytest.mark.every_release
def test_expedited_requeue_starts_the_job_again_at_once(clean):
    """Issue 23 part 4: with torchrun_launcher_requeue_expedite the launcher asks for --requeue=expedite. After
    a node failure Slurm requeues the job and starts it again at once on the other nodes, where an ordinary
    requeue waits requeue_delay (cred_expire, 120 s); no remediation runs. Slurm 25.05 and later only."""
    if "enable_expedited_requeue" not in run(["scontrol", "show", "config"]).stdout:
        pytest.skip("expedited requeue is Slurm 25.05 and later (the dev cluster sets "
                    "SlurmctldParameters=enable_expedited_requeue where slurmctld has it): untested here")
    r = deploy(clean, "e2e-expedite", torchrun_launcher_requeue=True, torchrun_launcher_requeue_expedite=True)
    with open(os.path.join(clean["registry"], r["name"], "launcher.sbatch")) as handle:
        assert "#SBATCH --requeue=expedite\n" in handle.read()
    first = wait_running_with_checkpoint(r)
    victim = node_list(first)[-1]
    make("cluster-crash", NODE=victim)

    def restarted():
        """Slurm's own record of the job once it requeued it and started it again (polling its state misses
        the requeue: the job is RUNNING again within the same second)."""
        job = dict(t.split("=", 1) for t in run(["scontrol", "show", "job", str(first)]).stdout.split() if "=" in t)
        started = job.get("JobState") not in (None, "PENDING") and job.get("StartTime", "Unknown") != "Unknown"
        return job if int(job.get("Restarts", "0")) >= 1 and started else None
    job = until(restarted, "Slurm to requeue job %s and start it again" % first, 180, interval=0.5)
    when = {k: datetime.datetime.fromisoformat(job[k]) for k in ("SubmitTime", "EligibleTime", "StartTime")}
    again = (when["StartTime"] - when["SubmitTime"]).total_seconds()  # SubmitTime: the requeue's time
    assert job.get("ExpeditedRequeue") == "Yes", job
    assert when["EligibleTime"] == when["SubmitTime"], "held for requeue_delay: %s" % job
    assert again < 60, "requeued job started again after %.0f s: not expedited" % again
    assert victim not in run(["scontrol", "show", "hostnames", job["NodeList"]]).stdout.split(), job
    assert [row[0] for row in squeue(r["name"])] == [first], "a second job appeared"
    until(lambda: len(attempts(read_events(r["ckpt"]))) >= 2, "the trainer to start again", 120)
    tries = attempts(read_events(r["ckpt"]))
    saved = max(e["step"] for e in tries[0] if e["event"] == "save")
    assert tries[1][0]["step"] == saved, "did not resume from the newest checkpoint %d" % saved
    print("expedited requeue: job %s requeued at %s, running again on %s %.0f s later" % (
        first, job["SubmitTime"], job["NodeList"], again))
    make("cluster-poweron", NODE=victim)


def test_time_limit_saves_on_usr1_and_loses_no_step(clean):
    # --time=2 (minutes), USR1 60 s before the limit. slurmctld checks every 30 s and sends the
    # signal up to 30 s early, so it arrives 30-60 s after the start: after the trainer installed
    # its handler. (A signal that comes while the workers still start is ignored: they inherit
    # the agent's SIG_IGN until their handler is in place.)
    r = deploy(clean, "e2e-timelimit", step_time=0.3, torchrun_launcher_time="2",
               torchrun_launcher_signal_seconds=60,
               train_args=["--total-steps", "1000", "--checkpoint-every", "100", "--seed", "7"])
    first = until(lambda: (active_jobs(r["name"]) or [[None]])[0][0], "the job to be queued", 30)
    until(lambda: sacct_state(first) == "TIMEOUT", "job %s to end TIMEOUT" % first, 240, interval=2)
    attempt = attempts(read_events(r["ckpt"]))[0]
    usr1 = [e for e in attempt if e["event"] == "save" and e["why"] == "usr1"]
    assert usr1, attempt[-5:]
    last_step = max(e["step"] for e in attempt if e["event"] == "step")
    assert usr1[-1]["step"] == last_step, "steps after the USR1 checkpoint were lost"

    proc, recap = remediate(clean["registry"], *only(r["name"]))
    assert "ended TIMEOUT" in summary_line(proc, r["name"]) and recap["changed"] >= 1
    until(lambda: len(attempts(read_events(r["ckpt"]))) == 2 and any(
        e["event"] == "step" for e in attempts(read_events(r["ckpt"]))[1]), "the resubmitted job to train", 120)
    second = attempts(read_events(r["ckpt"]))[1]
    assert second[0]["step"] == last_step, "did not resume from the USR1 checkpoint"
    assert [e["step"] for e in second if e["event"] == "step"][0] == last_step + 1
    run(["scancel", "--quiet", "-n", r["name"], "-u", ALICE], check=False)


def test_damaged_checkpoints_resume_from_the_previous_valid_one(clean, reference):
    r = deploy(clean, "e2e-damaged")
    first = wait_running_with_checkpoint(r, 4 * EVERY, "four checkpoints", interval=0.2)
    # A worker dies (like a GPU fault): torchrun exits non-zero, srun --kill-on-bad-exit ends the step.
    out = run(["pgrep", "-f", "reference_trainer.py.*%s" % r["ckpt"]], check=False).stdout.split()
    assert out, "no trainer process found"
    os.kill(int(out[-1]), signal.SIGKILL)
    until(lambda: sacct_state(first) == "FAILED", "job %s to end FAILED" % first, 90)
    steps = sorted(s for s in saved_steps(r["ckpt"]))
    newest, second, third = ["step_%09d" % s for s in (steps[-1], steps[-2], steps[-3])]
    # newest: a file cut short; the one before: no manifest; plus a staging folder left over.
    model = os.path.join(r["ckpt"], newest, "model.pt")
    with open(model, "r+b") as handle:
        handle.truncate(os.path.getsize(model) // 2)
    os.unlink(os.path.join(r["ckpt"], second, "manifest.json"))
    os.makedirs(os.path.join(r["ckpt"], "tmp-step_%09d.999.deadbeef" % (steps[-1] + EVERY)))

    proc, dummy = remediate(clean["registry"], *only(r["name"]))
    line = summary_line(proc, r["name"])
    assert "newest valid step %d -> resubmit" % steps[-3] in line, line
    until(lambda: os.path.exists(os.path.join(r["ckpt"], "FINISHED")), "the run to finish", 300)
    tries = attempts(read_events(r["ckpt"]))
    assert tries[-1][0]["step"] == steps[-3], "did not resume from %s" % third
    assert_bitwise_equal(final_params(r["ckpt"]), reference)


@pytest.mark.parametrize("loss", ["newest deleted", "run folder lost whole", "replication killed mid-copy",
                                  "replica file system full"])
def test_checkpoints_lost_after_replication_resume_from_the_replica(clean, reference, loss, request):
    """Issue 27: after replication (as alice, the cron entry's command) the run folder loses its newest checkpoint,
    or the whole folder; or a first replication is killed mid-copy and run again. Remediation and the launcher resume
    from the replica's verified copy (read in place), never from a partial one, and the run ends bitwise equal to an
    uninterrupted one."""
    replica = os.path.join(clean["base"], "replica-%s-%d" % (clean["tag"], len(loss)))
    os.makedirs(replica)
    if loss == "replica file system full":  # room for one checkpoint of the reference trainer (93 kB), not two
        run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", replica])
        request.addfinalizer(lambda: run(["umount", "--lazy", replica], check=False))
        # The nodes run in private mount namespaces (a release's in its container) made when they start: they
        # see the new file system once started anew, as a real node sees a file system mounted before its boot.
        make("cluster-down")
        make("cluster-up")
        reset_cluster()
    container = cluster_info().get("container")
    run(["chown", ALICE, replica])
    r = deploy(clean, "e2e-replica-%d" % len(loss), torchrun_launcher_checkpoint_replicas=[replica])
    first = wait_running_with_checkpoint(r, 3 * EVERY, "three checkpoints", interval=0.2)
    out = run(["pgrep", "-f", "reference_trainer.py.*%s" % r["ckpt"]], check=False).stdout.split()
    assert out, "no trainer process found"
    os.kill(int(out[-1]), signal.SIGKILL)  # a worker dies: the job ends FAILED
    until(lambda: sacct_state(first) == "FAILED", "job %s to end FAILED" % first, 90)
    as_alice = ["podman", "exec", "--user", ALICE, container] if container else ["runuser", "-u", ALICE, "--"]
    replicate = as_alice + ["/usr/bin/python3", os.path.join(clean["tools"], "clusterops_checkpoint"), "replicate",
                            r["ckpt"], replica, "--keep-last", "2", "--json"]
    newest = max(saved_steps(r["ckpt"]))
    if loss == "replication killed mid-copy":
        slow = subprocess.Popen(replicate[:-1] + ["--bwlimit", "512", "--quiet"])  # 512 bytes a second
        until(lambda: any(n.startswith("tmp-replica-") for n in os.listdir(replica)), "a copy being made", 30)
        run(["pkill", "-KILL", "-u", ALICE, "-f", "clusterops_checkpoint replicate"], check=False)
        slow.wait(timeout=30)
        assert run(["/usr/bin/python3", os.path.join(clean["tools"], "clusterops_checkpoint"), "latest", r["ckpt"],
                    "--replica", replica]).stdout.strip().startswith(r["ckpt"]), "a partial copy was chosen"
    if loss == "replica file system full":  # the newest copied, the next one refused: an error, nothing partial left
        full = run(replicate, check=False)
        result = json.JSONDecoder().raw_decode(full.stdout)[0]  # then the error line (stderr, merged)
        assert full.returncode == 2 and "the replica's file system is full" in result["error"], full.stdout
        assert [c["step"] for c in result["copied"]] == [newest], full.stdout
        assert not [n for n in os.listdir(replica) if n.startswith("tmp-")], os.listdir(replica)
    else:
        copied = json.loads(run(replicate).stdout)
        assert copied["copied"][0]["step"] == newest and copied["lag"]["checkpoints_behind"] == 0, copied
    if loss == "run folder lost whole":
        shutil.rmtree(r["ckpt"])
    else:
        shutil.rmtree(os.path.join(r["ckpt"], "step_%09d" % newest))

    proc, dummy = remediate(clean["registry"], *only(r["name"]))
    line = summary_line(proc, r["name"])
    assert "newest valid step %d -> resubmit" % newest in line, line
    until(lambda: os.path.exists(os.path.join(r["ckpt"], "FINISHED")), "the run to finish", 300)
    tries = attempts(read_events(r["ckpt"]))
    assert tries[-1][0]["step"] == newest, "did not resume from the replica's step %d" % newest
    assert_bitwise_equal(final_params(r["ckpt"]), reference)


def test_a_node_crash_resumes_the_run_through_slurms_events_alone(clean, reference):
    """Issue 23: no schedule runs. slurmctld's trigger (the role slurm_events, put on the dev cluster by
    dev/cluster/eventpath.py as `make events-up` does) sends the node_down event to the collection's rulebook on the real
    ansible-rulebook, which runs remediate.yml: the node is rebooted through Slurm, the run resubmitted, and it
    resumes from its newest checkpoint. Prints each phase's time."""
    if cluster_info().get("container"):
        pytest.skip("on the host's release in make test (CI's time); dev/cluster/eventpath.py serves every release")
    sys.path.insert(0, os.path.join(REPO, "dev", "cluster"))
    import eventpath as events  # pylint: disable=import-outside-toplevel
    r = deploy(clean, "e2e-event")
    events.up({"remediate_training_registry": clean["registry"], "remediate_nodes_max_percent": 50,
               "remediate_nodes_heal_since": int(time.time())})
    try:
        first = wait_running_with_checkpoint(r)
        victim = node_list(first)[-1]
        crashed = time.time()
        make("cluster-crash", NODE=victim)
        wait_for(lambda ns: ns[victim]["base"] == "DOWN", "%s marked DOWN" % victim, 180, interval=0.5)
        down = time.time()
        power_on_after_reboot_issued(victim)  # the BMC, once remediation (started by the event) asked for it
        until(lambda: len(active_jobs(r["name"])) == 1 and active_jobs(r["name"])[0][0] != first,
              "the run resubmitted by the event's remediation", 120)
        resubmitted = time.time()
        until(lambda: os.path.exists(os.path.join(r["ckpt"], "FINISHED")), "the run to finish", 300)
        took = [e for e in events.accepted() if e["kind"] == "node_down" and victim in e["subject"]]
    finally:
        events.down()
    assert took, "no node_down event of %s reached the rulebook" % victim
    tries = attempts(read_events(r["ckpt"]))
    assert len(tries) == 2, tries
    saved = max(e["step"] for e in tries[0] if e["event"] == "save")
    assert tries[1][0]["step"] == saved, "did not resume from the newest checkpoint %d" % saved
    first_step = min(e["time"] for e in tries[1] if e["event"] == "step")
    phases = (down - crashed, took[0]["received"] - down, resubmitted - down, first_step - down, first_step - crashed)
    print("event path: crash to DOWN %.1f s, DOWN to the event %.1f s, to the resubmission seen %.1f s, to the first "
          "new step %.1f s; crash to training again %.1f s" % phases)
    assert_bitwise_equal(final_params(r["ckpt"]), reference)


def test_cancelled_run_is_never_resubmitted(clean):
    r = deploy(clean, "e2e-cancel")
    first = until(lambda: (active_jobs(r["name"]) or [[None]])[0][0], "the job to be queued", 30)
    run(["runuser", "-u", ALICE, "--", "scancel", first])
    until(lambda: sacct_state(first) == "CANCELLED", "the job to be cancelled", 60)
    for dummy in range(2):
        proc, recap = remediate(clean["registry"], *only(r["name"]))
        line = summary_line(proc, r["name"])
        assert "cancelled" in line and "never resubmitted" in line and "-> none" in line, line
        assert recap["changed"] == 0
    assert [row[0] for row in squeue(r["name"])] == [first], "remediation submitted a job"


def test_budget_and_no_progress_stop_the_run_with_a_clear_report(clean):
    # A program that fails at once: every job ends FAILED without a checkpoint.
    # A program that fails everywhere would make its nodes suspect (test_training_suspect.py):
    # these runs opt out, the budgets are what is tested here.
    r = deploy(clean, "e2e-budget", torchrun_launcher_python="/bin/false",
               torchrun_launcher_max_resubmissions=5, torchrun_launcher_no_progress_limit=2,
               torchrun_launcher_suspect_nodes=False)
    runs = [*only(r["name"])]
    submitted = []
    for attempt in range(3):
        job = until(lambda: (squeue(r["name"]) or [[None]])[-1][0], "a job", 30)
        until(lambda: sacct_state(job) == "FAILED", "job %s to fail" % job, 60)
        proc, recap = remediate(clean["registry"], *runs, needs_human=attempt == 2)
        line = summary_line(proc, r["name"])
        submitted.append(line)
        if attempt < 2:
            assert "-> resubmit (job " in line, line
            until(lambda: squeue(r["name"]) and squeue(r["name"])[-1][0] != job, "the new job", 30)
    assert "-> stop" in submitted[-1] and "no progress" in submitted[-1] and "needs a human" in submitted[-1]
    proc, recap = remediate(clean["registry"], *runs, needs_human=True)
    line = summary_line(proc, r["name"])
    assert "stopped" in line and "needs a human" in line and recap["changed"] == 0, line

    # The budget: one resubmission allowed, no progress check.
    b = deploy(clean, "e2e-budget1", torchrun_launcher_python="/bin/false",
               torchrun_launcher_max_resubmissions=1, torchrun_launcher_no_progress_limit=0,
               torchrun_launcher_suspect_nodes=False)
    runs = only(b["name"])
    for attempt in range(2):
        job = until(lambda: (squeue(b["name"]) or [[None]])[-1][0], "a job", 30)
        until(lambda: sacct_state(job) == "FAILED", "job %s to fail" % job, 60)
        proc, recap = remediate(clean["registry"], *runs, needs_human=attempt == 1)
        if attempt == 0:
            until(lambda: squeue(b["name"]) and squeue(b["name"])[-1][0] != job, "the new job", 30)
    line = summary_line(proc, b["name"])
    assert "budget of 1 resubmission(s) is used up" in line and "-> stop" in line, line


def test_overlapping_remediations_submit_once(clean):
    # A run whose first job failed; then its launcher is fixed (a real trainer, slow steps).
    r = deploy(clean, "e2e-overlap", torchrun_launcher_python="/bin/false")
    first = until(lambda: (squeue(r["name"]) or [[None]])[-1][0], "a job", 30)
    until(lambda: sacct_state(first) == "FAILED", "job %s to fail" % first, 60)
    deploy(clean, "e2e-overlap", step_time=1.0, submit=False)
    # A busy controller: every Slurm command answers 3 s late, so both remediations below are
    # inside their read-decide-submit at the same time.
    slow = os.path.join(clean["base"], "slow-slurm")
    os.makedirs(slow, exist_ok=True)
    for name in ("sacct", "squeue", "sbatch"):
        path = os.path.join(slow, name)
        with open(path, "w") as handle:
            handle.write('#!/bin/sh\nsleep 3\nexec %s "$@"\n' % shutil.which(name, path="/usr/bin:/usr/local/bin"))
        os.chmod(path, 0o755)
    # Two remediations at once (AWX schedules overlap): the registry lock lets one decide and
    # submit; the other then sees the new job active.
    cmd = ["ansible", "-i", INVENTORY, "localhost",
           "-m", "clusterops.slurm.training_remediation",
           "-a", json.dumps({"registry": clean["registry"], "runs": [r["name"]], "slurm_bin_dir": slow,
                             "slurm_conf": SLURM_CONF})]
    procs = [subprocess.Popen(cmd, cwd=REPO, env=slurm_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True) for dummy in range(2)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    assert sum('"resubmitted": [\n        "%s"' % r["name"] in out for out in outputs) == 1, outputs
    assert sum('is RUNNING: nothing to do' in out or 'is PENDING: nothing to do' in out
               for out in outputs) == 1, outputs
    jobs = [row[0] for row in squeue(r["name"]) if int(row[0]) > int(first)]
    assert len(jobs) == 1, squeue(r["name"])
    run(["scancel", "--quiet", "-n", r["name"], "-u", ALICE], check=False)

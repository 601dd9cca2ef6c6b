# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Slurm's node events out on the dev cluster (issue 23, part 1): the role clusterops.slurm.slurm_events sets
its permanent triggers (idempotent, check mode, state absent clears exactly its own), a node crashes for real,
slurmctld runs the trigger program, and the signed event reaches the collection's source plugin (run here,
outside ansible-rulebook: tests/events runs it inside) within SlurmdTimeout plus the 15 s trigger interval."""

from __future__ import annotations

import asyncio
import glob
import importlib.machinery
import importlib.util
import json
import os
import socket
import threading
import time

from conftest import REPO, SLURM_CONF, STATE_DIR, make, playbook, reset_cluster, run, shared_tmpdir, until, wait_for

SECRET = "0123456789abcdef0123456789abcdef"
PLUGIN = os.path.join(REPO, "extensions", "eda", "plugins", "event_source", "slurm_events.py")


def load_source():
    loader = importlib.machinery.SourceFileLoader("slurm_events_source", PLUGIN)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class Receiver(object):
    """The source plugin's listener on a free port of 127.0.0.1 (the release's container shares the host's
    network); ``events`` is what it accepted, with the time each arrived."""

    def __init__(self):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.events = []
        source = load_source()
        outer = self

        class Queue(asyncio.Queue):
            async def put(self, item):
                outer.events.append((time.time(), item["slurm_event"]))

        self.loop = asyncio.new_event_loop()

        def serve():
            asyncio.set_event_loop(self.loop)
            self.task = self.loop.create_task(source.main(Queue(), {"secret": SECRET, "port": self.port}))
            try:
                self.loop.run_until_complete(self.task)
            except asyncio.CancelledError:
                pass

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        until(self.listens, "the receiver to listen", 15)

    def listens(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def stop(self):
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(10)


def slurmd_timeout():
    with open(SLURM_CONF) as handle:
        for line in handle:
            if line.strip().lower().startswith("slurmdtimeout="):
                return int(line.split("=", 1)[1].split()[0])
    return 300


def ours(folder):
    listed = run(["strigger", "--get"]).stdout
    return sorted(line.split()[3] for line in listed.splitlines()[1:] if folder in line and " PERM " in line)


# On the host's release in make test (CI's time): 24.11 and 26.05 were run by hand (SLURM=24.11/26.05, docs/events.md).
def test_a_crashed_node_reaches_the_receiver_through_slurms_trigger(healthy):
    receiver = Receiver()
    folder = shared_tmpdir("clusterops-events-")  # the same path in a release's container
    os.chmod(folder, 0o755)
    libexec = os.path.join(folder, "libexec")
    play = os.path.join(folder, "events.yml")
    variables = {"slurm_events_url": "http://127.0.0.1:%d/events" % receiver.port, "slurm_events_secret": SECRET,
                 "slurm_events_secret_file": os.path.join(folder, "secret"), "slurm_events_dir": libexec,
                 "slurm_events_config": os.path.join(folder, "event.json"),
                 "slurm_events_log_dir": os.path.join(folder, "log")}
    with open(play, "w") as handle:
        handle.write("- hosts: slurm_controller\n  gather_facts: false\n  roles:\n    - clusterops.slurm.slurm_events\n")
    try:
        proc, recap = playbook(play, "-e", json.dumps(variables), "--check", "--diff")
        assert recap.get("failed") == 0 and ours(libexec) == [], proc.stdout  # check mode sets nothing
        proc, recap = playbook(play, "-e", json.dumps(variables))
        assert recap.get("failed") == 0 and recap.get("changed", 0) > 0, proc.stdout
        assert ours(libexec) == ["down", "drained", "fail"]
        proc, recap = playbook(play, "-e", json.dumps(variables))
        assert recap.get("changed") == 0, proc.stdout  # idempotent

        victim = "n4"
        crashed = time.time()
        make("cluster-crash", NODE=victim)
        # Slurm's detection: SlurmdTimeout, then its next ping round.
        wait_for(lambda ns: ns[victim]["base"] == "DOWN", "%s marked DOWN" % victim, 3 * slurmd_timeout() + 60,
                 interval=0.5)
        down = time.time()
        got = until(lambda: [(t, e) for t, e in receiver.events if e["kind"] == "node_down" and victim in e["nodes"]],
                    "the node_down event of %s" % victim, 60, interval=0.2)
        arrived = got[0][0]
        print("crash to DOWN %.1f s (SlurmdTimeout %d s), DOWN to the event %.1f s (trigger interval 15 s)" % (
            down - crashed, slurmd_timeout(), arrived - down))
        assert arrived - down <= 15 + 2 + 1, "the event came %.1f s after Slurm marked the node DOWN" % (arrived - down)
        got = [got[0][1]]
        config = run(["scontrol", "show", "config"]).stdout
        assert got[0]["cluster"] == [line.split("=", 1)[1].strip() for line in config.splitlines()
                                     if line.startswith("ClusterName")][0]
        make("cluster-poweron", NODE=victim)
        reset_cluster()

        variables["slurm_events_state"] = "absent"
        proc, recap = playbook(play, "-e", json.dumps(variables))
        assert recap.get("failed") == 0 and recap.get("changed") == 1, proc.stdout  # the one trigger task
        assert ours(libexec) == []
    finally:
        receiver.stop()
        variables["slurm_events_state"] = "absent"
        playbook(play, "-e", json.dumps(variables), check=False)


def test_a_failed_job_reaches_the_receiver_through_epilog_slurmctld(healthy):
    """The end of a job: slurmctld runs EpilogSlurmctld at the end of every job; the dev cluster's calls the role's
    job-end program from <state dir>/events/libexec once it is there (slurm_events_job_end). A job that failed
    sends job_fini at once; one that completed sends nothing; with slurm_events_registry, a failed job that is not a
    registered run (its name, its user: SLURM_JOB_NAME and SLURM_JOB_USER as slurmctld sets them) sends nothing."""
    receiver = Receiver()
    events = os.path.join(STATE_DIR, "events-test")
    libexec = os.path.join(STATE_DIR, "events", "libexec")  # where the dev cluster's EpilogSlurmctld looks
    variables = {"slurm_events_url": "http://127.0.0.1:%d/events" % receiver.port, "slurm_events_secret": SECRET,
                 "slurm_events_secret_file": os.path.join(events, "secret"), "slurm_events_dir": libexec,
                 "slurm_events_config": os.path.join(events, "event.json"), "slurm_events_job_end": True,
                 "slurm_events_log_dir": os.path.join(events, "log"), "slurm_events_events": [],
                 "slurm_events_registry": os.path.join(events, "registry")}
    os.makedirs(os.path.join(events, "registry", "registered-fail"), mode=0o755, exist_ok=True)
    with open(os.path.join(events, "registry", "registered-fail", "run.json"), "w") as handle:
        json.dump({"format": "clusterops.training_run", "format_version": 1, "name": "registered-fail", "owner": "root"},
                  handle)  # who submits below: the registry file is the admin's, the job's user its owner
    play = os.path.join(events, "events.yml")
    with open(play, "w") as handle:
        handle.write("- hosts: slurm_controller\n  gather_facts: false\n  roles:\n    - clusterops.slurm.slurm_events\n")
    program = os.path.join(libexec, "clusterops-slurm-event-job_fini")
    try:
        proc, recap = playbook(play, "-e", json.dumps(variables))
        assert recap.get("failed") == 0 and os.access(program, os.X_OK), proc.stdout
        assert "set it to %s" % program in proc.stdout  # the role says what slurm.conf needs
        completed = run(["sbatch", "--parsable", "-J", "registered-fail", "-o", "/dev/null", "--wrap", "true"]).stdout.strip()
        other = run(["sbatch", "--parsable", "-J", "not-a-run", "-o", "/dev/null", "--wrap", "exit 3"]).stdout.strip()
        failed = run(["sbatch", "--parsable", "-J", "registered-fail", "-o", "/dev/null", "--wrap", "exit 3"]).stdout.strip()
        ended = until(lambda: [(t, e) for t, e in receiver.events if e["kind"] == "job_fini"], "the job_fini event", 60,
                      interval=0.2)
        time.sleep(2)  # the completed job and the other one, had they sent anything, would be here by now
        assert [e["job"] for t, e in receiver.events] == [int(failed)], (completed, other, receiver.events)
        logged = "".join(open(path, errors="replace").read()
                         for path in glob.glob(os.path.join(events, "log", "*", "slurm-event.log")))
        assert "cannot tell" not in logged, logged  # it read the registry: the other job was told apart, not lost
        print("job %s ended FAILED; its event came %.1f s after the program sent it" % (failed, ended[0][0] - ended[0][1]["time"]))
    finally:
        receiver.stop()
        if os.path.exists(program):
            os.unlink(program)  # later jobs' EpilogSlurmctld would send to a receiver that is gone

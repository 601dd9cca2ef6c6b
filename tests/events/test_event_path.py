# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The event path without a cluster (issue 23): slurmctld's trigger program (roles/slurm_events/files/
clusterops-slurm-event.py) signs and sends an event; the collection's source plugin
(extensions/eda/plugins/event_source/slurm_events.py) takes it or refuses it; the rulebook
(extensions/eda/rulebooks/slurm_events.yml) on the real ansible-rulebook (Drools on Java) runs the playbook
once per cluster for a burst. Run by ``make events`` with .venv-eda's Python (ansible-rulebook, aiohttp)."""

from __future__ import annotations

import asyncio
import importlib.machinery
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROGRAM = os.path.join(REPO, "roles", "slurm_events", "files", "clusterops-slurm-event.py")
PLUGIN = os.path.join(REPO, "extensions", "eda", "plugins", "event_source", "slurm_events.py")
RULEBOOK_FQCN = "clusterops.slurm.slurm_events"
BIN = os.path.dirname(sys.executable)
SECRET = b"0123456789abcdef0123456789abcdef"


def load(name, path):
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


sender = load("clusterops_slurm_event", PROGRAM)
source = load("slurm_events_source", PLUGIN)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Receiver(object):
    """The source plugin's ``main`` on a free port, in a thread of its own; ``events`` is what it queued."""

    def __init__(self, secret=SECRET):
        self.port = free_port()
        self.events = []
        self.loop = asyncio.new_event_loop()
        outer = self

        class Queue(asyncio.Queue):
            async def put(self, item):
                outer.events.append(item)

        def serve():
            asyncio.set_event_loop(self.loop)
            self.task = self.loop.create_task(source.main(Queue(), {"secret": secret.decode(), "port": self.port,
                                                                    "max_body": 4096}))
            try:
                self.loop.run_until_complete(self.task)
            except asyncio.CancelledError:
                pass

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        deadline = time.time() + 10
        while time.time() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("the source did not listen")

    def post(self, body, signature=None, path="/events", method="POST"):
        headers = {"Content-Type": "application/json"}
        if signature is not False:
            headers[source.SIGNATURE_HEADER] = signature or source.signature(SECRET, body)
        request = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=body if method == "POST"
                                         else None, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return answer.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def stop(self):
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(10)


@pytest.fixture
def receiver():
    rec = Receiver()
    yield rec
    rec.stop()


def event(**fields):
    base = dict(format="clusterops.slurm_event", format_version=1, kind="node_down", cluster="alpha", nodes="n[1-2]",
                job=None, time=1796534050.5, id="alpha-1")
    base.update(fields)
    return json.dumps(base).encode()


# ---- the trigger program ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind, subject, nodes, job", [
    ("node_down", "n[1-2]", "n[1-2]", None), ("node_drained", "gpu-a[001-128],gpu-b7", "gpu-a[001-128],gpu-b7", None),
    ("node_fail", "n3", "n3", None), ("job_fini", "4711", None, 4711)])
def test_the_program_builds_each_kind(kind, subject, nodes, job):
    body = json.loads(sender.event_body(kind, "alpha", subject, now=100.0))
    assert (body["kind"], body["nodes"], body["job"], body["cluster"], body["time"]) == (kind, nodes, job, "alpha", 100.0)
    assert source.parse_event(SECRET, json.dumps(body).encode(), source.signature(SECRET, json.dumps(body).encode()))


@pytest.mark.parametrize("kind, subject", [("job_fini", "n1"), ("job_fini", "0"), ("node_down", "n1; rm -rf /"),
                                           ("node_down", "$(id)"), ("node_fail", "")])
def test_the_program_refuses_what_is_no_hostlist_or_job_id(kind, subject):
    with pytest.raises(ValueError):
        sender.event_body(kind, "alpha", subject)


def test_the_kind_is_required(tmp_path):
    proc = subprocess.run([sys.executable, PROGRAM, "--config", config(tmp_path, 1), "n1"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2 and "--kind" in proc.stderr


def config(tmp_path, port, secret=SECRET, timeout=3):
    (tmp_path / "secret").write_bytes(secret + b"\n")
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"url": "http://127.0.0.1:%d/events" % port, "cluster": "alpha", "timeout": timeout,
                                "secret_file": str(tmp_path / "secret"), "log": str(tmp_path / "event.log")}))
    return str(path)


def run_program(cfg, kind, subject):
    """The program as a trigger's wrapper runs it (``--kind``, ``--config``, the node list or job id)."""
    return subprocess.run([sys.executable, PROGRAM, "--kind", kind, "--config", cfg, subject], capture_output=True,
                          text=True, timeout=30, check=False)


def test_the_program_sends_a_signed_event_the_source_takes(tmp_path, receiver):
    proc = run_program(config(tmp_path, receiver.port), "node_fail", "n[3-4]")
    assert proc.returncode == 0, proc.stderr
    assert [e["slurm_event"]["kind"] for e in receiver.events] == ["node_fail"]
    assert receiver.events[0]["slurm_event"]["nodes"] == "n[3-4]" and receiver.events[0]["slurm_event"]["cluster"] == "alpha"


def test_a_wrong_secret_is_refused_and_logged(tmp_path, receiver):
    proc = run_program(config(tmp_path, receiver.port, secret=b"another-secret-of-32-bytes-000000"), "node_down", "n1")
    assert proc.returncode == 1 and receiver.events == []
    assert "401" in (tmp_path / "event.log").read_text()


def test_the_program_gives_up_within_its_timeout_and_logs_the_event(tmp_path):
    """A receiver that accepts and never answers: slurmctld's trigger program must not hang on it."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(5)
        start = time.monotonic()
        proc = run_program(config(tmp_path, silent.getsockname()[1], timeout=1), "node_down", "n1")
        took = time.monotonic() - start
    assert proc.returncode == 1 and took < 5, took
    logged = (tmp_path / "event.log").read_text()
    assert "node_down n1: not sent" in logged and '"nodes": "n1"' in logged


def test_no_receiver_is_a_logged_failure_too(tmp_path):
    proc = run_program(config(tmp_path, free_port()), "job_fini", "42")
    assert proc.returncode == 1 and "job_fini 42: not sent" in (tmp_path / "event.log").read_text()


def test_as_epilog_slurmctld_it_sends_a_job_that_did_not_complete(tmp_path, receiver):
    """EpilogSlurmctld runs the job_fini wrapper with no argument and the job in its environment."""
    cfg = config(tmp_path, receiver.port)
    for code in ("0:0", "1:0", "0:9"):
        env = dict(os.environ, SLURM_JOB_ID="4242", SLURM_JOB_EXIT_CODE2=code)
        proc = subprocess.run([sys.executable, PROGRAM, "--kind", "job_fini", "--config", cfg], env=env,
                              capture_output=True, text=True, timeout=30, check=False)
        assert proc.returncode == 0, proc.stderr
    # 0:0 completed: nothing to remediate; 1:0 (exit 1) and 0:9 (SIGKILL) are sent.
    assert [(e["slurm_event"]["kind"], e["slurm_event"]["job"]) for e in receiver.events] == [("job_fini", 4242)] * 2


@pytest.mark.parametrize("kind, env", [("node_down", {"SLURM_JOB_ID": "7"}), ("job_fini", {}),
                                       ("job_fini", {"SLURM_JOB_ID": "7; reboot"})])
def test_without_a_subject_only_job_fini_takes_the_job_from_the_environment(tmp_path, kind, env):
    cfg = config(tmp_path, free_port())
    proc = subprocess.run([sys.executable, PROGRAM, "--kind", kind, "--config", cfg],
                          env=dict({k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}, **env),
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)


# ---- the source plugin --------------------------------------------------------------------------------

@pytest.mark.parametrize("body, signature, status", [
    (event(), None, 202),
    (event(kind="job_fini", nodes=None, job=7), None, 202),
    (event(), False, 401),
    (event(), "sha256=" + "0" * 64, 401),
    (event(kind="reboot"), None, 400),
    (event(cluster="../etc"), None, 400),
    (event(nodes="n1 n2"), None, 400),
    (event(job=5), None, 400),               # nodes and a job
    (event(nodes=None), None, 400),          # neither
    (event(format_version=2), None, 400),
    (event(time="now"), None, 400),
    (b"\xff\xfe not json", None, 400),
    (b"[]", None, 400),
    (b"x" * 5000, None, 413),
])
def test_the_source_takes_signed_events_and_refuses_the_rest(receiver, body, signature, status):
    assert receiver.post(body, signature) == status
    assert len(receiver.events) == (1 if status == 202 else 0)


def test_other_paths_and_methods_are_refused(receiver):
    assert receiver.post(event(), path="/") == 404
    assert receiver.post(event(), method="GET") == 405
    assert receiver.events == []


def test_an_unsigned_listener_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unsigned listener"):
        source.read_secret({})
    (tmp_path / "short").write_text("short\n")
    with pytest.raises(ValueError, match="shorter than 16"):
        source.read_secret({"secret_file": str(tmp_path / "short")})


# ---- the rulebook on ansible-rulebook -------------------------------------------------------------

def test_the_rulebook_runs_the_playbook_once_per_cluster_for_a_burst(tmp_path):
    """Three events of alpha within a second and one of beta run the playbook twice (one per cluster); a
    badly signed one of gamma none; an alpha event after the 10 s window runs it again."""
    port = free_port()
    (tmp_path / "secret").write_bytes(SECRET + b"\n")
    runs = tmp_path / "runs.jsonl"
    (tmp_path / "stub.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.copy:\n        dest: %s/run-{{ remediate_event.cluster }}-{{ 1000000 | random }}.json\n"
        "        content: '{{ remediate_event | to_json }}'\n" % tmp_path)
    (tmp_path / "inventory.yml").write_text(json.dumps({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    (tmp_path / "vars.yml").write_text(json.dumps({"slurm_events_port": port, "slurm_events_secret_file": str(
        tmp_path / "secret"), "slurm_events_playbook": str(tmp_path / "stub.yml")}))
    env = dict(os.environ, PATH="%s:%s" % (BIN, os.environ.get("PATH", "/usr/bin:/bin")),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    with open(str(tmp_path / "rulebook.log"), "w") as log:
        engine = subprocess.Popen([os.path.join(BIN, "ansible-rulebook"), "-r", RULEBOOK_FQCN, "-i",
                                   str(tmp_path / "inventory.yml"), "--vars", str(tmp_path / "vars.yml"), "-v"],
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while "slurm_events: listening" not in (tmp_path / "rulebook.log").read_text():
            assert engine.poll() is None and time.time() < deadline, (tmp_path / "rulebook.log").read_text()
            time.sleep(0.2)
        time.sleep(1)  # the rule engine connects after the source listens

        def send(cluster, secret=SECRET):
            body = event(cluster=cluster, id="%s-%f" % (cluster, time.time()))
            request = urllib.request.Request("http://127.0.0.1:%d/events" % port, data=body, method="POST", headers={
                source.SIGNATURE_HEADER: source.signature(secret, body)})
            try:
                with urllib.request.urlopen(request, timeout=5) as answer:
                    return answer.status
            except urllib.error.HTTPError as exc:
                return exc.code

        assert [send("alpha"), send("alpha"), send("beta"), send("alpha")] == [202] * 4
        assert send("gamma", secret=b"x" * 32) == 401

        def played(cluster):
            return sorted(p for p in os.listdir(str(tmp_path)) if p.startswith("run-%s-" % cluster))

        deadline = time.time() + 45
        while (len(played("alpha")), len(played("beta"))) != (1, 1):
            assert time.time() < deadline, (played("alpha"), played("beta"), (tmp_path / "rulebook.log").read_text())
            time.sleep(0.5)
        first = json.loads((tmp_path / played("alpha")[0]).read_text())
        assert (first["kind"], first["nodes"], first["cluster"]) == ("node_down", "n[1-2]", "alpha")
        time.sleep(11)  # past the window
        assert (len(played("alpha")), len(played("beta")), played("gamma")) == (1, 1, [])
        assert send("alpha") == 202
        deadline = time.time() + 45
        while len(played("alpha")) != 2:
            assert time.time() < deadline, (tmp_path / "rulebook.log").read_text()
            time.sleep(0.5)
    finally:
        engine.terminate()
        try:
            engine.wait(30)
        except subprocess.TimeoutExpired:
            engine.kill()

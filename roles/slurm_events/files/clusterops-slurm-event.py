# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""slurmctld's trigger program (strigger --program): send one Slurm event to the event receiver.

Installed by the role clusterops.slurm.slurm_events as ``<dir>/clusterops-slurm-event.py`` with one
wrapper per event kind, ``<dir>/clusterops-slurm-event-<kind>`` (node_down, node_drained, node_fail), which
runs it with ``--kind`` and ``--config``: slurmctld runs a trigger's program with the event's node list
(or job id) as its only argument. The wrapper ``clusterops-slurm-event-job_fini`` is slurmctld's
``EpilogSlurmctld`` (or is called from the site's own): slurmctld runs it, as SlurmUser, at the end of every
job with no argument and the job in its environment; ``SLURM_JOB_ID`` is the job, and a job whose
``SLURM_JOB_EXIT_CODE2`` is ``0:0`` (it completed: nothing to remediate) sends nothing.

    python3 clusterops-slurm-event.py --kind node_down --config /etc/clusterops/slurm-event.json 'n[1-2]'

It reads its configuration (JSON) from ``--config`` (default ``$CLUSTEROPS_SLURM_EVENT_CONFIG``, else
``/etc/clusterops/slurm-event.json``): ``url`` (the receiver, ``http://host:port/events``),
``cluster`` (this cluster's name), ``secret_file`` (the shared HMAC secret, first line), ``timeout``
(seconds for the whole send, default 3), ``log`` (a file for what could not be sent; default
``/var/log/clusterops/slurm-event.log``, rotated at 1 MiB, 3 kept), ``registry`` (optional: the run
registry; then ``job_fini`` is sent only for a job that is a registered training run, one whose
``SLURM_JOB_NAME`` has ``<registry>/<name>/run.json`` with ``SLURM_JOB_USER`` as its owner).

The body is one JSON object (format clusterops.slurm_event, version 1: kind, cluster, nodes or job,
time, id) signed with HMAC-SHA256 in ``X-Clusterops-Signature: sha256=<hex>``. Before the body, on the
same connection, the receiver proves that it holds the secret (``GET`` with a random challenge, answered
with its HMAC): a program that took the receiver's port gets nothing and the failure is logged. The
whole exchange (connect, both requests, both answers) has one deadline, ``timeout``, enforced by a
timer signal however slowly the peer trickles its answer: slurmctld never waits on the receiver. It
never retries (the next event, or the scheduled sweep, covers a lost one), and writes every failure
to the log with the event.

Exit status: 0 sent (the receiver answered 2xx), or nothing to send (a job that completed, or that is
no registered run); 1 not sent (logged); 2 a usage or configuration error (logged when the log can be
opened, else on stderr).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.client
import json
import logging
import logging.handlers
import os
import re
import secrets
import signal
import ssl
import stat
import sys
import time
import urllib.parse

KINDS = ("node_down", "node_drained", "node_fail", "job_fini")
PROGRAM = "clusterops-slurm-event"
DEFAULT_CONFIG = "/etc/clusterops/slurm-event.json"
DEFAULT_LOG = "/var/log/clusterops/slurm-event.log"
HOSTLIST = re.compile(r"^[A-Za-z0-9_.,\[\]-]{1,65536}$")
#: A registered run's name (the registry's folder name; the job's name).
RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
#: What the receiver signs to prove it holds the secret, before the challenge (the source plugin's PROOF_PREFIX).
PROOF_PREFIX = b"clusterops.slurm_event receiver proof:"


def load_config(path):
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    for key in ("url", "cluster", "secret_file"):
        if not isinstance(config.get(key), str) or not config[key]:
            raise ValueError("%s: %s is missing" % (path, key))
    if not config["url"].startswith(("http://", "https://")):
        raise ValueError("%s: url must be http:// or https://" % path)
    return config


def read_secret(path):
    with open(path, "rb") as handle:
        lines = handle.read(4096).splitlines()
    secret = lines[0].strip() if lines else b""
    if len(secret) < 16:
        raise ValueError("the secret in %s is shorter than 16 bytes" % path)
    return secret


def event_body(kind, cluster, subject, now=None):
    """The event as the receiver takes it (bytes): nodes for node events, the job id for job_fini.

    Raises:
        ValueError: the subject is not a hostlist (node events) or a job id (job_fini).
    """
    now = time.time() if now is None else now
    if kind == "job_fini":
        if not subject.isdigit() or int(subject) <= 0:
            raise ValueError("job_fini needs a job id, not %r" % subject)
        nodes, job = None, int(subject)
    else:
        if not HOSTLIST.match(subject):
            raise ValueError("%s needs a hostlist, not %r" % (kind, subject))
        nodes, job = subject, None
    event = {"format": "clusterops.slurm_event", "format_version": 1, "kind": kind, "cluster": cluster,
             "nodes": nodes, "job": job, "time": now, "id": "%s-%d-%d" % (cluster, int(now * 1000), os.getpid())}
    return json.dumps(event, sort_keys=True).encode("utf-8")


class DeadlineExceeded(OSError):
    """The whole send took longer than its timeout."""


class NotTheReceiver(OSError):
    """What answered at the receiver's address did not prove that it holds the secret."""


def _hmac(secret, data):
    return "sha256=" + hmac.new(secret, data, hashlib.sha256).hexdigest()


def _exchange(url, secret, body, timeout):
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout,
                                           context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    path = parts.path or "/events"
    try:
        challenge = secrets.token_hex(32)
        conn.request("GET", path, headers={"X-Clusterops-Challenge": challenge})
        answer = conn.getresponse()
        answer.read(65536)
        got = (answer.getheader("X-Clusterops-Proof") or "").strip().encode("utf-8", "replace")
        if answer.status != 200 or not hmac.compare_digest(got, _hmac(secret, PROOF_PREFIX + challenge.encode())
                                                           .encode()):
            raise NotTheReceiver("what answers at %s did not prove that it holds the secret (HTTP %d): another program "
                                 "may hold the receiver's port, or the secrets differ" % (url, answer.status))
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json",
                                                       "X-Clusterops-Signature": _hmac(secret, body)})
        answer = conn.getresponse()
        answer.read(65536)
        return answer.status
    finally:
        conn.close()


def _deadline(signum, frame):
    raise DeadlineExceeded("no answer within the whole send's deadline")


def send(url, secret, body, timeout):
    """POST ``body`` signed to the receiver at ``url`` once it proved that it holds ``secret``; all of it within
    ``timeout`` seconds (a timer signal ends it). Returns the HTTP status.

    Raises:
        DeadlineExceeded: the whole exchange took longer than ``timeout``.
        NotTheReceiver: the peer did not prove that it holds the secret (the body was not sent).
        OSError, http.client.HTTPException: the connection failed.
    """
    previous = signal.signal(signal.SIGALRM, _deadline)
    # A program started by a daemon inherits its signal mask: SIGALRM blocked there would never end the send.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGALRM])
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return _exchange(url, secret, body, timeout)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def registered_run(registry, name, user):
    """Whether the job ``name`` of ``user`` is a registered training run: ``<registry>/<name>/run.json``
    names ``user`` as its ``owner``. The file is read without following a link or blocking on a FIFO, at
    most 64 KiB.

    Raises:
        OSError, ValueError: it cannot tell (the registry is not there or not readable, run.json is not a
            regular JSON file of at most 64 KiB).
    """
    if not os.path.isdir(registry):
        raise ValueError("the registry %s is not a folder" % registry)
    if not name or not RUN_NAME.match(name) or not user:
        return False
    try:
        fd = os.open(os.path.join(registry, name, "run.json"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return False
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError("%s/%s/run.json is not a regular file" % (registry, name))
        data = handle.read(65537)
    if len(data) > 65536:
        raise ValueError("%s/%s/run.json is over 64 KiB" % (registry, name))
    run = json.loads(data.decode("utf-8"))
    return isinstance(run, dict) and run.get("owner") == user


def logger(path):
    log = logging.Logger(PROGRAM)
    try:
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=1 << 20, backupCount=3)
    except OSError:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s pid=%(process)d %(message)s", "%Y-%m-%dT%H:%M:%S%z"))
    log.addHandler(handler)
    return log


def main(argv=None):
    argv = sys.argv if argv is None else argv
    parser = argparse.ArgumentParser(prog=os.path.basename(argv[0]), description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--kind", choices=KINDS, required=True, help="the event kind")
    parser.add_argument("--config", default=os.environ.get("CLUSTEROPS_SLURM_EVENT_CONFIG", DEFAULT_CONFIG))
    parser.add_argument("subject", nargs="?", help="the node list (node events) or the job id (job_fini), as "
                        "slurmctld passes it; job_fini from EpilogSlurmctld: $SLURM_JOB_ID")
    args = parser.parse_args(argv[1:])
    kind = args.kind
    if args.subject is None:
        if kind != "job_fini":
            parser.error("%s needs the node list" % kind)
        if os.environ.get("SLURM_JOB_EXIT_CODE2") == "0:0":
            return 0  # EpilogSlurmctld of a job that completed: nothing to remediate
        args.subject = os.environ.get("SLURM_JOB_ID", "")
        from_epilog = True
    else:
        from_epilog = False
    try:
        config = load_config(args.config)
    except (OSError, ValueError) as exc:
        sys.stderr.write("%s: configuration: %s\n" % (PROGRAM, exc))
        return 2
    log = logger(config.get("log") or DEFAULT_LOG)
    if from_epilog and config.get("registry"):
        name, user = os.environ.get("SLURM_JOB_NAME", ""), os.environ.get("SLURM_JOB_USER", "")
        try:
            if not registered_run(config["registry"], name, user):
                return 0  # another job than a registered training run's: remediation has nothing to do for it
        except (OSError, ValueError) as exc:
            log.warning("job_fini %s: cannot tell whether job %r of %r is a registered run (%s): sent", args.subject,
                        name, user, exc)
    try:
        body = event_body(kind, config["cluster"], args.subject)
        secret = read_secret(config["secret_file"])
    except (OSError, ValueError) as exc:
        log.error("%s %s: not sent: %s", kind, args.subject, exc)
        return 2
    timeout = float(config.get("timeout", 3))
    start = time.monotonic()
    try:
        status = send(config["url"], secret, body, timeout)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        log.error("%s %s: not sent to %s after %.1f s: %s; event %s", kind, args.subject, config["url"],
                  time.monotonic() - start, exc, body.decode("utf-8"))
        return 1
    if not 200 <= status < 300:
        log.error("%s %s: the receiver answered %d; event %s", kind, args.subject, status, body.decode("utf-8"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

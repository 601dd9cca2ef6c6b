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
``/var/log/clusterops/slurm-event.log``, rotated at 1 MiB, 3 kept).

The body is one JSON object (format clusterops.slurm_event, version 1: kind, cluster, nodes or job,
time, id) signed with HMAC-SHA256 in ``X-Clusterops-Signature: sha256=<hex>``. It never waits longer
than ``timeout`` (slurmctld must not wait on the receiver), never retries (the next event, or the
scheduled sweep, covers a lost one), and writes every failure to the log with the event.

Exit status: 0 sent (the receiver answered 2xx); 1 not sent (logged); 2 a usage or configuration error
(logged when the log can be opened, else on stderr).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import logging
import logging.handlers
import os
import re
import sys
import time
import urllib.error
import urllib.request

KINDS = ("node_down", "node_drained", "node_fail", "job_fini")
PROGRAM = "clusterops-slurm-event"
DEFAULT_CONFIG = "/etc/clusterops/slurm-event.json"
DEFAULT_LOG = "/var/log/clusterops/slurm-event.log"
HOSTLIST = re.compile(r"^[A-Za-z0-9_.,\[\]-]{1,65536}$")


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


def send(url, secret, body, timeout):
    """POST ``body`` signed; returns the HTTP status. Raises OSError/urllib errors on failure."""
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json",
        "X-Clusterops-Signature": "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()})
    with urllib.request.urlopen(request, timeout=timeout) as answer:  # nosec B310 - http(s) checked in load_config
        return answer.status


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
    try:
        config = load_config(args.config)
    except (OSError, ValueError) as exc:
        sys.stderr.write("%s: configuration: %s\n" % (PROGRAM, exc))
        return 2
    log = logger(config.get("log") or DEFAULT_LOG)
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
    except (OSError, ValueError, urllib.error.URLError) as exc:
        log.error("%s %s: not sent to %s after %.1f s: %s; event %s", kind, args.subject, config["url"],
                  time.monotonic() - start, exc, body.decode("utf-8"))
        return 1
    if not 200 <= status < 300:
        log.error("%s %s: the receiver answered %d; event %s", kind, args.subject, status, body.decode("utf-8"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

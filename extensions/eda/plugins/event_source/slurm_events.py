# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""clusterops.slurm.slurm_events: Slurm's own events, sent by the program the role
clusterops.slurm.slurm_events installs as slurmctld's trigger program, into ansible-rulebook.

An HTTP listener (aiohttp, which ansible-rulebook itself runs on) that takes one event per
``POST /events``, signed with HMAC-SHA256 over the exact body by a secret shared with the sender:

.. code-block:: text

    POST /events
    Content-Type: application/json
    X-Clusterops-Signature: sha256=<hex of HMAC-SHA256(secret, body)>

    {"format": "clusterops.slurm_event", "format_version": 1, "kind": "node_down",
     "cluster": "dev", "nodes": "n[1-2]", "job": null, "time": 1786000000.5, "id": "..."}

Each accepted event is put on the rulebook's queue as ``{"slurm_event": {...the body's fields...},
"meta": {"source": {"name": "clusterops.slurm.slurm_events"}}}``: ``kind`` one of :data:`KINDS`,
``cluster`` a Slurm ClusterName (letters, digits, ``_.-``), ``nodes`` a hostlist as Slurm wrote it or
null, ``job`` a job id or null, ``time`` Unix seconds. Nothing else is passed on, and no field ever
reaches a shell or a command line: the rulebook only chooses the cluster whose remediation runs.

Answers: 202 accepted; 401 no or a wrong signature (compared in constant time); 400 a body that is not
such an event; 413 a body over ``max_body`` bytes; 404 another path; 405 another method. A refusal is
logged (warning) without the body; an accepted one (info) with its kind, cluster, nodes or job, and the
times it was sent and received.

Arguments (the rulebook's source entry):

- ``host`` (default ``127.0.0.1``), ``port`` (default 5050): where to listen.
- ``secret_file``: a file holding the shared secret (its first line; at least 16 bytes); or ``secret``
  itself (tests). One of them is required: an unsigned listener is refused at start.
- ``max_body`` (default 65536): the most bytes a request may carry.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import time
from typing import Any, Dict, Optional

from aiohttp import web

LOG = logging.getLogger(__name__)

EVENT_FORMAT = "clusterops.slurm_event"
EVENT_FORMAT_VERSION = 1
#: What the trigger program reports: strigger's node events and the end of a job.
KINDS = ("node_down", "node_drained", "node_fail", "job_fini")
SIGNATURE_HEADER = "X-Clusterops-Signature"
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: A hostlist as Slurm writes one: names, brackets, ranges, commas.
HOSTLIST = re.compile(r"^[A-Za-z0-9_.,\[\]-]{1,65536}$")
EVENT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class EventError(ValueError):
    """A request that is not a well-formed, well-signed event; ``status`` is the HTTP answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def read_secret(args: Dict[str, Any]) -> bytes:
    """The shared secret from ``secret_file`` (first line) or ``secret``.

    Raises:
        ValueError: neither is given, the file cannot be read, or the secret is shorter than 16 bytes.
    """
    if args.get("secret_file"):
        try:
            with open(args["secret_file"], "rb") as handle:
                secret = handle.read(4096).splitlines()[0] if handle else b""
        except (OSError, IndexError) as exc:
            raise ValueError("cannot read secret_file %s: %s" % (args["secret_file"], exc))
    elif args.get("secret"):
        secret = str(args["secret"]).encode("utf-8")
    else:
        raise ValueError("slurm_events needs secret_file (or secret): an unsigned listener is refused")
    secret = secret.strip()
    if len(secret) < 16:
        raise ValueError("the shared secret is shorter than 16 bytes")
    return secret


def signature(secret: bytes, body: bytes) -> str:
    """The ``X-Clusterops-Signature`` value of ``body``: ``sha256=<hex>``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def parse_event(secret: bytes, body: bytes, header: Optional[str]) -> Dict[str, Any]:
    """The event of a signed request body, checked field by field.

    Raises:
        EventError: 401 for a missing or wrong signature, 400 for anything else that is not an event.
    """
    if not header or not hmac.compare_digest(header.strip(), signature(secret, body)):
        raise EventError(401, "missing or wrong %s" % SIGNATURE_HEADER)
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise EventError(400, "not JSON: %s" % exc)
    if not isinstance(data, dict) or data.get("format") != EVENT_FORMAT:
        raise EventError(400, "not a %s object" % EVENT_FORMAT)
    if data.get("format_version") != EVENT_FORMAT_VERSION:
        raise EventError(400, "format_version %r is not %d" % (data.get("format_version"), EVENT_FORMAT_VERSION))
    kind, cluster = data.get("kind"), data.get("cluster")
    if kind not in KINDS:
        raise EventError(400, "kind %r is not one of %s" % (kind, ", ".join(KINDS)))
    if not isinstance(cluster, str) or not CLUSTER_NAME.match(cluster):
        raise EventError(400, "cluster %r is not a cluster name" % (cluster,))
    nodes, job, when, ident = data.get("nodes"), data.get("job"), data.get("time"), data.get("id")
    if nodes is not None and (not isinstance(nodes, str) or not HOSTLIST.match(nodes)):
        raise EventError(400, "nodes is not a hostlist")
    if job is not None and (not isinstance(job, int) or isinstance(job, bool) or job <= 0):
        raise EventError(400, "job is not a job id")
    if (nodes is None) == (job is None):
        raise EventError(400, "an event names either nodes or a job")
    if not isinstance(when, (int, float)) or isinstance(when, bool) or when <= 0:
        raise EventError(400, "time is not Unix seconds")
    if ident is not None and (not isinstance(ident, str) or not EVENT_ID.match(ident)):
        raise EventError(400, "id is not an event id")
    return dict(kind=kind, cluster=cluster, nodes=nodes, job=job, time=float(when), id=ident)


def make_app(queue: "asyncio.Queue[Any]", secret: bytes, max_body: int = 65536) -> web.Application:
    """The aiohttp application: ``POST /events`` puts each accepted event on ``queue``."""

    async def events(request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > max_body:
            return web.json_response({"error": "body over %d bytes" % max_body}, status=413)
        body = await request.content.read(max_body + 1)
        if len(body) > max_body:
            return web.json_response({"error": "body over %d bytes" % max_body}, status=413)
        try:
            event = parse_event(secret, body, request.headers.get(SIGNATURE_HEADER))
        except EventError as exc:
            LOG.warning("slurm_events: refused a request from %s: %s", request.remote, exc)
            return web.json_response({"error": str(exc)}, status=exc.status)
        LOG.info("slurm_events: accepted %s of %s (%s) sent at %.3f, received at %.3f", event["kind"], event["cluster"],
                 event["nodes"] or event["job"], event["time"], time.time())
        await queue.put({"slurm_event": event, "meta": {"source": {"name": "clusterops.slurm.slurm_events"}}})
        return web.json_response({"accepted": event["kind"], "cluster": event["cluster"]}, status=202)

    app = web.Application(client_max_size=max_body)
    app.router.add_post("/events", events)
    return app


async def main(queue: "asyncio.Queue[Any]", args: Dict[str, Any]) -> None:
    """ansible-rulebook's entry point: listen until cancelled."""
    secret = read_secret(args)
    app = make_app(queue, secret, int(args.get("max_body", 65536)))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, args.get("host", "127.0.0.1"), int(args.get("port", 5050)))
    await site.start()
    LOG.info("slurm_events: listening on %s:%s", args.get("host", "127.0.0.1"), args.get("port", 5050))
    try:
        await asyncio.Future()  # until ansible-rulebook cancels the source
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    # Run alone: print the events (python3 slurm_events.py SECRET_FILE [PORT]).
    import sys

    class _Print(asyncio.Queue):  # type: ignore[type-arg]
        async def put(self, item: Any) -> None:
            print(json.dumps(item), flush=True)

    asyncio.run(main(_Print(), {"secret_file": sys.argv[1], "port": int(sys.argv[2]) if len(sys.argv) > 2 else 5050}))

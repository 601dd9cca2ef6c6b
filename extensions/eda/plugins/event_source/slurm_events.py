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

Before it sends an event the sender asks the listener to prove that it holds the secret:
``GET /events`` with ``X-Clusterops-Challenge: <32 to 128 hex digits>`` is answered 200 with
``X-Clusterops-Proof: sha256=<hex of HMAC-SHA256(secret, PROOF_PREFIX + challenge)>`` (:func:`proof`),
so a program that took the port first gets no event and the sender logs it.

Each accepted event is put on the rulebook's queue as ``{"slurm_event": {...the body's fields...},
"meta": {"source": {"name": "clusterops.slurm.slurm_events"}}}``: ``kind`` one of :data:`KINDS`,
``cluster`` a Slurm ClusterName (letters, digits, ``_.-``), ``nodes`` a hostlist as Slurm wrote it or
null, ``job`` a job id or null, ``time`` Unix seconds, ``id`` the sender's event id. Nothing else is
passed on, and no field ever reaches a shell or a command line: the rulebook only chooses the cluster
whose remediation runs.

What is refused, and the answer: 401 no signature, a wrong one or a malformed header (compared in
constant time, as bytes); 400 a body that is not such an event, or whose ``time`` is more than
``max_age`` seconds from this host's clock (either way: the two hosts' clocks must agree within it);
409 an ``id`` already taken within the window (a replay); 413 a body over ``max_body`` bytes; 404
another path; 405 another method. The whole body is read (to ``max_body``) before the signature is
checked. A connection that has not finished within ``request_timeout`` seconds is closed; one over
``max_connections`` (all peers) or ``max_connections_per_peer`` (one address) is closed at once, so a
flood from one address cannot hold the port against the others. A refusal is logged (warning) without
the body; an accepted event (info) with its kind, cluster, nodes or job, and the times it was sent and
received.

Arguments (the rulebook's source entry):

- ``host`` (default ``127.0.0.1``), ``port`` (default 5050): where to listen.
- ``secret_file``: a file holding the shared secret (its first line; at least 16 bytes), which no one
  but its owner may read or write (the listener refuses to start otherwise, unless
  ``secret_file_shared: true``, then it warns at each start); or ``secret`` itself (tests). One of them
  is required: an unsigned listener is refused at start.
- ``max_body`` (default 65536): the most bytes a request may carry.
- ``max_age`` (default 300): seconds an event's ``time`` may differ from this host's clock.
- ``max_ids`` (default 65536): the most event ids remembered (each for ``max_age`` seconds past its
  time); past it the oldest is forgotten first (logged).
- ``request_timeout`` (default 10): seconds a connection may take, headers and body and answer.
- ``max_connections`` (default 256), ``max_connections_per_peer`` (default 16): open connections.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import hmac
import json
import logging
import os
import re
import stat
import time
from typing import Any, Dict, Optional

from aiohttp import web

LOG = logging.getLogger(__name__)

EVENT_FORMAT = "clusterops.slurm_event"
EVENT_FORMAT_VERSION = 1
#: What the trigger program reports: strigger's node events and the end of a job.
KINDS = ("node_down", "node_drained", "node_fail", "job_fini")
SIGNATURE_HEADER = "X-Clusterops-Signature"
CHALLENGE_HEADER = "X-Clusterops-Challenge"
PROOF_HEADER = "X-Clusterops-Proof"
#: What the listener signs to prove it holds the secret, before the challenge (never an event body:
#: a body is JSON and starts with ``{``).
PROOF_PREFIX = b"clusterops.slurm_event receiver proof:"
CHALLENGE = re.compile(r"^[0-9a-f]{32,128}$")
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: A hostlist as Slurm writes one: names, brackets, ranges, commas.
HOSTLIST = re.compile(r"^[A-Za-z0-9_.,\[\]-]{1,65536}$")
EVENT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
#: The arguments' defaults (the module docstring says what each is).
DEFAULTS = {"host": "127.0.0.1", "port": 5050, "max_body": 65536, "max_age": 300, "max_ids": 65536,
            "request_timeout": 10, "max_connections": 256, "max_connections_per_peer": 16}


class EventError(ValueError):
    """A request that is not a well-formed, well-signed, fresh event; ``status`` is the HTTP answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def read_secret(args: Dict[str, Any]) -> bytes:
    """The shared secret from ``secret_file`` (first line) or ``secret``.

    Raises:
        ValueError: neither is given, the file cannot be read, others than its owner may read or write
            it (unless ``secret_file_shared``), or the secret is shorter than 16 bytes.
    """
    if args.get("secret_file"):
        path = args["secret_file"]
        try:
            with open(path, "rb") as handle:
                mode = os.fstat(handle.fileno()).st_mode
                secret = handle.read(4096).splitlines()[0]
        except (OSError, IndexError) as exc:
            raise ValueError("cannot read secret_file %s: %s" % (path, exc))
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            if str(args.get("secret_file_shared", False)).lower() not in ("true", "yes", "1"):
                raise ValueError("secret_file %s is mode %04o: others than its owner can read or change the secret "
                                 "(chmod 0600, or secret_file_shared: true)" % (path, stat.S_IMODE(mode)))
            LOG.warning("slurm_events: secret_file %s is mode %04o: others than its owner can read the secret and "
                        "sign events (secret_file_shared is set)", path, stat.S_IMODE(mode))
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


def proof(secret: bytes, challenge: str) -> str:
    """The ``X-Clusterops-Proof`` value for ``challenge`` (hex digits): ``sha256=<hex>``."""
    return signature(secret, PROOF_PREFIX + challenge.encode("ascii"))


def _header_bytes(header: Optional[str]) -> bytes:
    """A header as bytes whatever it holds (aiohttp decodes headers leniently): never raises."""
    return (header or "").strip().encode("utf-8", "replace")


class SeenIds(object):
    """The event ids taken within the freshness window: a bounded memory that refuses a replay.

    ``window`` seconds (``max_age``): an id is kept until its event's ``time`` is older than the window,
    when the event itself is refused as stale. ``capacity``: past it the oldest id is forgotten first.
    """

    def __init__(self, window: float, capacity: int) -> None:
        self.window = window
        self.capacity = capacity
        self._ids = collections.OrderedDict()  # type: collections.OrderedDict[str, float]
        self.forgotten = 0

    def take(self, ident: str, when: float, now: float) -> bool:
        """Remember ``ident`` (its event's time ``when``); False when it was taken already."""
        while self._ids and next(iter(self._ids.values())) < now - self.window:
            self._ids.popitem(last=False)  # its event is stale now: refused as such, whatever its id
        if ident in self._ids:
            return False
        if len(self._ids) >= self.capacity:
            oldest = self._ids.popitem(last=False)[0]
            self.forgotten += 1
            LOG.warning("slurm_events: %d event ids within %s s: forgot the oldest (%s)", self.capacity, self.window,
                        oldest)
        self._ids[ident] = when
        return True


def parse_event(secret: bytes, body: bytes, header: Optional[str], now: Optional[float] = None,
                max_age: float = DEFAULTS["max_age"]) -> Dict[str, Any]:
    """The event of a signed request body, checked field by field.

    ``now``: this host's clock (Unix seconds; default the current time); ``max_age``: seconds the
    event's ``time`` may differ from it.

    Raises:
        EventError: 401 for a missing, malformed or wrong signature, 400 for anything else that is not
            a fresh event.
    """
    if not hmac.compare_digest(_header_bytes(header), signature(secret, body).encode("ascii")):
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
    if job is not None and (not isinstance(job, int) or isinstance(job, bool) or not 0 < job < 1 << 63):
        raise EventError(400, "job is not a job id")
    if (nodes is None) == (job is None):
        raise EventError(400, "an event names either nodes or a job")
    if not isinstance(when, (int, float)) or isinstance(when, bool) or not 0 < when < 1 << 40:
        raise EventError(400, "time is not Unix seconds")
    now = time.time() if now is None else now
    if abs(now - when) > max_age:
        raise EventError(400, "time %.3f is %.0f s from this host's clock, over max_age %s s (an old or replayed "
                         "event, or the two hosts' clocks disagree)" % (when, now - when, max_age))
    if not isinstance(ident, str) or not EVENT_ID.match(ident):
        raise EventError(400, "id is not an event id")
    return dict(kind=kind, cluster=cluster, nodes=nodes, job=job, time=float(when), id=ident)


class ConnectionGuard(object):
    """Bounds on the listener's connections: at most ``total`` open, ``per_peer`` from one address, each
    closed after ``timeout`` seconds. :meth:`wrap` turns aiohttp's protocol factory into a guarded one.
    A refusal is logged once per 10 s with the count since the last line."""

    def __init__(self, total: int, per_peer: int, timeout: float) -> None:
        self.total, self.per_peer, self.timeout = total, per_peer, timeout
        self.open = 0
        self.by_peer = collections.Counter()  # type: collections.Counter[str]
        self.refused = 0
        self.expired = 0
        self._logged = 0.0

    def admit(self, peer: str) -> bool:
        if self.open >= self.total or self.by_peer[peer] >= self.per_peer:
            self.refused += 1
            now = time.monotonic()
            if now - self._logged >= 10:
                self._logged = now
                LOG.warning("slurm_events: closed a connection from %s at once: %d open (%d from it), bounds %d and %d "
                            "per address; %d refused so far", peer, self.open, self.by_peer[peer], self.total,
                            self.per_peer, self.refused)
            return False
        self.open += 1
        self.by_peer[peer] += 1
        return True

    def release(self, peer: str) -> None:
        self.open -= 1
        self.by_peer[peer] -= 1
        if not self.by_peer[peer]:
            del self.by_peer[peer]

    def wrap(self, factory: Any) -> Any:
        guard = self

        def make() -> asyncio.Protocol:
            return _GuardedProtocol(factory(), guard)
        return make


class _GuardedProtocol(asyncio.Protocol):
    """aiohttp's request handler behind :class:`ConnectionGuard`: each call passed on, the connection
    counted, refused past the bounds and closed at its deadline."""

    def __init__(self, inner: Any, guard: ConnectionGuard) -> None:
        self.inner, self.guard = inner, guard
        self.peer = ""
        self.admitted = False
        self.deadline = None  # type: Optional[asyncio.TimerHandle]

    def connection_made(self, transport: Any) -> None:
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, (tuple, list)) and peer else str(peer or "")
        if not self.guard.admit(self.peer):
            transport.abort()
            return
        self.admitted = True
        self.deadline = asyncio.get_running_loop().call_later(self.guard.timeout, self._expire, transport)
        self.inner.connection_made(transport)

    def _expire(self, transport: Any) -> None:
        self.guard.expired += 1
        LOG.warning("slurm_events: closed a connection from %s that took over %s s", self.peer, self.guard.timeout)
        transport.abort()

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        if not self.admitted:
            return
        self.admitted = False
        if self.deadline is not None:
            self.deadline.cancel()
        self.guard.release(self.peer)
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.admitted:
            self.inner.data_received(data)

    def eof_received(self) -> Optional[bool]:
        return self.inner.eof_received() if self.admitted else None

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


def make_app(queue: "asyncio.Queue[Any]", secret: bytes, max_body: int = DEFAULTS["max_body"],
             max_age: float = DEFAULTS["max_age"], max_ids: int = DEFAULTS["max_ids"]) -> web.Application:
    """The aiohttp application: ``POST /events`` puts each accepted event on ``queue``; ``GET /events``
    answers a challenge with its proof."""
    seen = SeenIds(max_age, max_ids)

    async def events(request: web.Request) -> web.Response:
        try:
            body = await request.read()  # the whole body, to client_max_size (max_body)
        except web.HTTPRequestEntityTooLarge:
            LOG.warning("slurm_events: refused a request from %s: body over %d bytes", request.remote, max_body)
            return web.json_response({"error": "body over %d bytes" % max_body}, status=413)
        now = time.time()
        try:
            event = parse_event(secret, body, request.headers.get(SIGNATURE_HEADER), now, max_age)
            if not seen.take(event["id"], event["time"], now):
                raise EventError(409, "event %s was taken already (a replay)" % event["id"])
        except EventError as exc:
            LOG.warning("slurm_events: refused a request from %s: %s", request.remote, exc)
            return web.json_response({"error": str(exc)}, status=exc.status)
        LOG.info("slurm_events: accepted %s of %s (%s) sent at %.3f, received at %.3f", event["kind"], event["cluster"],
                 event["nodes"] or event["job"], event["time"], now)
        await queue.put({"slurm_event": event, "meta": {"source": {"name": "clusterops.slurm.slurm_events"}}})
        return web.json_response({"accepted": event["kind"], "cluster": event["cluster"]}, status=202)

    async def challenge(request: web.Request) -> web.Response:
        asked = request.headers.get(CHALLENGE_HEADER, "")
        if not CHALLENGE.match(asked):
            return web.json_response({"error": "%s is not 32 to 128 hex digits" % CHALLENGE_HEADER}, status=400)
        return web.json_response({"proof": True}, headers={PROOF_HEADER: proof(secret, asked)})

    app = web.Application(client_max_size=max_body)
    app.router.add_post("/events", events)
    app.router.add_get("/events", challenge, allow_head=False)
    return app


def _setting(args: Dict[str, Any], name: str) -> float:
    """A numeric argument (the rulebook passes templated values as strings). Raises ValueError."""
    value = float(args.get(name, DEFAULTS[name]))
    if not 0 < value < 1 << 31:
        raise ValueError("slurm_events: %s %r is not a positive number" % (name, args.get(name)))
    return value


async def main(queue: "asyncio.Queue[Any]", args: Dict[str, Any]) -> None:
    """ansible-rulebook's entry point: listen until cancelled."""
    secret = read_secret(args)
    app = make_app(queue, secret, int(_setting(args, "max_body")), _setting(args, "max_age"),
                   int(_setting(args, "max_ids")))
    guard = ConnectionGuard(int(_setting(args, "max_connections")), int(_setting(args, "max_connections_per_peer")),
                            _setting(args, "request_timeout"))
    runner = web.AppRunner(app)
    await runner.setup()
    host, port = args.get("host", DEFAULTS["host"]), int(_setting(args, "port"))
    server = await asyncio.get_running_loop().create_server(guard.wrap(runner.server), host, port)
    LOG.info("slurm_events: listening on %s:%s", host, port)
    try:
        await asyncio.Future()  # until ansible-rulebook cancels the source
    finally:
        server.close()
        await runner.cleanup()


if __name__ == "__main__":
    # Run alone: print the events (python3 slurm_events.py SECRET_FILE [PORT]).
    import sys

    class _Print(asyncio.Queue):  # type: ignore[type-arg]
        async def put(self, item: Any) -> None:
            print(json.dumps(item), flush=True)

    asyncio.run(main(_Print(), {"secret_file": sys.argv[1], "port": int(sys.argv[2]) if len(sys.argv) > 2 else 5050}))

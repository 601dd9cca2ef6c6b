# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A TCP proxy in front of the dev cluster's slurmctld that loses messages on purpose.

Clients pointed at it (through a copy of slurm.conf whose SlurmctldPort is the proxy's) see
what they see on a real cluster when the network or an overloaded slurmctld drops a message:

``drop-reply``  the request reaches slurmctld, which acts on it (sbatch: the job IS created),
                but its answer is thrown away; the client gives up after MessageTimeout with
                "Socket timed out on send/recv operation".
``swallow``     the request never reaches slurmctld (no job), and no answer comes back: the
                client sees the same timeout.

Only connections whose first message is of one of ``msg_types`` count (default: sbatch's
REQUEST_SUBMIT_BATCH_JOB, 4003; ``0`` for any): after ``skip`` of them pass through, the next
``count`` are treated so; every other connection passes through untouched, so a client's
follow-up query (squeue) gets a true answer. The message type is read from Slurm's message
header (22.05, protocol 0x2600): uint32 length, uint16 version, uint16 flags, uint16 type.
Standard library only.

    python3 dev/cluster/ctld_proxy.py --conf .devcluster/etc/slurm.conf --out DIR --mode drop-reply
        [--skip 0] [--count 1] [--msg-type 4003] [--message-timeout 3]

writes DIR/slurm.conf, prints its path, and serves until killed.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import struct
import sys
import threading
import time

MODES = ("drop-reply", "swallow", "pass")
#: slurm_protocol_defs.h
REQUEST_SUBMIT_BATCH_JOB = 4003
_HEADER = struct.Struct(">IHHH")   # length, version, flags, msg_type


def _drain(sock):
    try:
        while sock.recv(65536):
            pass
    except OSError:
        pass


def _pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class CtldProxy(object):
    """Listens on 127.0.0.1:<port>; ``log`` lists ``(msg_type, mode)`` for each connection."""

    def __init__(self, target_port, mode, count=1, skip=0, msg_types=(REQUEST_SUBMIT_BATCH_JOB,),
                 target_host="127.0.0.1"):
        if mode not in MODES:
            raise ValueError("mode must be one of %s" % (MODES,))
        self.target = (target_host, target_port)
        self.mode = mode
        self.skip = skip
        self.remaining = count
        self.msg_types = frozenset(msg_types or ())
        self.log = []
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]

    def start(self):
        thread = threading.Thread(target=self._serve, name="ctld-proxy")
        thread.daemon = True
        thread.start()
        return self

    def close(self):
        try:
            self._sock.close()
        except OSError:
            pass

    def _serve(self):
        while True:
            try:
                client, dummy = self._sock.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._handle, args=(client,))
            thread.daemon = True
            thread.start()

    def _mode(self, msg_type):
        with self._lock:
            mode = "pass"
            if not self.msg_types or msg_type in self.msg_types:
                if self.skip > 0:
                    self.skip -= 1
                elif self.remaining > 0:
                    self.remaining -= 1
                    mode = self.mode
            self.log.append((msg_type, mode))
            return mode

    def _handle(self, client):
        try:
            first = b""
            while len(first) < _HEADER.size:
                data = client.recv(65536)
                if not data:
                    break
                first += data
            msg_type = _HEADER.unpack(first[:_HEADER.size])[3] if len(first) >= _HEADER.size else None
            mode = self._mode(msg_type)
            if mode == "swallow":
                _drain(client)
                return
            server = socket.create_connection(self.target, timeout=None)
            server.sendall(first)
            upstream = threading.Thread(target=_pipe, args=(client, server))
            upstream.daemon = True
            upstream.start()
            if mode == "drop-reply":
                _drain(server)
            else:
                _pipe(server, client)
            upstream.join(60)
            server.close()
        finally:
            client.close()


def conf_via_proxy(conf, port, out_dir, message_timeout=None):
    """Write ``out_dir/slurm.conf``: ``conf`` with SlurmctldPort=port (and MessageTimeout)."""
    with open(conf) as handle:
        text = handle.read()
    text, count = re.subn(r"(?m)^SlurmctldPort=\S+$", "SlurmctldPort=%d" % port, text)
    if count != 1:
        raise ValueError("%s has no single SlurmctldPort= line" % conf)
    if message_timeout is not None:
        text, count = re.subn(r"(?m)^MessageTimeout=\S+$", "MessageTimeout=%d" % message_timeout, text)
        if not count:
            text += "\nMessageTimeout=%d\n" % message_timeout
    path = os.path.join(out_dir, "slurm.conf")
    with open(path, "w") as handle:
        handle.write(text)
    return path


def slurmctld_port(conf):
    with open(conf) as handle:
        match = re.search(r"(?m)^SlurmctldPort=(\d+)$", handle.read())
    if not match:
        raise ValueError("%s has no SlurmctldPort= line" % conf)
    return int(match.group(1))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--conf", required=True, help="the dev cluster's slurm.conf")
    parser.add_argument("--out", required=True, help="directory for the proxied slurm.conf")
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--skip", type=int, default=0)
    parser.add_argument("--msg-type", type=int, action="append",
                        help="message types to treat (default %d, sbatch; 0: any)" % REQUEST_SUBMIT_BATCH_JOB)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--message-timeout", type=int, default=3)
    args = parser.parse_args(argv)
    types = args.msg_type or [REQUEST_SUBMIT_BATCH_JOB]
    proxy = CtldProxy(slurmctld_port(args.conf), args.mode, args.count, args.skip,
                      msg_types=() if 0 in types else types).start()
    print(conf_via_proxy(args.conf, proxy.port, args.out, args.message_timeout), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        proxy.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

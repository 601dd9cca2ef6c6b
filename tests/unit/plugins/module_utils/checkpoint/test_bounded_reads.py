# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""fsutil's bounded reads (open_regular, read_bounded, load_json_bounded): what a cluster user can
put where the collection reads a small file (a symlink, a FIFO, a huge or deeply nested file, bytes
that are not UTF-8) is refused at once with an error, never followed, never blocked on, never a crash."""

from __future__ import annotations

import errno
import json
import os
import signal

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck
from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import fsutil


@pytest.fixture
def no_hang():
    """A read that blocks fails the test after 5 s instead of hanging the suite."""
    def alarm(signum, frame):
        raise AssertionError("the read blocked")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(5)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_a_regular_json_file_is_read(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"a": [1, 2]}))
    assert fsutil.load_json_bounded(str(path)) == {"a": [1, 2]}


def test_a_symlink_is_never_followed_unless_asked(tmp_path):
    target = tmp_path / "secret"
    target.write_text("{}")
    link = tmp_path / "state.json"
    link.symlink_to(target)
    with pytest.raises(OSError) as err:
        fsutil.load_json_bounded(str(link))
    assert err.value.errno == errno.ELOOP
    assert fsutil.load_json_bounded(str(link), follow=True) == {}


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_what_is_no_regular_file_is_refused_without_blocking(tmp_path, no_hang, kind):
    path = str(tmp_path / "heartbeat")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        os.mkdir(path)
    else:
        path = "/dev/zero"   # endless: a reader without the check would read until memory runs out
    with pytest.raises(OSError) as err:
        fsutil.read_bounded(path, 1 << 20, follow=True)
    assert err.value.errno in (errno.EINVAL, errno.EISDIR)


def test_a_file_over_the_limit_is_refused_whole(tmp_path):
    path = tmp_path / "run.json"
    path.write_bytes(b" " * (fsutil.MAX_STATE_BYTES + 1))
    with pytest.raises(OSError) as err:
        fsutil.load_json_bounded(str(path))
    assert err.value.errno == errno.EFBIG


@pytest.mark.parametrize("data", [b"[" * 200000 + b"]" * 200000, b'{"a":' * 100000 + b"1" + b"}" * 100000,
                                  b"\xff\xfe{}", b"{", b""])
def test_bad_json_is_a_value_error_never_a_crash(tmp_path, data):
    path = tmp_path / "FINISHED"
    path.write_bytes(data)
    with pytest.raises(ValueError):
        fsutil.load_json_bounded(str(path))


@pytest.mark.parametrize("marker", ["nested", "fifo", "huge"])
def test_a_hostile_finished_marker_neither_crashes_nor_blocks_the_scan(tmp_path, no_hang, marker):
    path = tmp_path / "FINISHED"
    if marker == "nested":
        path.write_bytes(b"[" * 60000)
    elif marker == "fifo":
        os.mkfifo(str(path))
    else:
        path.write_bytes(b'{"step": 1' + b" " * (4 << 20) + b"}")
    report = ck.inspect(str(tmp_path), "structure")
    # A FIFO is no marker; a marker whose content cannot be read still marks the run finished.
    assert report.finished == (None if marker == "fifo" else {}) and report.latest_valid is None

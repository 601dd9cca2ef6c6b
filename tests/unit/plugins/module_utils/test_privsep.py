# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_privsep.call_as for real: the child has the user's ids (as root), gets only the user's rights,
is killed when it blocks, and brings back its value or its error, never the parent's state."""

from __future__ import annotations

import os
import stat
import tempfile

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _privsep

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="changing ids needs root")
USER = "nobody"


def ids():
    return list(os.getresuid()) + list(os.getresgid()) + [sorted(os.getgroups())]


@needs_root
def test_the_child_has_the_users_ids_for_good_and_the_parent_keeps_its_own():
    uid, gid, groups = _privsep.user_ids(USER)
    assert _privsep.call_as(USER, ids) == [uid, uid, uid, gid, gid, gid, sorted(set(groups))]
    assert os.geteuid() == 0 and os.getegid() == 0


@needs_root
def test_the_child_gets_the_users_rights_not_roots():
    """A file only root may read: the child as nobody cannot; the same call as root can."""
    folder = tempfile.mkdtemp()
    try:
        secret = os.path.join(folder, "secret")
        with open(secret, "w") as handle:
            handle.write("root only")
        os.chmod(secret, stat.S_IRUSR)
        os.chmod(folder, 0o755)

        def read():
            with open(secret) as handle:
                return handle.read()
        with pytest.raises(_privsep.PrivsepError, match="Permission denied"):
            _privsep.call_as(USER, read)
        assert _privsep.call_as(None, read) == "root only"
    finally:
        os.unlink(os.path.join(folder, "secret"))
        os.rmdir(folder)


def test_a_blocked_child_is_killed_and_only_that_call_fails(tmp_path):
    fifo = str(tmp_path / "heartbeat")
    os.mkfifo(fifo)

    def blocks():
        with open(fifo) as handle:   # no writer: blocks for ever
            return handle.read()
    with pytest.raises(_privsep.PrivsepError, match="no answer within 1 s"):
        _privsep.call_as(None, blocks, timeout=1)
    assert _privsep.call_as(None, lambda: 42, timeout=5) == 42


@pytest.mark.parametrize("func, message", [
    (lambda: 1 / 0, "ZeroDivisionError: division by zero"),
    (lambda: {1, 2}, "TypeError: Object of type set is not JSON serializable"),
    (lambda: os._exit(3), "the child died without answering"),
])
def test_what_the_child_raises_comes_back_as_one_error(func, message):
    with pytest.raises(_privsep.PrivsepError) as err:
        _privsep.call_as(None, func)
    assert message in str(err.value)


def test_an_unknown_user_is_refused_before_anything_runs():
    if os.geteuid() != 0:
        pytest.skip("as another user no id is changed, so no user is looked up")
    with pytest.raises(_privsep.PrivsepError, match="no user no-such-user-here"):
        _privsep.call_as("no-such-user-here", lambda: 1)


def test_the_childs_changes_stay_in_the_child():
    box = {"n": 1}

    def change():
        box["n"] = 2
        return box["n"]
    assert _privsep.call_as(None, change) == 2 and box == {"n": 1}

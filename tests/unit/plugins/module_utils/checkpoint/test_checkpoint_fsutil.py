# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_checkpoint.fsutil: atomic JSON files and the non-blocking flock, on real files in tmp_path."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils import _checkpoint as ck


@pytest.mark.parametrize("tmp_name", [None, "tmp-state.4711"])
def test_atomic_write_json_replaces_the_file_and_leaves_no_temporary(tmp_path, tmp_name):
    path = str(tmp_path / "state.json")
    ck.atomic_write_json(path, {"b": 1, "a": [2]}, tmp=tmp_name and str(tmp_path / tmp_name), indent=1, mode=0o644)
    assert ck.atomic_write_json(path, {"b": 2}) == path
    with open(path) as handle:
        text = handle.read()
    assert json.loads(text) == {"b": 2} and text.endswith("\n")
    assert os.listdir(str(tmp_path)) == ["state.json"]


def test_atomic_write_json_mode_and_sorted_keys(tmp_path):
    path = str(tmp_path / "state.json")
    ck.atomic_write_json(path, {"b": 1, "a": 2}, indent=1, mode=0o640, fsync=False)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    with open(path) as handle:
        assert handle.read() == '{\n "a": 2,\n "b": 1\n}\n'


def test_atomic_write_json_failure_keeps_the_old_file(tmp_path):
    path = str(tmp_path / "state.json")
    ck.atomic_write_json(path, {"old": True})
    with pytest.raises(TypeError):
        ck.atomic_write_json(path, {"new": object()})  # not JSON: fails half-way through the temporary file
    with open(path) as handle:
        assert json.load(handle) == {"old": True}
    assert os.listdir(str(tmp_path)) == ["state.json"]


def test_try_flock_is_exclusive_until_closed(tmp_path):
    path = str(tmp_path / ".lock")
    first = ck.open_lock_file(path)
    second = ck.open_lock_file(path)
    try:
        assert ck.try_flock(first) is True
        assert ck.try_flock(second) is False  # flock is per open file: a second open conflicts
        os.close(first)
        first = None
        assert ck.try_flock(second) is True
    finally:
        for fd in (first, second):
            if fd is not None:
                os.close(fd)


def test_open_lock_file_never_follows_a_symlink(tmp_path):
    target = tmp_path / "elsewhere"
    os.symlink(str(target), str(tmp_path / ".lock"))
    with pytest.raises(OSError):
        ck.open_lock_file(str(tmp_path / ".lock"))
    assert not target.exists()


def test_stat_regular_is_the_one_stat_check_of_read_json_and_single_file_checkpoints(tmp_path):
    # read_json (manifests, trainer_state.json) and a single-file checkpoint share fsutil.stat_regular.
    from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint import fsutil
    from ansible_collections.clusterops.slurm.plugins.module_utils._checkpoint.common import Invalid
    big = tmp_path / "big.json"
    big.write_text(u'{"a": 1}')
    assert fsutil.stat_regular(str(big), "big.json").st_size == 8
    cases = [(str(tmp_path / "missing.json"), None, "no x"),
             (str(tmp_path), None, "x is not a regular file"),
             (str(big), 7, "x is larger than 7 bytes")]
    for path, limit, words in cases:
        with pytest.raises(Invalid) as info:
            fsutil.stat_regular(path, "x", limit)
        assert str(info.value) == words
        with pytest.raises(Invalid) as info:
            fsutil.read_json(path, "x", 7 if limit else 1 << 20)
        assert str(info.value) == words
    os.mkfifo(str(tmp_path / "model.pt"))
    with pytest.raises(Invalid) as info:
        fsutil.stat_regular(str(tmp_path / "model.pt"), "model.pt")
    assert "model.pt is not a regular file" in str(info.value)

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_hostlist.py against the recorded answers of the real scontrol of each release
(tests/unit/fixtures/hostlist/, see its README): no Slurm needed."""

from __future__ import annotations

import glob
import json
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import (
    RELEASES,
    HostlistError,
    compress_hostlist,
    expand_hostlist,
    release_tuple,
)

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        'fixtures', 'hostlist')


def _load():
    recordings = {}
    for path in sorted(glob.glob(os.path.join(FIXTURES, 'scontrol-*.json'))):
        with open(path) as handle:
            recordings[os.path.basename(path)] = json.load(handle)
    return recordings


RECORDINGS = _load()
CASES = [(name, recording['version'], answer)
         for name, recording in sorted(RECORDINGS.items()) for answer in recording['answers']]


def test_every_tested_release_is_recorded():
    recorded = sorted('%d.%02d' % release_tuple(recording['version']) for recording in RECORDINGS.values())
    assert recorded == sorted(RELEASES)
    for name, recording in RECORDINGS.items():
        assert name == 'scontrol-%d.%02d.json' % release_tuple(recording['version'])
        assert len(recording['answers']) > 250, name


IDS = ['%s:%s:%s' % (name[9:14], answer['what'], answer['expr']) for name, dummy, answer in CASES]


@pytest.mark.parametrize('name, version, answer', CASES, ids=IDS)
def test_recorded_scontrol_answer(name, version, answer):
    expr = answer['expr']
    if answer['what'] == 'hostnames':
        if answer['ok'] and answer['expect'] == 'same':
            assert expand_hostlist(expr, release=version) == answer['stdout']
        else:
            with pytest.raises(HostlistError):
                expand_hostlist(expr, release=version)
    else:
        assert answer['what'] == 'hostlist' and answer['expect'] == 'same' and answer['ok']
        hosts = expr.split(',')
        assert compress_hostlist(hosts, release=version) == answer['stdout'][0]
        assert expand_hostlist(answer['stdout'][0], release=version) == hosts


def test_releases_differ_where_the_module_says():
    """The recordings themselves show the suffix rule: 22.05 rejects node[0001-0002]-int, 24.11 and 26.05 read it."""
    answers = {('%d.%02d' % release_tuple(recording['version'])): {
        (answer['what'], answer['expr']): answer for answer in recording['answers']}
        for recording in RECORDINGS.values()}
    key = ('hostnames', 'node[0001-0002]-int')
    assert answers['22.05'][key]['ok'] is False
    for release in ('24.11', '26.05'):
        assert answers[release][key]['stdout'] == ['node0001-int', 'node0002-int']

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Compare plugins/module_utils/_hostlist.py with the real Slurm: ``scontrol show hostnames`` / ``show hostlist``.

Needs only the ``scontrol`` binary (skipped without it), no daemon: ``scontrol show hostnames|hostlist`` parse the
expression locally but still want a configuration. ``$SLURM_CONF`` is used when it names a file (e.g. the dev
cluster's); otherwise the test writes a throwaway one-node slurm.conf to a temporary folder.

Run: ``.venv/bin/python -m pytest tests/integration/test_hostlist_vs_slurm.py -q``. Set ``HOSTLIST_SEED`` to
replay a random run (the seed is in the failure message).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import random
import shutil
import subprocess
import sys

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_COLLECTIONS = os.path.join(_REPO, '.collections')
_LINK = os.path.join(_COLLECTIONS, 'ansible_collections', 'clusterops', 'slurm')
if not os.path.exists(_LINK):
    os.makedirs(os.path.dirname(_LINK), exist_ok=True)
    os.symlink(_REPO, _LINK)
if _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import (  # noqa: E402
    HostlistError,
    compress_hostlist,
    expand_hostlist,
)

SCONTROL = shutil.which('scontrol')
RANDOM_CASES = 300
SEED = int(os.environ.get('HOSTLIST_SEED', random.SystemRandom().randrange(2 ** 32)))

_THROWAWAY_CONF = """\
ClusterName=hostlisttest
SlurmctldHost=localhost
NodeName=localhost CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES State=UP
"""

pytestmark = pytest.mark.skipif(SCONTROL is None, reason='scontrol (Slurm client) is not installed')


@pytest.fixture(scope='module')
def slurm_env(tmp_path_factory):
    """Environment for scontrol: $SLURM_CONF when it names a file, else a throwaway slurm.conf."""
    env = dict(os.environ)
    conf = env.get('SLURM_CONF')
    if not conf or not os.path.isfile(conf):
        conf = str(tmp_path_factory.mktemp('slurm') / 'slurm.conf')
        with open(conf, 'w') as handle:
            handle.write(_THROWAWAY_CONF)
        env['SLURM_CONF'] = conf
    probe = subprocess.run([SCONTROL, 'show', 'hostnames', 'probe[1-2]'], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, check=False)
    if probe.returncode != 0 or probe.stdout.split() != ['probe1', 'probe2']:
        pytest.skip('scontrol cannot expand hostlists with SLURM_CONF=%s: rc=%d %s'
                    % (conf, probe.returncode, probe.stderr.strip()))
    return env


@pytest.fixture(scope='module')
def slurm_version(slurm_env):
    return subprocess.run([SCONTROL, '--version'], env=slurm_env, stdout=subprocess.PIPE,
                          universal_newlines=True, check=True).stdout.strip()


def scontrol_show(env, what, expr):
    """``scontrol show hostnames|hostlist EXPR`` -> (ok, output lines). ok is False when Slurm rejects EXPR."""
    result = subprocess.run([SCONTROL, 'show', what, expr], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True, check=False)
    ok = result.returncode == 0 and 'Invalid hostlist' not in result.stdout + result.stderr
    return ok, result.stdout.splitlines()


EXPRESSIONS = [
    'rack04-[09-10]',
    'node[001-002]',
    'rack[0-1]node[0-1]',
    'nodeA,nodeB[001,003],nodeC',
    'gpu[001-004],cpu[001-002]',
    'n[9-10]', 'n[09-10]', 'n[009-10]', 'n[1-02]', 'n[01-1]', 'n[1,01]',
    'n3,n1,n2', 'n1,n1,n2', 'a,b,a', 'n[1-3,2]', 'n[1,2-3,5]',
    '[1-3]', '[1-2][3-4]', 'n[1-2]-[3-4]', 'n[1-2]5[1]',
    ' a , b ', 'n1 n2', 'n[0-65535]', 'a[1-65536]b[1]', 'a[1-40000,1-30000]',
    'e[1-2][3-4]x[5-6]', 'e[1-2]a[3-4]b[5-6]c[7-8]', 'e[2,1]a[3]b[5-6]', 'a[1-3][1-2][1]x[1-2]y[1]',
    'n[4294967295-4294967296]',
]


@pytest.mark.parametrize('expr', EXPRESSIONS)
def test_expand_matches_scontrol_show_hostnames(slurm_env, expr):
    ok, slurm_hosts = scontrol_show(slurm_env, 'hostnames', expr)
    assert ok, 'Slurm rejects %r' % (expr,)
    assert expand_hostlist(expr) == slurm_hosts


# Both reject these.
REJECTED_BY_BOTH = ['n[5-1]', 'n[a-b]', 'n[]', 'n[1,,2]', 'n[-2]', 'n[1-2-3]', 'n[1-2]x', 'n[1-2]5',
                    'x[1-2]y[3]z', 'n[[1-2]]', 'n[1-2]]', 'n[0-65536]', 'n[1-2 ]',
                    'a[1-40000,1-30000]b[1]']


@pytest.mark.parametrize('expr', REJECTED_BY_BOTH)
def test_rejected_by_slurm_and_by_us(slurm_env, expr):
    ok, dummy = scontrol_show(slurm_env, 'hostnames', expr)
    assert not ok, 'Slurm accepts %r' % (expr,)
    with pytest.raises(HostlistError):
        expand_hostlist(expr)


# Slurm 22.05 accepts these with surprising results; we raise instead. The table keeps the module docstring honest.
SLURM_ACCEPTS_WE_REJECT = [
    ('a,,b', ['a', 'b']),
    ('n[1-2],', ['n1', 'n2']),
    (',n1', ['n1']),
    ('node[1-2', ['node]']),
    ('node1],x', ['node1]', 'x']),
    ('n[ 1-2]', ['n01', 'n02']),
    ('n[+1-2]', ['n01', 'n02']),
    ('n[1-]', ['n1']),
]


@pytest.mark.parametrize('expr, slurm_hosts', SLURM_ACCEPTS_WE_REJECT)
def test_documented_differences(slurm_env, expr, slurm_hosts):
    assert scontrol_show(slurm_env, 'hostnames', expr) == (True, slurm_hosts)
    with pytest.raises(HostlistError):
        expand_hostlist(expr)


HOST_LISTS = [
    ['rack04-09', 'rack04-10'],
    ['rack0node0', 'rack0node1', 'rack1node0', 'rack1node1'],
    ['nodeA', 'nodeB001', 'nodeB003', 'nodeC'],
    ['gpu001', 'gpu002', 'gpu003', 'gpu004', 'cpu001', 'cpu002'],
    ['n3', 'n1', 'n2'], ['n3', 'n1', 'n1', 'n2'], ['n2', 'n1'], ['n1', 'n01'], ['n01', 'n1'],
    ['n9', 'n10'], ['n09', 'n10'], ['n9', 'n010'], ['n08', 'n9'], ['n98', 'n99', 'n100'],
    ['n099', 'n100'], ['n00', 'n01'], ['n1', 'n02', 'n3'], ['1', '2', '3'], ['a', 'a'],
    ['a', 'a1', 'a2'], ['a1', 'a', 'a2'], ['a1', 'b1', 'a2'], ['a1', 'a2', 'b1', 'a3'],
    ['rack1node3', 'rack1node4', 'rack2node3'], ['n1x', 'n2x', 'n3y'], ['a-1', 'a-2'],
]


@pytest.fixture(scope='module')
def slurm_keeps_order(slurm_env, slurm_version):
    """``scontrol show hostlist`` keeps order and duplicates in 22.05; only then are strings compared."""
    ok, lines = scontrol_show(slurm_env, 'hostlist', 'n3,n1,n1,n2')
    if not ok or lines != ['n[3,1,1-2]']:
        pytest.skip('%s: scontrol show hostlist n3,n1,n1,n2 gives %r, it does not keep order and duplicates'
                    % (slurm_version, lines))


@pytest.mark.parametrize('hosts', HOST_LISTS, ids=','.join)
def test_compress_matches_scontrol_show_hostlist(slurm_env, slurm_keeps_order, hosts):
    ok, lines = scontrol_show(slurm_env, 'hostlist', ','.join(hosts))
    assert ok
    assert compress_hostlist(hosts) == lines[0]
    assert expand_hostlist(lines[0]) == hosts


def test_slurm_hostlistsorted_sorts_but_keeps_duplicates(slurm_env):
    """Recorded for the docstring: the sorted variant of 22.05 sorts and keeps duplicates."""
    ok, lines = scontrol_show(slurm_env, 'hostlistsorted', 'n3,n1,n1')
    if not ok:
        pytest.skip('this scontrol has no "show hostlistsorted"')
    assert lines == ['n[1,1,3]']


def _random_number(rng):
    width = rng.choice([0, 0, 1, 2, 3, 4])
    return rng.randrange(0, rng.choice([10, 100, 1200])), width


def _random_prefix(rng):
    # never a leading '-' (scontrol would take it as an option) nor '/' (as a file of host names)
    prefix = ''.join(rng.choice('abnode-_.') for dummy in range(rng.randrange(0, 4))).lstrip('-')
    if rng.random() < 0.3:  # digits in the middle
        prefix += '%d%s' % (rng.randrange(0, 40), rng.choice(['node', 'n', '-', 'x']))
    return prefix


def _random_expression(rng):
    items = []
    for dummy in range(rng.randrange(1, 5)):
        parts = [_random_prefix(rng)]
        for dummy2 in range(rng.choice([0, 1, 1, 1, 2, 3, 4])):
            ranges = []
            for dummy3 in range(rng.randrange(1, 4)):
                lo, width = _random_number(rng)
                hi = lo + rng.choice([0, 1, 2, 5, 13])
                hi_width = rng.choice([0, width])  # hi written padded or not: Slurm uses lo's width
                ranges.append(str(lo).zfill(width) if hi == lo and rng.random() < 0.5
                              else '%s-%s' % (str(lo).zfill(width), str(hi).zfill(hi_width)))
            parts.append('[%s]' % ','.join(ranges))
            parts.append(rng.choice(['', 'n', '-', 'x']))
        word = ''.join(parts)
        if '[' in word:
            word = word[:word.rindex(']') + 1]  # Slurm 22.05 rejects text after the last bracket
        if not word:
            word = 'h'
        items.append(word)
    return rng.choice([',', ',', ' , ']).join(items)


def _random_host_list(rng):
    hosts = []
    for dummy in range(rng.randrange(1, 6)):
        prefix = _random_prefix(rng)
        start, width = _random_number(rng)
        suffix = rng.choice(['', '', '', 'x', '-ib'])
        count = rng.randrange(1, 8)
        hosts.extend('%s%s%s' % (prefix, str(number).zfill(rng.choice([width, width, 0, 3])), suffix)
                     for number in range(start, start + count))
        if rng.random() < 0.2:
            hosts.append(rng.choice('abc'))
    hosts += [rng.choice(hosts) for dummy in range(rng.randrange(0, 3))]  # duplicates
    if rng.random() < 0.5:
        rng.shuffle(hosts)
    return hosts


def test_random_expressions_match_scontrol(slurm_env):
    rng = random.Random(SEED)
    for dummy in range(RANDOM_CASES):
        expr = _random_expression(rng)
        ok, slurm_hosts = scontrol_show(slurm_env, 'hostnames', expr)
        assert ok, 'seed %d: Slurm rejects %r' % (SEED, expr)
        assert expand_hostlist(expr) == slurm_hosts, 'seed %d: %r' % (SEED, expr)


def test_random_host_lists_match_scontrol(slurm_env, slurm_keeps_order):
    rng = random.Random(SEED)
    for dummy in range(RANDOM_CASES):
        hosts = _random_host_list(rng)
        ok, lines = scontrol_show(slurm_env, 'hostlist', ','.join(hosts))
        assert ok, 'seed %d: Slurm rejects %r' % (SEED, hosts)
        compressed = compress_hostlist(hosts)
        assert compressed == lines[0], 'seed %d: %r' % (SEED, hosts)
        assert expand_hostlist(compressed) == hosts, 'seed %d: %r' % (SEED, hosts)

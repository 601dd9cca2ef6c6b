# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import random

import pytest

from hypothesis import given, settings, strategies as st

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import (
    DEFAULT_RELEASE,
    MAX_HOSTS,
    MAX_RANGE,
    RELEASES,
    HostlistError,
    compress_hostlist,
    expand_hostlist,
    first_host,
    release_tuple,
)


def _with_releases(cases):
    """Each case once per release of RELEASES: (release, *case)."""
    return [(release,) + tuple(case) for release in RELEASES for case in cases]


# (expression, expected hosts), the same in every release; every expected value was checked with
# `scontrol show hostnames` of Slurm 22.05.8 and 24.11.5 (tests/integration/test_hostlist_vs_slurm.py)
EXPAND_CASES = [
    ('rack04-[09-10]', ['rack04-09', 'rack04-10']),
    ('node[001-002]', ['node001', 'node002']),
    ('rack[0-1]node[0-1]', ['rack0node0', 'rack0node1', 'rack1node0', 'rack1node1']),
    ('rack[1-2]-node[01-02]', ['rack1-node01', 'rack1-node02', 'rack2-node01', 'rack2-node02']),
    ('node[1,3-5]', ['node1', 'node3', 'node4', 'node5']),
    ('node1.cluster.local,node-2.ib', ['node1.cluster.local', 'node-2.ib']),
    ('a.b[1-2]', ['a.b1', 'a.b2']),
    ('n[1-2]-[3-4]', ['n1-3', 'n1-4', 'n2-3', 'n2-4']),
    # 3+ groups: last group innermost, then second-to-last outermost down to the first (Slurm's recursion)
    ('e[1-2][3-4]x[5-6]', ['e13x5', 'e13x6', 'e23x5', 'e23x6', 'e14x5', 'e14x6', 'e24x5', 'e24x6']),
    ('e[1-2]a[3-4]b[5-6]c[7-8]', [
        'e1a3b5c7', 'e1a3b5c8', 'e2a3b5c7', 'e2a3b5c8', 'e1a4b5c7', 'e1a4b5c8', 'e2a4b5c7', 'e2a4b5c8',
        'e1a3b6c7', 'e1a3b6c8', 'e2a3b6c7', 'e2a3b6c8', 'e1a4b6c7', 'e1a4b6c8', 'e2a4b6c7', 'e2a4b6c8']),
    ('a[1-40000,1-30000]', ['a%d' % n for n in range(1, 40001)] + ['a%d' % n for n in range(1, 30001)]),
    ('[1-2][3-4]', ['13', '14', '23', '24']),
    ('nodeA,nodeB[001,003],nodeC', ['nodeA', 'nodeB001', 'nodeB003', 'nodeC']),
    ('gpu[001-004],cpu[001-002]', ['gpu001', 'gpu002', 'gpu003', 'gpu004', 'cpu001', 'cpu002']),
    ('n[9-10]', ['n9', 'n10']),
    ('n[09-10]', ['n09', 'n10']),
    ('n[009-10]', ['n009', 'n010']),
    ('n[1-02]', ['n1', 'n2']),
    ('n[01-1]', ['n01']),
    ('n[3-3]', ['n3']),
    ('n[1,01]', ['n1', 'n01']),
    ('n3,n1,n2', ['n3', 'n1', 'n2']),
    ('n1,n1,n2', ['n1', 'n1', 'n2']),
    ('a,b,a', ['a', 'b', 'a']),
    ('n[1-3,2]', ['n1', 'n2', 'n3', 'n2']),
    ('n[1,2-3,5]', ['n1', 'n2', 'n3', 'n5']),
    ('[1-3]', ['1', '2', '3']),
    ('n[1-2]5[1]', ['n151', 'n251']),
    (' a , b ', ['a', 'b']),
    ('n1 n2', ['n1', 'n2']),
    ('n1\tn2\n', ['n1', 'n2']),
    ('n[4294967295-4294967296]', ['n4294967295', 'n4294967296']),
    ('', []),
    ('   ', []),
    (['node[1-2]', 'login1'], ['node1', 'node2', 'login1']),
    (('n1', 'n1'), ['n1', 'n1']),
    ([], []),
]


@pytest.mark.parametrize('release, expr, expected', _with_releases(EXPAND_CASES))
def test_expand_hostlist(release, expr, expected):
    assert expand_hostlist(expr, release=release) == expected


def test_expand_hostlist_default_release_is_the_newest():
    assert DEFAULT_RELEASE == RELEASES[-1] == '26.05'
    assert expand_hostlist('node[0001-0002]-int') == expand_hostlist('node[0001-0002]-int', release='26.05')


# (expression, hosts from 23.11 on); a shared suffix after the last bracket group. Checked with scontrol 24.11.5;
# 22.05.8 rejects every one ("Invalid hostlist").
SUFFIX_CASES = [
    ('node[0001-0002]-int', ['node0001-int', 'node0002-int']),
    ('rack[1-2]-node[01-02]-int', ['rack1-node01-int', 'rack1-node02-int', 'rack2-node01-int', 'rack2-node02-int']),
    ('node[1-2].ib.cluster', ['node1.ib.cluster', 'node2.ib.cluster']),
    ('node[1,3-5]-ib,login1', ['node1-ib', 'node3-ib', 'node4-ib', 'node5-ib', 'login1']),
    ('n[1-2]x', ['n1x', 'n2x']),
    ('n[1-2]5', ['n15', 'n25']),
    ('n[09-10]x', ['n09x', 'n10x']),
    ('x[1-2]y[3]z', ['x1y3z', 'x2y3z']),
    ('n[1-2]-', ['n1-', 'n2-']),
    ('n[1-2]x,n[3-4]y', ['n1x', 'n2x', 'n3y', 'n4y']),
    ('e[1-2][3-4]x[5-6]y', ['e13x5y', 'e13x6y', 'e23x5y', 'e23x6y', 'e14x5y', 'e14x6y', 'e24x5y', 'e24x6y']),
    ('n[1-2]a1b', ['n1a1b', 'n2a1b']),
]


@pytest.mark.parametrize('release, expr, expected', _with_releases(SUFFIX_CASES))
def test_shared_suffix_per_release(release, expr, expected):
    if release_tuple(release) >= (23, 11):
        assert expand_hostlist(expr, release=release) == expected
        assert first_host(expr, release=release) == expected[0]
    else:
        with pytest.raises(HostlistError) as excinfo:
            expand_hostlist(expr, release=release)
        assert 'after the last bracket group' in str(excinfo.value)
        assert 'Slurm 22.05 rejects it' in str(excinfo.value)
        assert 'needs Slurm 23.11 or newer' in str(excinfo.value)


# (release, expression, hosts or the start of the error): hostlist functions are 25.05+ (expanded by slurmctld);
# before, "{" is an ordinary character (checked with scontrol 22.05.8 and 24.11.5).
RELEASE_CASES = [
    ('22.05', 'feature{gpu}', ['feature{gpu}']),
    ('24.11', 'feature{gpu}', ['feature{gpu}']),
    ('24.11', 'a{b}[1-2]', ['a{b}1', 'a{b}2']),
    ('25.05', 'feature{gpu}', "hostlist function 'feature{gpu}'"),
    ('26.05', 'feature{gpu}', "hostlist function 'feature{gpu}'"),
    ('26.05', 'n1,switchwith{n1}', "hostlist function 'switchwith{n1}'"),
    ('26.05', 'a}', "hostlist function 'a}'"),
    ('23.02', 'n[1-2]x', 'Slurm 23.02 rejects it'),
    ('23.11', 'n[1-2]x', ['n1x', 'n2x']),
    ('21.08', 'n[1-2]x', 'Slurm 21.08 rejects it'),
    ('27.05', 'n[1-2]x', ['n1x', 'n2x']),
    ('slurm-wlm 22.05.8', 'n[1-2]x', 'Slurm 22.05 rejects it'),
    ('slurm 24.11.5', 'n[1-2]x', ['n1x', 'n2x']),
    ((22, 5, 8), 'n[1-2]x', 'Slurm 22.05 rejects it'),
    ((24, 11), 'n[1-2]x', ['n1x', 'n2x']),
    (None, 'n[1-2]x', ['n1x', 'n2x']),
]


@pytest.mark.parametrize('release, expr, expected', RELEASE_CASES)
def test_expand_hostlist_release_rules(release, expr, expected):
    if isinstance(expected, list):
        assert expand_hostlist(expr, release=release) == expected
    else:
        with pytest.raises(HostlistError) as excinfo:
            expand_hostlist(expr, release=release)
        assert expected in str(excinfo.value)


RELEASE_TUPLE_CASES = [
    ('22.05', (22, 5)), ('24.11', (24, 11)), ('26.05', (26, 5)), ('24.11.5', (24, 11)),
    ('slurm 24.11.5', (24, 11)), ('slurm-wlm 22.05.8', (22, 5)), ('SLURM 26.05.5\n', (26, 5)),
    ('26.05.0-0rc1', (26, 5)), ((24, 11), (24, 11)), ((24, 11, 5), (24, 11)), (None, (26, 5)),
]


@pytest.mark.parametrize('release, expected', RELEASE_TUPLE_CASES)
def test_release_tuple(release, expected):
    assert release_tuple(release) == expected


@pytest.mark.parametrize('release', ['', '24', 'latest', '24.x', 'v24.11', 'slurm', 24.11, 2411, (24,), (24, '11'),
                                     (True, 1), (24, 11, 5, 1), [24, 11], b'24.11'])
def test_release_tuple_errors(release):
    with pytest.raises(HostlistError) as excinfo:
        release_tuple(release)
    assert 'unknown Slurm release' in str(excinfo.value)
    with pytest.raises(HostlistError):
        expand_hostlist('n1', release=release)
    with pytest.raises(HostlistError):
        compress_hostlist(['n1'], release=release)


EXPAND_ERROR_CASES = [
    ('a,,b', 'empty item #2'),
    (',n1', 'empty item #1'),
    ('n[1-2],', 'empty item #2'),
    ('n[5-1]', "descending range '5-1'"),
    ('n[1-2', 'unbalanced "["'),
    ('n1],x', 'unbalanced "]"'),
    ('n[1-2]]', 'unbalanced "]"'),  # 23.11+ Slurm: n1], n2] (the "]" as suffix)
    ('n[1-2]x]', 'unbalanced "]"'),
    ('n[1-3]x[', 'unbalanced "["'),  # 22.05: the host n[1-3]x]
    ('n[[1-2]]', 'nested "["'),
    ('n[a-b]', "invalid range 'a-b'"),
    ('n[1-]', "invalid range '1-'"),
    ('n[-2]', "invalid range '-2'"),
    ('n[1-9:2]', "invalid range '1-9:2'"),  # no release has a step syntax
    ('n[1-9/2]', "invalid range '1-9/2'"),
    ('n[+1-2]', "invalid range '+1-2'"),
    ('n[1-2-3]', "invalid range '1-2-3'"),
    ('n[\u0661-\u0662]', 'digits 0-9 only'),  # Arabic-Indic digits are not digits to Slurm
    ('n[]', 'empty range'),
    ('n[1,,2]', 'empty range'),
    ('n[ 1-2]', 'whitespace inside brackets'),
    ('n[0-%d]' % MAX_RANGE, 'at most %d per range' % MAX_RANGE),
    ('a[1-40000,1-30000]b[1]', 'a bracket group before the last one'),
    ('a[1-1000]b[1-1001]', 'more than %d hosts' % MAX_HOSTS),
    (['n[1-60000]'] * 17, 'more than %d hosts' % MAX_HOSTS),
    (None, 'got NoneType'),
    (5, 'got int'),
    (b'n1', 'got bytes'),
    ({'n1': 1}, 'got dict'),
    (['n1', 2], 'found int 2'),
]


@pytest.mark.parametrize('release, expr, message', _with_releases(EXPAND_ERROR_CASES))
def test_expand_hostlist_errors(release, expr, message):
    with pytest.raises(HostlistError, match=None) as excinfo:
        expand_hostlist(expr, release=release)
    assert message in str(excinfo.value)
    assert isinstance(excinfo.value, ValueError)


def test_expand_hostlist_cap_allows_exactly_max_hosts():
    hosts = expand_hostlist('a[1-1000]b[1-1000]')
    assert len(hosts) == MAX_HOSTS
    assert hosts[:2] == ['a1b1', 'a1b2']
    assert hosts[-1] == 'a1000b1000'


FIRST_HOST_CASES = [
    ('nodeA,nodeB[001,003],nodeC', 'nodeA'),
    ('gpu[001-004],cpu[001-002]', 'gpu001'),
    ('rack[0-1]node[0-1]', 'rack0node0'),
    (['', 'n[7-9]'], 'n7'),
    ('a[1-1000]b[1-1000]', 'a1b1'),
    ('rack[1-2]-node[01-02]-int', 'rack1-node01-int'),
]


@pytest.mark.parametrize('expr, expected', FIRST_HOST_CASES)
def test_first_host(expr, expected):
    assert first_host(expr) == expected


@pytest.mark.parametrize('expr, message', [
    ('', 'holds no host'),
    ([], 'holds no host'),
    ('n1,n[5-1]', 'descending range'),  # the whole expression is validated, not only the first item
    ('n1,n[1-2]-int', 'Slurm 22.05 rejects it'),
])
def test_first_host_errors(expr, message):
    with pytest.raises(HostlistError) as excinfo:
        first_host(expr, release='22.05')
    assert message in str(excinfo.value)


# (hosts, expected string), the same in every release; every expected value was checked with
# `scontrol show hostlist` of Slurm 22.05.8 and 24.11.5
COMPRESS_CASES = [
    (['rack04-09', 'rack04-10'], 'rack04-[09-10]'),
    (['node001', 'node002'], 'node[001-002]'),
    (['rack0node0', 'rack0node1', 'rack1node0', 'rack1node1'], 'rack0node[0-1],rack1node[0-1]'),
    (['nodeA', 'nodeB001', 'nodeB003', 'nodeC'], 'nodeA,nodeB[001,003],nodeC'),
    (['gpu001', 'gpu002', 'gpu003', 'gpu004', 'cpu001', 'cpu002'], 'gpu[001-004],cpu[001-002]'),
    (['n3', 'n1', 'n2'], 'n[3,1-2]'),
    (['n2', 'n1'], 'n[2,1]'),
    (['n1', 'n1', 'n2'], 'n[1,1-2]'),
    (['n1', 'n01'], 'n[1,01]'),
    (['n01', 'n1'], 'n[01,1]'),
    (['n9', 'n10'], 'n[9-10]'),
    (['n9', 'n10', 'n11'], 'n[9-11]'),
    (['n09', 'n10'], 'n[09-10]'),
    (['n9', 'n010'], 'n[9,010]'),
    (['n08', 'n9'], 'n[08,9]'),
    (['n98', 'n99', 'n100'], 'n[98-100]'),
    (['n099', 'n100'], 'n[099-100]'),
    (['n0', 'n1'], 'n[0-1]'),
    (['n00', 'n01'], 'n[00-01]'),
    (['n1', 'n02', 'n3'], 'n[1,02,3]'),
    (['n1', 'n2', 'n4'], 'n[1-2,4]'),
    (['1', '2', '3'], '[1-3]'),
    (['a', 'a'], 'a,a'),
    (['a', 'b', 'a'], 'a,b,a'),
    (['a', 'a1', 'a2'], 'a,a[1-2]'),
    (['a1', 'a', 'a2'], 'a1,a,a2'),
    (['a1', 'b1', 'a2'], 'a1,b1,a2'),
    (['a1', 'a2', 'b1', 'a3'], 'a[1-2],b1,a3'),
    (['a-1', 'a-2'], 'a-[1-2]'),
    (['rack1node3', 'rack1node4', 'rack2node3'], 'rack1node[3-4],rack2node3'),
    (['n1x', 'n2x', 'n3y'], 'n1x,n2x,n3y'),
    (['node0001-int', 'node0002-int'], 'node0001-int,node0002-int'),  # Slurm never writes a suffix
    (['node0001-int', 'node0002-int', 'node3', 'node4'], 'node0001-int,node0002-int,node[3-4]'),
    (['node1.ib.cluster', 'node2.ib.cluster'], 'node1.ib.cluster,node2.ib.cluster'),
    (['rack1-node01', 'rack1-node02', 'rack2-node01'], 'rack1-node[01-02],rack2-node01'),
    (['a.b1', 'a.b2'], 'a.b[1-2]'),
    (['a1b', 'a2b'], 'a1b,a2b'),
    (['n3'], 'n3'),
    (['n007'], 'n007'),
    ([], ''),
    (('n1', 'n2'), 'n[1-2]'),
]


@pytest.mark.parametrize('release, hosts, expected', _with_releases(COMPRESS_CASES))
def test_compress_hostlist(release, hosts, expected):
    hosts = list(hosts)
    assert compress_hostlist(hosts, release=release) == expected
    assert expand_hostlist(expected, release=release) == hosts


def test_compress_hostlist_takes_any_iterable():
    assert compress_hostlist(iter(['n1', 'n2'])) == 'n[1-2]'
    assert compress_hostlist(name for name in ['n1', 'n2']) == 'n[1-2]'


@pytest.mark.parametrize('release, hosts, expected', [
    ('22.05', ['feature{gpu}1', 'feature{gpu}2'], 'feature{gpu}[1-2]'),
    ('24.11', ['a{b}1', 'a{b}2'], 'a{b}[1-2]'),
    ('25.05', ['a{b}1'], "host name 'a{b}1' holds a brace: Slurm 25.05"),
    ('26.05', ['n1', 'x}'], "host name 'x}' holds a brace: Slurm 26.05"),
])
def test_compress_hostlist_braces_per_release(release, hosts, expected):
    if ' ' not in expected:
        assert compress_hostlist(hosts, release=release) == expected
        assert expand_hostlist(expected, release=release) == hosts
    else:
        with pytest.raises(HostlistError) as excinfo:
            compress_hostlist(hosts, release=release)
        assert expected in str(excinfo.value)


COMPRESS_ERROR_CASES = [
    ('n1,n2', 'got a string'),
    (b'n1', 'got a string'),
    (5, 'got int'),
    (None, 'got NoneType'),
    (['n1', 2], 'found int 2'),
    (['n1', ''], 'empty host name'),
    (['n[1-2]'], 'holds a comma, a bracket or whitespace'),
    (['n1,n2'], 'holds a comma, a bracket or whitespace'),
    (['n 1'], 'holds a comma, a bracket or whitespace'),
    (['n1]'], 'holds a comma, a bracket or whitespace'),
    # Every kind of whitespace str.isspace() knows: tab, newline, no-break and ideographic space.
    (['n1', 'n\t2'], 'holds a comma, a bracket or whitespace'),
    (['n3\n'], 'holds a comma, a bracket or whitespace'),
    (['n\u00a04'], 'holds a comma, a bracket or whitespace'),
    (['n\u30005'], 'holds a comma, a bracket or whitespace'),
]


@pytest.mark.parametrize('hosts, message', COMPRESS_ERROR_CASES)
def test_compress_hostlist_errors(hosts, message):
    with pytest.raises(HostlistError) as excinfo:
        compress_hostlist(hosts)
    assert message in str(excinfo.value)


# Property: expand(compress(x)) == x for any list of valid names (order and duplicates kept).
_PREFIXES = st.text(alphabet='abcnode-_.', min_size=0, max_size=4).flatmap(
    lambda head: st.one_of(
        st.just(head),
        # digits in the middle of the prefix, e.g. rack1node
        st.tuples(st.integers(0, 120), st.sampled_from(['node', 'n', '-', 'x'])).map(
            lambda pair: '%s%d%s' % (head, pair[0], pair[1])),
    ))
_NUMBER = st.tuples(st.integers(0, 1200), st.integers(0, 5)).map(
    lambda pair: str(pair[0]).zfill(pair[1]))  # random zero padding, sometimes none
_NAME = st.one_of(
    st.tuples(_PREFIXES, _NUMBER).map(''.join),                       # prefix + number
    st.tuples(_PREFIXES, _NUMBER, st.sampled_from(['x', '-ib', 'a1b', '-int', '.ib.cluster'])).map(''.join),
    st.text(alphabet='abc', min_size=1, max_size=3),                  # no digits at all
).filter(bool)


@st.composite
def _host_lists(draw):
    base = draw(st.lists(_NAME, max_size=12))
    # runs of consecutive numbers (what compress merges), with the same or a changing padding
    prefix = draw(_PREFIXES)
    start = draw(st.integers(0, 1100))
    width = draw(st.integers(0, 5))
    # mostly one padding, sometimes another one in the middle of the run (n9,n010 must not merge)
    paddings = st.sampled_from([width, width, width, 0, 2, 3])
    run = [prefix + str(number).zfill(draw(paddings)) for number in range(start, start + draw(st.integers(0, 15)))]
    hosts = base + run
    hosts += draw(st.lists(st.sampled_from(hosts), max_size=5)) if hosts else []  # duplicates
    seed = draw(st.integers(0, 2 ** 32 - 1))
    if draw(st.booleans()):
        random.Random(seed).shuffle(hosts)
    return hosts


@settings(max_examples=300, deadline=None)
@given(_host_lists(), st.sampled_from(RELEASES))
def test_compress_expand_round_trip(hosts, release):
    compressed = compress_hostlist(hosts, release=release)
    assert expand_hostlist(compressed, release=release) == hosts
    assert expand_hostlist(hosts, release=release) == hosts  # plain names expand to themselves
    if hosts:
        assert first_host(compressed, release=release) == hosts[0]

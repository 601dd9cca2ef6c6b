# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random

import pytest

from hypothesis import given, settings, strategies as st

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import (
    MAX_HOSTS,
    MAX_RANGE,
    HostlistError,
    compress_hostlist,
    expand_hostlist,
    first_host,
)


# (expression, expected hosts); every expected value was checked with `scontrol show hostnames` of Slurm 22.05.8
EXPAND_CASES = [
    ('rack04-[09-10]', ['rack04-09', 'rack04-10']),
    ('node[001-002]', ['node001', 'node002']),
    ('rack[0-1]node[0-1]', ['rack0node0', 'rack0node1', 'rack1node0', 'rack1node1']),
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


@pytest.mark.parametrize('expr, expected', EXPAND_CASES)
def test_expand_hostlist(expr, expected):
    assert expand_hostlist(expr) == expected


EXPAND_ERROR_CASES = [
    ('a,,b', 'empty item #2'),
    (',n1', 'empty item #1'),
    ('n[1-2],', 'empty item #2'),
    ('n[5-1]', "descending range '5-1'"),
    ('n[1-2', 'unbalanced "["'),
    ('n1],x', 'unbalanced "]"'),
    ('n[1-2]]', 'unbalanced "]"'),
    ('n[[1-2]]', 'nested "["'),
    ('n[a-b]', "invalid range 'a-b'"),
    ('n[1-]', "invalid range '1-'"),
    ('n[-2]', "invalid range '-2'"),
    ('n[+1-2]', "invalid range '+1-2'"),
    ('n[1-2-3]', "invalid range '1-2-3'"),
    ('n[\u0661-\u0662]', 'digits 0-9 only'),  # Arabic-Indic digits are not digits to Slurm
    ('n[]', 'empty range'),
    ('n[1,,2]', 'empty range'),
    ('n[ 1-2]', 'whitespace inside brackets'),
    ('n[1-2]x', "text 'x' after the last bracket group"),
    ('n[1-2]5', "text '5' after the last bracket group"),
    ('x[1-2]y[3]z', "text 'z' after the last bracket group"),
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


@pytest.mark.parametrize('expr, message', EXPAND_ERROR_CASES)
def test_expand_hostlist_errors(expr, message):
    with pytest.raises(HostlistError, match=None) as excinfo:
        expand_hostlist(expr)
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
]


@pytest.mark.parametrize('expr, expected', FIRST_HOST_CASES)
def test_first_host(expr, expected):
    assert first_host(expr) == expected


@pytest.mark.parametrize('expr, message', [
    ('', 'holds no host'),
    ([], 'holds no host'),
    ('n1,n[5-1]', 'descending range'),  # the whole expression is validated, not only the first item
])
def test_first_host_errors(expr, message):
    with pytest.raises(HostlistError) as excinfo:
        first_host(expr)
    assert message in str(excinfo.value)


# (hosts, expected string); every expected value was checked with `scontrol show hostlist` of Slurm 22.05.8
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
    (['a1b', 'a2b'], 'a1b,a2b'),
    (['n3'], 'n3'),
    (['n007'], 'n007'),
    ([], ''),
    (iter(['n1', 'n2']), 'n[1-2]'),
]


@pytest.mark.parametrize('hosts, expected', COMPRESS_CASES)
def test_compress_hostlist(hosts, expected):
    hosts = list(hosts)
    assert compress_hostlist(hosts) == expected
    assert expand_hostlist(expected) == hosts


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
    st.tuples(_PREFIXES, _NUMBER, st.sampled_from(['x', '-ib', 'a1b'])).map(''.join),  # suffix after it
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


@settings(max_examples=500, deadline=None)
@given(_host_lists())
def test_compress_expand_round_trip(hosts):
    compressed = compress_hostlist(hosts)
    assert expand_hostlist(compressed) == hosts
    assert expand_hostlist(hosts) == hosts  # plain names expand to themselves
    if hosts:
        assert first_host(compressed) == hosts[0]

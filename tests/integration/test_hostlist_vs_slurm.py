# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Compare plugins/module_utils/_hostlist.py with the real Slurm: ``scontrol show hostnames`` / ``show hostlist``.

Needs only an ``scontrol`` binary (skipped without one), no daemon: ``scontrol show hostnames|hostlist`` parse the
expression locally but still want a configuration. The release is read from ``scontrol --version`` and the
module's rules for that release are compared with it. Where scontrol comes from:

- default: ``scontrol`` on ``PATH`` (the host's Slurm 22.05, or the wrappers of a podman dev cluster after
  ``eval "$(make -s cluster-env SLURM=24.11)"``), with ``$SLURM_CONF`` when it names a file, else a throwaway
  one-node slurm.conf in a temporary folder;
- ``HOSTLIST_SLURM_IMAGE=localhost/clusterops-slurm:24.11`` (or ``:26.05``): the ``scontrol`` inside that local
  podman image (built by ``dev/cluster/images/build.sh``), run once with ``podman run --rm -i --network=none``
  and a throwaway slurm.conf, no cluster needed.

All answers are asked in one batch (one ``sh`` reading the expressions from stdin), so a container costs one
start, not one per expression.

Run: ``.venv/bin/python -m pytest tests/integration/test_hostlist_vs_slurm.py -q``. Set ``HOSTLIST_SEED`` to
replay a random run (the seed is in the failure message).
"""

from __future__ import annotations

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
    HOSTLIST_FUNCTIONS_SINCE,
    SUFFIX_SINCE,
    HostlistError,
    compress_hostlist,
    expand_hostlist,
    release_tuple,
)

IMAGE = os.environ.get('HOSTLIST_SLURM_IMAGE') or None
SCONTROL = shutil.which('scontrol')
PODMAN = shutil.which('podman')
RANDOM_CASES = int(os.environ.get('HOSTLIST_RANDOM_CASES', '300'))
SEED = int(os.environ.get('HOSTLIST_SEED', random.SystemRandom().randrange(2 ** 32)))

_THROWAWAY_CONF = """\
ClusterName=hostlisttest
SlurmctldHost=localhost
NodeName=localhost CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES State=UP
"""

# Reads pairs of lines (what, expression) and answers each with scontrol's stdout, a marker, its stderr and rc.
# scontrol reads /dev/null: a podman-exec wrapper must not eat the loop's own stdin.
_BATCH = r"""
err=$(mktemp)
scontrol --version </dev/null 2>&1 | head -n 1
while IFS= read -r what && IFS= read -r expr; do
  scontrol show "$what" "$expr" </dev/null 2>"$err"
  rc=$?
  echo '@@hostlist-test-stderr@@'
  cat "$err"
  echo "@@hostlist-test-rc@@ $rc"
done
rm -f "$err"
"""

# Asked for an image: podman and the image must be there (a failure, never a silent skip).
pytestmark = pytest.mark.skipif(not IMAGE and SCONTROL is None, reason='scontrol (Slurm client) is not installed')


class Scontrol:
    """Answers of one real scontrol, asked in batches and cached: ``show(what, expr) -> (ok, lines)``."""

    def __init__(self, tmp_dir):
        self.env = dict(os.environ)
        self.answers = {}
        self.version = None
        if IMAGE:
            self.argv = [PODMAN, 'run', '--rm', '-i', '--network=none', IMAGE, 'sh', '-c',
                         'export SLURM_CONF=/tmp/slurm.conf\ncat >/tmp/slurm.conf <<"EOF"\n%sEOF\n%s'
                         % (_THROWAWAY_CONF, _BATCH)]
        else:
            conf = self.env.get('SLURM_CONF')
            if not conf or not os.path.isfile(conf):
                conf = os.path.join(tmp_dir, 'slurm.conf')
                with open(conf, 'w') as handle:
                    handle.write(_THROWAWAY_CONF)
                self.env['SLURM_CONF'] = conf
            self.argv = ['sh', '-c', _BATCH]

    def ask(self, pairs, retry=True):
        """Ask every (what, expr) not asked yet, in one run of the batch script.

        Slurm's own refusal always says "Invalid hostlist". An answer with rc != 0 and no such words
        is the wrapper's or the container's failure (a busy dev cluster's `podman exec` can fail
        once): those are asked once more; a second failure stays and its rc and stderr are shown."""
        todo = []
        for pair in pairs:
            if pair not in self.answers and pair not in todo:
                assert '\n' not in pair[1], 'the batch reads one expression per line: %r' % (pair[1],)
                todo.append(pair)
        if not todo and self.version is not None:
            return
        stdin = ''.join('%s\n%s\n' % pair for pair in todo)
        result = subprocess.run(self.argv, input=stdin, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, universal_newlines=True, timeout=900, check=False)
        if result.returncode != 0:
            pytest.fail('%s: rc=%d %s' % (' '.join(self.argv[:7]), result.returncode, result.stderr.strip()))
        lines = result.stdout.split('\n')
        self.version = lines[0]
        pos = 1
        for pair in todo:
            end = lines.index('@@hostlist-test-stderr@@', pos)
            out = lines[pos:end]
            pos = end + 1
            end = next(index for index in range(pos, len(lines)) if lines[index].startswith('@@hostlist-test-rc@@ '))
            err = lines[pos:end]
            rc = int(lines[end].split()[1])
            pos = end + 1
            text = '\n'.join(out + err)
            self.answers[pair] = (rc == 0 and 'Invalid hostlist' not in text, out, err, rc)
        failed = [pair for pair in todo if self.answers[pair][3] != 0
                  and 'Invalid hostlist' not in '\n'.join(self.answers[pair][1] + self.answers[pair][2])]
        if failed and retry:
            for pair in failed:
                del self.answers[pair]
            self.ask(failed, retry=False)

    def show(self, what, expr):
        """(ok, stdout lines): ok is False when scontrol rejects EXPR."""
        self.ask([(what, expr)])
        return self.answers[(what, expr)][:2]

    def stderr(self, what, expr):
        self.ask([(what, expr)])
        return self.answers[(what, expr)][2]

    def why(self, what, expr):
        """For failure messages: the version, rc and stderr of one answer."""
        ok, out, err, rc = self.answers[(what, expr)]
        return '%s, rc=%d, stderr=%r, stdout starts %r' % (self.version, rc, '\n'.join(err)[-300:], out[:3])


def _release_of(version_line):
    try:
        return release_tuple(version_line.strip())
    except HostlistError:
        pytest.skip('scontrol --version printed %r, not a Slurm release' % (version_line,))


# (expression, hosts): the same answer from every release (22.05.8, 24.11.5, 26.05.5).
EXPRESSIONS = [
    ('rack04-[09-10]', ['rack04-09', 'rack04-10']),
    ('node[001-002]', ['node001', 'node002']),
    ('rack[0-1]node[0-1]', ['rack0node0', 'rack0node1', 'rack1node0', 'rack1node1']),
    ('rack[1-2]-node[01-02]', ['rack1-node01', 'rack1-node02', 'rack2-node01', 'rack2-node02']),
    ('nodeA,nodeB[001,003],nodeC', ['nodeA', 'nodeB001', 'nodeB003', 'nodeC']),
    ('gpu[001-004],cpu[001-002]', ['gpu001', 'gpu002', 'gpu003', 'gpu004', 'cpu001', 'cpu002']),
    ('node[1,3-5]', ['node1', 'node3', 'node4', 'node5']),
    ('n[9-10]', ['n9', 'n10']), ('n[09-10]', ['n09', 'n10']), ('n[009-10]', ['n009', 'n010']),
    ('n[1-02]', ['n1', 'n2']), ('n[01-1]', ['n01']), ('n[1,01]', ['n1', 'n01']),
    ('n3,n1,n2', ['n3', 'n1', 'n2']), ('n1,n1,n2', ['n1', 'n1', 'n2']), ('a,b,a', ['a', 'b', 'a']),
    ('n[1-3,2]', ['n1', 'n2', 'n3', 'n2']), ('n[1,2-3,5]', ['n1', 'n2', 'n3', 'n5']),
    ('[1-3]', ['1', '2', '3']), ('[1-2][3-4]', ['13', '14', '23', '24']),
    ('n[1-2]-[3-4]', ['n1-3', 'n1-4', 'n2-3', 'n2-4']), ('n[1-2]5[1]', ['n151', 'n251']),
    ('node1.cluster.local,node-2.ib', ['node1.cluster.local', 'node-2.ib']),
    ('a.b[1-2]', ['a.b1', 'a.b2']),
    (' a , b ', ['a', 'b']), ('n1 n2', ['n1', 'n2']), ('n1\tn2', ['n1', 'n2']),
    ('n[0-65535]', ['n%d' % n for n in range(65536)]),
    ('a[1-65536]b[1]', ['a%db1' % n for n in range(1, 65537)]),
    ('a[1-40000,1-30000]', ['a%d' % n for n in range(1, 40001)] + ['a%d' % n for n in range(1, 30001)]),
    ('e[1-2][3-4]x[5-6]', ['e13x5', 'e13x6', 'e23x5', 'e23x6', 'e14x5', 'e14x6', 'e24x5', 'e24x6']),
    ('e[1-2]a[3-4]b[5-6]c[7-8]', None), ('e[2,1]a[3]b[5-6]', None), ('a[1-3][1-2][1]x[1-2]y[1]', None),
    ('n[4294967295-4294967296]', ['n4294967295', 'n4294967296']),
]

# (expression, hosts): a shared suffix after the last bracket group, read since 23.11, rejected by 22.05.
SUFFIX_EXPRESSIONS = [
    ('node[0001-0002]-int', ['node0001-int', 'node0002-int']),
    ('rack[1-2]-node[01-02]-int', ['rack1-node01-int', 'rack1-node02-int', 'rack2-node01-int', 'rack2-node02-int']),
    ('node[1-2].ib.cluster', ['node1.ib.cluster', 'node2.ib.cluster']),
    ('node[1,3-5]-ib,login1', ['node1-ib', 'node3-ib', 'node4-ib', 'node5-ib', 'login1']),
    ('n[1-2]x', ['n1x', 'n2x']), ('n[1-2]5', ['n15', 'n25']), ('n[09-10]x', ['n09x', 'n10x']),
    ('x[1-2]y[3]z', ['x1y3z', 'x2y3z']), ('n[1-2]-', ['n1-', 'n2-']),
    ('n[1-2]x,n[3-4]y', ['n1x', 'n2x', 'n3y', 'n4y']),
    ('e[1-2][3-4]x[5-6]y', ['e13x5y', 'e13x6y', 'e23x5y', 'e23x6y', 'e14x5y', 'e14x6y', 'e24x5y', 'e24x6y']),
    ('n[1-2]a1b', ['n1a1b', 'n2a1b']),
]


# Rejected by Slurm and by us, in every release.
REJECTED_BY_BOTH = ['n[5-1]', 'n[a-b]', 'n[]', 'n[1,,2]', 'n[-2]', 'n[1-2-3]', 'n[0-65536]', 'n[1-2 ]',
                    'a[1-40000,1-30000]b[1]', 'n[1-9:2]', 'n[1-9/2]']

# (expression, {release: what scontrol of that release prints}); we raise instead, in every release. A release
# that is not a key rejects the expression itself (then it is a REJECTED_BY_BOTH case there).
SLURM_ACCEPTS_WE_REJECT = [
    ('a,,b', {(22, 5): ['a', 'b'], (24, 11): ['a', 'b'], (26, 5): ['a', 'b']}),
    ('n[1-2],', {(22, 5): ['n1', 'n2'], (24, 11): ['n1', 'n2'], (26, 5): ['n1', 'n2']}),
    (',n1', {(22, 5): ['n1'], (24, 11): ['n1'], (26, 5): ['n1']}),
    ('node1],x', {(22, 5): ['node1]', 'x'], (24, 11): ['node1]', 'x'], (26, 5): ['node1]', 'x']}),
    ('n[ 1-2]', {(22, 5): ['n01', 'n02'], (24, 11): ['n01', 'n02'], (26, 5): ['n01', 'n02']}),
    ('n[+1-2]', {(22, 5): ['n01', 'n02'], (24, 11): ['n01', 'n02'], (26, 5): ['n01', 'n02']}),
    ('n[1-]', {(22, 5): ['n1'], (24, 11): ['n1'], (26, 5): ['n1']}),
    ('node[1-2', {(22, 5): ['node]']}),  # 23.02+: "[" without "]" is Invalid hostlist
    ('n[1-3]x[', {(22, 5): ['n[1-3]x]']}),
    ('n[1-2]]', {(24, 11): ['n1]', 'n2]'], (26, 5): ['n1]', 'n2]']}),  # 23.11+: "]" is the suffix
    ('n[[1-2]]', {(24, 11): ['n[1]', 'n[2]'], (26, 5): ['n[1]', 'n[2]']}),
]

# Host lists for `scontrol show hostlist` (the same string in every release).
HOST_LISTS = [
    ['rack04-09', 'rack04-10'],
    ['rack0node0', 'rack0node1', 'rack1node0', 'rack1node1'],
    ['rack1-node01', 'rack1-node02', 'rack2-node01', 'rack2-node02'],
    ['nodeA', 'nodeB001', 'nodeB003', 'nodeC'],
    ['gpu001', 'gpu002', 'gpu003', 'gpu004', 'cpu001', 'cpu002'],
    ['node1', 'node3', 'node4', 'node5'],
    ['n3', 'n1', 'n2'], ['n3', 'n1', 'n1', 'n2'], ['n2', 'n1'], ['n1', 'n01'], ['n01', 'n1'],
    ['n9', 'n10'], ['n09', 'n10'], ['n9', 'n010'], ['n08', 'n9'], ['n98', 'n99', 'n100'],
    ['n099', 'n100'], ['n00', 'n01'], ['n1', 'n02', 'n3'], ['1', '2', '3'], ['a', 'a'],
    ['a', 'a1', 'a2'], ['a1', 'a', 'a2'], ['a1', 'b1', 'a2'], ['a1', 'a2', 'b1', 'a3'],
    ['rack1node3', 'rack1node4', 'rack2node3'], ['n1x', 'n2x', 'n3y'], ['a-1', 'a-2'],
    ['node0001-int', 'node0002-int'], ['node0001-int', 'node0002-int', 'node3', 'node4'],
    ['node1.ib.cluster', 'node2.ib.cluster'], ['node1.cluster', 'node2'], ['a.b1', 'a.b2'],
]


@pytest.fixture(scope='module')
def slurm(tmp_path_factory):
    """The scontrol under test, with every table answer asked in one batch; skipped when it cannot expand."""
    if IMAGE and PODMAN is None:
        pytest.fail('HOSTLIST_SLURM_IMAGE=%s but podman is not installed: run make molecule-setup' % (IMAGE,))
    scontrol = Scontrol(str(tmp_path_factory.mktemp('slurm')))
    pairs = [('hostnames', 'probe[1-2]')]
    pairs += [('hostnames', expr) for expr, dummy in EXPRESSIONS + SUFFIX_EXPRESSIONS]
    pairs += [('hostnames', expr) for expr in REJECTED_BY_BOTH]
    pairs += [('hostnames', expr) for expr, dummy in SLURM_ACCEPTS_WE_REJECT]
    pairs += [('hostlist', ','.join(hosts)) for hosts in HOST_LISTS]
    pairs += [('hostlist', 'n3,n1,n1,n2'), ('hostlistsorted', 'n3,n1,n1'), ('hostlist', 'node[0001-0002]-int')]
    scontrol.ask(pairs)
    probe = scontrol.show('hostnames', 'probe[1-2]')
    if probe != (True, ['probe1', 'probe2']):
        pytest.skip('scontrol cannot expand hostlists (%s): %r' % (scontrol.version, probe))
    scontrol.release = _release_of(scontrol.version)
    return scontrol


def test_release_is_known(slurm):
    """The rules of this release are the module's (a release it does not know would take the newest rules)."""
    assert slurm.release >= (21, 8), slurm.version


@pytest.mark.parametrize('expr, hosts', EXPRESSIONS, ids=[expr for expr, dummy in EXPRESSIONS])
def test_expand_matches_scontrol_show_hostnames(slurm, expr, hosts):
    ok, slurm_hosts = slurm.show('hostnames', expr)
    assert ok, '%r rejected: %s' % (expr, slurm.why('hostnames', expr))
    if hosts is not None:
        assert slurm_hosts == hosts  # the table tells the truth
    assert expand_hostlist(expr, release=slurm.version) == slurm_hosts


@pytest.mark.parametrize('expr, hosts', SUFFIX_EXPRESSIONS, ids=[expr for expr, dummy in SUFFIX_EXPRESSIONS])
def test_shared_suffix_per_release(slurm, expr, hosts):
    """23.11+ reads the text after the last bracket as a suffix shared by every host; 22.05 rejects it."""
    ok, slurm_hosts = slurm.show('hostnames', expr)
    if slurm.release >= SUFFIX_SINCE:
        assert ok, '%r rejected: %s' % (expr, slurm.why('hostnames', expr))
        assert slurm_hosts == hosts
        assert expand_hostlist(expr, release=slurm.version) == hosts
    else:
        assert not ok, '%s accepts %r: %r' % (slurm.version, expr, slurm_hosts)
        with pytest.raises(HostlistError, match='after the last bracket group'):
            expand_hostlist(expr, release=slurm.version)


@pytest.mark.parametrize('expr', REJECTED_BY_BOTH)
def test_rejected_by_slurm_and_by_us(slurm, expr):
    ok, slurm_hosts = slurm.show('hostnames', expr)
    assert not ok, '%s accepts %r: %r' % (slurm.version, expr, slurm_hosts[:5])
    with pytest.raises(HostlistError):
        expand_hostlist(expr, release=slurm.version)


@pytest.mark.parametrize('expr, per_release', SLURM_ACCEPTS_WE_REJECT,
                         ids=[expr for expr, dummy in SLURM_ACCEPTS_WE_REJECT])
def test_documented_differences(slurm, expr, per_release):
    """Slurm accepts these with surprising results; we raise instead. Keeps the module docstring honest."""
    known = [release for release in per_release if release[0] == slurm.release[0]]
    ok, slurm_hosts = slurm.show('hostnames', expr)
    if known:
        assert (ok, slurm_hosts) == (True, per_release[known[0]]), slurm.version
    elif slurm.release[0] in (22, 24, 26):
        assert not ok, '%s accepts %r: %r' % (slurm.version, expr, slurm_hosts)
    with pytest.raises(HostlistError):
        expand_hostlist(expr, release=slurm.version)


@pytest.mark.parametrize('hosts', HOST_LISTS, ids=','.join)
def test_compress_matches_scontrol_show_hostlist(slurm, hosts):
    ok, lines = slurm.show('hostlist', ','.join(hosts))
    assert ok
    assert compress_hostlist(hosts, release=slurm.version) == lines[0]
    assert expand_hostlist(lines[0], release=slurm.version) == hosts


def test_slurm_show_hostlist_keeps_order_and_duplicates(slurm):
    assert slurm.show('hostlist', 'n3,n1,n1,n2') == (True, ['n[3,1,1-2]'])
    assert compress_hostlist(['n3', 'n1', 'n1', 'n2'], release=slurm.version) == 'n[3,1,1-2]'


def test_slurm_never_writes_a_suffix(slurm):
    """23.11+ reads node[0001-0002]-int but prints each host whole; compress_hostlist does the same."""
    ok, lines = slurm.show('hostlist', 'node[0001-0002]-int')
    if slurm.release < SUFFIX_SINCE:
        assert not ok
        return
    assert (ok, lines) == (True, ['node0001-int,node0002-int'])
    assert compress_hostlist(['node0001-int', 'node0002-int'], release=slurm.version) == lines[0]


def test_hostlist_functions_per_release(slurm):
    """Before 25.05 "{" is an ordinary character; from 25.05 scontrol sends the expression to slurmctld to expand
    (without a controller: "controller failed to expand hostlist function", after about 20 s of retries)."""
    expr = 'feature{gpu}'
    ok, hosts = slurm.show('hostnames', expr)
    if slurm.release < HOSTLIST_FUNCTIONS_SINCE:
        assert (ok, hosts) == (True, ['feature{gpu}'])
        assert expand_hostlist(expr, release=slurm.version) == hosts
    else:
        assert 'hostlist function' in '\n'.join(slurm.stderr('hostnames', expr)) or hosts != [expr], hosts
        with pytest.raises(HostlistError, match='hostlist function'):
            expand_hostlist(expr, release=slurm.version)


def test_slurm_hostlistsorted_sorts_but_keeps_duplicates(slurm):
    """Recorded for the docstring: the sorted variant sorts and keeps duplicates."""
    ok, lines = slurm.show('hostlistsorted', 'n3,n1,n1')
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


def _random_expression(rng, suffix):
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
            parts.append(rng.choice(['', 'n', '-', 'x', '.ib', '-int', '5']))
        word = ''.join(parts)
        if '[' in word and not suffix:
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
        suffix = rng.choice(['', '', '', 'x', '-ib', '-int', '.ib.cluster'])
        count = rng.randrange(1, 8)
        hosts.extend('%s%s%s' % (prefix, str(number).zfill(rng.choice([width, width, 0, 3])), suffix)
                     for number in range(start, start + count))
        if rng.random() < 0.2:
            hosts.append(rng.choice('abc'))
    hosts += [rng.choice(hosts) for dummy in range(rng.randrange(0, 3))]  # duplicates
    if rng.random() < 0.5:
        rng.shuffle(hosts)
    return hosts


def test_random_expressions_match_scontrol(slurm):
    rng = random.Random(SEED)
    exprs = [_random_expression(rng, slurm.release >= SUFFIX_SINCE) for dummy in range(RANDOM_CASES)]
    slurm.ask([('hostnames', expr) for expr in exprs])
    for expr in exprs:
        ok, slurm_hosts = slurm.show('hostnames', expr)
        assert ok, 'seed %d: %r rejected: %s' % (SEED, expr, slurm.why('hostnames', expr))
        assert expand_hostlist(expr, release=slurm.version) == slurm_hosts, 'seed %d: %r' % (SEED, expr)


def test_random_host_lists_match_scontrol(slurm):
    rng = random.Random(SEED)
    lists = [_random_host_list(rng) for dummy in range(RANDOM_CASES)]
    slurm.ask([('hostlist', ','.join(hosts)) for hosts in lists])
    for hosts in lists:
        ok, lines = slurm.show('hostlist', ','.join(hosts))
        assert ok, 'seed %d: %r rejected: %s' % (SEED, hosts, slurm.why('hostlist', ','.join(hosts)))
        compressed = compress_hostlist(hosts, release=slurm.version)
        assert compressed == lines[0], 'seed %d: %r' % (SEED, hosts)
        assert expand_hostlist(compressed, release=slurm.version) == hosts, 'seed %d: %r' % (SEED, hosts)


# Recording: the answers of this scontrol for the unit tests (tests/unit/fixtures/hostlist/), so that `make unit`
# compares every release without a cluster. Run once per release:
#   .venv/bin/python tests/integration/test_hostlist_vs_slurm.py --record tests/unit/fixtures/hostlist
#   HOSTLIST_SLURM_IMAGE=localhost/clusterops-slurm:24.11 .venv/bin/python tests/integration/... --record ...
RECORD_SEED = 20261130
RECORD_RANDOM_CASES = 150
RECORD_MAX_HOSTS = 200


def record(folder):
    """Write ``scontrol-<release>.json`` into ``folder``: every table expression and a fixed-seed random set,
    each with scontrol's answer and what the module must do with it (``expect``: ``same`` = the same hosts or
    string, or a HostlistError where Slurm rejects; ``we_reject`` = Slurm accepts, the module raises)."""
    import json
    import tempfile

    scontrol = Scontrol(tempfile.mkdtemp(prefix='hostlist-record-'))
    scontrol.ask([('hostnames', 'probe[1-2]')])
    release = release_tuple(scontrol.version.strip())
    rng = random.Random(RECORD_SEED)
    entries = []
    for expr, dummy in EXPRESSIONS + SUFFIX_EXPRESSIONS:
        entries.append(('hostnames', expr, 'same'))
    entries += [('hostnames', expr, 'same') for expr in REJECTED_BY_BOTH]
    entries += [('hostnames', expr, 'we_reject') for expr, dummy in SLURM_ACCEPTS_WE_REJECT]
    if release < HOSTLIST_FUNCTIONS_SINCE:  # from 25.05 the answer is the controller's (see the test above)
        entries.append(('hostnames', 'feature{gpu}', 'same'))
    entries += [('hostlist', ','.join(hosts), 'same') for hosts in HOST_LISTS]
    entries += [('hostnames', _random_expression(rng, release >= SUFFIX_SINCE), 'same')
                for dummy in range(RECORD_RANDOM_CASES)]
    entries += [('hostlist', ','.join(_random_host_list(rng)), 'same') for dummy in range(RECORD_RANDOM_CASES)]
    scontrol.ask([(what, expr) for what, expr, dummy in entries])
    answers = []
    for what, expr, expect in entries:
        ok, out, dummy, rc = scontrol.answers[(what, expr)]
        if rc != 0 and 'Invalid hostlist' not in '\n'.join(out + scontrol.answers[(what, expr)][2]):
            raise SystemExit('%r: scontrol failed (rc=%d), not recorded: %s' % (expr, rc, scontrol.why(what, expr)))
        if len(out) > RECORD_MAX_HOSTS:
            continue
        answers.append({'what': what, 'expr': expr, 'ok': ok, 'stdout': out if ok else [], 'expect': expect})
    path = os.path.join(folder, 'scontrol-%d.%02d.json' % release)
    with open(path, 'w') as handle:  # one answer a line: small diffs when re-recorded
        handle.write('{"version": %s,\n "source": %s,\n "answers": [\n%s\n]}\n' % (
            json.dumps(scontrol.version.strip()), json.dumps(IMAGE or 'scontrol on PATH'),
            ',\n'.join(json.dumps(answer, sort_keys=True) for answer in answers)))
    print('%s: %d answers of %s' % (path, len(answers), scontrol.version.strip()))


if __name__ == '__main__':
    if len(sys.argv) != 3 or sys.argv[1] != '--record':
        raise SystemExit('usage: %s --record FOLDER' % (sys.argv[0],))
    record(sys.argv[2])

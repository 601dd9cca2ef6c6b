# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Slurm hostlist expressions: expand, compress, first host, per Slurm release.

Private to the collection (the leading underscore): no API promise outside it.

Pure standard library, Python 3.8+: this file is shipped to target hosts inside modules.

Semantics are those of ``scontrol show hostnames`` / ``scontrol show hostlist`` of the release given as
``release`` (default :data:`DEFAULT_RELEASE`, the newest one tested), read from Slurm's
``src/common/hostlist.c`` of each release and checked against the real ``scontrol`` of 22.05.8, 24.11.5 and
26.05.5 (``tests/integration/test_hostlist_vs_slurm.py``; its recorded answers, ``tests/unit/fixtures/hostlist/``,
are replayed by the unit tests). Where releases differ:

=================================  ================  ===========================================================
rule                               releases          Slurm source
=================================  ================  ===========================================================
shared suffix after the brackets   23.11 and newer   ``_hostlist_create_bracketed``: text after the last ``]``
(``node[0001-0002]-int``)                            becomes a suffix (commit 0994b5f1, NEWS 23.11: "Allow for a
                                                     shared suffix to be used with the hostlist format"); 22.05
                                                     rejects it (``Invalid hostlist``)
newline separates items            23.02 and newer   separators ``"\\t, \\n"`` (commit 0a614b81); 22.05 keeps a
                                                     newline inside the host name
``[`` without ``]`` rejected       23.02 and newer   commit f520d2a1; 22.05 turns ``node[1-2`` into ``node]``
hostlist functions                 25.05 and newer   ``hostlist_create_client``: a string holding ``{`` is sent to
(``feature{gpu}``, ``block{b1}``)                    slurmctld to expand (``feature{}``, ``switch{}``...); before,
                                                     ``{`` is an ordinary character of a name
=================================  ================  ===========================================================

Everything else is the same in 22.05, 24.11 and 26.05 (the parsing and printing functions of hostlist.c are
unchanged between 24.11.5 and 26.05, and between 22.05.8 and 23.11 but for the rows above; 21.08 equals 22.05):

``scontrol show hostnames EXPR`` (what :func:`expand_hostlist` reproduces)
  - Items are separated by commas; Slurm also splits on spaces and tabs (``"n1 n2"`` is two hosts). Here any
    whitespace separates items.
  - A bracket group holds comma-separated numbers or ``lo-hi`` ranges: ``nodeB[001,003]``, ``n[1,3-5]``. There is
    no step syntax in any release (``n[1-9:2]`` is ``Invalid hostlist``), nor letters (box ranges ``[0x1]`` exist only
    on multi-dimensional BlueGene-style clusters, never on Linux clusters).
  - Zero padding is the width of ``lo``: ``node[001-002]`` -> node001, node002; ``n[09-10]`` -> n09, n10;
    ``n[9-10]`` -> n9, n10; ``n[009-10]`` -> n009, n010.
  - Two bracket groups in one name expand with the first group outermost:
    ``rack[0-1]node[0-1]`` -> rack0node0, rack0node1, rack1node0, rack1node1. With three or more groups Slurm's
    order is odd but kept here: the last group is the innermost loop, the second-to-last the outermost, then down
    to the first: ``e[1-2][3-4]x[5-6]`` -> e13x5, e13x6, e23x5, e23x6, e14x5, e14x6, e24x5, e24x6.
  - 23.11 and newer: the text after the LAST bracket group is a suffix shared by every host of the item:
    ``node[0001-0002]-int`` -> node0001-int, node0002-int; ``rack[1-2]-node[01-02]-int`` -> rack1-node01-int,
    rack1-node02-int, rack2-node01-int, rack2-node02-int; ``node[1-2].ib.cluster`` -> node1.ib.cluster, ...;
    ``n[1-2]5`` -> n15, n25. 22.05 rejects any text after the last bracket (``Invalid hostlist: n[1-2]x``), and
    so does this module for ``release="22.05"``.
  - Order and duplicates are kept: ``n3,n1,n1`` -> n3, n1, n1; ``n[1-3,2]`` -> n1, n2, n3, n2.
  - One range may hold at most 65536 hosts (``Too many hosts in range``), and so may a bracket group that is not
    the last of its name (``a[1-40000,1-30000]b[1]`` is invalid, ``a[1-40000,1-30000]`` is not); so here too.

``scontrol show hostlist NAMES`` (what :func:`compress_hostlist` reproduces; the same in every release)
  - It keeps the order and the duplicates; it only merges a host into the range just before it:
    ``n3,n1,n2`` -> ``n[3,1-2]``, ``n1,n1,n2`` -> ``n[1,1-2]``, ``a1,b1,a2`` -> ``a1,b1,a2``,
    ``rack0node0,rack0node1,rack1node0`` -> ``rack0node[0-1],rack1node0`` (one bracket group per item).
  - The number of a name is its LAST run of digits (``rack1node3``: prefix ``rack1node``, number 3); a name with
    text after its digits (``n1x``, ``node0001-int``, ``node1.ib``) has no number and is never merged: Slurm
    never writes a suffix form, even in 23.11+ (``node0001-int,node0002-int`` stays as it is, and
    ``scontrol show hostlist node[0001-0002]-int`` prints ``node0001-int,node0002-int``).
  - Consecutive ranges with the same prefix share one bracket even when their widths differ: ``n1,n01`` ->
    ``n[1,01]``; ``n08,n9`` -> ``n[08,9]``. Hosts are only merged into a range when the zero padding agrees:
    ``n9,n10`` -> ``n[9-10]``, ``n09,n10`` -> ``n[09-10]``, ``n9,n010`` -> ``n[9,010]``.
  - ``scontrol show hostlistsorted`` sorts (``n3,n1,n1`` -> ``n[1,1,3]``) but keeps duplicates. This module has no
    sorted variant: sort the list yourself first if you want one.

Deliberate differences from Slurm (it accepts these silently and gives odd results; here they raise
:class:`HostlistError`, in every release): empty items (``a,,b``, a trailing comma), unbalanced or nested
brackets (22.05 turns ``node[1-2`` into the host ``node]`` and ``n[1-3]x[`` into ``n[1-3]x]``; 23.11+ turns
``n[1-2]]`` into ``n1]``, ``n2]`` and ``n[[1-2]]`` into ``n[1]``, ``n[2]``),
whitespace or signs inside brackets (``n[ 1-2]`` gives n01, n02), an open range ``n[1-]``, and more than
:data:`MAX_HOSTS` hosts in one expression. Numbers are not clamped to 64 bits (Slurm turns
``n18446744073709551616`` into ``n18446744073709551615``). Hostlist functions (25.05+) raise: only slurmctld
knows their nodes (measured on a 26.05.5 dev cluster: ``feature{gpu}`` with no node of that feature gives no host
and rc 0; ``n[1-2],switch{x}`` without a topology plugin logs "controller failed to expand hostlist function" and
then reads ``switch{x}`` as a host name; without a reachable controller the same after about 20 s of retries).
Newlines always separate items (22.05 would keep one inside a name).

Why not python-hostlist (PyPI ``python-hostlist`` 2.3.0, GPL-2.0-or-later, well kept): its
``collect_hostlist`` sorts and de-duplicates (``n3,n1,n1,n2`` -> ``n[1-3]``), its ``expand_hostlist`` drops
duplicates by default and has no per-release rules, and it would have to be pip-installed on every target host,
whereas module_utils ship inside the module payload.
"""

from __future__ import annotations

import itertools
import re

from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

__all__ = [
    'DEFAULT_RELEASE',
    'HOSTLIST_FUNCTIONS_SINCE',
    'HostlistError',
    'MAX_HOSTS',
    'MAX_RANGE',
    'RELEASES',
    'SUFFIX_SINCE',
    'compress_hostlist',
    'expand_hostlist',
    'first_host',
    'release_tuple',
]

MAX_HOSTS = 1000000
"""Most hosts one call of :func:`expand_hostlist` returns (all items together); more raises HostlistError."""

MAX_RANGE = 65536
"""Most hosts in one ``lo-hi`` range (Slurm's ``MAX_RANGE``, ``Too many hosts in range``), and in one bracket group
that is not the last of its name (Slurm's ``MAX_PREFIX_CNT``)."""

RELEASES = ('22.05', '24.11', '26.05')
"""The Slurm releases whose ``scontrol`` this module was compared with (``tests/integration``)."""

DEFAULT_RELEASE = '26.05'
"""The release whose rules apply when none is given: the newest one of :data:`RELEASES`."""

SUFFIX_SINCE = (23, 11)
"""First release that accepts a shared suffix after the last bracket group (``node[0001-0002]-int``)."""

HOSTLIST_FUNCTIONS_SINCE = (25, 5)
"""First release whose ``scontrol`` sends an expression holding ``{`` to slurmctld as a hostlist function."""

Release = Union[str, Tuple[int, ...], None]
"""A Slurm release: ``"24.11"``, ``"24.11.5"``, ``"slurm 24.11.5"`` (``sinfo --version``), ``(24, 11)``,
``(24, 11, 5)``; None for :data:`DEFAULT_RELEASE`."""

_RANGE_RE = re.compile(r'\A([0-9]+)(?:-([0-9]+))?\Z')
_NUMBERED_RE = re.compile(r'\A(.*?)([0-9]+)\Z', re.DOTALL)
_RELEASE_RE = re.compile(r'\A(?:slurm(?:-wlm)?\s+)?([0-9]{1,3})\.([0-9]{1,2})(?:\.[0-9]+)?(?:-\S*)?\Z', re.IGNORECASE)
# A comma, a bracket or whitespace (``\s`` of a str pattern is ``str.isspace``): one search per
# name instead of a loop over its characters (a third of compressing 16,384 names).
_UNSAFE_IN_NAME_RE = re.compile(r'[,\[\]\s]')
_FUNCTION_CHARS = frozenset('{}')

HostlistExpr = Union[str, Iterable[str]]


class HostlistError(ValueError):
    """A hostlist expression or host name list that cannot be expanded or compressed, or an unknown release."""


class _Rules:
    """What one Slurm release accepts (see the table in the module docstring)."""

    __slots__ = ('name', 'suffix', 'functions')

    def __init__(self, version: Tuple[int, int]) -> None:
        self.name = '%d.%02d' % version
        self.suffix = version >= SUFFIX_SINCE
        self.functions = version >= HOSTLIST_FUNCTIONS_SINCE


def release_tuple(release: Release = DEFAULT_RELEASE) -> Tuple[int, int]:
    """``(major, minor)`` of a Slurm release given as text or as a version tuple.

    ``"24.11"``, ``"24.11.5"``, ``"slurm 24.11.5"``, ``"slurm-wlm 22.05.8"``, ``"26.05.0-0rc1"``, ``(24, 11)`` and
    ``(24, 11, 5)`` all name a release; None means :data:`DEFAULT_RELEASE`. Releases before 22.05 follow the 22.05
    rules (21.08's hostlist.c is the same) and releases after 26.05 the 26.05 ones.

    :raises HostlistError: (a ``ValueError``) for anything else, e.g. ``"24"``, ``"latest"``, ``24.11`` (a float).
    """
    if release is None:
        release = DEFAULT_RELEASE
    if isinstance(release, tuple):
        if (2 <= len(release) <= 3 and all(isinstance(part, int) and not isinstance(part, bool) and part >= 0
                                           for part in release)):
            return release[0], release[1]
    elif isinstance(release, str):
        match = _RELEASE_RE.match(release.strip())
        if match:
            return int(match.group(1)), int(match.group(2))
    raise HostlistError('unknown Slurm release %r: expected a release such as "24.11", "24.11.5" or (24, 11, 5)'
                        % (release,))


def _rules(release: Release) -> _Rules:
    return _Rules(release_tuple(release))


# One bracket group: list of (lo, hi, width). A parsed word: (literal parts, groups) with
# len(parts) == len(groups) + 1; parts[-1] is the shared suffix (23.11+), '' when there is none.
_Range = Tuple[int, int, int]
_Word = Tuple[List[str], List[List[_Range]]]


def _parse_range(text: str, expr: str) -> _Range:
    match = _RANGE_RE.match(text)
    if match is None:
        if text == '':
            raise HostlistError('empty range inside brackets in hostlist %r' % (expr,))
        raise HostlistError(
            'invalid range %r in hostlist %r: expected N or LO-HI with digits 0-9 only (no step, no sign)'
            % (text, expr))
    lo_text, hi_text = match.group(1), match.group(2)
    lo = int(lo_text)
    hi = lo if hi_text is None else int(hi_text)
    if hi < lo:
        raise HostlistError('descending range %r in hostlist %r: LO must not exceed HI' % (text, expr))
    if hi - lo + 1 > MAX_RANGE:
        raise HostlistError('range %r in hostlist %r holds %d hosts; Slurm allows at most %d per range'
                            % (text, expr, hi - lo + 1, MAX_RANGE))
    return lo, hi, len(lo_text)


def _parse_word(word: str, expr: str, rules: _Rules) -> _Word:
    """Split one host pattern like ``rack[0-1]node[0-1]-int`` into literal parts and bracket groups."""
    if rules.functions and _FUNCTION_CHARS.intersection(word):
        raise HostlistError(
            'hostlist function %r in hostlist %r: Slurm %s (25.05+) sends it to slurmctld to expand (feature{}, '
            'switch{}, block{}...); it cannot be expanded without the cluster: ask it with '
            '"scontrol show hostnames"' % (word, expr, rules.name))
    parts: List[str] = []
    groups: List[List[_Range]] = []
    pos = 0
    while True:
        open_pos = word.find('[', pos)
        close_pos = word.find(']', pos)
        if open_pos < 0:
            if close_pos >= 0:
                raise HostlistError('unbalanced "]" in hostlist %r (item %r)' % (expr, word))
            parts.append(word[pos:])
            break
        if 0 <= close_pos < open_pos:
            raise HostlistError('unbalanced "]" in hostlist %r (item %r)' % (expr, word))
        if close_pos < 0:
            raise HostlistError('unbalanced "[" in hostlist %r (item %r): missing "]"' % (expr, word))
        inner = word[open_pos + 1:close_pos]
        if '[' in inner:
            raise HostlistError('nested "[" in hostlist %r (item %r)' % (expr, word))
        parts.append(word[pos:open_pos])
        groups.append([_parse_range(piece, expr) for piece in inner.split(',')])
        pos = close_pos + 1
    for group in groups[:-1]:
        in_group = sum(hi - lo + 1 for lo, hi, dummy in group)
        if in_group > MAX_RANGE:
            raise HostlistError('a bracket group before the last one in hostlist %r (item %r) holds %d hosts; '
                                'Slurm allows at most %d there' % (expr, word, in_group, MAX_RANGE))
    if groups and parts[-1] and not rules.suffix:
        raise HostlistError(
            'text %r after the last bracket group in hostlist %r (item %r): Slurm %s rejects it (a shared suffix '
            'such as node[1-2]-int needs Slurm 23.11 or newer)' % (parts[-1], expr, word, rules.name))
    return parts, groups


def _word_count(word: _Word) -> int:
    count = 1
    for group in word[1]:
        count *= sum(hi - lo + 1 for lo, hi, dummy in group)
    return count


def _split_items(expr: str) -> List[str]:
    """Split on top-level commas and whitespace; reject empty items and whitespace inside brackets."""
    items: List[str] = []
    depth = 0
    start = 0
    pieces: List[str] = []
    for index, char in enumerate(expr):
        if char == '[':
            depth += 1
        elif char == ']':
            depth = max(depth - 1, 0)
        elif depth and char.isspace():
            raise HostlistError('whitespace inside brackets in hostlist %r' % (expr,))
        elif char == ',' and not depth:
            pieces.append(expr[start:index])
            start = index + 1
    pieces.append(expr[start:])
    if len(pieces) == 1 and not pieces[0].strip():
        return items
    for number, piece in enumerate(pieces, 1):
        words = piece.split()
        if not words:
            raise HostlistError('empty item #%d in hostlist %r (two commas in a row, or a leading or trailing '
                                'comma)' % (number, expr))
        items.extend(words)
    return items


def _parse(expr: HostlistExpr, release: Release) -> List[_Word]:
    rules = _rules(release)
    if isinstance(expr, str):
        exprs: Sequence[str] = [expr]
    elif isinstance(expr, (bytes, bytearray, dict)) or expr is None:
        raise HostlistError('expected a hostlist string or a list of them, got %s' % (type(expr).__name__,))
    else:
        try:
            exprs = list(expr)
        except TypeError:
            raise HostlistError('expected a hostlist string or a list of them, got %s' % (type(expr).__name__,))
        for one in exprs:
            if not isinstance(one, str):
                raise HostlistError('expected a list of hostlist strings, found %s %r'
                                    % (type(one).__name__, one))
    words: List[_Word] = []
    total = 0
    for one in exprs:
        for item in _split_items(one):
            word = _parse_word(item, one, rules)
            total += _word_count(word)
            if total > MAX_HOSTS:
                raise HostlistError('hostlist %r expands to more than %d hosts' % (one, MAX_HOSTS))
            words.append(word)
    return words


def _slurm_group_order(count: int) -> List[int]:
    """Indexes of the bracket groups of one name, outermost loop first, as Slurm expands them (every release).

    Slurm (``_push_range_list`` in src/common/hostlist.c) takes the LAST group as the innermost loop and
    then recurses from the second-to-last group (outermost) down to the first one: for 3 groups the order is
    2nd, 1st, 3rd. With 1 or 2 groups that is simply first group outermost.
    """
    return list(range(count - 2, -1, -1)) + [count - 1]


def _iter_word(word: _Word) -> Iterator[str]:
    parts, groups = word
    if not groups:
        yield parts[0]
        return
    columns: List[List[str]] = []
    for group in groups:
        column: List[str] = []
        for lo, hi, width in group:
            column.extend(str(number).zfill(width) for number in range(lo, hi + 1))
        columns.append(column)
    order = _slurm_group_order(len(columns))
    numbers = [''] * len(columns)
    for combo in itertools.product(*[columns[index] for index in order]):
        for index, number in zip(order, combo):
            numbers[index] = number
        yield ''.join(part + number for part, number in zip(parts, numbers)) + parts[-1]


def expand_hostlist(expr: HostlistExpr, release: Release = DEFAULT_RELEASE) -> List[str]:
    """Expand a Slurm hostlist expression to host names, like ``scontrol show hostnames EXPR`` of ``release``.

    :param expr: a hostlist string such as ``"nodeA,nodeB[001,003],rack[0-1]node[0-1],node[0001-0002]-int"``, or
        a list (any iterable but a string, bytes or dict) of such strings whose expansions are concatenated.
        An empty or blank string expands to ``[]``.
    :param release: the Slurm release whose rules apply (see :func:`release_tuple` for the spellings); default
        :data:`DEFAULT_RELEASE`. It decides whether a shared suffix after the brackets is accepted (23.11+) and
        whether ``{`` starts a hostlist function (25.05+).
    :returns: host names, as ``List[str]``, in the order written, duplicates kept; bracket groups expand in
        Slurm's order (first group outermost for two groups; see the module docstring for three or more), zero
        padding taken from the width of each range's low bound, the shared suffix (23.11+) appended to each.
    :raises HostlistError: (a ``ValueError``) for a wrong type, an unknown release, an empty item (``a,,b``),
        unbalanced or nested brackets, an empty, non-numeric, stepped or descending range (``[]``, ``[a-b]``,
        ``[1-9:2]``, ``[5-1]``), whitespace inside brackets, text after the last bracket group (``n[1-2]x``) before
        Slurm 23.11, a hostlist function (``feature{gpu}``) from Slurm 25.05, a range (or a group before the
        last) of more than :data:`MAX_RANGE` hosts, or more than :data:`MAX_HOSTS` hosts in all.
    """
    hosts: List[str] = []
    for word in _parse(expr, release):
        hosts.extend(_iter_word(word))
    return hosts


def first_host(expr: HostlistExpr, release: Release = DEFAULT_RELEASE) -> str:
    """Return the first host name of a hostlist expression without expanding the rest.

    The whole expression is still validated with the rules of ``release`` (as :func:`expand_hostlist`).
    ``first_host("nodeA,nodeB[001,003]")`` -> ``"nodeA"``.

    :raises HostlistError: as :func:`expand_hostlist`, and for an expression with no hosts.
    """
    for word in _parse(expr, release):
        for host in _iter_word(word):
            return host
    raise HostlistError('hostlist %r holds no host' % (expr,))


class _Run:
    """Consecutive numbers ``lo..hi`` after one prefix, with the zero-padding widths all of them allow."""

    __slots__ = ('prefix', 'lo', 'hi', 'wmin', 'wmax')

    def __init__(self, prefix: str, number: int, wmin: int, wmax: int) -> None:
        self.prefix = prefix
        self.lo = number
        self.hi = number
        self.wmin = wmin
        self.wmax = wmax

    def render(self) -> str:
        low = str(self.lo).zfill(self.wmin)
        if self.hi == self.lo:
            return low
        return '%s-%s' % (low, str(self.hi).zfill(self.wmin))


def _widths(digits: str) -> Tuple[int, int]:
    """Padding widths W such that ``str(int(digits)).zfill(W) == digits``: (min, max)."""
    if len(digits) > 1 and digits[0] == '0':
        return len(digits), len(digits)
    return 1, len(digits)


def compress_hostlist(hosts: Iterable[str], release: Release = DEFAULT_RELEASE) -> str:
    """Compress host names to a Slurm hostlist string, like ``scontrol show hostlist`` (the same in every release).

    ``expand_hostlist(compress_hostlist(x, release), release) == list(x)`` for any list ``x`` of valid names:
    order and duplicates are kept. A host is merged into the range just before it when it has the same prefix,
    the next number and a compatible zero padding (``n9,n10`` -> ``n[9-10]``, ``n1,n01`` -> ``n[1,01]``);
    consecutive ranges with one prefix share a bracket (``n3,n1,n2`` -> ``n[3,1-2]``). The number is the last run
    of digits of the name; names with text after it (``n1x``, ``node0001-int``, ``node1.ib``) are written as they
    are, never merged: Slurm 23.11+ reads a shared suffix (``node[0001-0002]-int``) but its
    ``scontrol show hostlist`` never writes one, and 22.05 would reject it. Its ``scontrol show hostlistsorted``
    sorts (keeping duplicates), which this function never does.

    :param hosts: host names (any iterable of ``str`` but a single string); ``[]`` gives ``""``.
    :param release: the Slurm release the string is for (see :func:`release_tuple`); default
        :data:`DEFAULT_RELEASE`. It only decides whether ``{`` and ``}`` may appear in a name (not from 25.05,
        where they would make the string a hostlist function).
    :returns: the hostlist string, ``str``.
    :raises HostlistError: (a ``ValueError``) for a string or non-iterable instead of a list, an unknown release,
        a non-string or empty name, a name holding a comma, a bracket or whitespace (it would not expand back to
        itself), or, from 25.05, a brace.
    """
    rules = _rules(release)
    if isinstance(hosts, (str, bytes, bytearray)):
        raise HostlistError('expected a list of host names, got a string %r; expand it first' % (hosts,))
    try:
        names = list(hosts)
    except TypeError:
        raise HostlistError('expected a list of host names, got %s' % (type(hosts).__name__,))
    runs: List[Union[_Run, str]] = []
    for name in names:
        if not isinstance(name, str):
            raise HostlistError('host names must be strings, found %s %r' % (type(name).__name__, name))
        if not name:
            raise HostlistError('empty host name in list')
        if _UNSAFE_IN_NAME_RE.search(name):
            raise HostlistError('host name %r holds a comma, a bracket or whitespace' % (name,))
        if rules.functions and _FUNCTION_CHARS.intersection(name):
            raise HostlistError('host name %r holds a brace: Slurm %s (25.05+) would read the hostlist as a '
                                'hostlist function' % (name, rules.name))
        match = _NUMBERED_RE.match(name)
        if match is None:
            runs.append(name)
            continue
        prefix, digits = match.group(1), match.group(2)
        number = int(digits)
        wmin, wmax = _widths(digits)
        last: Optional[Union[_Run, str]] = runs[-1] if runs else None
        if (isinstance(last, _Run) and last.prefix == prefix and number == last.hi + 1
                and max(wmin, last.wmin) <= min(wmax, last.wmax)):
            last.hi = number
            last.wmin = max(wmin, last.wmin)
            last.wmax = min(wmax, last.wmax)
        else:
            runs.append(_Run(prefix, number, wmin, wmax))

    items: List[str] = []
    index = 0
    while index < len(runs):
        run = runs[index]
        if not isinstance(run, _Run):
            items.append(run)
            index += 1
            continue
        group = [run]
        index += 1
        while index < len(runs):
            following = runs[index]
            if not isinstance(following, _Run) or following.prefix != run.prefix:
                break
            group.append(following)
            index += 1
        if len(group) == 1 and run.lo == run.hi:
            items.append(run.prefix + run.render())
        else:
            items.append('%s[%s]' % (run.prefix, ','.join(member.render() for member in group)))
    return ','.join(items)

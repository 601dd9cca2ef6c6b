# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys

import pytest

import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import DEFAULT_RELEASE
from ansible_collections.clusterops.slurm.plugins.filter import hostlist_compress as compress_plugin
from ansible_collections.clusterops.slurm.plugins.filter import hostlist_expand as expand_plugin
from ansible_collections.clusterops.slurm.plugins.filter.hostlist_compress import hostlist_compress
from ansible_collections.clusterops.slurm.plugins.filter.hostlist_expand import hostlist_expand

_COLLECTIONS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))),
    '.collections')

EXPAND_CASES = [
    ('rack04-[09-10]', ['rack04-09', 'rack04-10']),
    ('node[001-002]', ['node001', 'node002']),
    ('rack[0-1]node[0-1]', ['rack0node0', 'rack0node1', 'rack1node0', 'rack1node1']),
    ('rack[1-2]-node[01-02]', ['rack1-node01', 'rack1-node02', 'rack2-node01', 'rack2-node02']),
    ('node[0001-0002]-int', ['node0001-int', 'node0002-int']),
    ('nodeA,nodeB[001,003],nodeC', ['nodeA', 'nodeB001', 'nodeB003', 'nodeC']),
    ('gpu[001-004],cpu[001-002]', ['gpu001', 'gpu002', 'gpu003', 'gpu004', 'cpu001', 'cpu002']),
    ('n[9-10]', ['n9', 'n10']),
    ('n[09-10]', ['n09', 'n10']),
    ('n2,n1,n2', ['n2', 'n1', 'n2']),
    (['node[1-2]', 'login1'], ['node1', 'node2', 'login1']),
    ('', []),
]


@pytest.mark.parametrize('value, expected', EXPAND_CASES)
def test_hostlist_expand(value, expected):
    assert hostlist_expand(value) == expected


@pytest.mark.parametrize('value, release, expected', [
    ('node[0001-0002]-int', '24.11', ['node0001-int', 'node0002-int']),
    ('node[0001-0002]-int', 'slurm 26.05.5', ['node0001-int', 'node0002-int']),
    ('node[1-2].ib', '23.11', ['node1.ib', 'node2.ib']),
    ('feature{gpu}', '24.11', ['feature{gpu}']),
    ('node[1-2]', '22.05', ['node1', 'node2']),
])
def test_hostlist_expand_release(value, release, expected):
    assert hostlist_expand(value, release=release) == expected


COMPRESS_CASES = [
    (['rack04-09', 'rack04-10'], 'rack04-[09-10]'),
    (['node001', 'node002'], 'node[001-002]'),
    (['nodeA', 'nodeB001', 'nodeB003', 'nodeC'], 'nodeA,nodeB[001,003],nodeC'),
    (['gpu001', 'gpu002', 'gpu003', 'gpu004', 'cpu001', 'cpu002'], 'gpu[001-004],cpu[001-002]'),
    (['n9', 'n10'], 'n[9-10]'),
    (['n09', 'n10'], 'n[09-10]'),
    (['n3', 'n1', 'n2', 'n1'], 'n[3,1-2,1]'),
    (['node0001-int', 'node0002-int', 'node3', 'node4'], 'node0001-int,node0002-int,node[3-4]'),
    ([], ''),
]


@pytest.mark.parametrize('value, expected', COMPRESS_CASES)
def test_hostlist_compress(value, expected):
    assert hostlist_compress(value) == expected
    assert hostlist_compress(value, release='22.05') == expected  # the same string in every release


@pytest.mark.parametrize('function, value, message', [
    (hostlist_expand, 'n[5-1]', "hostlist_expand: descending range '5-1'"),
    (hostlist_expand, 'a,,b', 'hostlist_expand: empty item #2'),
    (hostlist_expand, 'n[1-2', 'hostlist_expand: unbalanced "["'),
    (hostlist_expand, 'n[a-b]', "hostlist_expand: invalid range 'a-b'"),
    (hostlist_expand, 42, 'hostlist_expand: expected a hostlist string or a list of them, got int'),
    (lambda value: hostlist_expand(value, release='22.05'), 'node[1-2]-int',
     "hostlist_expand: text '-int' after the last bracket group in hostlist 'node[1-2]-int' (item 'node[1-2]-int'): "
     "Slurm 22.05 rejects it"),
    (lambda value: hostlist_expand(value, release='26.05'), 'feature{gpu}', 'hostlist_expand: hostlist function'),
    (lambda value: hostlist_expand(value, release='latest'), 'n1', "hostlist_expand: unknown Slurm release 'latest'"),
    (lambda value: hostlist_compress(value, release='24'), ['n1'], "hostlist_compress: unknown Slurm release '24'"),
    (lambda value: hostlist_compress(value, release='26.05'), ['a{b}'], 'hostlist_compress: host name'),
    (hostlist_compress, 'n1,n2', 'hostlist_compress: expected a list of host names, got a string'),
    (hostlist_compress, ['n1', None], 'hostlist_compress: host names must be strings, found NoneType'),
    (hostlist_compress, ['n[1-2]'], 'hostlist_compress: host name'),
])
def test_filter_errors(function, value, message):
    with pytest.raises(AnsibleFilterError) as excinfo:
        function(value)
    assert message in str(excinfo.value)


@pytest.mark.parametrize('plugin, name', [
    (expand_plugin, 'hostlist_expand'),
    (compress_plugin, 'hostlist_compress'),
])
def test_filter_module_and_docs(plugin, name):
    assert plugin.FilterModule().filters() == {name: getattr(plugin, name)}
    doc = yaml.safe_load(plugin.DOCUMENTATION)
    assert doc['name'] == name
    assert '_input' in doc['options']
    assert yaml.safe_load(plugin.RETURN)['_value']['type'] in ('list', 'string')
    assert isinstance(yaml.safe_load(plugin.EXAMPLES), list)
    # one home per default: the documented release is the code's
    assert doc['options']['release']['default'] == DEFAULT_RELEASE
    assert inspect.signature(getattr(plugin, name)).parameters['release'].default == DEFAULT_RELEASE


@pytest.mark.parametrize('plugin, name', [
    (expand_plugin, 'hostlist_expand'),
    (compress_plugin, 'hostlist_compress'),
])
def test_examples_say_what_the_filter_returns(plugin, name):
    """Every EXAMPLES task of the form `msg: "{{ LITERAL | FQCN }}"` followed by `# -> RESULT` returns RESULT."""
    checked = 0
    for match in re.finditer(r"\{\{ (\[[^|]*\]|'[^']*') \| clusterops\.slurm\.%s(?:\(release='([^']*)'\))? \}\}\"\n"
                             r"  # -> (.*)" % name, plugin.EXAMPLES):
        value = ast.literal_eval(match.group(1))
        kwargs = {'release': match.group(2)} if match.group(2) else {}
        result = getattr(plugin, name)(value, **kwargs)
        expected = match.group(3)
        assert (result if isinstance(result, str) else repr(result)) == expected, match.group(0)
        checked += 1
    assert checked >= 2


_PLAYBOOK = r"""
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.assert:
        that:
          - "(nodes | clusterops.slurm.hostlist_expand) == ['gpu001', 'gpu002', 'cpu1']"
          - "(['n3', 'n1', 'n2'] | clusterops.slurm.hostlist_compress) == 'n[3,1-2]'"
          - "(nodes | clusterops.slurm.hostlist_expand | clusterops.slurm.hostlist_compress) == 'gpu[001-002],cpu1'"
          - "('node[0001-0002]-int' | clusterops.slurm.hostlist_expand) == ['node0001-int', 'node0002-int']"
          - "('n[1-2]' | clusterops.slurm.hostlist_expand(release='slurm-wlm 22.05.8')) == ['n1', 'n2']"
      vars:
        nodes: gpu[001-002],cpu1
    - ansible.builtin.debug:
        msg: "{{ 'n[5-1]' | clusterops.slurm.hostlist_expand }}"
      register: bad
      ignore_errors: true
    - ansible.builtin.debug:
        msg: "{{ 'node[1-2]-int' | clusterops.slurm.hostlist_expand(release='22.05') }}"
      register: old_release
      ignore_errors: true
    - ansible.builtin.assert:
        that:
          - bad is failed
          - "'hostlist_expand: descending range' in bad.msg"
          - old_release is failed
          - "'Slurm 22.05 rejects it' in old_release.msg"
"""


def test_filters_in_a_playbook(tmp_path):
    """The filters as a playbook calls them: by FQCN, through ansible-core's templating, errors as task failures."""
    playbook_bin = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
    if not os.path.exists(playbook_bin):
        pytest.skip('ansible-playbook not found next to %s' % sys.executable)
    playbook = tmp_path / 'play.yml'
    playbook.write_text(_PLAYBOOK)
    (tmp_path / 'ansible.cfg').write_text('[defaults]\n')  # not the repository's (its inventory may not exist)
    env = dict(os.environ)
    env.update({
        'ANSIBLE_CONFIG': str(tmp_path / 'ansible.cfg'),
        'ANSIBLE_COLLECTIONS_PATH': _COLLECTIONS,
        'ANSIBLE_NOCOLOR': '1',
    })
    result = subprocess.run(
        [playbook_bin, '-i', 'localhost,', '-c', 'local', str(playbook)],
        cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout
    assert 'failed=0' in result.stdout, result.stdout
    assert 'ignored=2' in result.stdout, result.stdout

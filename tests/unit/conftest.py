# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Make ``ansible_collections.clusterops.slurm`` importable when pytest runs straight from the repository.

The repository is the collection root. ansible.cfg sets ``collections_path = ./.collections``, where
``.collections/ansible_collections/clusterops/slurm`` is a symlink to the repository; create it if missing and put
``.collections`` first on ``sys.path``. Under ``ansible-test units`` the collection is already importable and
nothing is changed.
"""

from __future__ import annotations

import os
import pickle
import shutil
import sys
import types

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_COLLECTIONS = os.path.join(_REPO, '.collections')
_LINK = os.path.join(_COLLECTIONS, 'ansible_collections', 'clusterops', 'slurm')


def _make_importable():
    try:
        import ansible_collections.clusterops.slurm.plugins  # noqa: F401 pylint: disable=unused-import
        return
    except ImportError:
        pass
    if not os.path.exists(_LINK):
        os.makedirs(os.path.dirname(_LINK), exist_ok=True)
        if os.path.islink(_LINK):  # a dangling link
            os.unlink(_LINK)
        os.symlink(_REPO, _LINK)
    if _COLLECTIONS not in sys.path:
        sys.path.insert(0, _COLLECTIONS)


_make_importable()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # pytest-ansible: no collections/ tree of links in the repository (see tests/integration/conftest.py).
    config.option.ansible_unit_inject_only = True


# ---------------------------------------------------------------------------------------------
# A checkpoint file whose RNG state holds numpy arrays, with or without numpy installed
# ---------------------------------------------------------------------------------------------

def _reconstruct():  # never called: only its name is pickled
    raise AssertionError('not to be called')


class _NumpyArray(object):
    """Pickles as numpy pickles an ndarray: GLOBAL numpy._core.multiarray _reconstruct, then REDUCE."""


class _NumpyLikePickler(pickle._Pickler):  # pylint: disable=protected-access
    dispatch = dict(pickle._Pickler.dispatch)  # pylint: disable=protected-access

    def reducer_override(self, obj):
        if isinstance(obj, _NumpyArray):
            return (_reconstruct, ('ndarray', (0,), b'b'))
        return NotImplemented

    def save_global(self, obj, name=None):
        if obj is _reconstruct:
            self.write(pickle.GLOBAL + b'numpy._core.multiarray\n_reconstruct\n')
            self.memoize(obj)
            return None
        return super(_NumpyLikePickler, self).save_global(obj, name)


_NumpyLikePickler.dispatch[types.FunctionType] = _NumpyLikePickler.save_global


@pytest.fixture
def torch_save_numpy_rng():
    """``save(path, **fields)``: torch.save of ``{"torch": <torch RNG state>, "numpy":
    np.random.get_state(), **fields}``, the RNG state other trainers save and that
    ``torch.load(weights_only=True)`` refuses. Without numpy, the same pickle opcodes are written
    (numpy's ndarray global), so the refusal is the same. Skips without torch."""
    torch = pytest.importorskip('torch')

    def save(path, **fields):
        try:
            import numpy  # pylint: disable=import-outside-toplevel
        except ImportError:
            numpy, state, module = None, ('MT19937', _NumpyArray(), 624, 0, 0.0), types.ModuleType('numpy_like')
            module.Pickler = _NumpyLikePickler
        else:
            state, module = numpy.random.get_state(), pickle
        data = {'torch': torch.get_rng_state(), 'numpy': state}
        data.update(fields)
        torch.save(data, str(path), pickle_module=module)
        return str(path)

    return save


def _required_tool(command, package, variable):
    """The path of ``command`` on PATH. ``make test`` installs its Debian ``package`` first (``make deps``,
    dev/cluster/install-deps.sh) and sets the environment ``variable``: there a missing one fails the
    test. Elsewhere (``make unit``, pytest) a missing one skips it, saying so."""
    path = shutil.which(command)
    if path is None:
        why = "%s not found on PATH: make deps (dev/cluster/install-deps.sh) installs Debian's %s" % (command, package)
        if os.environ.get(variable):
            pytest.fail("%s (%s is set, as make test sets it)" % (why, variable))
        pytest.skip(why + "; skipped outside make test, which installs it and fails without it")
    return path


@pytest.fixture(name="promtool", scope="session")
def promtool_fixture():
    """Debian's promtool (package prometheus, 2.42), for the tests of the remediate role's alert rules and textfile."""
    return _required_tool("promtool", "prometheus, which has it", "CLUSTEROPS_REQUIRE_PROMTOOL")


@pytest.fixture(name="chromium", scope="session")
def chromium_fixture():
    """Debian's chromium, headless, for the tests of the goodput report's page."""
    return _required_tool("chromium", "chromium and its fonts", "CLUSTEROPS_REQUIRE_CHROMIUM")

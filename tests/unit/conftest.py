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

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

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

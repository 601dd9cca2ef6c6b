# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The checkpoint command's entry point: ``python3 -m clusterops_checkpoint ...`` or ``python3 FOLDER ...``.

On a host the package ``plugins/module_utils/_checkpoint`` is installed as
``<dir>/clusterops_checkpoint`` with this file as its ``__main__.py`` (role
``clusterops.slurm.checkpoint_tool``; it lives here, not in the package, because Galaxy's importer
refuses a module_utils name with a double underscore). ``python3 -m clusterops_checkpoint``
(``<dir>`` on ``sys.path``) runs this file inside its package. ``python3 <dir>/clusterops_checkpoint``
runs it as a plain script, outside any package: it then imports its own folder as a package, by
the folder's name, from the folder's parent, so the relative imports inside work either way.
Ansible modules never import this file.
"""

from __future__ import annotations

import importlib
import os
import sys

if __name__ == "__main__":
    if __package__:
        _main = importlib.import_module(__package__ + ".cli").main
    else:  # python3 FOLDER: sys.path[0] is the folder itself (its modules must not be top-level)
        _here = os.path.dirname(os.path.abspath(__file__))
        if sys.path and os.path.abspath(sys.path[0] or ".") == _here:
            sys.path[0] = os.path.dirname(_here)
        else:
            sys.path.insert(0, os.path.dirname(_here))
        _main = importlib.import_module(os.path.basename(_here) + ".cli").main
    sys.exit(_main())  # pylint: disable=ansible-bad-function

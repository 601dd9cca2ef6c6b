# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""``patch_module_args(args)`` on every ansible-core line the collection claims (meta/runtime.yml).

ansible-core 2.19 ships it as ``ansible.module_utils.testing.patch_module_args``; 2.17 and 2.18 have no such
module, and there the same is done by hand: the JSON ``{"ANSIBLE_MODULE_ARGS": args}`` that
``AnsibleModule`` reads from ``basic._ANSIBLE_ARGS`` instead of stdin (ansible-core's own unit tests did so
before 2.19). Drop the fallback when requires_ansible reaches 2.19.
"""

from __future__ import annotations

import contextlib
import json
from unittest import mock

from ansible.module_utils import basic

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core 2.17 and 2.18
    @contextlib.contextmanager
    def patch_module_args(args=None):
        """Expose ``args`` to the ``AnsibleModule`` instances created within this context."""
        if not isinstance(args, (dict, type(None))):
            raise TypeError("The `args` arg must be a dict or None.")
        data = json.dumps({"ANSIBLE_MODULE_ARGS": args or {}}).encode("utf-8")
        with mock.patch.object(basic, "_ANSIBLE_ARGS", data):
            yield

__all__ = ["patch_module_args"]

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A plugin's documentation as ansible-doc shows it: its DOCUMENTATION with every
``extends_documentation_fragment`` merged by ansible-core's own ``add_fragments``, without the
collection loader (the fragments are imported from this checkout and from ansible-core)."""

from __future__ import annotations

import importlib
import os
import types

import yaml

from ansible.utils.plugin_docs import add_fragments

PLUGINS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "plugins")
COLLECTION = "clusterops.slurm"


def plugin_names(kind):
    """The names of the collection's plugins of ``kind`` (``modules``, ``filter``)."""
    return sorted(name[:-3] for name in os.listdir(os.path.join(PLUGINS, kind))
                  if name.endswith(".py") and not name.startswith("_"))


def plugin(kind, name):
    """The plugin's Python module."""
    return importlib.import_module("ansible_collections.clusterops.slurm.plugins.%s.%s" % (kind, name))


class _FragmentLoader(object):
    """``fragment_loader.get(name)`` for ``clusterops.slurm.<x>`` and ``ansible.builtin.<x>``."""

    def get(self, name):
        namespace, dot, short = name.rpartition(".")
        if namespace == COLLECTION:
            package = "ansible_collections.clusterops.slurm.plugins.doc_fragments"
        elif namespace == "ansible.builtin":
            package = "ansible.plugins.doc_fragments"
        else:
            return None
        try:
            cls = importlib.import_module("%s.%s" % (package, short)).ModuleDocFragment
        except ImportError:
            return None
        sections = dict((key, value) for key, value in vars(cls).items() if key.isupper())
        return types.SimpleNamespace(ansible_name=name, **sections)


def documentation(kind, name):
    """The plugin's DOCUMENTATION as a dict, its fragments merged in as ansible-doc merges them.

    Raises:
        yaml.YAMLError: the DOCUMENTATION (or a fragment) is not YAML.
        ansible.errors.AnsibleError: an unknown fragment.
    """
    module = plugin(kind, name)
    doc = yaml.safe_load(module.DOCUMENTATION)
    add_fragments(doc, module.__file__, fragment_loader=_FragmentLoader(), is_module=kind == "modules")
    return doc

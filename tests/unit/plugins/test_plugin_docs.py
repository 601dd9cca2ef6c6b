# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every plugin's DOCUMENTATION, EXAMPLES and RETURN is YAML and its doc fragments resolve, checked in
the unit tests: a ': ' at the end of a line of a plain scalar broke ansible-doc twice (eda1996, the
remediation_plan filter's RETURN), found only by sanity and packaging runs."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.clusterops.slurm.tests.unit.plugins.plugin_docs import documentation, plugin, plugin_names

PLUGINS = [("modules", name) for name in plugin_names("modules")] + [("filter", name) for name in plugin_names("filter")]


@pytest.mark.parametrize("kind, name", PLUGINS, ids=["%s/%s" % p for p in PLUGINS])
def test_docs_are_yaml_and_fragments_resolve(kind, name):
    module = plugin(kind, name)
    for section in ("EXAMPLES", "RETURN"):
        assert yaml.safe_load(getattr(module, section)), section
    doc = documentation(kind, name)
    assert doc["options"] and doc["short_description"]
    assert "extends_documentation_fragment" not in doc

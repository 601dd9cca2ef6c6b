# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every role of the collection has a README, meta/main.yml and meta/argument_specs.yml, and its
defaults/main.yml says what the argument spec says: every default is declared there, with the same
value (a Jinja expression, computed from other variables, is described in words instead). The
defaults whose one home is in plugins/ are checked against the code by the roles' own tests
(test_remediate_nodes_defaults.py, test_training*.py, test_node_health.py)."""

from __future__ import annotations

import glob
import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(REPO, "roles", "*")) if os.path.isdir(p))


def load(role, *parts):
    path = os.path.join(REPO, "roles", role, *parts)
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return yaml.safe_load(handle)


def test_the_roles_are_found():
    assert {"remediate", "remediate_nodes", "remediate_training", "torchrun_launcher"} <= set(ROLES), ROLES


@pytest.mark.parametrize("role", ROLES)
def test_role_has_readme_meta_and_argument_spec(role):
    with open(os.path.join(REPO, "roles", role, "README.md")) as handle:
        assert "clusterops.slurm.%s" % role in handle.read(), "the README names the role by its FQCN"
    assert load(role, "meta", "main.yml")["galaxy_info"]["description"]
    main = load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]
    assert main["short_description"] and main["description"]


@pytest.mark.parametrize("role", ROLES)
def test_role_defaults_equal_the_argument_spec(role):
    defaults = load(role, "defaults", "main.yml") or {}
    options = load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    for name, value in defaults.items():
        assert name in options, "%s: %s has a default but no argument spec" % (role, name)
        if isinstance(value, str) and "{{" in value and "default" not in options[name]:
            continue
        assert options[name].get("default") == value, "%s: %s" % (role, name)
    for name, option in options.items():
        if option.get("default") is not None:
            assert name in defaults, "%s: %s has a default in the argument spec only" % (role, name)

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The remediation defaults have one home, _remediation.py; every place that repeats them for
documentation or role input (role defaults, role argument spec, filter DOCUMENTATION) must
say the same, or a release's new reason form is fixed in one place and missed in another."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

from ansible_collections.clusterops.slurm.plugins.filter import remediation_plan
from ansible_collections.clusterops.slurm.plugins.module_utils._remediation import (
    DEFAULT_CIRCUIT,
    DEFAULT_HEAL_BUDGET,
    DEFAULT_HEAL_SINCE,
    DEFAULT_HEAL_WINDOW,
    DEFAULT_REASON_CLASSES,
    DEFAULT_REBOOT_REASON,
)

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "remediate_nodes")


def load(*parts):
    with open(os.path.join(ROLE, *parts)) as handle:
        return yaml.safe_load(handle)


def test_role_defaults_argument_spec_and_filter_docs_equal_the_code():
    defaults = load("defaults", "main.yml")
    spec = load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    doc = yaml.safe_load(remediation_plan.DOCUMENTATION)["options"]
    expected_classes = [dict(c) for c in DEFAULT_REASON_CLASSES]
    assert defaults["remediate_nodes_reason_classes"] == expected_classes
    assert spec["remediate_nodes_reason_classes"]["default"] == expected_classes
    assert doc["classes"]["default"] == expected_classes
    scalars = {
        "heal_budget": DEFAULT_HEAL_BUDGET, "heal_window": DEFAULT_HEAL_WINDOW,
        "heal_since": DEFAULT_HEAL_SINCE,
        "circuit_window": DEFAULT_CIRCUIT["window"], "circuit_max_nodes": DEFAULT_CIRCUIT["max_nodes"],
        "circuit_max_percent": DEFAULT_CIRCUIT["max_percent"], "circuit_min_nodes": DEFAULT_CIRCUIT["min_nodes"],
        "reboot_reason": DEFAULT_REBOOT_REASON,
    }
    for key, value in scalars.items():
        assert defaults["remediate_nodes_" + key] == value, key
        assert spec["remediate_nodes_" + key]["default"] == value, key
    assert doc["heal_budget"]["default"] == DEFAULT_HEAL_BUDGET
    assert doc["heal_window"]["default"] == DEFAULT_HEAL_WINDOW
    assert doc["heal_since"]["default"] == DEFAULT_HEAL_SINCE
    assert doc["reboot_reason"]["default"] == DEFAULT_REBOOT_REASON
    assert dict((k, v["default"]) for k, v in doc["circuit"]["suboptions"].items()) == DEFAULT_CIRCUIT
    # the deprecated allowlist has no default any more: set, it replaces the classes
    assert "remediate_nodes_allow_reasons" not in defaults and "default" not in spec["remediate_nodes_allow_reasons"]


def test_module_docs_and_argument_spec_equal_the_code():
    """slurm_node_remediation documents no default classes of its own (omitted: the code's)."""
    from ansible_collections.clusterops.slurm.plugins.modules import slurm_node_remediation  # pylint: disable=import-outside-toplevel
    doc = yaml.safe_load(slurm_node_remediation.DOCUMENTATION)["options"]
    assert "default" not in doc["classes"]
    assert doc["heal_budget"]["default"] == DEFAULT_HEAL_BUDGET
    assert doc["heal_window"]["default"] == DEFAULT_HEAL_WINDOW
    assert doc["heal_since"]["default"] == DEFAULT_HEAL_SINCE
    assert doc["reboot_reason"]["default"] == DEFAULT_REBOOT_REASON
    assert dict((k, v["default"]) for k, v in doc["circuit"]["suboptions"].items()) == DEFAULT_CIRCUIT
    filter_doc = yaml.safe_load(remediation_plan.DOCUMENTATION)["options"]
    for key in ("scope", "max_nodes", "max_percent"):
        assert doc[key]["default"] == filter_doc[key]["default"], key

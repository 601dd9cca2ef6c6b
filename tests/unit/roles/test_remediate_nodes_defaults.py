# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The remediation defaults have one home, _node_remediation/ (settings.py, classes.py); every place that repeats them for
documentation or role input (role defaults, role argument spec, the remediation_policy doc
fragment as the filter and the module show it, the module's argument spec) must say the same, or
a release's new reason form is fixed in one place and missed in another."""

from __future__ import annotations

import inspect
import os

import pytest
import yaml

from ansible_collections.clusterops.slurm.plugins.filter import remediation_plan
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.classes import DEFAULT_REASON_CLASSES
from ansible_collections.clusterops.slurm.plugins.module_utils._node_remediation.settings import (
    DEFAULT_CIRCUIT,
    DEFAULT_HEAL_BUDGET,
    DEFAULT_HEAL_SINCE,
    DEFAULT_HEAL_WINDOW,
    DEFAULT_MAX_NODES,
    DEFAULT_MAX_PERCENT,
    DEFAULT_REBOOT_REASON,
    DEFAULT_SCOPE,
)
from ansible_collections.clusterops.slurm.plugins.modules import slurm_node_remediation
from ansible_collections.clusterops.slurm.tests.unit.plugins.plugin_docs import documentation

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "remediate_nodes")


def load(*parts):
    with open(os.path.join(ROLE, *parts)) as handle:
        return yaml.safe_load(handle)


#: The code's default of each setting, by its name in the filter and the module.
CODE = {
    "heal_budget": DEFAULT_HEAL_BUDGET, "heal_window": DEFAULT_HEAL_WINDOW, "heal_since": DEFAULT_HEAL_SINCE,
    "reboot_reason": DEFAULT_REBOOT_REASON, "scope": DEFAULT_SCOPE, "max_nodes": DEFAULT_MAX_NODES,
    "max_percent": DEFAULT_MAX_PERCENT,
}


def module_argument_spec(module):
    """The argument_spec a module's main() gives AnsibleModule."""
    class Captured(Exception):
        pass

    def capture(**kwargs):
        raise Captured(kwargs)

    saved, module.AnsibleModule = module.AnsibleModule, capture
    try:
        module.main()
    except Captured as exc:
        return exc.args[0]["argument_spec"]
    finally:
        module.AnsibleModule = saved
    raise AssertionError("main() built no AnsibleModule")


def documented_defaults(options):
    """``{option: default}`` of documented options (None when none), suboptions as dicts."""
    return dict((name, documented_defaults(doc["suboptions"]) if "suboptions" in doc else doc.get("default"))
                for name, doc in options.items())


def spec_defaults(spec):
    return dict((name, spec_defaults(option["options"]) if "options" in option else option.get("default"))
                for name, option in spec.items())


def test_role_defaults_argument_spec_and_filter_docs_equal_the_code():
    defaults = load("defaults", "main.yml")
    spec = load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    doc = documentation("filter", "remediation_plan")["options"]
    expected_classes = [dict(c) for c in DEFAULT_REASON_CLASSES]
    assert defaults["remediate_nodes_reason_classes"] == expected_classes
    assert spec["remediate_nodes_reason_classes"]["default"] == expected_classes
    assert doc["classes"]["default"] == expected_classes
    scalars = dict(CODE, **dict(("circuit_" + k, v) for k, v in DEFAULT_CIRCUIT.items()))
    for key, value in scalars.items():
        assert defaults["remediate_nodes_" + key] == value, key
        assert spec["remediate_nodes_" + key]["default"] == value, key
    for key, value in CODE.items():
        assert doc[key]["default"] == value, key
    assert dict((k, v["default"]) for k, v in doc["circuit"]["suboptions"].items()) == DEFAULT_CIRCUIT
    # the deprecated allowlist has no default any more: set, it replaces the classes
    assert "remediate_nodes_allow_reasons" not in defaults and "default" not in spec["remediate_nodes_allow_reasons"]


def test_filter_signature_defaults_equal_the_code():
    """The filter's keyword defaults are the code's (classes and circuit: None, the code's own)."""
    signature = inspect.signature(remediation_plan.remediation_plan).parameters
    for key, value in CODE.items():
        assert signature[key].default == value, key
    assert signature["classes"].default is None and signature["circuit"].default is None


@pytest.mark.parametrize("kind, name", [("modules", "slurm_node_remediation"), ("filter", "remediation_plan")])
def test_documented_policy_defaults_equal_the_code(kind, name):
    """The remediation_policy fragment, as each plugin shows it (merged by ansible-core)."""
    doc = documentation(kind, name)["options"]
    for key, value in CODE.items():
        assert doc[key]["default"] == value, key
    assert documented_defaults(doc["circuit"]["suboptions"]) == DEFAULT_CIRCUIT


def test_module_docs_and_argument_spec_equal_the_code():
    """slurm_node_remediation: every documented default (its own, the remediation_policy and slurm_cli
    fragments') is its argument spec's, and the policy's are the code's; it documents no default
    classes of its own (omitted: the code's)."""
    doc = documentation("modules", "slurm_node_remediation")["options"]
    spec = module_argument_spec(slurm_node_remediation)
    assert sorted(doc) == sorted(spec)
    assert documented_defaults(doc) == spec_defaults(spec)
    assert "default" not in doc["classes"] and spec["classes"].get("default") is None
    for key, value in CODE.items():
        assert spec[key]["default"] == value, key
    assert spec_defaults(spec)["circuit"] == DEFAULT_CIRCUIT

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The remediation reasons have one home, _remediation.py; every place that repeats them for
documentation or role input (role defaults, role argument spec, filter DOCUMENTATION) must
say the same, or a release's new reason form is fixed in one place and missed in another."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

from ansible_collections.clusterops.slurm.plugins.filter import remediation_plan
from ansible_collections.clusterops.slurm.plugins.module_utils._remediation import (
    DEFAULT_ALLOW_REASONS,
    DEFAULT_REBOOT_REASONS,
)

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "remediate_nodes")


def load(*parts):
    with open(os.path.join(ROLE, *parts)) as handle:
        return yaml.safe_load(handle)


def test_role_defaults_argument_spec_and_filter_docs_equal_the_code():
    defaults = load("defaults", "main.yml")
    spec = load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    doc = yaml.safe_load(remediation_plan.DOCUMENTATION)["options"]
    for allow, reboot in [
        (defaults["remediate_nodes_allow_reasons"], defaults["remediate_nodes_reboot_reasons"]),
        (spec["remediate_nodes_allow_reasons"]["default"], spec["remediate_nodes_reboot_reasons"]["default"]),
        (doc["allow_reasons"]["default"], doc["reboot_reasons"]["default"]),
    ]:
        assert tuple(allow) == DEFAULT_ALLOW_REASONS
        assert tuple(reboot) == DEFAULT_REBOOT_REASONS

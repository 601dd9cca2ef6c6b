# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The remediate role's Prometheus textfile (roles/remediate/templates/remediate.prom.j2) read by
prometheus_client's text parser, the one node_exporter's format follows: a cluster name with a
backslash, a double quote or a line feed comes back as it was and breaks no other series."""

from __future__ import annotations

import datetime
import os

import jinja2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible.module_utils.parsing.convert_bool import boolean

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TEMPLATE = os.path.join(REPO, "roles", "remediate", "templates", "remediate.prom.j2")

SUMMARY = dict(nodes_healed=3, nodes_skipped=4, nodes_overflow=0, nodes_flapping=0, nodes_needing_human=0,
               nodes_in_flight=1, circuit_open=False, nodes_suspect=0, nodes_suspect_drained=0,
               runs_resubmitted=1, runs_hung=0, runs_needing_human=0, slurm_readable=True, needs_human=[],
               duration_seconds=12.5)
FLEET = dict(clusters_needing_human=[], nodes_healed=6, nodes_suspect=0, runs_resubmitted=2, runs_hung=0)


def render(clusters):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.dirname(TEMPLATE)), trim_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["bool"] = lambda value: boolean(value, strict=False)  # Ansible's bool filter
    env.globals["now"] = lambda utc=False: datetime.datetime.now(datetime.timezone.utc)
    return env.get_template(os.path.basename(TEMPLATE)).render(
        remediate_prom_clusters=[dict(SUMMARY, cluster=name) for name in clusters], remediate_prom_fleet=FLEET)


@pytest.mark.parametrize("hostile", [
    'gpu"a', "gpu\\a", "gpu\na", "gpu\\n", 'a\\"b\nc', "gpu\r\na", "gpü-ä", "} 1\nclusterops_remediate_fake 7"])
def test_every_cluster_name_reads_back_as_it_was(hostile):
    text = render(["green", hostile])
    families = dict((f.name, f) for f in text_string_to_metric_families(text))
    healed = families["clusterops_remediate_nodes_healed"]
    assert sorted(s.labels["cluster"] for s in healed.samples) == sorted(["green", hostile])
    assert all(s.value == 3 for s in healed.samples)
    assert "clusterops_remediate_fake" not in families
    assert families["clusterops_remediate_fleet_clusters"].samples[0].value == 2
    assert len([f for f in families if f.startswith("clusterops_remediate_")]) == 22

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The dev cluster's package (dev/cluster/devcluster/) without a cluster: its one release table
(dev/cluster/releases.txt) reads the same through Python, bash and make; its templates render
every value; its command line starts (``--help``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DEV_CLUSTER = os.path.join(ROOT, "dev", "cluster")
sys.path.insert(0, DEV_CLUSTER)

from devcluster import releases  # noqa: E402 pylint: disable=wrong-import-position


def bash_reader(*args):
    return subprocess.run(["bash", os.path.join(DEV_CLUSTER, "releases.sh")] + list(args),
                          check=True, capture_output=True, text=True).stdout.strip()


def make_value(makefile, expression, *variables):
    """``expression`` as make expands it after reading ``makefile`` with ``variables`` (``NAME=value``
    arguments); no target of the makefile runs."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLURM", "SLURM_RELEASES", "CLUSTEROPS_SLURM_RELEASES", "CLUSTER", "DEVCLUSTER_DIR")}
    return subprocess.run(["make", "-s", "-f", makefile, "--eval", "print-value: ; @echo %s" % expression,
                           "print-value"] + list(variables), cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_python_reader_holds_one_host_release_and_the_rest_in_containers():
    assert len(releases.RELEASE_NAMES) == len(set(releases.RELEASE_NAMES)) >= 2
    assert [r.name for r in releases.RELEASES if r.runs == "host"] == [releases.HOST_RELEASE]
    assert set(releases.CONTAINER_RELEASES) == set(releases.RELEASE_NAMES) - {releases.HOST_RELEASE}
    assert releases.PORT_OFFSETS[releases.HOST_RELEASE] == 0
    assert len(set(releases.PORT_OFFSETS.values())) == len(releases.RELEASE_NAMES)


@pytest.mark.parametrize("line", ["24.11 trixie\n", "24.11 trixie somewhere 6000\n", "24.11 trixie host x\n"])
def test_a_malformed_line_is_refused(tmp_path, line):
    table = tmp_path / "releases.txt"
    table.write_text("# release suite runs port_offset\n22.05 bookworm host 0\n" + line)
    with pytest.raises(ValueError, match="releases.txt:3"):
        releases.read_releases(str(table))


def test_bash_reader_agrees_with_the_python_reader():
    assert bash_reader("release_names").split() == list(releases.RELEASE_NAMES)
    assert bash_reader("release_names", "container").split() == list(releases.CONTAINER_RELEASES)
    assert bash_reader("release_host") == releases.HOST_RELEASE
    for release in releases.RELEASES:
        assert bash_reader("release_suite", release.name) == release.suite
        assert bash_reader("release_runs", release.name) == release.runs
        assert bash_reader("release_state_dir", "/repo", release.name) == releases.state_dir("/repo", release.name)
    assert subprocess.run(["bash", os.path.join(DEV_CLUSTER, "releases.sh"), "release_suite", "1.0"],
                          check=False, capture_output=True).returncode != 0


def test_make_reads_the_table_for_its_defaults():
    assert make_value("Makefile", "$(SLURM_RELEASES)").split() == list(releases.RELEASE_NAMES)
    assert make_value("Makefile", "$(SLURM)") == releases.HOST_RELEASE
    cluster_mk = os.path.join("dev", "cluster", "cluster.mk")
    assert make_value(cluster_mk, "$(DEVCLUSTER_DEFAULT_DIR)") == releases.state_dir(ROOT, releases.HOST_RELEASE)
    for release in releases.CONTAINER_RELEASES:
        assert make_value(cluster_mk, "$(DEVCLUSTER_DEFAULT_DIR)", "SLURM=" + release) == releases.state_dir(ROOT, release)
    # A fleet cluster (CLUSTER=b) runs the host's release, in a state dir of its own.
    assert make_value(cluster_mk, "$(SLURM) $(DEVCLUSTER_DIR)", "CLUSTER=b") == "%s %s/.devcluster-b" % (
        releases.HOST_RELEASE, ROOT)


def test_the_templates_render(tmp_path):
    """Every value a template names is given (string.Template.substitute raises KeyError for a
    missing one) and a shell's own ``$`` comes out as written."""
    from devcluster import cluster, config, paths  # pylint: disable=import-outside-toplevel
    c = cluster.Cluster(str(tmp_path / "state"), releases.HOST_RELEASE)
    c.p.ensure_dirs()
    slurm_conf = c.render_slurm_conf({"nodes": 3, "slurmd_nodes": 2, "slurmd_timeout": None})
    assert "NodeName=n[1-3] " in slurm_conf and " Port=[17001-17003] " in slurm_conf
    assert "SlurmdTimeout=10\n" in slurm_conf and slurm_conf.endswith("State=UP\n")
    assert "StoragePort=16830\n" in c.render_slurmdbd_conf()
    assert 'node="${SLURMD_NODENAME:-${SLURM_NODE_NAME:-}}"' in c.render_prolog()
    assert c.render_reboot_program().endswith('/reboot-program.sh "$@"\n')
    assert c.render_healthcheck().endswith('--config %s "$@"\n' % c.p.healthcheck_json)
    for release in releases.CONTAINER_RELEASES:
        container = paths.CONTAINER.format(release=release)
        wrapper = config.render_wrapper(c.p, container, "sinfo")
        assert wrapper.endswith('exec podman "${args[@]}" %s sinfo "$@"\n' % container)


@pytest.mark.parametrize("args", [["--help"], ["up", "--help"], ["gpu-fault", "--help"]])
def test_the_command_line_starts(args):
    res = subprocess.run([sys.executable, os.path.join(DEV_CLUSTER, "devcluster")] + args,
                         check=False, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage: devcluster")

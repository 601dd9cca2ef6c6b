#!/usr/bin/env bash
# Run the Molecule scenarios (extensions/molecule/<name>/) on podman through pytest
# (tests/molecule/test_scenarios.py: pytest-ansible's molecule_scenario, `molecule test` each).
#
#   bash tests/molecule/run.sh              every scenario
#   bash tests/molecule/run.sh cluster      only these scenarios
#
# A scenario whose molecule.yml takes its image from CLUSTEROPS_SLURM_IMAGE (cluster) runs once
# per Slurm release in CLUSTEROPS_SLURM_RELEASES (default: every release of dev/cluster/releases.txt),
# each time on localhost/clusterops-molecule-slurm:<release>; the others run once: one pytest test each.
#
# First makes sure podman is set up (setup-podman.sh: idempotent, apt + containers.conf + pinned
# pip packages); the tests then build the local images their runs need (images/build.sh: cached;
# a first build takes a few minutes per release, then about a second). pytest prints each run's
# time and fails when one fails. Environment: VENV (default <repo>/.venv),
# CLUSTEROPS_SLURM_RELEASES, MOLECULE_ARGS (extra arguments for `molecule test`, e.g.
# "--destroy=never" to keep the containers for a look; pytest-ansible's MOLECULE_OPTS),
# PYTEST_ADDOPTS (e.g. "-s" to watch molecule's output as it runs).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${VENV:-${repo}/.venv}"
cd "${repo}"
export PATH="${venv}/bin:${PATH}"
export LC_ALL=C.UTF-8
# Modules that run on the machine itself (molecule's create/destroy playbooks) use the venv's
# Python: interpreter discovery can pick a broken pyenv shim here. The containers set theirs.
export ANSIBLE_PYTHON_INTERPRETER="${venv}/bin/python"
export ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
export MOLECULE_OPTS="${MOLECULE_ARGS:-${MOLECULE_OPTS:-}}"
export CLUSTEROPS_MOLECULE_SCENARIOS="$*"

bash tests/molecule/setup-podman.sh
# The collection under test, importable as clusterops.slurm (what `make collection` does).
mkdir -p .collections/ansible_collections/clusterops
[[ "$(readlink .collections/ansible_collections/clusterops/slurm)" == "${repo}" ]] ||
  ln -sfn "${repo}" .collections/ansible_collections/clusterops/slurm

# pytest-ansible finds the scenarios under pytest's rootdir: the repository.
exec "${venv}/bin/python" -m pytest --rootdir "${repo}" tests/molecule -v -ra --durations=0

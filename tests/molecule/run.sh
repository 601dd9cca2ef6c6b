#!/usr/bin/env bash
# Run the Molecule scenarios (extensions/molecule/<name>/) on podman, each with `molecule test`.
#
#   bash tests/molecule/run.sh              every scenario
#   bash tests/molecule/run.sh cluster      only these scenarios
#
# A scenario whose molecule.yml takes its image from CLUSTEROPS_SLURM_IMAGE (cluster) runs once
# per Slurm release in CLUSTEROPS_SLURM_RELEASES (default "22.05 24.11 26.05"), each time on
# localhost/clusterops-molecule-slurm:<release>; the others run once.
#
# First makes sure podman is set up (setup-podman.sh: idempotent, apt + containers.conf + pinned
# pip packages) and the local images of those releases exist and are current (images/build.sh:
# cached; a first build takes a few minutes per release, then about a second). Prints each
# run's time and fails when one fails. Environment: VENV (default <repo>/.venv),
# CLUSTEROPS_SLURM_RELEASES, MOLECULE_ARGS (extra arguments for `molecule test`, e.g.
# "--destroy=never" to keep the containers for a look).
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

read -r -a releases <<<"${CLUSTEROPS_SLURM_RELEASES:-22.05 24.11 26.05}"
for r in "${releases[@]}"; do
  case "${r}" in
    22.05 | 24.11 | 26.05) ;;
    *) echo "run.sh: no Molecule image for Slurm release ${r} (22.05, 24.11, 26.05)" >&2; exit 2 ;;
  esac
done

if (($#)); then
  scenarios=("$@")
else
  scenarios=()
  for f in extensions/molecule/*/molecule.yml; do
    scenarios+=("$(basename "$(dirname "${f}")")")
  done
fi
# per_release SCENARIO: whether the scenario runs once per Slurm release.
per_release() { grep -q 'CLUSTEROPS_SLURM_IMAGE' "extensions/molecule/$1/molecule.yml"; }
# Only the Slurm images some chosen scenario needs (the Debian 12 base is always built).
need=()
for s in "${scenarios[@]}"; do
  if per_release "${s}"; then
    need=("${releases[@]}")
  fi
done

start=${SECONDS}
bash tests/molecule/setup-podman.sh
if ((${#need[@]})); then
  bash tests/molecule/images/build.sh "${need[@]}"
else
  CLUSTEROPS_SLURM_RELEASES=none bash tests/molecule/images/build.sh
fi
# The collection under test, importable as clusterops.slurm (what `make collection` does).
mkdir -p .collections/ansible_collections/clusterops
ln -sfn "${repo}" .collections/ansible_collections/clusterops/slurm
echo "run.sh: podman and images ready in $((SECONDS - start)) s" >&2

failed=()
summary=()
runs=0
for s in "${scenarios[@]}"; do
  if per_release "${s}"; then
    on=("${releases[@]}")
  else
    on=("")
  fi
  for r in "${on[@]}"; do
    name="${s}${r:+ (Slurm ${r})}"
    t=${SECONDS}
    runs=$((runs + 1))
    echo "run.sh: === molecule test -s ${name}" >&2
    # MOLECULE_ARGS is split into words on purpose.
    # shellcheck disable=SC2086
    if CLUSTEROPS_SLURM_IMAGE="${r:+localhost/clusterops-molecule-slurm:${r}}" \
        molecule test -s "${s}" ${MOLECULE_ARGS:-}; then
      summary+=("${name}: passed in $((SECONDS - t)) s")
    else
      summary+=("${name}: FAILED after $((SECONDS - t)) s")
      failed+=("${name}")
    fi
  done
done

printf 'run.sh: %s\n' "${summary[@]}" >&2
echo "run.sh: ${runs} run(s) of ${#scenarios[@]} scenario(s) in $((SECONDS - start)) s, ${#failed[@]} failed" >&2
((${#failed[@]} == 0))

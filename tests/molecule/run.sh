#!/usr/bin/env bash
# Run the Molecule scenarios (extensions/molecule/<name>/) on podman, each with `molecule test`.
#
#   bash tests/molecule/run.sh              every scenario
#   bash tests/molecule/run.sh cluster      only these scenarios
#
# First makes sure podman is set up (setup-podman.sh: idempotent, apt + containers.conf + pinned
# pip packages) and the local images exist and are current (images/build.sh: cached; the first
# build takes about 1.5-3.5 minutes, then about a second). Prints each scenario's time and
# fails when one fails. Environment: VENV (default <repo>/.venv), MOLECULE_ARGS (extra
# arguments for `molecule test`, e.g. "--destroy=never" to keep the containers for a look).
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

start=${SECONDS}
bash tests/molecule/setup-podman.sh
bash tests/molecule/images/build.sh
# The collection under test, importable as clusterops.slurm (what `make collection` does).
mkdir -p .collections/ansible_collections/clusterops
ln -sfn "${repo}" .collections/ansible_collections/clusterops/slurm
echo "run.sh: podman and images ready in $((SECONDS - start)) s" >&2

if (($#)); then
  scenarios=("$@")
else
  scenarios=()
  for f in extensions/molecule/*/molecule.yml; do
    scenarios+=("$(basename "$(dirname "${f}")")")
  done
fi

failed=()
summary=()
for s in "${scenarios[@]}"; do
  t=${SECONDS}
  echo "run.sh: === molecule test -s ${s}" >&2
  # MOLECULE_ARGS is split into words on purpose.
  # shellcheck disable=SC2086
  if molecule test -s "${s}" ${MOLECULE_ARGS:-}; then
    summary+=("${s}: passed in $((SECONDS - t)) s")
  else
    summary+=("${s}: FAILED after $((SECONDS - t)) s")
    failed+=("${s}")
  fi
done

printf 'run.sh: %s\n' "${summary[@]}" >&2
echo "run.sh: ${#scenarios[@]} scenario(s) in $((SECONDS - start)) s, ${#failed[@]} failed" >&2
((${#failed[@]} == 0))

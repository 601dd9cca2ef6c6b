#!/usr/bin/env bash
# Build the collection's HTML docsite with antsibull-docs + Sphinx, offline, and fail on any
# warning about this collection's own documentation.
#
#   bash tests/docsite/build.sh            -> .cache/docsite/build/html/index.html
#
# Steps: the operator's guide as RST (guide_rst.py: docs/*.md -> docs/docsite/rst/*.rst, the pages
# docs/docsite/extra-docs.yml lists); antsibull-docs lint-collection-docs --plugin-docs (markup, references, option names);
# antsibull-docs sphinx-init (conf.py, pinned versions from requirements-test.txt); antsibull-docs
# collection (RST of every module, filter and role); sphinx-build to HTML.
# Offline on purpose: intersphinx (docs.ansible.com, docs.python.org) is switched off, so links to
# pages outside this collection (ansible.builtin plugins, "common return values", configuration
# settings) cannot resolve; exactly those "undefined label" warnings are tolerated, each one
# printed. Every other warning fails the build. Environment: VENV (default <repo>/.venv).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${VENV:-${repo}/.venv}"
export PATH="${venv}/bin:${PATH}" LC_ALL=C.UTF-8
out="${repo}/.cache/docsite"
start=${SECONDS}

# The working tree as clusterops.slurm (what `make collection` links), and nothing else.
mkdir -p "${repo}/.collections/ansible_collections/clusterops"
ln -sfn "${repo}" "${repo}/.collections/ansible_collections/clusterops/slurm"
export ANSIBLE_COLLECTIONS_PATH="${repo}/.collections"
export ANSIBLE_CONFIG="${repo}/ansible.cfg"

echo "build.sh: the operator's guide as RST (guide_rst.py)" >&2
python "${repo}/tests/docsite/guide_rst.py" "${repo}" >/dev/null

echo "build.sh: antsibull-docs lint-collection-docs --plugin-docs" >&2
(cd "${repo}" && antsibull-docs lint-collection-docs --plugin-docs --skip-rstcheck .)

rm -rf "${out}"
mkdir -p "${out}"
antsibull-docs sphinx-init --use-current --fail-on-error --dest-dir "${out}" clusterops.slurm >/dev/null
# No network: no intersphinx inventories (each unreachable one is a warning after a timeout).
printf '\n# tests/docsite/build.sh: offline build\nintersphinx_mapping = {}\n' >>"${out}/conf.py"

mkdir -p "${out}/rst"
chmod og-w "${out}/rst"
antsibull-docs --config-file "${out}/antsibull-docs.cfg" collection --cleanup everything \
  --fail-on-error --use-current --dest-dir "${out}/rst" clusterops.slurm >/dev/null

status=0
sphinx-build -M html "${out}/rst" "${out}/build" -c "${out}" -q -w "${out}/warnings.txt" 2>"${out}/sphinx-stderr.txt" || status=$?
if [[ "${status}" -ne 0 ]]; then
  echo "build.sh: sphinx-build failed (rc ${status})" >&2
  exit "${status}"
fi

# Links into documentation outside this collection (not reachable offline).
external="undefined label: '(common_return_values|ansible_configuration_settings|ansible_collections\.ansible\.builtin\.[a-z0-9_]+)'"
tolerated="$(grep -E "${external}" "${out}/warnings.txt" || true)"
remaining="$(grep -vE "${external}" "${out}/warnings.txt" | grep -v '^$' || true)"
if [[ -n "${tolerated}" ]]; then
  echo "build.sh: $(wc -l <<<"${tolerated}") link(s) to documentation outside the collection, not checked offline:" >&2
  sed -E 's/.*undefined label: //' <<<"${tolerated}" | sort | uniq -c >&2
fi
if [[ -n "${remaining}" ]]; then
  echo "build.sh: FAILED, Sphinx warnings about the collection's documentation:" >&2
  printf '%s\n' "${remaining}" >&2
  exit 1
fi
for page in index.html collections/clusterops/slurm/index.html; do
  [[ -s "${out}/build/html/${page}" ]] || { echo "build.sh: ${page} missing" >&2; exit 1; }
done
echo "build.sh: docsite built in $((SECONDS - start)) s: ${out}/build/html/index.html" >&2

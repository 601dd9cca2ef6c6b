#!/usr/bin/env bash
# ansible-test sanity on a copy of the collection, offline except for PyPI.
#
# ansible-test wants the collection at .../ansible_collections/<namespace>/<name> inside a git
# repository, and runs each sanity test in its own virtual environment that it bootstraps with a
# get-pip script downloaded from its CI file host (not reachable from our machines). So this script:
#   1. copies the files git knows (tracked + untracked-not-ignored) into a fresh temp dir
#      .../ansible_collections/clusterops/slurm and makes that a git repo;
#   2. puts tests/sanity/get_pip_standin.py into ~/.ansible/test/cache under the exact name this
#      ansible-test version looks for (read from ansible-test itself), so a fresh CI machine works;
#   3. runs `ansible-test sanity --local --python 3.11 --requirements` (requirements from PyPI),
#      installing the shellcheck tool with apt-get first when it is missing and we are root;
#   4. checks that modules and module_utils parse as Python 3.8 (the oldest target Python of
#      ansible-core 2.19), since only Python 3.11 is used here and the compile test runs on 3.11 only.
#
# Environment: VENV (default <repo>/.venv; the ansible-core matrix, noxfile.py, passes each line's venv),
# SANITY_ARGS (extra ansible-test arguments, e.g. "--test pylint" or "-v"). ansible-test's output is copied back
# to tests/output/ (git-ignored).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${VENV:-${repo}/.venv}"
py="${venv}/bin/python"
ansible_test="${venv}/bin/ansible-test"
export PATH="${venv}/bin:${PATH}"

for tool in "${py}" "${ansible_test}"; do
  if [[ ! -x "${tool}" ]]; then
    echo "run.sh: ${tool} not found; run 'make venv' first" >&2
    exit 1
  fi
done

start=${SECONDS}

# 1. Copy of the collection in a fresh ansible_collections tree, as its own git repository.
work="$(mktemp -d "${TMPDIR:-/tmp}/clusterops-slurm-sanity.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
dest="${work}/ansible_collections/clusterops/slurm"
mkdir -p "${dest}"
(
  cd "${repo}"
  # -c lists tracked files deleted in the work tree too: copy only what exists.
  git ls-files -z -co --exclude-standard |
    while IFS= read -r -d '' f; do
      if [[ -e "${f}" || -L "${f}" ]]; then printf '%s\0' "${f}"; fi
    done |
    tar --null -T - -cf -
) | tar -C "${dest}" -xf -
git -C "${dest}" init -q
git -C "${dest}" add -A

# 2. The get-pip stand-in, under the cache name ansible-test uses for its pinned pip version.
pip_version="$("${py}" -c '
import types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version="3.11"))["pip"])
')"
cache="${HOME}/.ansible/test/cache"
mkdir -p "${cache}"
cp "${repo}/tests/sanity/get_pip_standin.py" "${cache}/get_pip_${pip_version//./_}.py"

# 3. ansible-test sanity.
skip=()
# pslint needs PowerShell (pwsh), which is not packaged for Debian; the collection has no .ps1/.psm1
# files, so ansible-test has nothing to give it anyway.
skip+=(--skip-test pslint)
# The shellcheck test needs the shellcheck tool, from Debian's archive. On a fresh CI machine (root,
# Debian 12) install it; where that is not possible, skip the test and say so loudly.
if ! command -v shellcheck >/dev/null 2>&1 && [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "run.sh: installing shellcheck from the Debian archive" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends shellcheck >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends shellcheck >/dev/null 2>&1; } ||
    true
fi
if ! command -v shellcheck >/dev/null 2>&1; then
  echo "run.sh: WARNING: shellcheck is not installed; skipping the shellcheck sanity test" >&2
  skip+=(--skip-test shellcheck)
fi

status=0
(
  cd "${dest}"
  # SANITY_ARGS is split into words on purpose.
  # shellcheck disable=SC2086
  "${ansible_test}" sanity --local --python 3.11 --requirements --color no \
    "${skip[@]}" ${SANITY_ARGS:-}
) || status=$?

if [[ -d "${dest}/tests/output" ]]; then
  mkdir -p "${repo}/tests/output"
  cp -r "${dest}/tests/output/." "${repo}/tests/output/"
fi

# 4. Python 3.8 syntax of the code that runs on managed nodes.
"${py}" - "${repo}" <<'EOF' || status=$?
import ast
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
bad = 0
for path in sorted((root / "plugins").glob("module*/**/*.py")):
    try:
        ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 8))
    except SyntaxError as ex:
        bad += 1
        print("%s:%s:%s: not Python 3.8 syntax: %s" % (path.relative_to(root), ex.lineno, ex.offset, ex.msg))
print("python 3.8 syntax (ast, feature_version=3.8): %s" % ("FAILED" if bad else "ok"))
sys.exit(1 if bad else 0)
EOF

echo "run.sh: sanity finished in $((SECONDS - start)) s with status ${status}"
exit "${status}"

#!/usr/bin/env bash
# `make test`: every suite, in lanes that run side by side, so that a run on a 2-core machine takes
# about the time of its longest lane. The integration tests mostly wait on Slurm (a node declared
# DOWN, a reboot, a job's time limit, a training run's steps): one lane leaves the machine idle
# three quarters of the time (load average about 0.5 on 2 cores).
#
#   integration <host release>   the whole integration suite on the host's dev cluster
#   integration containers       for each release in a container (dev/cluster/releases.txt), one
#                                after the other: its image (cached), then its every_release tests
#                                on its dev cluster, which is stopped afterwards
#   molecule                     the Molecule images (cached), then every scenario (podman), nice 5
#   checks                       at nice 19, one after the other (they get what the clusters leave):
#                                unit, the real-library checkpoint suite (make trainers, its venv
#                                made in the lane), typecheck, packaging, ansible-test sanity, the
#                                ansible-core matrix, the event path (ansible-rulebook), ansible-lint, bandit,
#                                the checkpoint_pruning role on this machine; none needs a cluster
#
# What lets them share the machine: each dev cluster has its own ports (the release table's port
# offsets), state dir and container (host network, so no podman network); Molecule's containers
# have a podman network of their own; a local user is created once under one lock
# (devcluster.processes.ensure_user); the image scripts build one image at a time
# (dev/cluster/images/lib.sh's images_lock); `make setup` and the tools' venvs are made before
# the lanes start.
#
# Every suite runs even when one before it failed. Each lane's output goes to .cache/test-logs/
# <lane>.log and is printed when the lane ends; each pytest suite writes a JUnit XML file to
# .cache/test-logs/junit/ (tests/durations.py makes the duration table of tests/README.md from
# them). At the end: one line per suite with its time, and the total; a total over
# CLUSTEROPS_TEST_BUDGET_S (default 3600 s: CI stops at 5400 s) puts a warning first. The exit
# status is 1 when any suite failed. Environment: SLURM_RELEASES (default: every release of the
# release table), MAKE, CLUSTEROPS_TEST_BUDGET_S.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${repo}" || exit 1
make="${MAKE:-make}"
# shellcheck source=dev/cluster/releases.sh
source "${repo}/dev/cluster/releases.sh"
releases="${SLURM_RELEASES:-$(release_names)}"
logs="${repo}/.cache/test-logs"
budget="${CLUSTEROPS_TEST_BUDGET_S:-3600}"
start=${SECONDS}

# suite NAME COMMAND...: run COMMAND, its pytest writing junit/NAME.xml; record
# "NAME passed|FAILED (N s)".
suite() {
  local name="$1" t=${SECONDS} status=0
  shift
  PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} --junitxml=${logs}/junit/${name// /-}.xml" "$@" || status=$?
  if ((status == 0)); then
    echo "${name} passed ($((SECONDS - t)) s)" >>"${logs}/results"
  else
    echo "${name} FAILED, exit status ${status} ($((SECONDS - t)) s)" >>"${logs}/results"
  fi
  return "${status}"
}

host_release="$(release_host)"
container_releases=()
for release in ${releases}; do
  [[ "${release}" == "${host_release}" ]] || container_releases+=("${release}")
done

integration() {
  suite "integration $1" "${make}" --no-print-directory integration-release SLURM="$1"
}

lane_containers() {
  local release
  for release in "${container_releases[@]+"${container_releases[@]}"}"; do
    suite "images ${release}" bash dev/cluster/images/build.sh "${release}"
    integration "${release}"
  done
}

lane_molecule() {
  # shellcheck disable=SC2086  # one argument per release
  suite "molecule images" bash tests/molecule/images/build.sh ${releases}
  suite molecule "${make}" --no-print-directory molecule SLURM_RELEASES="${releases}"
}

lane_checks() {
  suite unit "${make}" --no-print-directory unit
  # Checkpoint validity against the real libraries (tests/trainers; its venv is made here, in the lane).
  suite trainers "${make}" --no-print-directory trainers
  suite typecheck "${make}" --no-print-directory typecheck
  suite packaging "${make}" --no-print-directory packaging
  suite sanity "${make}" --no-print-directory sanity
  # `make unit` and `make sanity` ran the pinned ansible-core: the matrix adds the other lines.
  # (Its sessions' pytest runs write no JUnit file: each would overwrite the one before.)
  suite matrix env PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-}" "${make}" --no-print-directory matrix NOXFLAGS='-t unpinned'
  # The event path without a cluster: ansible-rulebook (Java) with the collection's rulebook and source.
  suite events "${make}" --no-print-directory events
  suite lint "${make}" --no-print-directory lint
  suite security "${make}" --no-print-directory security
  # The checkpoint_pruning role on this machine (crontabs, the user clusterops-alice).
  suite "pruning role" "${make}" --no-print-directory pruning-role
}

rm -rf "${logs}"
mkdir -p "${logs}/junit"
# What every lane uses, made once before they start side by side: podman, runc and debootstrap
# (apt), the tools' venvs (`make setup` ran before this script).
suite "molecule setup" "${make}" --no-print-directory molecule-setup
suite "tool venvs" "${make}" --no-print-directory eda-venv

# lane NAME NICENESS FUNCTION: FUNCTION in the background at that niceness, its output in <lane>.log.
declare -A lane_of=()
lanes_ended=""
lane() {
  local name="$1" niceness="$2" fn="$3"
  (renice -n "${niceness}" -p "${BASHPID}" >/dev/null && "${fn}") >"${logs}/${name// /-}.log" 2>&1 &
  lane_of[$!]="${name}"
  echo "test: lane ${name} started (output: .cache/test-logs/${name// /-}.log, printed when it ends)"
}
lane_host() { integration "${host_release}"; }
[[ " ${releases} " == *" ${host_release} "* ]] && lane "integration ${host_release}" 0 lane_host
((${#container_releases[@]} == 0)) || lane "integration containers" 0 lane_containers
lane molecule 5 lane_molecule
lane checks 19 lane_checks

while ((${#lane_of[@]} > 0)); do
  wait -n -p done_pid "${!lane_of[@]}"
  name="${lane_of[${done_pid}]}"
  unset "lane_of[${done_pid}]"
  echo "=== lane ${name}: ended at $((SECONDS - start)) s; its output (.cache/test-logs/${name// /-}.log) ==="
  cat "${logs}/${name// /-}.log"
  echo "=== end of lane ${name} ==="
  lanes_ended+="lane ${name} ended at $((SECONDS - start)) s"$'\n'
done

total=$((SECONDS - start))
echo "=== make test: ${total} s ==="
if ((total > budget)); then
  echo "WARNING: make test took ${total} s, over its budget of ${budget} s ($((budget / 60)) minutes; CI stops at 90):" \
    "see which lane grew in the lines below and in tests/README.md"
fi
printf '%s' "${lanes_ended}"
cat "${logs}/results"
! grep -q FAILED "${logs}/results"

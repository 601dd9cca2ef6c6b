#!/usr/bin/env bash
# `make test`: every suite, in two lanes, so that a run on a 2-core machine takes the time of the
# dev clusters' tests and little more.
#
#   foreground, in order: unit, typecheck, the integration tests of each release in
#     SLURM_RELEASES (each on its real dev cluster), Molecule. The integration tests mostly wait on
#     Slurm (a node declared DOWN, a reboot, a job's time limit, a training run's steps): the
#     machine is idle three quarters of that time (load average about 0.5 on 2 cores).
#   background, one after the other, at nice 19 (they get only what the clusters and their tests
#     leave): the podman images of the other releases (dev clusters and Molecule: cached, built
#     before the tests that need them start), packaging, ansible-test sanity, the ansible-core
#     matrix, the event path (ansible-rulebook), ansible-lint, bandit, the checkpoint_pruning role on this
#     machine. None of them needs a cluster.
#
# Every suite runs even when one before it failed; the background suites' output is printed when
# they end (their logs stay in .cache/test-logs/), then one line per suite, and the exit status
# is 1 when any failed. Environment: SLURM_RELEASES (default: every release of the release table
# dev/cluster/releases.txt), MAKE.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${repo}" || exit 1
make="${MAKE:-make}"
# shellcheck source=dev/cluster/releases.sh
source "${repo}/dev/cluster/releases.sh"
releases="${SLURM_RELEASES:-$(release_names)}"
logs="${repo}/.cache/test-logs"
start=${SECONDS}

# lane NAME COMMAND...: run COMMAND, record "NAME passed|FAILED (N s)".
lane() {
  local name="$1" t=${SECONDS} status=0
  shift
  "$@" || status=$?
  if ((status == 0)); then
    echo "${name} passed ($((SECONDS - t)) s)" >>"${logs}/results"
  else
    echo "${name} FAILED, exit status ${status} ($((SECONDS - t)) s)" >>"${logs}/results"
  fi
  return "${status}"
}

# What the background builds: the images of the releases that run in podman (not the host's).
podman_releases=()
for release in ${releases}; do
  [[ "$(release_runs "${release}")" == host ]] || podman_releases+=("${release}")
done

if [[ "${1:-}" == --background ]]; then
  for release in "${podman_releases[@]+"${podman_releases[@]}"}"; do
    lane "images ${release}" bash dev/cluster/images/build.sh "${release}"
  done
  # shellcheck disable=SC2086  # one argument per release
  lane "molecule images" bash tests/molecule/images/build.sh ${releases}
  lane packaging "${make}" --no-print-directory packaging
  lane sanity "${make}" --no-print-directory sanity
  # `make unit` and `make sanity` ran the pinned ansible-core: the matrix adds the other lines.
  lane matrix "${make}" --no-print-directory matrix NOXFLAGS='-t unpinned'
  # The event path without a cluster: ansible-rulebook (Java) with the collection's rulebook and source.
  lane events "${make}" --no-print-directory events
  lane lint "${make}" --no-print-directory lint
  lane security "${make}" --no-print-directory security
  # The checkpoint_pruning role on this machine (crontabs, the user clusterops-alice): it needs no
  # cluster, and runs last, long after the integration tests created that user.
  lane "pruning role" "${make}" --no-print-directory pruning-role
  exit 0
fi

rm -rf "${logs}"
mkdir -p "${logs}"
# podman, runc and debootstrap before the background builds images with them (apt, once).
lane "molecule setup" "${make}" --no-print-directory molecule-setup
nice -n 19 bash "${BASH_SOURCE[0]}" --background >"${logs}/background.log" 2>&1 &
background_pid=$!

lane unit "${make}" --no-print-directory unit
lane typecheck "${make}" --no-print-directory typecheck
for release in ${releases}; do
  lane "integration ${release}" "${make}" --no-print-directory integration-release SLURM="${release}"
done
echo "test: waiting for the background suites (packaging, sanity, matrix, lint, security)"
wait "${background_pid}"
echo "=== background suites' output (.cache/test-logs/background.log) ==="
cat "${logs}/background.log"
echo "=== end of the background suites' output ==="
lane molecule "${make}" --no-print-directory molecule SLURM_RELEASES="${releases}"

echo "=== make test: $((SECONDS - start)) s ==="
cat "${logs}/results"
! grep -q FAILED "${logs}/results"

#!/usr/bin/env bash
# Local images for the dev clusters of newer Slurm releases (no container registry is reachable):
#
#   localhost/clusterops-slurm-base:<suite>   Debian <suite> minbase + python3 (debootstrap, podman import)
#   localhost/clusterops-slurm:<release>      + Slurm <release>, munge, MariaDB, python3-torch, bookworm's
#                                             libmariadb.so.3 for slurmdbd (podman build, Containerfile here)
#
#   bash dev/cluster/images/build.sh RELEASE [--force]
#
# RELEASE: one that runs in a container in the release table dev/cluster/releases.txt, which names
# its Debian suite (24.11: Debian 13 trixie, Slurm 24.11.5; 26.05: Debian forky, Slurm 26.05.5).
# The base is made by lib.sh's build_devbase, the one recipe tests/molecule/images/build.sh also
# uses for these bases (the Molecule Slurm images of 24.11/26.05 are built on them).
# Cached like the Molecule images: each image carries the sha256 of its build inputs in the label
# org.clusterops.inputs (the base: lib.sh's build_base, the suite and the packages; the Slurm
# image: build_slurm below, the Containerfile, torch-no-libuv.py, the base image id, the release,
# the copied libmariadb); a matching image is kept, a changed input rebuilds (--force rebuilds
# both). The Debian mirror is read at run time from this machine's apt sources (the URI of the
# machine's own suite, lib.sh's mirror) and is never written into the repository.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=dev/cluster/images/lib.sh
source "${here}/lib.sh"
release="${1:-}"
force=0
[[ "${2:-}" == "--force" ]] && force=1
base_image="$(devbase_image "${release}")" ||
  { echo "usage: $0 $(release_names container | tr ' ' '|') [--force]" >&2; exit 2; }
slurm_image="localhost/clusterops-slurm:${release}"
# bookworm's libmariadb3 (10.11), installed on the machine by dev/cluster/install-deps.sh.
libmariadb=/usr/lib/x86_64-linux-gnu/libmariadb.so.3

build_slurm() {
  local base_id inputs ctx start=${SECONDS}
  base_id="$(podman image inspect --format '{{.Id}}' "${base_image}")"
  inputs="$( (declare -f build_slurm; cat "${here}/Containerfile" "${here}/torch-no-libuv.py"
              echo "${base_id} ${release}"; sha256sum <"${libmariadb}") |
             sha256sum | cut -c1-64)"
  if [[ "${force}" -eq 0 && "$(label_of "${slurm_image}")" == "${inputs}" ]]; then
    log "${slurm_image} is up to date"
    return
  fi
  ctx="$(mktemp -d /var/tmp/clusterops-slurm-ctx.XXXXXX)"
  # shellcheck disable=SC2064
  trap "rm -rf '${ctx}'" RETURN
  cp "${here}/Containerfile" "${here}/torch-no-libuv.py" "${ctx}/"
  cp -L "${libmariadb}" "${ctx}/libmariadb.so.3"
  log "podman build ${slurm_image} (apt-get install of Slurm, MariaDB and torch, a few minutes)"
  podman build --quiet --pull=never --network=host \
    --build-arg "BASE=${base_image}" --build-arg "SLURM_RELEASE=${release}" \
    --label "org.clusterops.inputs=${inputs}" \
    -t "${slurm_image}" -f "${ctx}/Containerfile" "${ctx}" >/dev/null
  log "${slurm_image} built in $((SECONDS - start)) s ($(podman run --rm "${slurm_image}" slurmctld -V))"
}

require_root
if [[ ! -e "${libmariadb}" ]]; then
  log "${libmariadb} is missing: run dev/cluster/install-deps.sh (it installs libmariadb3)"
  exit 1
fi
images_lock
build_devbase "${release}"
build_slurm
podman image prune --force >/dev/null 2>&1 || true

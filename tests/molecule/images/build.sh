#!/usr/bin/env bash
# Local images for the Molecule scenarios (no container registry is reachable from our machines).
#
#   localhost/clusterops-debian12:latest          Debian 12 minbase + python3 and what Ansible needs
#                                                  (debootstrap, `podman import`); every scenario;
#   localhost/clusterops-debian12-slurm:latest    + Slurm 22.05 and munge (`podman build` from
#     = localhost/clusterops-molecule-slurm:22.05   images/slurm/Containerfile): scenario cluster;
#   localhost/clusterops-molecule-slurm:24.11     Slurm 24.11 (Debian 13 trixie) and munge, from
#                                                  the base localhost/clusterops-slurm-base:trixie;
#   localhost/clusterops-molecule-slurm:26.05     Slurm 26.05 (Debian forky) and munge, from
#                                                  the base localhost/clusterops-slurm-base:forky.
#
#   bash tests/molecule/images/build.sh [--force] [RELEASE ...]
#
# RELEASE: one of the release table dev/cluster/releases.txt (default: $CLUSTEROPS_SLURM_RELEASES,
# else all of them; "none": no Slurm image); the host's release is built on the Debian 12 base. The Debian 12 base image is always built. The trixie/forky bases are the dev
# clusters' bases: one that exists is used as it is (its id is an input of the Slurm image, so a
# rebuilt base rebuilds the Slurm image); a missing one is made here by the same call as in
# dev/cluster/images/build.sh (build_devbase of dev/cluster/images/lib.sh, the helpers both
# scripts source: one recipe, one package list, one label). The Molecule Slurm images are small
# (Slurm, munge, python3-apt: about 300-400 MB); the dev cluster images (MariaDB, torch) are not
# used here.
#
# Cached: each image carries the sha256 of its build inputs in the label
# org.clusterops.inputs (a base: lib.sh's build_base, the suite and the packages; a Slurm image:
# the Containerfile, the release and the base image's id). An image whose label matches is kept;
# a changed input rebuilds it (--force rebuilds the images this script owns, never the dev
# clusters' bases that exist). The Debian mirror is read at run time from this machine's apt
# sources (the URI of the machine's own suite, lib.sh's mirror; never written into the
# repository) and is not a build input. Never removes an image it did not build.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=dev/cluster/images/lib.sh
source "${here}/../../../dev/cluster/images/lib.sh"
force=0
releases=()
for arg in "$@"; do
  case "${arg}" in
    --force) force=1 ;;
    *)
      release_runs "${arg}" >/dev/null ||
        { echo "usage: $0 [--force] [$(release_names | tr ' ' '|') ...]" >&2; exit 2; }
      releases+=("${arg}") ;;
  esac
done
if ((${#releases[@]} == 0)) && [[ "${CLUSTEROPS_SLURM_RELEASES:-}" != none ]]; then
  read -r -a releases <<<"${CLUSTEROPS_SLURM_RELEASES:-$(release_names)}"
fi
debian12_image="localhost/clusterops-debian12:latest"
# Ansible's modules need python3 (python3-apt for ansible.builtin.apt); procps for ps/pkill,
# iproute2 for facts; ca-certificates for apt over https mirrors; cron for ansible.builtin.cron
# (role checkpoint_pruning).
debian12_include="python3,python3-apt,procps,iproute2,ca-certificates,cron"

# build_slurm RELEASE: the Molecule Slurm image of RELEASE on its base.
build_slurm() {
  local release="$1" base image tags=() base_id inputs start=${SECONDS}
  image="localhost/clusterops-molecule-slurm:${release}"
  if [[ "$(release_runs "${release}")" == host ]]; then
    base="${debian12_image}"
    tags=(-t localhost/clusterops-debian12-slurm:latest)
  else
    base="$(devbase_image "${release}")" || { log "no Slurm release ${release}"; return 1; }
    # The dev clusters' base is missing (a new machine): made here with their one recipe.
    podman image exists "${base}" || build_devbase "${release}"
  fi
  base_id="$(id_of "${base}")"
  inputs="$( (cat "${here}/slurm/Containerfile"; echo "${base_id} ${release}") | sha256sum | cut -c1-64)"
  if [[ "${force}" -eq 0 && "$(label_of "${image}")" == "${inputs}" ]] &&
     { ((${#tags[@]} == 0)) || [[ "$(label_of "${tags[1]}")" == "${inputs}" ]]; }; then
    log "${image} is up to date"
    return
  fi
  local old
  old="$(id_of "${image}")"
  log "podman build ${image} (apt-get install of Slurm ${release} and munge, about 1-2 minutes)"
  # --layers=false: no intermediate images left behind (the label above is the cache).
  podman build --quiet --pull=never --network=host --layers=false \
    --build-arg "BASE=${base}" --build-arg "SLURM_RELEASE=${release}" \
    --label "org.clusterops.inputs=${inputs}" \
    -t "${image}" "${tags[@]}" -f "${here}/slurm/Containerfile" "${here}/slurm" >/dev/null
  drop_replaced "${old}" "${image}"
  log "${image} built in $((SECONDS - start)) s ($(podman run --rm "${image}" slurmctld -V))"
}

require_root
images_lock
build_base bookworm "${debian12_image}" "${debian12_include}"
for r in "${releases[@]+"${releases[@]}"}"; do
  build_slurm "${r}"
done

# shellcheck shell=bash
# What the two image scripts share, sourced by both: dev/cluster/images/build.sh (the dev
# clusters' images of the releases in containers) and tests/molecule/images/build.sh (the Molecule
# images). It sources dev/cluster/releases.sh, the release table's reader (release_names,
# release_host, release_suite, release_runs).
#
#   log MSG...                    "images/build.sh: MSG" on stderr
#   require_root                  exit 1 unless root (debootstrap, podman)
#   images_lock                   wait for, then hold until exit, the one lock of both scripts
#   id_of IMAGE                   the image's id ("" when there is none)
#   label_of IMAGE                its label org.clusterops.inputs, the sha256 of its build inputs ("")
#   drop_replaced OLD_ID IMAGE    after a rebuild of IMAGE: its former image, when left untagged
#   mirror                        the Debian mirror of this machine's apt sources (apt_mirror.py)
#   build_base SUITE IMAGE INCLUDE    Debian SUITE minbase + INCLUDE as IMAGE, unless up to date
#   devbase_image RELEASE         the dev clusters' base image of a Slurm release in a container
#   build_devbase RELEASE         build_base of that base image, by the dev clusters' one recipe
#
# The caller sets force=1 for --force: build_base then rebuilds an image that is up to date.
# The Debian mirror is read at run time (never written into the repository) and is not a build
# input: a base's label is the hash of build_base itself, the suite and the packages, the same
# whichever script builds it.

_images_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=dev/cluster/releases.sh
source "${_images_lib_dir}/../releases.sh"

log() { echo "images/build.sh: $*" >&2; }

require_root() {
  if [[ "$(id -u)" -ne 0 ]]; then
    log "run as root (debootstrap, podman)"
    exit 1
  fi
}

# images_lock: one build at a time on this machine, whichever script asks (the lanes of `make test`
# run side by side): both build the dev clusters' bases, and the dev clusters' script prunes dangling
# images, which must never meet another build's. Held on fd 9 until the script exits.
images_lock() {
  exec 9>/var/tmp/clusterops-images.lock
  flock 9
}

id_of() { podman image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }

label_of() { podman image inspect --format '{{ index .Labels "org.clusterops.inputs" }}' "$1" 2>/dev/null || true; }

# drop_replaced OLD_ID IMAGE: after a rebuild of IMAGE, remove the image built before (OLD_ID)
# when it has no tag left; one still in use (a container, a child image) stays.
drop_replaced() {
  local old="$1" image="$2"
  [[ -n "${old}" && "${old}" != "$(id_of "${image}")" ]] || return 0
  [[ "$(podman image inspect --format '{{len .RepoTags}}' "${old}" 2>/dev/null)" == 0 ]] || return 0
  podman image rm "${old}" >/dev/null 2>&1 || true
}

# The first "deb" URI of the machine's own suite in its apt sources (deb822 .sources files, then
# one-line .list files); that mirror also serves the newer suites the images are made of.
mirror() { /usr/bin/python3 "${_images_lib_dir}/apt_mirror.py"; }

# build_base SUITE IMAGE INCLUDE: debootstrap --variant=minbase of SUITE with the packages
# INCLUDE, imported as IMAGE (its label: the hash of this function and its arguments).
build_base() {
  local suite="$1" image="$2" include="$3" inputs old url root start=${SECONDS}
  inputs="$( (declare -f build_base; echo "${suite} ${include}") | sha256sum | cut -c1-64)"
  if [[ "${force:-0}" -eq 0 && "$(label_of "${image}")" == "${inputs}" ]]; then
    log "${image} is up to date"
    return
  fi
  old="$(id_of "${image}")"
  url="$(mirror)"
  root="$(mktemp -d "/var/tmp/clusterops-base-${suite}.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '${root}'" RETURN
  log "debootstrap --variant=minbase ${suite} from the machine's apt mirror (about 1-2 minutes)"
  # The machine's debootstrap may not know a newer suite by name: sid's script fits them all.
  debootstrap --variant=minbase --include="${include}" "${suite}" "${root}" "${url}" \
      /usr/share/debootstrap/scripts/sid >"${root}.log" 2>&1 ||
    { tail -20 "${root}.log" >&2; rm -f "${root}.log"; return 1; }
  rm -f "${root}.log"
  # No init system in the containers: package scripts must not try to start services.
  printf '#!/bin/sh\nexit 101\n' >"${root}/usr/sbin/policy-rc.d"
  chmod 0755 "${root}/usr/sbin/policy-rc.d"
  chroot "${root}" apt-get clean
  rm -rf "${root}"/var/lib/apt/lists/* "${root}"/var/cache/apt/*.bin "${root}"/tmp/* "${root}"/var/log/*.log
  tar --numeric-owner --xattrs -C "${root}" -c . |
    podman import --quiet \
      --change 'CMD ["/bin/sh", "-c", "trap \"exit 0\" TERM; sleep infinity & wait"]' \
      --change 'ENV LANG=C.UTF-8' \
      --change "LABEL org.clusterops.inputs=${inputs}" \
      - "${image}" >/dev/null
  drop_replaced "${old}" "${image}"
  log "${image} built in $((SECONDS - start)) s"
}

# devbase_image RELEASE: the dev clusters' base image of a Slurm release that runs in a container,
# named after its Debian suite (dev/cluster/releases.txt); fails for another release.
devbase_image() {
  local suite
  [[ "$(release_runs "$1")" == container ]] || return 1
  suite="$(release_suite "$1")" || return 1
  echo "localhost/clusterops-slurm-base:${suite}"
}

# build_devbase RELEASE: the dev clusters' base of RELEASE, Debian minbase + python3 (the one
# recipe: dev/cluster/images/build.sh builds it, and tests/molecule/images/build.sh when missing).
build_devbase() {
  local image
  image="$(devbase_image "$1")"
  build_base "${image##*:}" "${image}" python3,ca-certificates
}

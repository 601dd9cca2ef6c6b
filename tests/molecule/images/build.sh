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
# RELEASE: 22.05, 24.11, 26.05 (default: $CLUSTEROPS_SLURM_RELEASES, else all three; "none": no
# Slurm image). The Debian 12 base image is always built. The trixie/forky bases are the dev clusters' bases (made by
# dev/cluster/images/build.sh with the same recipe): one that exists is used as it is (its id
# is an input of the Slurm image, so a rebuilt base rebuilds the Slurm image); a missing one is
# made here with that recipe. The Molecule Slurm images are small (Slurm, munge, python3-apt:
# about 300-400 MB); the dev cluster images (MariaDB, torch) are not used here.
#
# Cached: each image carries the sha256 of its build inputs in the label
# org.clusterops.inputs (a base: its recipe; a Slurm image: the Containerfile, the release and
# the base image's id). An image whose label matches is kept; a changed input rebuilds it
# (--force rebuilds the images this script owns, never the dev clusters' bases that exist). The
# Debian mirror is read at run time from this machine's apt sources (never written into the
# repository) and is not a build input. Never removes an image it did not build.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
force=0
releases=()
for arg in "$@"; do
  case "${arg}" in
    --force) force=1 ;;
    22.05 | 24.11 | 26.05) releases+=("${arg}") ;;
    *) echo "usage: $0 [--force] [22.05|24.11|26.05 ...]" >&2; exit 2 ;;
  esac
done
if ((${#releases[@]} == 0)) && [[ "${CLUSTEROPS_SLURM_RELEASES:-}" != none ]]; then
  read -r -a releases <<<"${CLUSTEROPS_SLURM_RELEASES:-22.05 24.11 26.05}"
fi
debian12_image="localhost/clusterops-debian12:latest"
# Ansible's modules need python3 (python3-apt for ansible.builtin.apt); procps for ps/pkill,
# iproute2 for facts; ca-certificates for apt over https mirrors; cron for ansible.builtin.cron
# (role checkpoint_pruning).
debian12_include="python3,python3-apt,procps,iproute2,ca-certificates,cron"
# What dev/cluster/images/build.sh puts into its trixie/forky bases.
devbase_include="python3,ca-certificates"

log() { echo "images/build.sh: $*" >&2; }

id_of() { podman image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }

# drop_replaced OLD_ID IMAGE: after a rebuild of IMAGE, remove the image this script built
# before (OLD_ID) when it has no tag left; one still in use (a container, a child image) stays.
drop_replaced() {
  local old="$1" image="$2"
  [[ -n "${old}" && "${old}" != "$(id_of "${image}")" ]] || return 0
  [[ "$(podman image inspect --format '{{len .RepoTags}}' "${old}" 2>/dev/null)" == 0 ]] || return 0
  podman image rm "${old}" >/dev/null 2>&1 || true
}

label_of() { podman image inspect --format '{{ index .Labels "org.clusterops.inputs" }}' "$1" 2>/dev/null || true; }

# First "deb" source of the machine's own suite (bookworm; its mirror also serves trixie
# and forky) in the machine's apt configuration (deb822 .sources
# files, then one-line .list files); security and updates suites are skipped.
mirror() {
  /usr/bin/python3 - bookworm <<'PY'
import glob, sys
suite = sys.argv[1]
found = []
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    with open(path, encoding="utf-8") as f:
        for stanza in f.read().split("\n\n"):
            fields = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.split()
            if "deb" in fields.get("types", []) and suite in fields.get("suites", []) \
                    and fields.get("enabled", ["yes"])[0].lower() != "no":
                found += fields.get("uris", [])
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        continue
    for line in lines:
        words = line.split("#", 1)[0].split()
        if words and words[0] == "deb":
            words = [w for w in words[1:] if not w.startswith("[")]
            if len(words) >= 2 and words[1] == suite:
                found.append(words[0])
if not found:
    sys.exit("no apt source for suite %s in /etc/apt/sources.list{,.d/}" % suite)
print(found[0])
PY
}

# build_base SUITE IMAGE INCLUDE: debootstrap --variant=minbase of SUITE with the packages
# INCLUDE, imported as IMAGE (its label: the hash of this function and its arguments).
build_base() {
  local suite="$1" image="$2" include="$3" inputs url root start=${SECONDS}
  inputs="$( (declare -f build_base; echo "${suite} ${include}") | sha256sum | cut -c1-64)"
  if [[ "${force}" -eq 0 && "$(label_of "${image}")" == "${inputs}" ]]; then
    log "${image} is up to date"
    return
  fi
  local old
  old="$(id_of "${image}")"
  url="$(mirror)"
  root="$(mktemp -d "/var/tmp/clusterops-molecule-${suite}.XXXXXX")"
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

# build_slurm RELEASE: the Molecule Slurm image of RELEASE on its base.
build_slurm() {
  local release="$1" base image tags=() base_id inputs start=${SECONDS}
  image="localhost/clusterops-molecule-slurm:${release}"
  case "${release}" in
    22.05)
      base="${debian12_image}"
      tags=(-t localhost/clusterops-debian12-slurm:latest) ;;
    24.11) base="localhost/clusterops-slurm-base:trixie" ;;
    26.05) base="localhost/clusterops-slurm-base:forky" ;;
  esac
  if ! podman image exists "${base}"; then
    # The dev clusters' base is missing (a new machine): made with dev/cluster's recipe.
    build_base "${base##*:}" "${base}" "${devbase_include}"
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

if [[ "$(id -u)" -ne 0 ]]; then
  log "run as root (debootstrap, podman)"
  exit 1
fi
# One build at a time on this machine (two scenarios or two shells may ask at once).
exec 9>/var/tmp/clusterops-molecule-images.lock
flock 9
build_base bookworm "${debian12_image}" "${debian12_include}"
for r in "${releases[@]+"${releases[@]}"}"; do
  build_slurm "${r}"
done

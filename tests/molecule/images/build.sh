#!/usr/bin/env bash
# Local images for the Molecule scenarios (no container registry is reachable from our machines):
#
#   localhost/clusterops-debian12:latest         Debian 12 minbase + python3 and what Ansible needs,
#                                                 built with debootstrap and `podman import`;
#   localhost/clusterops-debian12-slurm:latest   the same + Slurm 22.05 (slurmctld, slurmd,
#                                                 slurm-client) and munge, built with `podman build`
#                                                 from images/slurm/Containerfile.
#
#   bash tests/molecule/images/build.sh [--force]
#
# Cached: each image carries the sha256 of its build inputs in the label
# org.clusterops.inputs (this script, the package list, the Containerfile, and for the Slurm
# image the base image's id). An image whose label matches is kept; a changed input rebuilds it
# (--force rebuilds both). The Debian mirror is read at run time from this machine's apt sources
# (never written into the repository) and is not a build input: any mirror of bookworm will do.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
base_image="localhost/clusterops-debian12:latest"
slurm_image="localhost/clusterops-debian12-slurm:latest"
suite=bookworm
# PID 1 exits on SIGTERM (podman stop is immediate, not after a 10 s timeout).
# Ansible's modules need python3 (python3-apt for ansible.builtin.apt); procps for ps/pkill,
# iproute2 for facts; ca-certificates for apt over https mirrors; cron for ansible.builtin.cron
# (role checkpoint_pruning).
include="python3,python3-apt,procps,iproute2,ca-certificates,cron"
force=0
[[ "${1:-}" == "--force" ]] && force=1

log() { echo "images/build.sh: $*" >&2; }

label_of() { podman image inspect --format '{{ index .Labels "org.clusterops.inputs" }}' "$1" 2>/dev/null || true; }

# First "deb" source of the bookworm suite in the machine's apt configuration (deb822 .sources
# files, then one-line .list files); security and updates suites are skipped.
mirror() {
  /usr/bin/python3 - "${suite}" <<'PY'
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

build_base() {
  local inputs
  inputs="$(sha256sum <"${BASH_SOURCE[0]}" | cut -c1-64)"
  if [[ "${force}" -eq 0 && "$(label_of "${base_image}")" == "${inputs}" ]]; then
    log "${base_image} is up to date"
    return
  fi
  local url root start=${SECONDS}
  url="$(mirror)"
  root="$(mktemp -d /var/tmp/clusterops-debian12.XXXXXX)"
  # shellcheck disable=SC2064
  trap "rm -rf '${root}'" RETURN
  log "debootstrap --variant=minbase ${suite} from the machine's apt mirror (about 1-2 minutes)"
  debootstrap --variant=minbase --include="${include}" "${suite}" "${root}" "${url}" >"${root}.log" 2>&1 ||
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
      - "${base_image}" >/dev/null
  log "${base_image} built in $((SECONDS - start)) s"
}

build_slurm() {
  local base_id inputs start=${SECONDS}
  base_id="$(podman image inspect --format '{{.Id}}' "${base_image}")"
  inputs="$( (cat "${here}/slurm/Containerfile"; echo "${base_id}") | sha256sum | cut -c1-64)"
  if [[ "${force}" -eq 0 && "$(label_of "${slurm_image}")" == "${inputs}" ]]; then
    log "${slurm_image} is up to date"
    return
  fi
  log "podman build ${slurm_image} (apt-get install of Slurm and munge, about 1-2 minutes)"
  podman build --quiet --pull=never --network=host \
    --label "org.clusterops.inputs=${inputs}" \
    -t "${slurm_image}" -f "${here}/slurm/Containerfile" "${here}/slurm" >/dev/null
  log "${slurm_image} built in $((SECONDS - start)) s"
}

if [[ "$(id -u)" -ne 0 ]]; then
  log "run as root (debootstrap, podman)"
  exit 1
fi
# One build at a time on this machine (two scenarios or two shells may ask at once).
exec 9>/var/tmp/clusterops-molecule-images.lock
flock 9
build_base
build_slurm
podman image prune --force >/dev/null 2>&1 || true

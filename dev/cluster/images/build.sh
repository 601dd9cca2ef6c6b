#!/usr/bin/env bash
# Local images for the dev clusters of newer Slurm releases (no container registry is reachable):
#
#   localhost/clusterops-slurm-base:<suite>   Debian <suite> minbase + python3 (debootstrap, podman import)
#   localhost/clusterops-slurm:<release>      + Slurm <release>, munge, MariaDB, python3-torch, bookworm's
#                                             libmariadb.so.3 for slurmdbd (podman build, Containerfile here)
#
#   bash dev/cluster/images/build.sh 24.11|26.05 [--force]
#
# Releases: 24.11 = Debian 13 trixie (Slurm 24.11.5), 26.05 = Debian forky (Slurm 26.05.5).
# Cached like tests/molecule/images/build.sh: each image carries the sha256 of its build inputs in
# the label org.clusterops.inputs (this script, the Containerfile, the base image id, the copied
# libmariadb); a matching image is kept, a changed input rebuilds (--force rebuilds both).
# The Debian mirror is read at run time from this machine's apt sources (the URI of the machine's
# own suite) and is never written into the repository.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
release="${1:-}"
force=0
[[ "${2:-}" == "--force" ]] && force=1
case "${release}" in
  24.11) suite=trixie ;;
  26.05) suite=forky ;;
  *) echo "usage: $0 24.11|26.05 [--force]" >&2; exit 2 ;;
esac
base_image="localhost/clusterops-slurm-base:${suite}"
slurm_image="localhost/clusterops-slurm:${release}"
# bookworm's libmariadb3 (10.11), installed on the machine by dev/cluster/install-deps.sh.
libmariadb=/usr/lib/x86_64-linux-gnu/libmariadb.so.3

log() { echo "images/build.sh: $*" >&2; }
label_of() { podman image inspect --format '{{ index .Labels "org.clusterops.inputs" }}' "$1" 2>/dev/null || true; }

# The first "deb" URI of the machine's own suite (deb822 .sources, then one-line .list files).
mirror() {
  /usr/bin/python3 - <<'PY'
import glob, sys
suite = dict(l.strip().split("=", 1) for l in open("/etc/os-release") if "=" in l)["VERSION_CODENAME"].strip('"')
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
  local inputs url root start=${SECONDS}
  inputs="$( (sha256sum <"${BASH_SOURCE[0]}"; echo "${suite}") | sha256sum | cut -c1-64)"
  if [[ "${force}" -eq 0 && "$(label_of "${base_image}")" == "${inputs}" ]]; then
    log "${base_image} is up to date"
    return
  fi
  url="$(mirror)"
  root="$(mktemp -d "/var/tmp/clusterops-${suite}.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '${root}'" RETURN
  log "debootstrap --variant=minbase ${suite} from the machine's apt mirror (about 1-2 minutes)"
  # The machine's debootstrap may not know a newer suite by name: sid's script fits them all.
  debootstrap --variant=minbase --include=python3,ca-certificates "${suite}" "${root}" "${url}" \
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
      - "${base_image}" >/dev/null
  log "${base_image} built in $((SECONDS - start)) s"
}

build_slurm() {
  local base_id inputs ctx start=${SECONDS}
  base_id="$(podman image inspect --format '{{.Id}}' "${base_image}")"
  inputs="$( (cat "${here}/Containerfile" "${here}/torch-no-libuv.py"; echo "${base_id} ${release}"
              sha256sum <"${libmariadb}") |
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

if [[ "$(id -u)" -ne 0 ]]; then
  log "run as root (debootstrap, podman)"
  exit 1
fi
if [[ ! -e "${libmariadb}" ]]; then
  log "${libmariadb} is missing: run dev/cluster/install-deps.sh (it installs libmariadb3)"
  exit 1
fi
exec 9>/var/tmp/clusterops-devcluster-images.lock
flock 9
build_base
build_slurm
podman image prune --force >/dev/null 2>&1 || true

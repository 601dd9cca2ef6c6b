#!/usr/bin/env bash
# Podman for Molecule on a fresh Debian 12 machine (root, no Docker engine, no registry).
# Idempotent: installs only the Debian packages that are missing, writes the containers.conf
# settings this machine kind needs, and installs the pinned Molecule tools into the venv.
#
#   bash tests/molecule/setup-podman.sh          (VENV defaults to <repo>/.venv)
#
# Why containers.conf: with crun, or with podman's default ulimits, a container start fails
# here with "setrlimit RLIMIT_NOFILE/NPROC: Operation not permitted"; runc and no default
# ulimits work (see the shared dev-cluster notes, "Containers for Molecule").
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${VENV:-${repo}/.venv}"

if [[ "$(id -u)" -ne 0 ]]; then
  echo "setup-podman.sh: run as root (apt-get, /etc/containers)" >&2
  exit 1
fi

# 1. Debian packages. debootstrap builds the base image; podman's network stack on bookworm is
#    netavark + aardvark-dns (name resolution between containers on a user network); netavark
#    needs iptables ("netavark: No such file or directory" without it).
packages=(podman runc debootstrap netavark aardvark-dns iptables uidmap slirp4netns fuse-overlayfs
          ca-certificates)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q 'install ok installed' || missing+=("${p}")
done
if ((${#missing[@]})); then
  echo "setup-podman.sh: apt-get install ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
fi

# 2. containers.conf: runc, no default ulimits. Rewritten only when it differs.
conf=/etc/containers/containers.conf
want='# Written by clusterops.slurm tests/molecule/setup-podman.sh.
# runc, and no default ulimits: with crun or default_ulimits a container start fails on this
# machine kind with "setrlimit RLIMIT_NOFILE/NPROC: Operation not permitted".
[containers]
default_ulimits = []

[engine]
runtime = "runc"

[network]
network_backend = "netavark"'
mkdir -p /etc/containers
if [[ ! -f "${conf}" ]] || [[ "$(cat "${conf}")" != "${want}" ]]; then
  if [[ -f "${conf}" ]] && ! grep -q 'clusterops.slurm' "${conf}"; then
    cp -p "${conf}" "${conf}.orig-clusterops"
    echo "setup-podman.sh: kept the previous ${conf} as ${conf}.orig-clusterops" >&2
  fi
  printf '%s\n' "${want}" >"${conf}"
fi

# 3. Molecule, its podman driver and the `ansible` package (containers.podman), pinned in
#    requirements-molecule.txt (which requirements-test.txt includes, so `make venv` installs them).
if [[ ! -x "${venv}/bin/pip" ]]; then
  echo "setup-podman.sh: ${venv} has no pip; run 'make venv' first" >&2
  exit 1
fi
if [[ ! -x "${venv}/bin/molecule" ]] ||
   ! "${venv}/bin/ansible-doc" -t connection containers.podman.podman >/dev/null 2>&1; then
  "${venv}/bin/pip" install --quiet -r "${repo}/requirements-molecule.txt"
fi

podman info --format '{{.Host.OCIRuntime.Name}} {{.Version.Version}}' >/dev/null
echo "setup-podman.sh: podman $(podman --version | awk '{print $3}') with $(podman info --format '{{.Host.OCIRuntime.Name}}') ready" >&2

#!/usr/bin/env bash
# Install what the dev Slurm cluster (dev/cluster/devcluster/) needs on Debian 12.
#
# Idempotent: packages that are already installed are left alone, and apt-get is
# not called at all when nothing is missing. Must run as root. Exits non-zero on
# any failure (set -e), so `make cluster-deps` fails loudly.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

# Slurm 22.05 daemons and clients, MUNGE, MariaDB for slurmdbd, plus the tools the
# cluster manager runs: unshare/nsenter (util-linux), ps/pgrep (procps), python3.
packages=(
  slurmctld
  slurmd
  slurmdbd
  slurm-client
  munge
  mariadb-server
  # bookworm's libmariadb.so.3 (10.11): the images of Slurm 24.11/26.05 carry a copy for
  # slurmdbd, which dies against the newer suites' libmariadb3 11.8 (dev/cluster/images/).
  libmariadb3
  util-linux
  procps
  coreutils
  python3
  # The project's own tooling: the Python virtual environment (make venv), git
  # (ansible-test works on a git copy of the collection), CA certificates for pip.
  python3-venv
  git
  ca-certificates
  # crontab(1) for the checkpoint_pruning role and its integration test.
  cron
  # Ansible's ssh connection: the fleet tests list a controller host that does not answer.
  openssh-client
)

if [[ "$(id -u)" -ne 0 ]]; then
  echo "install-deps.sh: must run as root" >&2
  exit 1
fi

missing=()
for pkg in "${packages[@]}"; do
  # dpkg-query prints "install ok installed" only for fully installed packages.
  status="$(dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null || true)"
  if [[ "${status}" != "install ok installed" ]]; then
    missing+=("${pkg}")
  fi
done

if [[ "${#missing[@]}" -eq 0 ]]; then
  echo "install-deps.sh: all packages already installed"
  exit 0
fi

echo "install-deps.sh: installing: ${missing[*]}"
apt-get update
# --no-install-recommends keeps the install small; the daemons need no recommends.
# policy-rc.d is not touched: on a machine without systemd the maintainer scripts
# cannot start services anyway, and the dev cluster starts its own private daemons.
apt-get install -y --no-install-recommends "${missing[@]}"
echo "install-deps.sh: done"

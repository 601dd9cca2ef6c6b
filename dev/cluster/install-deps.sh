#!/usr/bin/env bash
# Install what the dev Slurm cluster (dev/cluster/devcluster/) and the tests need on Debian 12.
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
  # Headless Chromium and a font for the page's text: the unit tests open the goodput report in it
  # (screenshot and DOM). No daemon; --no-install-recommends below leaves out its recommended fonts.
  chromium
  fonts-liberation
  # The Java runtime of ansible-rulebook's rule engine (Drools, through drools_jpy): the event path's
  # tests (tests/events, make events) run the collection's rulebook on it.
  openjdk-17-jre-headless
)

# Packages whose maintainer scripts would start a daemon this machine must not run: Debian's
# prometheus (2.42) gives promtool, with which the unit tests check and test the alert rules
# (roles/remediate/files/prometheus/); its postinst enables and starts prometheus.service
# (port 9090). Debian's prometheus-node-exporter (its textfile collector reads the remediate
# role's textfile) and prometheus are started, on 127.0.0.1 and free ports, only by the
# integration test tests/integration/test_prometheus.py; its postinst starts port 9100.
# Installed apart, see below.
quiet_packages=(
  prometheus
  prometheus-node-exporter
)

if [[ "$(id -u)" -ne 0 ]]; then
  echo "install-deps.sh: must run as root" >&2
  exit 1
fi

# missing_of PKG...: the packages of PKG... not fully installed, one a line.
missing_of() {
  local pkg status
  for pkg in "$@"; do
    # dpkg-query prints "install ok installed" only for fully installed packages.
    status="$(dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null || true)"
    if [[ "${status}" != "install ok installed" ]]; then
      echo "${pkg}"
    fi
  done
}

mapfile -t missing < <(missing_of "${packages[@]}")
mapfile -t quiet_missing < <(missing_of "${quiet_packages[@]}")

if [[ "${#missing[@]}" -eq 0 && "${#quiet_missing[@]}" -eq 0 ]]; then
  echo "install-deps.sh: all packages already installed"
  exit 0
fi

apt-get update
if [[ "${#missing[@]}" -gt 0 ]]; then
  echo "install-deps.sh: installing: ${missing[*]}"
  # --no-install-recommends keeps the install small; the daemons need no recommends.
  # policy-rc.d is not touched: on a machine without systemd the maintainer scripts
  # cannot start services anyway, and the dev cluster starts its own private daemons.
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
if [[ "${#quiet_missing[@]}" -gt 0 ]]; then
  echo "install-deps.sh: installing without starting their services: ${quiet_missing[*]}"
  # invoke-rc.d and deb-systemd-invoke ask /usr/sbin/policy-rc.d first: exit status 101 forbids
  # the start. A policy-rc.d of the machine's own (a container image's) is left as it is; ours
  # lives only for this apt-get. Then the services are disabled, so that no boot starts them
  # either. A prometheus installed before is never touched: only what is installed here.
  policy=/usr/sbin/policy-rc.d
  own_policy=false
  if [[ ! -e "${policy}" ]]; then
    printf '#!/bin/sh\n# install-deps.sh: no service starts during its apt-get\nexit 101\n' >"${policy}"
    chmod 0755 "${policy}"
    own_policy=true
    trap 'rm -f "${policy}"' EXIT
  fi
  # --no-install-recommends: none of the packages' Recommends (prometheus-node-exporter-collectors
  # and its timers), which would start too.
  apt-get install -y --no-install-recommends "${quiet_missing[@]}"
  if [[ "${own_policy}" == true ]]; then
    rm -f "${policy}"
    trap - EXIT
  fi
  for pkg in "${quiet_missing[@]}"; do
    # systemctl disable works without a running systemd, and disables the SysV script too.
    if [[ -e "/lib/systemd/system/${pkg}.service" ]] && command -v systemctl >/dev/null; then
      systemctl disable "${pkg}.service"
    elif [[ -e "/etc/init.d/${pkg}" ]]; then
      update-rc.d "${pkg}" disable
    fi
  done
fi
echo "install-deps.sh: done"

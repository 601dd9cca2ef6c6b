#!/usr/bin/env bash
# Record what strigger and scontrol answer for the module slurm_trigger (tests/unit/fixtures/slurm-<release>/
# triggers/): `scontrol show config`, `strigger --get` with no trigger, and with the three permanent node
# triggers the role slurm_events sets. Usage: dev/cluster/record-triggers.sh RELEASE (its dev cluster up:
# make cluster-up SLURM=RELEASE; DEVCLUSTER_DIR= for another of its state dirs). It sets and then clears the three triggers (nothing else of the cluster's).
set -euo pipefail
cd "$(dirname "$0")/../.."
release="${1:?usage: record-triggers.sh RELEASE}"
# shellcheck source=dev/cluster/releases.sh
source dev/cluster/releases.sh
state="${DEVCLUSTER_DIR:-$(release_state_dir "${PWD}" "${release}")}"
# shellcheck source=/dev/null
source "${state}/env.sh"
out="tests/unit/fixtures/slurm-${release}/triggers"
mkdir -p "${out}"
# The programs, where the release's slurmctld sees them (the shared folder is the same path in a container).
programs=/var/tmp/clusterops-shared/record-triggers
mkdir -p "${programs}"
for kind in down drained fail; do
  printf '#!/bin/sh\nexit 0\n' >"${programs}/clusterops-slurm-event-node_${kind}"
  chmod 0755 "${programs}/clusterops-slurm-event-node_${kind}"
done
scontrol show config >"${out}/config.txt"
if [[ -n "$(strigger --get)" ]]; then echo "record-triggers.sh: the cluster holds triggers already; clear them first" >&2; exit 1; fi
strigger --get >"${out}/get-none.txt"
for kind in down drained fail; do
  strigger --set --node "--${kind}" --flags=PERM "--program=${programs}/clusterops-slurm-event-node_${kind}"
done
strigger --get >"${out}/get-set.txt"
for id in $(strigger --get | awk 'NR > 1 && $NF ~ /clusterops-slurm-event-node_/ { print $1 }'); do
  strigger --clear "--id=${id}"
done
echo "record-triggers.sh: ${out}: $(wc -l <"${out}/get-set.txt") lines of strigger --get, Slurm $(sinfo --version)"

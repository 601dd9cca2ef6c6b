#!/usr/bin/env bash
# RebootProgram of the dev cluster (see slurm.conf written by dev/cluster/devcluster/config.py).
#
# slurmd runs this, with its own environment, when slurmctld asks the node to
# reboot (`scontrol reboot ...`). No argument names the node, so dev/cluster/devcluster/
# starts each slurmd with CLUSTEROPS_DEV_NODE=<node> and CLUSTEROPS_DEV_DIR=<state dir>.
# Slurm 26.05 runs RebootProgram with an environment holding only SLURM_NODE_NAME: the node
# comes from there, and the state dir from <state dir>/etc/reboot-program, which slurm.conf
# names as RebootProgram and which runs this script.
#
# We run inside the node's PID namespace: anything we start here (even with
# setsid/nohup) dies with the node when it is powered off, so we cannot do the
# reboot ourselves. Instead we drop a request file that powerd (outside all node
# namespaces) turns into a power cycle of this one node, and return at once.
set -euo pipefail

node="${CLUSTEROPS_DEV_NODE:-${SLURM_NODE_NAME:-}}"
[[ -n "${node}" ]] || { echo "reboot-program: neither CLUSTEROPS_DEV_NODE nor SLURM_NODE_NAME is set" >&2; exit 1; }
state_dir="${CLUSTEROPS_DEV_DIR:?CLUSTEROPS_DEV_DIR is not set: not a dev-cluster slurmd}"
requests="${state_dir}/run/power-requests"

mkdir -p "${requests}"
: > "${requests}/${node}.reboot"
echo "$(date '+%F %T') reboot-program: requested reboot of ${node}" >> "${state_dir}/log/reboot-program.log"

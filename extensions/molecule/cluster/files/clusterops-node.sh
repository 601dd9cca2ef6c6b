#!/bin/sh
# The "machine" of a Slurm compute node in a container (no init system, no real reboot).
#
#   clusterops-node boot          power on: slurmd in a fresh time namespace, so its boot time
#                                 (from uptime) is new, as after a real boot; no-op when running
#   clusterops-node kill-slurmd   only slurmd dies (SIGKILL): the fault injected by the scenario
#   clusterops-node reboot        RebootProgram: detach, kill slurmd, stay dark 2 s, boot
#                                 (needs CAP_SYS_ADMIN and CAP_SYS_TIME: unshare/nsenter --time)
#
# slurmctld completes `scontrol reboot` only when the node registers with a boot time not before
# the request; slurmd reports uptime rounded up, so boot starts the namespace just after a whole
# second of the boot clock and a reboot stays dark 2 s (same as dev/cluster, see its README).
set -eu
log=/var/log/slurm/clusterops-node.log

running() { pgrep -x slurmd >/dev/null 2>&1; }

case "${1:-}" in
  boot)
    if running; then
      exit 0
    fi
    # RebootProgram runs inside slurmd's time namespace; a new one must be made from the
    # container's own (its offsets count from there, and /proc/uptime must be the real one).
    if [ "$(readlink /proc/self/ns/time)" != "$(readlink /proc/1/ns/time)" ]; then
      exec nsenter --target 1 --time -- "$0" boot
    fi
    # Wait for the next whole second of uptime.
    sleep "$(awk '{ printf "%.2f", 1 - ($1 - int($1)) }' /proc/uptime)"
    up=$(cut -d. -f1 /proc/uptime)
    echo "$(date +%s) boot" >>"${log}"
    setsid unshare --time --fork --boottime "-${up}" /usr/sbin/slurmd -D \
      </dev/null >>/var/log/slurm/slurmd.out 2>&1 &
    # Wait until slurmd runs (at most 10 s).
    i=0
    while ! running && [ "${i}" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    running
    ;;
  kill-slurmd)
    echo "$(date +%s) kill-slurmd" >>"${log}"
    pkill -KILL -x slurmd || true
    ;;
  reboot)
    echo "$(date +%s) reboot requested" >>"${log}"
    setsid sh -c "sleep 1; pkill -KILL -x slurmstepd; pkill -KILL -x slurmd; sleep 2; '$0' boot" \
      </dev/null >/dev/null 2>&1 &
    ;;
  *)
    echo "usage: $0 boot|kill-slurmd|reboot" >&2
    exit 2
    ;;
esac

#!/bin/sh
# The "machine" of a Slurm compute node in a container (no init system, no real reboot).
#
#   clusterops-node boot          power on: slurmd in a fresh time namespace, so its boot time
#                                 (from uptime) is new, as after a real boot; no-op when running
#   clusterops-node kill-slurmd   only slurmd dies (SIGKILL): the fault injected by the scenario
#   clusterops-node powerd        the node's "BMC": started once (prepare.yml) outside slurmd,
#                                 it performs the reboots RebootProgram asks for; no-op when running
#   clusterops-node reboot        RebootProgram: asks powerd for a power cycle and returns at once;
#                                 powerd then kills slurmd, stays dark 2 s and boots
#                                 (needs CAP_SYS_ADMIN and CAP_SYS_TIME: unshare/nsenter --time)
#
# Why powerd: Slurm 26.05 starts RebootProgram with an environment holding only SLURM_NODE_NAME
# (no PATH) and a background child of it did not survive there, so the reboot cannot be done from
# inside RebootProgram on every release; a process started apart from slurmd can.
#
# slurmctld completes `scontrol reboot` only when the node registers with a boot time not before
# the request; slurmd reports uptime rounded up, so boot starts the namespace just after a whole
# second of the boot clock and a reboot stays dark 2 s (same as dev/cluster, see its README).
set -eu
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
log=/var/log/slurm/clusterops-node.log
run=/run/clusterops-node

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
    # One boot at a time (powerd and the scenario's BMC emulation may both try): the second
    # finds slurmd running. The lock's fd is not passed on to slurmd.
    mkdir -p "${run}"
    exec 8>"${run}/boot.lock"
    flock 8
    if running; then
      exit 0
    fi
    # Wait for the next whole second of uptime.
    sleep "$(awk '{ printf "%.2f", 1 - ($1 - int($1)) }' /proc/uptime)"
    up=$(cut -d. -f1 /proc/uptime)
    echo "$(date +%s) boot" >>"${log}"
    setsid unshare --time --fork --boottime "-${up}" /usr/sbin/slurmd -D \
      </dev/null >>/var/log/slurm/slurmd.out 2>&1 8>&- &
    # Wait until slurmd runs (at most 10 s).
    i=0
    while ! running && [ "${i}" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    running
    ;;
  kill-slurmd)
    echo "$(date +%s) kill-slurmd" >>"${log}"
    pkill -KILL -x slurmd || true
    ;;
  powerd)
    mkdir -p "${run}"
    if [ -s "${run}/powerd.pid" ] && kill -0 "$(cat "${run}/powerd.pid")" 2>/dev/null; then
      echo "powerd is running"
      exit 0
    fi
    # Detached from the caller (podman exec ends, powerd stays); it polls for requests. The
    # script is single-quoted on purpose: $$ and $1 belong to the inner sh.
    # shellcheck disable=SC2016
    setsid sh -c '
      echo $$ >"$1/powerd.pid"
      while :; do
        if [ -e "$1/reboot-request" ]; then
          rm -f "$1/reboot-request"
          sleep 1
          pkill -KILL -x slurmstepd || true
          pkill -KILL -x slurmd || true
          sleep 2
          "$2" boot || echo "$(date +%s) boot failed" >>"$3"
        fi
        sleep 0.2
      done' powerd "${run}" "$0" "${log}" </dev/null >/dev/null 2>&1 &
    i=0
    while [ ! -s "${run}/powerd.pid" ] && [ "${i}" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    echo "powerd started"
    ;;
  reboot)
    echo "$(date +%s) reboot requested" >>"${log}"
    mkdir -p "${run}"
    : >"${run}/reboot-request"
    ;;
  *)
    echo "usage: $0 boot|kill-slurmd|powerd|reboot" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Record what a real Slurm of one release keeps in its accounting about node state changes
# (`sacctmgr show event`), as unit-test fixtures for plugins/module_utils/_node_events.py:
#   tests/unit/fixtures/slurm-<release>/node-events-<scenario>/sacctmgr-show-event{,-iso}.{out,rc,err}
#
#   dev/cluster/record-node-events.sh [22.05|24.11|26.05] [SCENARIO...]
#                                       (release default: $SLURM, else 22.05; scenarios: all)
#
# Uses the release's dev cluster as `make cluster-up` leaves it (starts it when it is down; the
# accounting database keeps the events of earlier runs, so every read is limited to the node and
# the start time of its scenario). DEVCLUSTER_DIR / DEVCLUSTER_PORT_OFFSET are passed on (a
# second host cluster for 22.05). Leaves the cluster up, every node idle. About 2-3 minutes.
#
# Each scenario folder holds:
#   sacctmgr-show-event.*      the collection's own read (what _node_events.py runs):
#                              TZ=UTC SLURM_TIME_FORMAT=%s sacctmgr --noheader --parsable2 show event
#                              event=node start=<UTC start> nodes=<node>
#                              format=NodeName,TimeStart,TimeEnd,State,User,Reason
#   sacctmgr-show-event-iso.*  the same read with Slurm's default time format (TZ=UTC)
#   steps.txt                  what was done, each step with its Unix time
#   README.md                  the above, for the reader of the fixtures
#
# Scenarios (folder node-events-<name>):
#   flapping         n2 drained "Prolog error", resumed, drained "Prolog error", resumed
#   reboot           n3 drained "Kill task failed", then `scontrol reboot ASAP nextstate=resume
#                    reason="clusterops.slurm remediation: reboot" n3`; RebootProgram power-cycles
#                    it and Slurm returns it to service
#   crash            n4 loses power (make cluster-crash): NOT_RESPONDING, DOWN; powered on, resumed
#   admin-open       n1 drained by an admin with a reason holding '|', still drained when read
#   reason-bytes     n2 drained with a Latin-1 (not UTF-8) reason, resumed
#   slurmdbd-down    slurmdbd stopped (slurmctld up): what sacctmgr prints and its exit status
set -euo pipefail

# shellcheck source=dev/cluster/record-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/record-lib.sh"
use_release "${1:-}"
shift || true
scenarios=("$@")
(( ${#scenarios[@]} )) || scenarios=(crash flapping reboot reason-bytes admin-open slurmdbd-down)
unset SLURM_CONF
out_root="${FIXTURES:-${repo}/tests/unit/fixtures/slurm-${release}}"

cluster_up
export LC_ALL=C.UTF-8

FORMAT="format=NodeName,TimeStart,TimeEnd,State,User,Reason"

utc_now() { date -u +%Y-%m-%dT%H:%M:%S; }

scenario=""
dir=""
begin() { # begin SCENARIO: a fresh folder, the read starts 2 s before the first step
  scenario="$1"
  dir="${out_root}/node-events-${scenario}"
  rm -rf "${dir}"
  mkdir -p "${dir}"
  start="$(date -u -d '-2 seconds' +%Y-%m-%dT%H:%M:%S)"
  : >"${dir}/steps.txt"
}
step() { # step TEXT...: run the command and log it with its time
  { printf '%s' "$(date +%s)"; printf ' %q' "$@"; printf '\n'; } >>"${dir}/steps.txt"
  "$@"
}
note() { printf '%s # %s\n' "$(date +%s)" "$*" >>"${dir}/steps.txt"; }
read_events() { # read_events NODE
  local rc=0 name
  for name in sacctmgr-show-event sacctmgr-show-event-iso; do
    rc=0
    if [[ "${name}" == sacctmgr-show-event ]]; then
      TZ=UTC SLURM_TIME_FORMAT=%s sacctmgr --noheader --parsable2 show event event=node \
        "start=${start}" "nodes=$1" "${FORMAT}" >"${dir}/${name}.out" 2>"${dir}/${name}.err" || rc=$?
    else
      TZ=UTC sacctmgr --noheader --parsable2 show event event=node \
        "start=${start}" "nodes=$1" "${FORMAT}" >"${dir}/${name}.out" 2>"${dir}/${name}.err" || rc=$?
    fi
    echo "${rc}" >"${dir}/${name}.rc"
    [[ -s "${dir}/${name}.err" ]] || rm -f "${dir}/${name}.err"
  done
  date +%s >"${dir}/recorded-at"
  cat >"${dir}/README.md" <<EOF
# Slurm ${release}: node events, scenario \`${scenario}\`

Recorded by \`dev/cluster/record-node-events.sh ${release}\` on the dev cluster
(\`make cluster-up SLURM=${release}\`, $(sacctmgr --version)), $(date -u +%Y-%m-%dT%H:%M:%SZ).

What was done: \`steps.txt\` (Unix time, then the command or a note).

| file | command |
|---|---|
| \`sacctmgr-show-event.out\` (\`.rc\`, \`.err\` when stderr was not empty) | \`TZ=UTC SLURM_TIME_FORMAT=%s sacctmgr --noheader --parsable2 show event event=node start=${start} nodes=$1 ${FORMAT}\` (the collection's read) |
| \`sacctmgr-show-event-iso.*\` | the same with \`TZ=UTC\` and Slurm's default time format |

\`recorded-at\`: Unix time of the read (an event with end \`Unknown\` was still open then).
EOF
  say "${release}/node-events-${scenario} saved"
}

# --- crash: the node must be marked DOWN* (SlurmdTimeout + a ping cycle) before it boots again
sc_crash() {
  begin crash
  step mk cluster-crash NODE=n4
  wait_node n4 'down\*' 180
  note "n4 is $(state_of n4)"
  sleep 2
  step mk cluster-poweron NODE=n4
  wait_node n4 'down|idle' 60
  sleep 3
  note "n4 is $(state_of n4) after power-on"
  step scontrol update NodeName=n4 State=RESUME
  wait_node n4 idle 60
  sleep 2
  read_events n4
}

sc_flapping() {
  begin flapping
  for _ in 1 2; do
    step scontrol update NodeName=n2 State=DRAIN Reason="Prolog error"
    sleep 3
    step scontrol update NodeName=n2 State=RESUME
    sleep 3
  done
  wait_node n2 idle 30
  read_events n2
}

sc_reboot() {
  begin reboot
  step scontrol update NodeName=n3 State=DRAIN Reason="Kill task failed"
  sleep 3
  step scontrol reboot ASAP nextstate=resume reason="clusterops.slurm remediation: reboot" n3
  wait_node n3 idle 120
  note "n3 is $(state_of n3)"
  sleep 2
  read_events n3
}

sc_reason-bytes() {
  begin reason-bytes
  step scontrol update NodeName=n2 State=DRAIN Reason="$(printf 'Wartung f\374r GPU')"
  sleep 2
  step scontrol update NodeName=n2 State=RESUME
  wait_node n2 idle 30
  read_events n2
}

sc_admin-open() {
  begin admin-open
  step scontrol update NodeName=n1 State=DRAIN Reason="maintenance: rack 7 | PSU swap (CHG-1234)"
  sleep 2
  read_events n1
  scontrol update NodeName=n1 State=RESUME
}

sc_slurmdbd-down() {
  begin slurmdbd-down
  step mk cluster-slurmdbd-stop
  sleep 1
  read_events n1
  step mk cluster-slurmdbd-start
  wait_node n1 idle 30 || true
}

for name in "${scenarios[@]}"; do "sc_${name}"; done
say "${release} done"

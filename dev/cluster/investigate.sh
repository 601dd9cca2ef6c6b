#!/usr/bin/env bash
# Record what Slurm 22.05 really does on node crash, power-on and reboot, on the
# dev cluster, and save real command outputs as unit-test fixtures.
#
#   dev/cluster/investigate.sh [FIXTURE_DIR]   (default tests/unit/fixtures/devcluster)
#
# Starts a fresh 4-node cluster (cluster-down first), runs scenarios a-e from
# dev/cluster/README.md, prints timelines (seconds since the triggering action)
# and leaves the cluster DOWN. Takes about 5 minutes. The facts in README.md were
# written from its output.
set -euo pipefail

# shellcheck source=dev/cluster/record-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/record-lib.sh"
use_fixture_dir "${1:-}"
fresh_cluster
export LC_ALL=C

t0=0
mark() { t0="$(date +%s.%N)"; echo "--- t=0: $*"; }
elapsed() { awk -v a="$(date +%s.%N)" -v b="${t0}" 'BEGIN { printf "%5.1f", a - b }'; }
# One line per node (the debug partition only, so each node appears once).
node_line() { sinfo -N -h -p debug -n "$1" -o '%N|%T|%E'; }
node_state() { scontrol show node -o "$1" | tr ' ' '\n' | grep -E '^State=' || true; }

# Print the node's state whenever it changes, until its sinfo line matches the
# extended regex $2 or $3 seconds have passed. Returns 1 on timeout.
watch_node() {
  local node="$1" until_re="$2" timeout="$3" last="" now
  local deadline=$(( $(date +%s) + timeout ))
  while :; do
    now="$(node_line "${node}") $(node_state "${node}")"
    if [[ "${now}" != "${last}" ]]; then
      echo "  $(elapsed)s  ${now}"
      last="${now}"
    fi
    if [[ "${now}" =~ ${until_re} ]]; then return 0; fi
    if (( $(date +%s) >= deadline )); then echo "  (timeout after ${timeout}s)"; return 1; fi
    sleep 0.5
  done
}

jobs_table() {
  { sacct -a -D -X -P -j "$1" -o JobID,JobName,State,ExitCode,NodeList,Start,End 2>&1 || true; } | sed 's/^/  sacct: /'
  { squeue -h -j "$1" -O 'JobID:8,Name:10,State:10,Reason:22,NodeList:10,RestartCnt:4' 2>&1 || true; } | sed 's/^/  squeue: /'
}

wait_running() { # wait_running JOBID: until the job runs and its processes exist
  local _
  for _ in $(seq 1 60); do
    if [[ "$(squeue -h -j "$1" -o '%T')" == "RUNNING" ]] && pgrep -f 'sleep 600' >/dev/null; then
      sleep 1; return 0
    fi
    sleep 0.5
  done
  echo "  job $1 did not start"; return 1
}

echo "=== baseline"
save sinfo_json_all_idle.json sinfo --json
save sinfo_N_all_idle.txt sinfo -N -h -o '%N|%P|%T|%E'
save scontrol_show_node_o_all_idle.txt scontrol show node -o

echo "=== a. crash n2 with a 1-node batch job on it and a 2-node job on n2,n3"
j1="$(sbatch --parsable -o /dev/null -J one-node -w n2 -N1 -n1 --wrap 'sleep 600')"
j2="$(sbatch --parsable -o /dev/null -J two-node -w n2,n3 -N2 -n2 --wrap 'srun sleep 600')"
wait_running "${j1}"; wait_running "${j2}"
jobs_table "${j1},${j2}"
echo "  processes of job ${j2} on n3 before: $(pgrep -fc 'sleep 600' || true) sleep(s) on the host"
mark "make cluster-crash NODE=n2"
mk cluster-crash NODE=n2
watch_node n2 'down\*' 60 || true
echo "  $(elapsed)s jobs:"
jobs_table "${j1},${j2}"
echo "  sleep processes left on the host (n3's step must be gone too): $(pgrep -fc 'sleep 600' || true)"
sleep 5
echo "  $(elapsed)s jobs:"
jobs_table "${j1},${j2}"
scontrol show node n2 | sed 's/^/  /'
save sinfo_json_crashed_n2.json sinfo --json
save sinfo_N_crashed_n2.txt sinfo -N -h -o '%N|%P|%T|%E'
save scontrol_show_node_o_crashed_n2.txt scontrol show node -o
scancel "${j1}" "${j2}"

echo "=== b. reboot requested while n2 is powered off, then power on"
mark "scontrol reboot ASAP nextstate=resume reason=\"clusterops: test\" n2"
scontrol reboot ASAP nextstate=resume reason="clusterops: test" n2
watch_node n2 'NEVER' 8 || true
scontrol show node n2 | sed 's/^/  /'
save sinfo_json_crashed_reboot_requested_n2.json sinfo --json
save sinfo_N_crashed_reboot_requested_n2.txt sinfo -N -h -o '%N|%P|%T|%E'
save scontrol_show_node_o_crashed_reboot_requested_n2.txt scontrol show node -o
reboots_before="$(grep -c 'reboot of n2' .devcluster/log/reboot-program.log 2>/dev/null || true)"
mark "make cluster-poweron NODE=n2"
mk cluster-poweron NODE=n2
watch_node n2 '^n2\|idle\|' 90 || true
echo "  RebootProgram runs for n2 after power-on: $(( $(grep -c 'reboot of n2' .devcluster/log/reboot-program.log 2>/dev/null || true) - reboots_before ))"
scontrol show node n2 | grep -E 'State=|Reason|BootTime' | sed 's/^/  /'

echo "=== c. crash n2, power it on WITHOUT a reboot request (ReturnToService=0)"
mark "make cluster-crash NODE=n2"
mk cluster-crash NODE=n2
watch_node n2 'down\*' 60 || true
mark "make cluster-poweron NODE=n2"
mk cluster-poweron NODE=n2
watch_node n2 'NEVER' 20 || true
scontrol show node n2 | grep -E 'State=|Reason|BootTime' | sed 's/^/  /'
save sinfo_json_powered_on_down_n2.json sinfo --json
save sinfo_N_powered_on_down_n2.txt sinfo -N -h -o '%N|%P|%T|%E'
mark "scontrol update nodename=n2 state=resume"
scontrol update nodename=n2 state=resume
watch_node n2 '^n2\|idle\|' 30 || true

echo "=== b2. reboot requested while n2 is powered off, n2 stays off past ResumeTimeout (60 s)"
mark "make cluster-crash NODE=n2"
mk cluster-crash NODE=n2
watch_node n2 'down\*' 60 || true
mark "scontrol reboot ASAP nextstate=resume reason=\"clusterops: test\" n2"
scontrol reboot ASAP nextstate=resume reason="clusterops: test" n2
watch_node n2 'reboot timed out' 100 || true
watch_node n2 'NEVER' 3 || true
save sinfo_json_reboot_timed_out_n2.json sinfo --json
save sinfo_N_reboot_timed_out_n2.txt sinfo -N -h -o '%N|%P|%T|%E'
mark "make cluster-poweron NODE=n2 (after the reboot timed out)"
mk cluster-poweron NODE=n2
watch_node n2 'NEVER' 10 || true
scontrol show node n2 | grep -E 'State=|Reason|BootTime' | sed 's/^/  /'
mark "scontrol update nodename=n2 state=resume"
scontrol update nodename=n2 state=resume
watch_node n2 '^n2\|idle\|' 30 || true

echo "=== f. slurmd of n4 dies but the node stays up (job running), then slurmd restarts (same boot time)"
j4="$(sbatch --parsable -o /dev/null -J survivor -w n4 -N1 -n1 --wrap 'sleep 600')"
wait_running "${j4}"
echo "  job processes alive on n4 before: $(pgrep -fc 'sleep 600' || true)"
mark "make cluster-slurmd-kill NODE=n4"
mk cluster-slurmd-kill NODE=n4
watch_node n4 'down\*' 60 || true
jobs_table "${j4}"
echo "  job processes still alive on n4: $(pgrep -fc 'sleep 600' || true)"
save sinfo_json_slurmd_dead_n4.json sinfo --json
mark "make cluster-slurmd-start NODE=n4"
mk cluster-slurmd-start NODE=n4
watch_node n4 'NEVER' 15 || true
scontrol show node n4 | grep -E 'State=|Reason|BootTime' | sed 's/^/  /'
jobs_table "${j4}"
echo "  job processes still alive on n4: $(pgrep -fc 'sleep 600' || true)"
save sinfo_json_slurmd_back_down_n4.json sinfo --json
save sinfo_N_slurmd_back_down_n4.txt sinfo -N -h -o '%N|%P|%T|%E'
mark "scontrol update nodename=n4 state=resume"
scontrol update nodename=n4 state=resume
watch_node n4 '^n4\|idle\|' 30 || true
scancel "${j4}" 2>/dev/null || true

echo "=== d. drain n3 \"Kill task failed\", then reboot ASAP nextstate=resume"
mark "scontrol update nodename=n3 state=drain reason=\"Kill task failed\""
scontrol update nodename=n3 state=drain reason="Kill task failed"
watch_node n3 'drained' 10 || true
save sinfo_json_drained_n3.json sinfo --json
save sinfo_N_drained_n3.txt sinfo -N -h -o '%N|%P|%T|%E'
save scontrol_show_node_o_drained_n3.txt scontrol show node -o
mark "scontrol reboot ASAP nextstate=resume reason=\"clusterops: Kill task failed\" n3"
scontrol reboot ASAP nextstate=resume reason="clusterops: Kill task failed" n3
watch_node n3 '^n3\|idle\|' 90 || true
scontrol show node n3 | grep -E 'State=|Reason|BootTime' | sed 's/^/  /'

echo "=== e. a mix: n1 busy + reboot ASAP, n2 crashed, n3 drained by an admin, n4 idle"
j3="$(sbatch --parsable -o /dev/null -J busy -w n1 -N1 -n1 --wrap 'sleep 600')"
wait_running "${j3}"
scontrol reboot ASAP nextstate=resume reason="clusterops: Not responding" n1
mk cluster-crash NODE=n2
scontrol update nodename=n3 state=drain reason="maintenance: swap DIMM"
mark "waiting for n2 to be marked down"
watch_node n2 'down\*' 60 || true
sinfo -N -h -o '%N|%P|%T|%E' | sed 's/^/  /'
save sinfo_json_mixed.json sinfo --json
save sinfo_N_mixed.txt sinfo -N -h -o '%N|%P|%T|%E'
save sinfo_N_mixed_long_states.txt sinfo -N -h -o '%N|%P|%6t|%T|%E|%u|%H'
save scontrol_show_node_o_mixed.txt scontrol show node -o
save sinfo_R_mixed.txt sinfo -R -h -o '%n|%T|%E|%u|%H'
scancel "${j3}"

echo "=== hostlists and scontrol errors"
{
  for expr in 'n[1-4]' 'n1,n3,n[5-6]' 'gpu[001-003],cpu[9-11]' 'n[1-2],n[1-2]'; do
    echo "\$ scontrol show hostnames '${expr}'"; scontrol show hostnames "${expr}"
  done
  for expr in 'n1,n2,n3,n4' 'n3,n1,n2' 'gpu001,gpu002,gpu003,cpu9,cpu10,cpu11' 'n1,n1,n2'; do
    echo "\$ scontrol show hostlist '${expr}'"; scontrol show hostlist "${expr}"
    echo "\$ scontrol show hostlistsorted '${expr}'"; scontrol show hostlistsorted "${expr}"
  done
} > "${fixtures}/scontrol_hostlist_examples.txt" 2>&1
echo "  saved scontrol_hostlist_examples.txt"

capture_rc scontrol_resume_idle_node.txt scontrol update nodename=n4 state=resume
capture_rc scontrol_resume_unknown_node.txt scontrol update nodename=n99 state=resume
capture_rc scontrol_resume_mixed_known_unknown.txt scontrol update nodename=n4,n99 state=resume
# n3 is drained here: is it resumed when the list also holds an unknown name?
capture_rc scontrol_resume_drained_and_unknown.txt scontrol update nodename=n3,n99 state=resume
echo "  n3 after 'update nodename=n3,n99 state=resume': $(node_line n3)" | tee -a "${fixtures}/scontrol_resume_drained_and_unknown.txt"
scontrol update nodename=n3 state=drain reason="maintenance: swap DIMM"
capture_rc scontrol_resume_drained_and_idle.txt scontrol update nodename=n3,n4 state=resume
echo "  n3 after 'update nodename=n3,n4 state=resume': $(node_line n3)" | tee -a "${fixtures}/scontrol_resume_drained_and_idle.txt"
capture_rc scontrol_reboot_unknown_node.txt scontrol reboot ASAP nextstate=resume reason=x n99
capture_rc scontrol_show_node_unknown.txt scontrol show node n99

mk cluster-down >/dev/null
echo "=== done; cluster is down"

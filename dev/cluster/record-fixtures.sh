#!/usr/bin/env bash
# Record what a real Slurm of one release prints for nodes and jobs in known situations, as
# unit-test fixtures:  tests/unit/fixtures/slurm-<release>/<scenario>/<command>.out  (+ .rc, and
# .err when stderr was not empty).
#
#   dev/cluster/record-fixtures.sh [22.05|24.11|26.05]     (default: $SLURM, else 22.05)
#
# Starts a fresh 4-node dev cluster of that release (cluster-down, cluster-up), then walks
# through the scenarios below, taking one snapshot (every command of COMMANDS) in each. Leaves the
# cluster UP with every node idle and no job. About 3-4 minutes (one node crash: the node is
# marked DOWN after SlurmdTimeout, 10 s on the host and 30 s in a container, plus ping cycles).
# Works for every release the same way: client commands come from PATH as `make cluster-env`
# sets it (the release's own commands; for 24.11/26.05 wrappers that run them in the container).
#
# Scenarios (folder names):
#   all-idle               fresh cluster, no job
#   drained-admin          n1 and n2 drained by an admin with two different reasons
#   resumed-after-drain    right after `State=RESUME` of n1,n2 (24.11 keeps the old reason)
#   kill-task-failed       n3 drained with the reason slurmd writes for an unkillable step
#                          (set with scontrol: 22.05/24.11 "Kill task failed", 25.05+ the
#                          "Kill task failed (JobId=<id> batch)" form)
#   completing             an exclusive job on n4 cancelled while its processes ignore SIGTERM:
#                          COMPLETING for KillWait (5 s): node state COMPLETING
#   completing-busy        the same with a second job running on n4 (MIXED+COMPLETING)
#   jobs                   running, held by user (sbatch -H), held by an admin (scontrol hold),
#                          held by Slurm itself (Prolog failure on n2: "launch failed requeued
#                          held", n2 drained "Prolog error"), an array, a het job, a finished
#                          FAILED (exit 3) and a cancelled job
#   not-responding         n3 crashed (power loss) with a job on it, before slurmctld marks it DOWN
#   down-not-responding    n3 DOWN* "Not responding"; its job ended NODE_FAIL and was requeued
#   rebooting              `scontrol reboot ASAP nextstate=resume` of the powered-off n3 (reboot
#                          issued, nobody answers) and of the busy n1 (reboot requested, draining)
#   after-reboot           n3 powered on again: the reboot completed (nextstate=resume); n1's
#                          reboot request cancelled after its job was cancelled
#   controller-stopped     slurmctld stopped (slurmdbd still up): what each command prints and
#                          its exit status when the controller does not answer
set -euo pipefail

# shellcheck source=dev/cluster/record-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/record-lib.sh"
use_release "${1:-}"
unset DEVCLUSTER_DIR SLURM_CONF
out_root="${FIXTURES:-${repo}/tests/unit/fixtures/slurm-${release}}"
work="/var/tmp/clusterops-shared/record-fixtures-${release}"

say "fresh Slurm ${release} dev cluster"
fresh_cluster
export LC_ALL=C.UTF-8
since="$(date +%Y-%m-%dT%H:%M:%S)"
rm -rf "${work}"
mkdir -p "${work}"
chmod 755 "${work}"
cd "${work}"

# name|command: one file set per command in every snapshot.
COMMANDS=(
  "sinfo-version|sinfo --version"
  "sinfo-json|sinfo --json"
  "scontrol-show-nodes-json|scontrol show nodes --json"
  "scontrol-show-node-oneliner|scontrol show node -o"
  "sinfo-text|sinfo -N -h -o %N|%T|%E|%u|%H"
  "sinfo-summary|sinfo"
  "squeue-json|squeue --json"
  "squeue-text|squeue -h --states=all -o %A|%i|%j|%u|%T|%r|%N"
  "sacct-json|sacct --json -a -S ${since}"
  "sacct-text|sacct -a -P -S ${since} -o JobID,JobIDRaw,JobName,User,State,ExitCode,Reason,NodeList"
)

snapshot() { # snapshot SCENARIO
  local dir="${out_root}/$1" entry name cmd rc
  rm -rf "${dir}"
  mkdir -p "${dir}"
  for entry in "${COMMANDS[@]}"; do
    name="${entry%%|*}"
    cmd="${entry#*|}"
    # Split on spaces only (formats above contain no spaces but use | and %).
    read -r -a argv <<<"${cmd}"
    rc=0
    "${argv[@]}" >"${dir}/${name}.out" 2>"${dir}/${name}.err" || rc=$?
    echo "${rc}" >"${dir}/${name}.rc"
    [[ -s "${dir}/${name}.err" ]] || rm -f "${dir}/${name}.err"
  done
  say "${release}/$1 saved"
}

settle() { # settle NODE: wait until idle; a node still busy after 3 minutes is reported, not fatal
  # (seen on a loaded machine: a het job's idle component kept a node "mixed" for minutes).
  wait_node "$1" idle 180 || say "continuing with $1 not idle"
}

cat >"${work}/sleeper.sh" <<'SH'
#!/bin/sh
sleep 600
SH
cat >"${work}/stubborn.sh" <<'SH'
#!/bin/sh
# Ignores SIGTERM (inherited by sleep): the job stays COMPLETING until KillWait's SIGKILL.
trap '' TERM
sleep 600
SH
cat >"${work}/het.sh" <<'SH'
#!/bin/sh
#SBATCH -n1 -w n3
#SBATCH hetjob
#SBATCH -n1 -w n2
sleep 600
SH
cat >"${work}/fail3.sh" <<'SH'
#!/bin/sh
exit 3
SH

snapshot all-idle

scontrol update NodeName=n1 State=DRAIN Reason="maintenance: replace PSU (CHG-1234)"
scontrol update NodeName=n2 State=DRAIN Reason="health check: ECC errors on DIMM B2"
sleep 1
snapshot drained-admin
scontrol update NodeName=n1,n2 State=RESUME
snapshot resumed-after-drain
settle n1
settle n2

case "${release}" in
  22.05|24.11) ktf="Kill task failed" ;;
  *) ktf="Kill task failed (JobId=7 batch)" ;;
esac
scontrol update NodeName=n3 State=DRAIN Reason="${ktf}"
snapshot kill-task-failed
scontrol update NodeName=n3 State=RESUME
settle n3

job="$(submit -J stubborn --exclusive -w n4 "${work}/stubborn.sh")"
wait_job "${job}" RUNNING 60
sleep 2
scancel "${job}"
sleep 0.5
snapshot completing
settle n4
busy="$(submit -J busy -n1 -w n4 "${work}/sleeper.sh")"
job="$(submit -J stubborn -n1 -w n4 "${work}/stubborn.sh")"
wait_job "${busy}" RUNNING 60
wait_job "${job}" RUNNING 60
sleep 2
scancel "${job}"
sleep 0.5
snapshot completing-busy
scancel "${busy}"
settle n4

running="$(submit -J running -w n1 -n1 "${work}/sleeper.sh")"
held_user="$(submit -J held-user -H -n1 "${work}/sleeper.sh")"
held_admin="$(submit -J held-admin -n1 --begin=now+600 "${work}/sleeper.sh")"
scontrol hold "${held_admin}"
array="$(submit -J array --array=1-6%2 -n1 -w n4 "${work}/sleeper.sh")"
het="$(submit -J het "${work}/het.sh")"
failed="$(submit -J fail3 -n1 -w n1 "${work}/fail3.sh")"
cancelled="$(submit -J cancelled -n1 -w n1 "${work}/sleeper.sh")"
wait_job "${running}" RUNNING 60
wait_job "${cancelled}" RUNNING 60
scancel "${cancelled}"
mk cluster-prolog-fail NODE=n2 >/dev/null
held_slurm="$(submit -J held-by-slurm -n1 -w n2 "${work}/sleeper.sh")"
left=60
until squeue -h -j "${held_slurm}" -o '%r' | grep -qi 'held'; do
  (( left-- > 0 )) || { say "job ${held_slurm} was not held by Slurm"; break; }
  sleep 1
done
mk cluster-prolog-ok NODE=n2 >/dev/null
sleep 3  # accounting of the finished jobs reaches slurmdbd
jobs_line="running=${running} held_user=${held_user} held_admin=${held_admin} array=${array}"
jobs_line+=" het=${het} failed=${failed} cancelled=${cancelled} held_slurm=${held_slurm}"
say "jobs ${jobs_line}"
snapshot jobs
scancel "${held_user}" "${held_admin}" "${array}" "${het}" "${held_slurm}" "${running}"
scontrol update NodeName=n2 State=RESUME 2>/dev/null || true
settle n2
settle n4

victim="$(submit -J node-fail -n1 -w n3 "${work}/sleeper.sh")"
wait_job "${victim}" RUNNING 60
sleep 2
mk cluster-crash NODE=n3 >/dev/null
wait_node n3 '[a-z]+\*' 90
snapshot not-responding
wait_node n3 'down\*' 120
left=60
until [[ "$(job_state "${victim}")" == PENDING ]]; do
  (( left-- > 0 )) || break
  sleep 1
done
sleep 3
snapshot down-not-responding

busy="$(submit -J busy -w n1 --exclusive "${work}/sleeper.sh")"
wait_job "${busy}" RUNNING 60
scontrol reboot ASAP nextstate=resume reason="clusterops: fixture" n3
scontrol reboot ASAP nextstate=resume reason="clusterops: fixture busy" n1
wait_node n3 'reboot\^' 30 || true
snapshot rebooting
scancel "${busy}" "${victim}"
scontrol cancel_reboot n1 2>/dev/null || true
sleep 3
mk cluster-poweron NODE=n3 >/dev/null
wait_node n3 idle 180 || scontrol update NodeName=n3 State=RESUME
snapshot after-reboot
scontrol update NodeName=n1 State=RESUME 2>/dev/null || true
settle n1

mk cluster-slurmctld-stop >/dev/null
snapshot controller-stopped
mk cluster-slurmctld-start >/dev/null
left=60
until scontrol ping >/dev/null 2>&1; do (( left-- > 0 )) || break; sleep 1; done
for n in n1 n2 n3 n4; do wait_node "${n}" idle 180 || true; done
cd "${repo}"
rm -rf "${work}"

# The README of this release's recordings (named so as not to clash with other READMEs there).
{
  echo "# Slurm ${release} recordings made by dev/cluster/record-fixtures.sh"
  echo
  echo "Recorded on $(date -u +%Y-%m-%d) from a real 4-node dev cluster (\`make cluster-up SLURM=${release}\`,"
  echo "nodes n1..n4, partitions debug (default) and train, 2 CPUs per node):"
  echo "\`$(sinfo --version)\`. Regenerate with \`dev/cluster/record-fixtures.sh ${release}\`"
  echo "(about 4 minutes; the values of times, job ids and boot times change on every run)."
  echo
  echo "Each scenario folder holds, for every command below, \`<name>.out\` (stdout), \`<name>.rc\`"
  echo "(exit status) and \`<name>.err\` (stderr, only when not empty). All commands ran as root."
  echo
  echo "| name | command |"
  echo "|---|---|"
  for entry in "${COMMANDS[@]}"; do
    echo "| \`${entry%%|*}\` | \`${entry#*|}\` |" | sed 's/|%/\\|%/g; s/%\([A-Za-z]\)|/%\1\\|/g'
  done
  echo
  echo "The sacct commands start at the start of the recording. Jobs of the \`jobs\` and later"
  echo "scenarios: ${jobs_line}; the job that ran on n3 when it crashed: ${victim}; the busy job on"
  echo "n1 asked to reboot: ${busy}."
  echo
  echo "## Scenarios (in the order they were taken)"
  echo
  echo '```'
  sed -n '/^# Scenarios (folder names):/,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '1d;$d' | sed 's/^# \{0,1\}//'
  echo '```'
  echo
  echo "The Kill task failed reason is set with scontrol (no unkillable step can be made on these"
  echo "nodes), so it is the text an admin or a script would see, not one slurmd wrote."
  if [[ -n "${DEVCLUSTER_PORT_OFFSET:-}" ]]; then
    echo
    echo "This run used \`DEVCLUSTER_PORT_OFFSET=${DEVCLUSTER_PORT_OFFSET}\` (another checkout's dev cluster held the"
    echo "default ports): the ports in the outputs are moved by that much."
  fi
} >"${out_root}/README-record-fixtures.md"
say "Slurm ${release} fixtures in ${out_root}"

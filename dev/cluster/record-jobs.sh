#!/usr/bin/env bash
# Record what Slurm 22.05's sbatch, squeue, sacct, scancel and scontrol print for jobs, on the
# dev cluster, and save the real outputs as unit-test fixtures (jobs_*, sbatch_*, ...).
#
#   dev/cluster/record-jobs.sh [FIXTURE_DIR]   (default tests/unit/fixtures/devcluster)
#
# Starts a fresh 4-node dev cluster (cluster-down, cluster-up: job ids start at 1 again) and
# creates the local user clusterops-alice when missing. Leaves the cluster UP, every node idle,
# no job. Takes about 3 minutes (a node crash, a 1-minute time limit). Every job writes to
# /dev/null. The accounting database outlives cluster-up, and with it the records of earlier
# runs under the same job ids: every sacct here starts at this run's start time.
set -euo pipefail

# shellcheck source=dev/cluster/record-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/record-lib.sh"
use_fixture_dir "${1:-}"
fresh_cluster
export LC_ALL=C
since="$(date +%Y-%m-%dT%H:%M:%S)"
sleep 1
work="$(mktemp -d /tmp/clusterops-record-jobs.XXXXXX)"
chmod 755 "${work}"
proxy_pid=""
cleanup() {
  if [[ -n "${proxy_pid}" ]]; then kill "${proxy_pid}" 2>/dev/null || true; fi
  rm -rf "${work}"
}
trap cleanup EXIT

# The fields and separators the module_utils (_jobs.py) ask for: ASCII US between fields,
# RS after squeue's last one; times as Unix seconds.
US=$'\x1f'
RS=$'\x1e'
SQUEUE_FIELDS=(JobID JobArrayID Name UserName State Reason exit_code NodeList SubmitTime StartTime
               EndTime RestartCnt Partition Cluster Comment)
squeue_format=""
for f in "${SQUEUE_FIELDS[@]}"; do squeue_format+="${f}:${US},"; done
squeue_format="${squeue_format%"${US}",}${RS}"
SACCT_FORMAT=JobID,JobIDRaw,Cluster,User,Partition,State,ExitCode,Reason,NodeList,Submit,Start,End,JobName
our_squeue() { SLURM_TIME_FORMAT=%s squeue --noheader --states=all "--Format=${squeue_format}" "$@"; }
our_sacct() {
  SLURM_TIME_FORMAT=%s sacct --noheader --parsable2 "--delimiter=${US}" --duplicates \
    "--format=${SACCT_FORMAT}" "--starttime=${since}" "$@"
}

wait_sacct() { # wait_sacct JOBID REGEX: until sacct's newest record of the job matches
  local _
  for _ in $(seq 1 60); do
    if [[ "$(sacct -n -X -P -j "$1" -o State 2>/dev/null | tail -1)" =~ $2 ]]; then return 0; fi
    sleep 0.5
  done
  echo "  sacct never showed $2 for job $1"; return 1
}
sb() { submit -e /dev/null --chdir=/tmp "$@"; }

id clusterops-alice >/dev/null 2>&1 || useradd -m -s /bin/bash clusterops-alice

echo "=== sbatch output forms"
capture_rc sbatch_plain.txt sbatch -o /dev/null --chdir=/tmp -J rec-plain --wrap 'true'
capture_rc sbatch_parsable.txt sbatch --parsable -o /dev/null --chdir=/tmp -J rec-parsable --wrap 'true'
capture_rc sbatch_on_cluster.txt sbatch -M devcluster -o /dev/null --chdir=/tmp -J rec-cluster --wrap 'true'
capture_rc sbatch_parsable_on_cluster.txt sbatch --parsable -M devcluster -o /dev/null --chdir=/tmp -J rec-cluster --wrap 'true'
capture_rc sbatch_stdin_script.txt bash -c "printf '#!/bin/sh\ntrue\n' | sbatch --parsable -o /dev/null --chdir=/tmp -J rec-stdin"
capture_rc sbatch_invalid_partition.txt sbatch --parsable -o /dev/null -p nosuch -J rec-bad --wrap 'true'
capture_rc sbatch_not_a_script.txt bash -c "printf 'true\n' | sbatch --parsable -o /dev/null -J rec-bad"

echo "=== sbatch when slurmctld cannot be reached, or its answer is lost (MessageTimeout=3)"
closed="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p "${work}/closed"
python3 -c "import sys; sys.path.insert(0, 'dev/cluster'); import ctld_proxy; ctld_proxy.conf_via_proxy('${SLURM_CONF}', ${closed}, '${work}/closed', 3)"
SLURM_CONF="${work}/closed/slurm.conf" capture_rc sbatch_connect_failure.txt sbatch --parsable -o /dev/null -J rec-unreachable --wrap 'true'
SLURM_CONF="${work}/closed/slurm.conf" capture_rc squeue_connect_failure.txt squeue --noheader
mkdir -p "${work}/noacct"
sed -e 's|^AccountingStorageType=.*|AccountingStorageType=accounting_storage/none|' "${SLURM_CONF}" > "${work}/noacct/slurm.conf"
SLURM_CONF="${work}/noacct/slurm.conf" capture_rc sacct_accounting_disabled.txt sacct --noheader --parsable2
mkdir -p "${work}/drop"
python3 dev/cluster/ctld_proxy.py --conf "${SLURM_CONF}" --out "${work}/drop" --mode drop-reply --count 1 > "${work}/drop.path" &
proxy_pid=$!
sleep 1
SLURM_CONF="${work}/drop/slurm.conf" capture_rc sbatch_timeout_accepted.txt sbatch --parsable -o /dev/null --chdir=/tmp -J rec-lost-answer --wrap 'sleep 0'
echo "  squeue after the lost answer (the job exists):" | tee -a "${fixtures}/sbatch_timeout_accepted.txt"
squeue -h --states=all -n rec-lost-answer -o '%i %j %T' | tee -a "${fixtures}/sbatch_timeout_accepted.txt"
kill "${proxy_pid}"; wait "${proxy_pid}" 2>/dev/null || true; proxy_pid=""

echo "=== jobs in many states"
# time limit 1 minute: TIMEOUT later
j_timeout="$(sb -J rec-timeout -w n4 --time=1 --wrap 'sleep 600')"
j_done="$(sb -J rec-done --wrap 'true')"
j_fail="$(sb -J rec-fail --wrap 'exit 3')"
j_sig="$(sb -J rec-signal --wrap 'kill -9 $$')"
j_step="$(sb -J rec-steps -N2 --wrap 'srun -N2 true; srun -N1 false; true')"
j_run="$(sb -J rec-run -w n1 --wrap 'sleep 600')"
j_held="$(sb -J rec-held -H --wrap 'true')"
j_array="$(sb -J rec-array --array=1-100%2 --wrap 'sleep 600')"
j_array2="$(sb -J rec-array-few -w n4 --array=5-9 --wrap 'sleep 600')"
j_cancel="$(sb -J rec-cancel --begin=now+1hour --wrap 'true')"
j_cancel2="$(sb -J rec-cancel-2 --begin=now+1hour --wrap 'true')"
j_het="$(sbatch --parsable -o /dev/null -e /dev/null --chdir=/tmp -J rec-het -n1 : -n1 --wrap 'srun true' 2>&1 || true)"
echo "  het job: ${j_het}"
j_alice="$(su -s /bin/sh clusterops-alice -c "SLURM_CONF='${SLURM_CONF}' sbatch --parsable -o /dev/null -e /dev/null --chdir=/tmp -J rec-alice --begin=now+1hour --wrap true")"
wait_job "${j_run}" RUNNING 60
wait_job "${j_array}_1" RUNNING 60 || true
su -s /bin/sh clusterops-alice -c "SLURM_CONF='${SLURM_CONF}' scancel ${j_alice}"
scancel "${j_cancel}"
for j in "${j_done}" "${j_fail}" "${j_sig}" "${j_step}"; do wait_job "$j" 'COMPLETED|FAILED|CANCELLED|' 60 || true; done
sleep 3
save squeue_states.txt our_squeue
save squeue_states_default_format.txt squeue
capture_rc squeue_unknown_job.txt our_squeue --jobs=999999
capture_rc squeue_unknown_jobs_two.txt our_squeue --jobs=999998,999999
save squeue_json_states.json squeue --json
save sacct_json_states.json sacct --json -S "${since}" -j "${j_done},${j_fail},${j_step}"

echo "=== hold / release / requeue / cancel: what each prints"
capture_rc scontrol_hold_pending.txt scontrol hold "${j_cancel},${j_held}"
capture_rc scontrol_hold_running.txt scontrol hold "${j_run}"
save squeue_held_running.txt our_squeue --jobs="${j_run},${j_held}"
capture_rc scontrol_release_held.txt scontrol release "${j_held}"
capture_rc scontrol_release_not_held.txt scontrol release "${j_run}"
scontrol hold "${j_held}" || true
capture_rc scontrol_requeue_pending.txt scontrol requeue "${j_held}"
capture_rc scontrol_requeue_running.txt scontrol requeue "${j_run}"
capture_rc scontrol_requeue_finished.txt scontrol requeue "${j_fail}"
capture_rc scancel_finished.txt scancel "${j_done}"
capture_rc scancel_unknown.txt scancel 999999
capture_rc scancel_two.txt scancel "${j_array2}" "${j_cancel2}"
sleep 3
save squeue_after_actions.txt our_squeue
wait_sacct "${j_run}" 'PENDING|RUNNING' || true

# only the 1-minute job stays: nothing else may land on n2 or n3 now
scancel "${j_array}" "${j_run}" "${j_held}" "${j_fail}"
sleep 2

echo "=== node failure: a batch job on n2 when n2 loses power"
j_nf="$(sb -J rec-node-fail -w n2 --wrap 'sleep 600')"
j_nf2="$(sb -J rec-node-fail-2n -N2 -w n2,n3 --wrap 'srun sleep 600')"
wait_job "${j_nf}" RUNNING 60; wait_job "${j_nf2}" RUNNING 60
sleep 2
mk cluster-crash NODE=n2 >/dev/null
t0=$(date +%s)
for _ in $(seq 1 120); do
  s1="$(job_state "${j_nf}")"; s2="$(job_state "${j_nf2}")"
  echo "  t=$(( $(date +%s) - t0 ))s ${j_nf}: ${s1}  ${j_nf2}: ${s2}"
  if [[ "${s2}" == COMPLETING && ! -e "${fixtures}/squeue_node_fail_completing.txt" ]]; then
    save squeue_node_fail_completing.txt our_squeue --jobs="${j_nf},${j_nf2}"
  fi
  if [[ "${s1}" == PENDING && "${s2}" == PENDING ]]; then break; fi
  sleep 0.5
done
sleep 3
save squeue_node_fail_requeued.txt our_squeue --jobs="${j_nf},${j_nf2}"
save sacct_node_fail_requeued.txt our_sacct --jobs="${j_nf},${j_nf2}"
save sacct_node_fail_requeued_default_format.txt sacct -D -S "${since}" -j "${j_nf},${j_nf2}"
mk cluster-poweron NODE=n2 >/dev/null
sleep 2
scontrol update nodename=n2 state=resume || true

echo "=== the 1-minute job times out"
wait_job "${j_timeout}" 'TIMEOUT|CANCELLED|' 150 || true
sleep 3
echo "=== everything sacct has (our format), and the same with squeue"
save sacct_states.txt our_sacct --allusers
save sacct_states_jobs.txt our_sacct --allusers --jobs="${j_run},${j_held},${j_array},${j_alice},${j_cancel},${j_fail},${j_nf}"
save squeue_final.txt our_squeue
capture_rc sacct_no_such_user.txt our_sacct --user=nosuchuser-clusterops
save sacct_json_node_fail.json sacct --json -S "${since}" -j "${j_nf}"

echo "=== clean up: no job left, every node idle"
scancel --quiet -u root || true
scancel --quiet -u clusterops-alice || true
for _ in $(seq 1 60); do
  if [[ -z "$(squeue -h)" ]]; then break; fi
  sleep 0.5
done
sinfo -N -h -p debug -o '%N %T %E'
echo "=== done"

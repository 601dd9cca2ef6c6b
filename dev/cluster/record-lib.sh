# shellcheck shell=bash
# What the scripts that record a dev cluster's behaviour share: dev/cluster/investigate.sh,
# record-jobs.sh, record-fixtures.sh and record-node-events.sh source it after
# `set -euo pipefail`. Sourcing it changes into the repository.
#
#   repo                        the repository
#   say MSG...                  "<script>: MSG" on stderr (<script>: the caller's name without .sh)
#   use_release [RELEASE]       release=RELEASE (default $SLURM, else the host's release of
#                               dev/cluster/releases.txt) after checking it in that table; mk
#                               then runs the main Makefile for that release
#   mk TARGET [VAR=VALUE...]    make -s of a dev cluster target: dev/cluster/cluster.mk alone
#                               (the host's release), or after use_release the main Makefile
#                               with SLURM=<release> (and DEVCLUSTER_DIR when set)
#   cluster_up                  cluster-up NODES=4 (the cluster as it is, started when down),
#                               then the cluster's client environment (cluster-env) in this shell
#   fresh_cluster               cluster-down first, then cluster_up: a fresh cluster
#   use_fixture_dir [DIR]       fixtures=DIR (default tests/unit/fixtures/devcluster), created
#   save FILE CMD...            CMD's stdout into the fixture dir
#   capture_rc FILE CMD...      the command, its rc, stdout and stderr into the fixture dir
#   state_of NODE               the node's state, from the full `sinfo -N` list
#   wait_node NODE REGEX SECS   until the node's state matches ^(REGEX)$; 1 and a line on timeout
#   job_state JOBID             the job's state in squeue ("" when squeue has it no more)
#   wait_job JOBID REGEX SECS   until the job's state matches ^(REGEX)$; 1 and a line on timeout
#   submit SBATCH_ARGS...       sbatch --parsable -o /dev/null: the job id (without ;cluster)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${repo}" || exit 1
# shellcheck source=dev/cluster/releases.sh
source "${repo}/dev/cluster/releases.sh"
_record_name="$(basename "$0" .sh)"
release=""

say() { echo "${_record_name}: $*" >&2; }

use_release() {
  release="${1:-${SLURM:-$(release_host)}}"
  release_runs "${release}" >/dev/null || { echo "usage: $0 [$(release_names | tr ' ' '|')]" >&2; exit 2; }
}

mk() {
  if [[ -z "${release}" ]]; then
    make -s -f dev/cluster/cluster.mk "$@"
  else
    make -s --no-print-directory -C "${repo}" "$@" SLURM="${release}" \
      ${DEVCLUSTER_DIR:+DEVCLUSTER_DIR="${DEVCLUSTER_DIR}"}
  fi
}

cluster_up() {
  mk cluster-up NODES=4 >/dev/null
  eval "$(mk cluster-env)"
}

fresh_cluster() {
  mk cluster-down >/dev/null
  cluster_up
}

use_fixture_dir() {
  fixtures="${1:-${repo}/tests/unit/fixtures/devcluster}"
  mkdir -p "${fixtures}"
}

save() { # save FILE CMD...: stdout of CMD into the fixture dir
  local file="$1"; shift
  "$@" > "${fixtures}/${file}"
  echo "  saved ${file}"
}

capture_rc() { # capture_rc FILE CMD...: stdout, stderr and rc of a (failing) command
  local file="$1" rc=0 out err; shift
  out="$(mktemp)"; err="$(mktemp)"
  "$@" > "${out}" 2> "${err}" || rc=$?
  {
    echo "# command: $*"
    echo "# rc: ${rc}"
    echo "# stdout:"; cat "${out}"
    echo "# stderr:"; cat "${err}"
  } > "${fixtures}/${file}"
  rm -f "${out}" "${err}"
  echo "  saved ${file} (rc=${rc})"
}

# From the full node list: `sinfo -N -n NODE` was seen lagging for minutes on a loaded machine
# (22.05: `mixed*` long after slurmctld had set the node DOWN and the full list said `down*`).
state_of() { sinfo -h -N -o '%N %T' 2>/dev/null | awk -v n="$1" '$1 == n { print $2; exit }'; }

# The first line: squeue -j of an array job lists its tasks. Never fails (a job squeue no longer
# knows makes it exit 1), so that `state="$(job_state ...)"` is safe under set -e.
job_state() { { squeue -h -j "$1" -o '%T' 2>/dev/null || true; } | head -n1; }

# _wait_state READER NAME ID REGEX SECONDS: until `READER ID` matches ^(REGEX)$, polled each
# second; on timeout a line "NAME not REGEX (is <state>)" and 1.
_wait_state() {
  local reader="$1" name="$2" id="$3" regex="$4" left="$5"
  until [[ "$("${reader}" "${id}")" =~ ^(${regex})$ ]]; do
    (( left-- > 0 )) || { say "${name} not ${regex} (is $("${reader}" "${id}"))"; return 1; }
    sleep 1
  done
}
wait_node() { _wait_state state_of "$1" "$@"; }  # wait_node NODE REGEX SECONDS
wait_job() { _wait_state job_state "job $1" "$@"; }  # wait_job JOBID REGEX SECONDS

submit() { sbatch --parsable -o /dev/null "$@" | cut -d';' -f1; }

# shellcheck shell=bash
# Sourced by the demos (dev/demo.sh, dev/demo_replica.sh): the dev cluster's environment, where the jobs'
# Python and the demo folders are, and the helpers they share. Sets SLURM, state, INVENTORY, JOB_VENV,
# SHARED, USER_NAME; demo_folder NAME gives a demo's folder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
export ANSIBLE_PYTHON_INTERPRETER="$PWD/.venv/bin/python"
export PATH="$PWD/.venv/bin:$PATH"
export LC_ALL=C.UTF-8
# The dev cluster's release: SLURM=<release> of dev/cluster/releases.txt, default the one on the
# host; one in podman has an env.sh that puts wrappers of the release's own client commands first
# on PATH, and an inventory that reaches the container with the podman connection.
# shellcheck source=dev/cluster/releases.sh
source dev/cluster/releases.sh
SLURM="${SLURM:-$(release_host)}"
state="${DEVCLUSTER_DIR:-$(release_state_dir "${PWD}" "${SLURM}")}" ||
  { echo "demo: SLURM=${SLURM} is not in dev/cluster/releases.txt ($(release_names))" >&2; exit 2; }
# shellcheck source=/dev/null
source "${state}/env.sh"
export SLURM DEVCLUSTER_DIR="${state}"
INVENTORY="${state}/inventory.yml"
# Where the jobs' Python comes from, and a folder the jobs see at the same path: the repo's venv
# on the host; in a container its own venv (cluster.json) and the shared folder.
read -r JOB_VENV SHARED < <(python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
print(c.get("venv") or sys.argv[2], c.get("shared_dir") or "/var/tmp")' "${state}/cluster.json" "${PWD}/.venv")
USER_NAME=clusterops-alice

# demo_folder NAME: /var/tmp/clusterops-NAME on the host, <shared folder>/NAME-<release> in a container.
demo_folder() {
  if [[ "$(release_runs "${SLURM}")" == host ]]; then echo "/var/tmp/clusterops-$1"; else echo "${SHARED}/$1-${SLURM}"; fi
}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { sinfo -N -h -o '%8N %12T %E' | sort -u -k1,1; }
# From the full node list: once, on a loaded machine, `sinfo -N -n NODE` said `mixed*` while the
# full list and scontrol already said `down*` (22.05, dev/cluster/record-fixtures.sh).
state_of() { sinfo -h -N -o '%N %T' | awk -v n="$1" '$1 == n { print $2; exit }'; }
wait_state() { # wait_state NODE REGEX SECONDS
  local node="$1" want="$2" left="$3"
  until [[ "$(state_of "$node")" =~ ^($want)$ ]]; do
    (( left-- > 0 )) || { echo "timed out waiting for $node to be $want (is $(state_of "$node"))" >&2; return 1; }
    sleep 1
  done
}
wait_until() { # wait_until SECONDS WHAT COMMAND...
  local left="$1" what="$2"; shift 2
  until "$@"; do
    (( left-- > 0 )) || { echo "timed out waiting for $what" >&2; return 1; }
    sleep 1
  done
}
job_state() { sacct -n -X -P -j "$1" -o State | head -n1; }

# Every node powered on, in service, no job of root or the demo's user left.
reset_nodes() {
  local n
  for n in n1 n2 n3 n4; do make -s cluster-poweron NODE="$n" >/dev/null; done
  scancel --quiet --full -u root || true
  scancel --quiet --full -u "$USER_NAME" 2>/dev/null || true
  scontrol cancel_reboot n[1-4] >/dev/null 2>&1 || true
  scontrol update NodeName=n[1-4] State=RESUME >/dev/null 2>&1 || true
  for n in n1 n2 n3 n4; do wait_state "$n" 'idle' 120; done
}

# deploy_run DEMO RUN [ROLE VARIABLE LINES]: the reference trainer as a 2-node run RUN of the user, deployed with
# the role clusterops.slurm.torchrun_launcher (registry, tools and run folder under DEMO) and submitted; 120
# steps, a checkpoint every 20. The third argument adds role variables (YAML lines, 8 spaces in).
deploy_run() {
  local demo="$1" run="$2" more="${3:-}" ckpt="$1/$2/checkpoints"
  id "$USER_NAME" >/dev/null 2>&1 || useradd -m -s /bin/bash "$USER_NAME"
  cat > "$demo/deploy.yml" <<YAML
- name: Deploy the demo training run
  hosts: slurm_controller[0]
  gather_facts: false
  tasks:
    - name: Launcher and run registry entry for $run
      ansible.builtin.include_role:
        name: clusterops.slurm.torchrun_launcher
      vars:
        torchrun_launcher_run_name: $run
        torchrun_launcher_owner: $USER_NAME
        torchrun_launcher_registry_dir: $demo/registry
        torchrun_launcher_tool_dir: $demo/tools
        torchrun_launcher_install_reference_trainer: true
        torchrun_launcher_workdir: $demo/$run
        torchrun_launcher_checkpoint_dir: $ckpt
        torchrun_launcher_nodes: 2
        torchrun_launcher_time: "10"
        torchrun_launcher_env_activation: venv
        torchrun_launcher_venv: $JOB_VENV
        torchrun_launcher_python: python
        torchrun_launcher_program: $demo/tools/reference_trainer.py
        torchrun_launcher_program_args: [--checkpoint-dir, $ckpt, --events, $ckpt/events.jsonl,
                                         --total-steps, "120", --checkpoint-every, "20", --step-time, "0.25"]
        torchrun_launcher_submit: true
        ansible_become_method: su
$more
YAML
  ansible-playbook -i "$INVENTORY" "$demo/deploy.yml" | tail -n 3
}

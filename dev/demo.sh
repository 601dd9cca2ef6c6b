#!/usr/bin/env bash
# make demo: a training run loses a node for real; remediate.yml heals the cluster and the run
# finishes from its newest checkpoint.
#   a 2-node torchrun training (the reference trainer, torch DDP on CPU/gloo) runs as the user
#   clusterops-alice and writes a checkpoint every 20 steps;
#   n3  is drained "Kill task failed"                    -> a stuck process: needs a reboot
#   n4  is drained by an admin for maintenance           -> must be left alone
#   n2  (a node of the training job) crashes              -> DOWN* "Not responding", the job NODE_FAIL
# Then a node comes back from a reboot with a broken GPU:
#   n1  gets an emulated GPU fault that needs a repair (Xid 64) and is power-cycled -> the health
#       check (HealthCheckProgram of the role node_health) drains it at slurmd start, and
#       remediate.yml leaves it for a human (the play fails, saying why).
set -euo pipefail
cd "$(dirname "$0")/.."
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
# A 4-node cluster: let one run act on half of it. The default blast radius, 10 % of the
# cluster (at least one node), would heal one node per run.
if [[ "$(release_runs "${SLURM}")" == host ]]; then DEMO=/var/tmp/clusterops-demo; else DEMO="${SHARED}/demo-${SLURM}"; fi
RUN=demo-llm
USER_NAME=clusterops-alice
CKPT=$DEMO/$RUN/checkpoints
# The healing budget counts heals in the dev cluster's accounting, which keeps those of earlier
# demos and tests: this demo counts only its own (remediate_nodes_heal_since: when it started).
DEMO_STARTED=$(date +%s)
extra() {
  printf '{"remediate_nodes_max_percent": 50, "remediate_training_registry": "%s", "remediate_nodes_heal_since": %d}' \
    "$DEMO/registry" "$DEMO_STARTED"
}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { sinfo -N -h -o '%8N %12T %E' | sort -u -k1,1; }
jobs_of_run() { squeue -h --states=all -n "$RUN" -u "$USER_NAME" -o '%8i %10T %N'; }
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
has_checkpoint() { [ -d "$CKPT/step_000000040" ]; }
job_state() { sacct -n -X -P -j "$1" -o State | head -n1; }
first_job_ended() { [[ "$(job_state "$FIRST")" == NODE_FAIL ]]; }
finished() { [ -e "$CKPT/FINISHED" ]; }

say "Slurm $(sinfo --version | awk '{print $2}') dev cluster ($state)"
say "Resetting the dev cluster to all nodes in service"
for n in n1 n2 n3 n4; do make -s cluster-poweron NODE="$n" >/dev/null; done
scancel --quiet --full -u root || true
scancel --quiet --full -u "$USER_NAME" 2>/dev/null || true
scontrol cancel_reboot n[1-4] >/dev/null 2>&1 || true
scontrol update NodeName=n[1-4] State=RESUME >/dev/null 2>&1 || true
for n in n1 n2 n3 n4; do wait_state "$n" 'idle' 120; done
show

say "Deploying a training run with the role clusterops.slurm.torchrun_launcher and submitting it"
id "$USER_NAME" >/dev/null 2>&1 || useradd -m -s /bin/bash "$USER_NAME"
rm -rf "$DEMO"
mkdir -p "$DEMO"
chmod 755 "$DEMO"
# make report reads the run's jobs from here on: jobs of earlier demos have the same name and owner.
echo "$DEMO_STARTED" > "$DEMO/started"
cat > "$DEMO/deploy.yml" <<YAML
- name: Deploy the demo training run
  hosts: slurm_controller[0]
  gather_facts: false
  tasks:
    - name: Launcher and run registry entry for $RUN
      ansible.builtin.include_role:
        name: clusterops.slurm.torchrun_launcher
      vars:
        torchrun_launcher_run_name: $RUN
        torchrun_launcher_owner: $USER_NAME
        torchrun_launcher_registry_dir: $DEMO/registry
        torchrun_launcher_tool_dir: $DEMO/tools
        torchrun_launcher_install_reference_trainer: true
        torchrun_launcher_workdir: $DEMO/$RUN
        torchrun_launcher_checkpoint_dir: $CKPT
        torchrun_launcher_nodes: 2
        torchrun_launcher_time: "10"
        torchrun_launcher_env_activation: venv
        torchrun_launcher_venv: $JOB_VENV
        torchrun_launcher_python: python
        torchrun_launcher_program: $DEMO/tools/reference_trainer.py
        torchrun_launcher_program_args: [--checkpoint-dir, $CKPT, --events, $CKPT/events.jsonl,
                                         --total-steps, "120", --checkpoint-every, "20", --step-time, "0.25"]
        torchrun_launcher_submit: true
        ansible_become_method: su
YAML
ansible-playbook -i "$INVENTORY" "$DEMO/deploy.yml" | tail -n 3
FIRST=$(squeue -h -n "$RUN" -u "$USER_NAME" -o %i | head -n1)
echo "job $FIRST submitted as $USER_NAME; waiting for its checkpoint at step 40 ..."
wait_until 120 "a checkpoint" has_checkpoint
sleep 3  # a few steps past it: the crash below will cost them
jobs_of_run
ls "$CKPT"

say "Breaking nodes for real"
echo "n3: drained 'Kill task failed' (what slurmd reports when a job's process cannot be killed)"
scontrol update NodeName=n3 State=DRAIN Reason="Kill task failed"
echo "n4: drained by an admin for maintenance"
scontrol update NodeName=n4 State=DRAIN Reason="maintenance: replace PSU (CHG-1234)"
echo "n2: power loss in the middle of the training (slurmd and every job process die at once)"
make -s cluster-crash NODE=n2
echo "waiting for Slurm to notice that n2 stopped responding (SlurmdTimeout) ..."
wait_state n2 'down\*' 90
wait_until 60 "job $FIRST to end NODE_FAIL" first_job_ended
show
jobs_of_run

say "ansible-playbook playbooks/remediate.yml --check --diff   (the plan; nothing changes)"
ansible-playbook -i "$INVENTORY" playbooks/remediate.yml --check --diff -e "$(extra)"

say "ansible-playbook playbooks/remediate.yml"
ansible-playbook -i "$INVENTORY" playbooks/remediate.yml -e "$(extra)"

say "n3 reboots through Slurm's RebootProgram; n2 is still without power"
show
echo "Slurm issues the reboot to n2 (it cannot deliver it: n2 has no power) ..."
wait_state n2 'reboot\^' 30
# Slurm completes a reboot only on a boot time after the request; a BMC takes longer than this anyway.
sleep 3
echo "power comes back to n2 (its BMC powers it on): Slurm sees the new boot and completes the reboot"
make -s cluster-poweron NODE=n2
wait_state n3 'idle' 120
wait_state n2 'idle' 120

say "The run trains again from its newest checkpoint"
jobs_of_run
wait_until 300 "the run to finish" finished
python3 - "$CKPT/events.jsonl" <<'PY'
import json, sys
attempts = []
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["event"] == "start":
        attempts.append([])
    attempts[-1].append(e)
before = max(e["step"] for e in attempts[0] if e["event"] == "step")
saved = max([e["step"] for e in attempts[0] if e["event"] == "save"] or [0])
resumed = attempts[1][0]["step"]
print("first job: trained up to step %d, newest checkpoint step %d, then its node died" % (before, saved))
print("second job: resumed from step %d and finished at step %d" % (resumed, attempts[-1][-1]["step"]))
print("steps lost: %d (checkpoint interval 20)" % (before - resumed))
# The last sign of progress of the first job (its newest event with a step) to the second job's
# first new step: what training_goodput_info calls time_to_training (docs/goodput.md).
last = max(e["time"] for e in attempts[0] if isinstance(e.get("step"), int))
first = min(e["time"] for e in attempts[1] if e["event"] == "step")
print("time to training again: %.1f s (the first job's last step to the second job's first step)" % (first - last))
PY

say "After: n2 and n3 back in service, n4 untouched, the run finished"
show
cat "$CKPT/FINISHED"; echo

say "A second run changes nothing"
ansible-playbook -i "$INVENTORY" playbooks/remediate.yml -e "$(extra)" | tail -n 4

say "A node comes back from a reboot with a broken GPU"
echo "n1: emulated GPU fault row-remap-failure (nvidia-smi and the kernel log of n1 show Xid 64), then a power cycle"
make -s cluster-gpu-fault NODE=n1 FAULT=row-remap-failure
make -s cluster-reboot NODE=n1
wait_until 120 "the health check to drain n1" bash -c 'scontrol show node n1 | grep -q "Reason=clusterops-health:"'
show
say "ansible-playbook playbooks/remediate.yml   (n1 needs a repair: left for a human, the play fails)"
if ansible-playbook -i "$INVENTORY" playbooks/remediate.yml -e "$(extra)" > "$DEMO/gpu-run.log" 2>&1; then
  cat "$DEMO/gpu-run.log"; echo "expected the play to fail: n1 needs a human" >&2; exit 1
fi
grep -E 'n1: class|needs a human:' "$DEMO/gpu-run.log" | sed 's/^ *//' | sort -u
show
say "After the repair (here: the fault cleared) an operator reboots n1 through Slurm; the health check passes at boot"
make -s cluster-gpu-fault NODE=n1 FAULT=none
scontrol reboot ASAP nextstate=resume reason="GPU replaced, RMA 42" n1
wait_state n1 'idle' 120
show
echo
echo "make report RUN=$RUN: the run's goodput page (timeline, progress curve, the steps lost and time to training above)"

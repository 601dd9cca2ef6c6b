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
# shellcheck source=dev/demo_lib.sh
source "$(dirname "$0")/demo_lib.sh"
DEMO=$(demo_folder demo)
RUN="demo-llm"
CKPT=$DEMO/$RUN/checkpoints
# The healing budget counts heals in the dev cluster's accounting, which keeps those of earlier
# demos and tests: this demo counts only its own (remediate_nodes_heal_since: when it started).
DEMO_STARTED=$(date +%s)
# A 4-node cluster: let one run act on half of it. The default blast radius, 10 % of the
# cluster (at least one node), would heal one node per run.
extra() {
  printf '{"remediate_nodes_max_percent": 50, "remediate_training_registry": "%s", "remediate_nodes_heal_since": %d}' \
    "$DEMO/registry" "$DEMO_STARTED"
}
jobs_of_run() { squeue -h --states=all -n "$RUN" -u "$USER_NAME" -o '%8i %10T %N'; }
has_checkpoint() { [ -d "$CKPT/step_000000040" ]; }
first_job_ended() { [[ "$(job_state "$FIRST")" == NODE_FAIL ]]; }
finished() { [ -e "$CKPT/FINISHED" ]; }

say "Slurm $(sinfo --version | awk '{print $2}') dev cluster ($state)"
say "Resetting the dev cluster to all nodes in service"
reset_nodes
show

say "Deploying a training run with the role clusterops.slurm.torchrun_launcher and submitting it"
rm -rf "$DEMO"
mkdir -p "$DEMO"
chmod 755 "$DEMO"
# make report reads the run's jobs from here on: jobs of earlier demos have the same name and owner.
echo "$DEMO_STARTED" > "$DEMO/started"
deploy_run "$DEMO" "$RUN"
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

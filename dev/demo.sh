#!/usr/bin/env bash
# make demo: break nodes of the dev cluster for real, then heal them with remediate.yml.
#   n2  crashes (power loss: slurmd and its jobs die)   -> Slurm marks it DOWN* "Not responding"
#   n3  is drained "Kill task failed"                    -> a stuck process: needs a reboot
#   n4  is drained by an admin for maintenance           -> must be left alone
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
export ANSIBLE_PYTHON_INTERPRETER="$PWD/.venv/bin/python"
export PATH="$PWD/.venv/bin:$PATH"
# shellcheck source=/dev/null
source .devcluster/env.sh
INVENTORY=.devcluster/inventory.yml
# A 4-node cluster: let one run act on half of it. The default blast radius, 10 % of the
# cluster (at least one node), would heal one node per run.
LIMITS='{"remediate_nodes_max_percent": 50}'

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { sinfo -N -h -o '%8N %12T %E' | sort -u -k1,1; }
state_of() { sinfo -h -N -n "$1" -o '%T' | head -n1; }
wait_state() { # wait_state NODE REGEX SECONDS
  local node="$1" want="$2" left="$3"
  until [[ "$(state_of "$node")" =~ ^($want)$ ]]; do
    (( left-- > 0 )) || { echo "timed out waiting for $node to be $want (is $(state_of "$node"))" >&2; return 1; }
    sleep 1
  done
}

say "Resetting the dev cluster to all nodes in service"
for n in n1 n2 n3 n4; do make -s cluster-poweron NODE="$n" >/dev/null; done
scancel --quiet --full -u root || true
scontrol cancel_reboot n[1-4] >/dev/null 2>&1 || true
scontrol update NodeName=n[1-4] State=RESUME >/dev/null 2>&1 || true
for n in n1 n2 n3 n4; do wait_state "$n" 'idle' 120; done
show

say "Breaking nodes for real"
echo "n2: power loss (slurmd and every job process die at once)"
make -s cluster-crash NODE=n2
echo "n3: drained 'Kill task failed' (what slurmd reports when a job's process cannot be killed)"
scontrol update NodeName=n3 State=DRAIN Reason="Kill task failed"
echo "n4: drained by an admin for maintenance"
scontrol update NodeName=n4 State=DRAIN Reason="maintenance: replace PSU (CHG-1234)"
echo "waiting for Slurm to notice that n2 stopped responding (SlurmdTimeout) ..."
wait_state n2 'down\*' 90
show

say "ansible-playbook playbooks/remediate.yml --check --diff   (the plan; nothing changes)"
ansible-playbook -i "$INVENTORY" playbooks/remediate.yml --check --diff -e "$LIMITS"

say "ansible-playbook playbooks/remediate.yml"
ansible-playbook -i "$INVENTORY" playbooks/remediate.yml -e "$LIMITS"

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

say "After: n2 and n3 back in service, n4 untouched"
show

say "A second run changes nothing"
ansible-playbook -i "$INVENTORY" playbooks/remediate.yml -e "$LIMITS" | tail -n 4

#!/usr/bin/env bash
# make demo-replica: a training run's newest checkpoint is lost on its file system and the run resumes from
# the replica (issue 27, docs/checkpoint-replicas.md).
#   a 2-node torchrun training (the reference trainer) runs as clusterops-alice with a replica folder
#   (torchrun_launcher_checkpoint_replicas) and writes a checkpoint every 20 steps;
#   after its checkpoint at step 40 a worker dies (a GPU fault would do the same): the job ends FAILED;
#   the cron entry's command of the role checkpoint_pruning copies the newest checkpoints to the replica,
#   as alice, verified; then the run folder's newest checkpoint is lost (a purge, a failed storage target);
#   remediate.yml resubmits the run, the launcher resumes from the replica's copy, the run finishes.
# shellcheck source=dev/demo_lib.sh
source "$(dirname "$0")/demo_lib.sh"
DEMO=$(demo_folder demo-replica)
RUN="demo-replica"
CKPT=$DEMO/$RUN/checkpoints
REPLICA=$DEMO/replica/$RUN
TOOL=$DEMO/tools/clusterops_checkpoint
has_checkpoint() { [ -d "$CKPT/step_000000040" ]; }
finished() { [ -e "$CKPT/FINISHED" ]; }
as_user() { runuser -u "$USER_NAME" -- "$@"; }
# In a container the tool runs where the jobs run (the release's container), as alice.
if [[ "$(release_runs "${SLURM}")" != host ]]; then
  as_user() { podman exec --user "$USER_NAME" "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["container"])' \
    "${state}/cluster.json")" "$@"; }
fi

say "Slurm $(sinfo --version | awk '{print $2}') dev cluster ($state)"
reset_nodes
say "A training run with a replica folder ($REPLICA)"
rm -rf "$DEMO"
mkdir -p "$DEMO/replica"
chmod 755 "$DEMO"
id "$USER_NAME" >/dev/null 2>&1 || useradd -m -s /bin/bash "$USER_NAME"
chown "$USER_NAME" "$DEMO/replica"
deploy_run "$DEMO" "$RUN" "        torchrun_launcher_checkpoint_replicas: [$REPLICA]"
FIRST=$(squeue -h -n "$RUN" -u "$USER_NAME" -o %i | head -n1)
echo "job $FIRST submitted as $USER_NAME; waiting for its checkpoint at step 40 ..."
wait_until 120 "a checkpoint" has_checkpoint

say "A worker dies: the job ends FAILED"
kill -KILL "$(pgrep -u "$USER_NAME" -f "reference_trainer.py.*$CKPT" | tail -n 1)"
wait_until 90 "job $FIRST to end FAILED" bash -c "[[ \$(sacct -n -X -P -j $FIRST -o State | head -n1) == FAILED ]]"
ls "$CKPT"

say "The cron entry's replication, as $USER_NAME: python3 clusterops_checkpoint replicate RUN_DIR REPLICA_DIR --keep-last 2"
as_user /usr/bin/python3 "$TOOL" replicate "$CKPT" "$REPLICA" --keep-last 2
ls -A "$REPLICA"
NEWEST=$(as_user /usr/bin/python3 "$TOOL" latest "$CKPT" -q)
echo "the run folder's newest valid checkpoint: $NEWEST"

say "The run folder loses $(basename "$NEWEST") (a scratch purge, a failed storage target)"
rm -rf "$NEWEST"
echo "without the replica:  $(as_user /usr/bin/python3 "$TOOL" latest "$CKPT" -q)"
echo "with the replica:     $(as_user /usr/bin/python3 "$TOOL" latest "$CKPT" --replica "$REPLICA" 2>&1 | paste -sd ' ')"

say "ansible-playbook playbooks/remediate.yml"
ansible-playbook -i "$INVENTORY" playbooks/remediate.yml \
  -e "{\"remediate_training_registry\": \"$DEMO/registry\", \"remediate_training_runs\": [\"$RUN\"]}" \
  | grep -E "$RUN: |^PLAY RECAP|changed=" | sed 's/^ *"//; s/",\?$//'
wait_until 300 "the run to finish" finished
say "The run resumed from the replica and finished"
grep -h "resuming from\|note: resuming" "$DEMO/$RUN"/logs/*.out 2>/dev/null | sed 's/^/  /' || true
python3 - "$CKPT/events.jsonl" "$(basename "$NEWEST")" <<'PY'
import json, sys
attempts = []
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["event"] == "start":
        attempts.append([])
    if attempts:
        attempts[-1].append(e)
print("lost in the run folder: %s; the second job resumed from step %d and finished at step %d"
      % (sys.argv[2], attempts[-1][0]["step"], attempts[-1][-1]["step"]))
PY
cat "$CKPT/FINISHED"; echo

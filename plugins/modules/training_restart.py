#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
module: training_restart
short_description: Resubmit failed training runs of the run registry once each, from their newest valid checkpoint
version_added: 0.2.0
description:
  - Reads the run registry (one folder per run, written by the role
    C(clusterops.slurm.torchrun_launcher)), the jobs of every registered run with one C(sacct)
    and one C(squeue) call, and each run's checkpoint folder, then decides for each run.
  - A run whose C(FINISHED) marker exists, or that has a job queued, running or being requeued
    (C(PENDING) after Slurm requeued it by itself included, and C(EXPEDITING) of Slurm 25.11+),
    is left alone.
  - A run whose job is held is reported as needing a human (RV(runs[].status) V(held)) and left
    alone - neither released nor resubmitted. Slurm holds a job itself after a launch or prolog
    failure (reason C(launch failed requeued held)), after C(scontrol requeuehold) or an
    expedited requeue (C(job requeued in held state)), or when it was requeued too often
    (C(JobHoldMaxRequeue)); a user or admin may hold it too. The cause (often a node that
    M(clusterops.slurm.slurm_node) or the C(remediate.yml) playbook heals) comes first; then a
    person releases it (M(clusterops.slurm.slurm_job) O(clusterops.slurm.slurm_job#module:state=released),
    or C(scontrol release <id>)) or cancels it.
  - A run with a job in a state this collection does not know (a word of a later Slurm
    release) is reported as needing a human (V(unknown)) and never resubmitted, as the job may
    still be active.
  - A read that is not a complete answer fails the task before anything is decided or
    submitted - C(sacct) or C(squeue) exiting non-zero (slurmdbd down - C(Problem talking to the
    database); controller unreachable), an error on their stderr with exit status 0, an output
    cut short. Only C(Slurm accounting storage is disabled) is read as "no accounting", and the
    runs are then decided from C(squeue) alone.
  - When the run's last job ended C(NODE_FAIL), C(FAILED), C(TIMEOUT), C(PREEMPTED) or
    C(BOOT_FAIL), the run's launcher is submitted again (C(sbatch <launcher>)) as the run's
    owner; the launcher resumes from the newest valid checkpoint.
  - A run cancelled by a user (C(CANCELLED)) is never resubmitted. C(OUT_OF_MEMORY),
    C(DEADLINE), C(COMPLETED) without the C(FINISHED) marker and other final states are
    reported as needing a human and not resubmitted.
  - Budgets, per run (C(run.json)) - at most C(max_resubmissions) resubmissions; and when the
    newest valid checkpoint step has not changed over C(no_progress_limit) consecutive
    resubmissions, remediation stops the run. A stopped run is reported as needing a human
    until its C(state.json) is removed.
  - Hang watchdog, per run (C(run.json) C(hang_timeout), 0 for none) - a run whose job is
    C(RUNNING) but whose progress (C(progress) - V(heartbeat) the mtime of C(heartbeat_file), which
    the trainer replaces every step; V(checkpoint) the newest mtime in the checkpoint folder;
    V(log) the newest mtime of the job's log files) has not moved for C(hang_timeout) seconds,
    counted from the job's start at the earliest, is hung (RV(runs[].status) V(hung)). Evidence
    first - the Python stacks of every rank, with C(py-spy dump) run on the job's nodes as the
    run's owner (C(srun --overlap --jobid <id>)), and where py-spy fails a C(SIGUSR2) to the rank
    (the reference trainer's C(faulthandler) dump, in the job's log) - saved in the run's log
    folder as C(hang-<job id>-<UTC time>.txt). Then the job is recorded in the run's C(state.json)
    as cancelled by remediation because it hung (before C(scancel)), cancelled, and, once it ended
    (at most O(hang_cancel_wait) seconds), resubmitted within the run's budgets like a failed
    job; a run that hangs at the same step as before its last C(no_progress_limit)
    resubmissions is stopped for no progress. A job remediation cancelled is never cancelled
    again, and a job a user cancelled is still never resubmitted.
  - >-
    Suspect nodes (O(suspect_nodes)) - when the last C(k) failed jobs of a run (C(FAILED) or
    C(NODE_FAIL); C(TIMEOUT), C(CANCELLED) and other states neither count nor break the
    sequence; a job Slurm requeued counts once per run of it) all ran on a node (C(sacct)
    C(NodeList), a compressed hostlist), that node is suspect. C(k) is the run's C(suspect_after)
    (C(run.json)), else O(suspect_after); a run with C(suspect_nodes) false in C(run.json) has
    none. Only runs failing now (RV(runs[].action) V(resubmit) or V(stop)) are looked at, so a
    second remediation finds nothing new. The nodes are read once (C(sinfo --json) or
    C(scontrol show nodes --json)); a suspect node in service is drained with the reason
    "clusterops: suspect: runs A,B failed on it (jobs 12,15)", which the node healing's reason
    class C(clusterops_hold) leaves for a human, at most O(suspect_drain_limit) nodes per task and
    one C(scontrol update NodeName=<hostlist> State=DRAIN Reason=...) per distinct reason. A node
    already drained, down, failing or rebooting keeps its state and reason. The run's resubmission
    excludes its suspect nodes (C(sbatch --exclude=<hostlist> <launcher>), drained or not; a node
    Slurm does not know is left out). Every suspect node is reported as needing a human.
  - Exactly once - the whole read-decide-submit runs under an exclusive lock on the registry
    (C(flock) on C(<registry>/.remediate.lock)), so overlapping runs (AWX schedules overlap)
    never both submit; the submission itself checks the job identity (name, owner, and the key
    C(clusterops-key=<run>) in the comment) with C(squeue) first, as M(clusterops.slurm.slurm_job)
    does, and a resubmission is recorded in the run's C(state.json) before the next run reads it.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.attributes
  - clusterops.slurm.slurm_cli
attributes:
  check_mode:
    support: full
    details: Reads everything and reports what it would do, with the exact C(sbatch), C(srun),
      C(scancel) and C(scontrol) commands; submits, cancels, drains and collects nothing, writes no
      state and takes no lock.
  diff_mode:
    support: full
    details: Per run, the last job and its state before, the action after.
options:
  registry:
    description:
      - The run registry folder on the target. A missing folder means no run is registered.
    type: path
    default: /var/lib/clusterops/runs
  runs:
    description: Only these runs (names). Empty means every run of the registry.
    type: list
    elements: str
    default: []
  history:
    description:
      - How far back C(sacct) looks for the runs' jobs (C(--starttime)), in the forms
        M(clusterops.slurm.slurm_job_info) takes for O(clusterops.slurm.slurm_job_info#module:start)
        (V(now-30days), V(2026-01-31)). A run with no job in this window is reported as not started.
    type: str
    default: now-30days
  lock_timeout:
    description:
      - Seconds to wait for another remediation holding the registry lock. When it is still
        held, nothing is read or submitted and RV(locked) is true.
    type: int
    default: 60
  submit_retries:
    description:
      - After an C(sbatch) failure that leaves open whether Slurm took the job, how many more
        times to submit once C(squeue) shows it did not (see M(clusterops.slurm.slurm_job)).
    type: int
    default: 2
  retry_delay:
    description: Seconds to wait before looking the job up after such a failure.
    type: float
    default: 10
  hang_cancel_wait:
    description:
      - After cancelling a hung job, how many seconds to wait for it to end before resubmitting
        its run in the same task (Slurm's C(KillWait) and the epilog pass first). A job that
        has not ended by then is resubmitted by the next remediation.
    type: int
    default: 120
  suspect_nodes:
    description:
      - Find suspect nodes at all (see the description); V(false) turns the feature off for every
        run (a run opts out alone with C(suspect_nodes) false in its C(run.json)).
    type: bool
    default: true
  suspect_after:
    description:
      - C(k) - the last C(k) failed jobs of a run sharing a node make it suspect, for runs whose
        C(run.json) C(suspect_after) is 0 (unset). 1 or more.
    type: int
    default: 2
  suspect_drain_limit:
    description:
      - Most suspect nodes this task drains - what the node blast radius leaves. In
        C(remediate.yml) the role C(clusterops.slurm.remediate_training) passes the limit of the
        role C(clusterops.slurm.remediate_nodes) (C(remediate_nodes_max_nodes),
        C(remediate_nodes_max_percent)) less the nodes in flight and healed in the same run. The
        others are reported as over the blast radius and still excluded. 0 drains none.
    type: int
    default: 1
notes:
  - Runs on the host that holds the registry and sees the checkpoint folders (shared file
    system). Submitting as another user than the one the task runs as needs root
    (C(runuser -u <owner> -- sbatch ...)).
  - The launcher is submitted as it is (C(sbatch <launcher>)); every option is in its
    C(#SBATCH) lines and it starts with a clean environment (C(--export=NONE)).
seealso:
  - module: clusterops.slurm.slurm_job
  - module: clusterops.slurm.checkpoint_info
  - name: Training recovery
    description: How runs are registered, resumed and budgeted (docs/training-recovery.md).
    link: https://github.com/clusterops/slurm/blob/main/docs/training-recovery.md
'''

EXAMPLES = r'''
- name: Resubmit failed training runs
  clusterops.slurm.training_restart:
    registry: /var/lib/clusterops/runs
  become: true
  register: training

- name: What would be resubmitted, without submitting
  clusterops.slurm.training_restart:
    runs: [llama-8b]
  check_mode: true
  register: plan

- name: Runs that need a human
  ansible.builtin.debug:
    msg: "{{ item.name }}: {{ item.reason }}"
  loop: "{{ training.runs | selectattr('needs_human') | list }}"
'''

RETURN = r'''
runs:
  description: One entry per registered run, by name.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The run's name (its job name).
      type: str
    owner:
      description: The user its jobs run as.
      type: str
    status:
      description:
        - V(disabled), V(finished), V(active), V(held) (its job waits for a release; needs a
          human), V(unknown) (a job in a state this collection does not know; needs a human),
          V(not_started), V(stopped) (by an earlier remediation), V(cancelled), V(failed) (last
          job ended in a state that is resubmitted, or hung and was cancelled by remediation),
          V(hung) (its job is RUNNING without progress; or cancelled by remediation and not ended
          yet), V(lost) (our resubmission is not visible), V(ended) (another final state).
      type: str
    action:
      description:
        - V(resubmit) (done, or would be in check mode), V(stop) (remediation stops the run
          now), V(cancel_hung) (the job hung - evidence, cancel, then resubmitted within the budgets
          when it ended in time, see RV(runs[].then)), V(none).
      type: str
    evidence:
      description: For V(cancel_hung), the file the ranks' stacks were saved to.
      type: str
    evidence_command:
      description: For V(cancel_hung), the C(srun) command that collects the stacks (run as the owner).
      type: list
      elements: str
    then:
      description:
        - For V(cancel_hung), the decision after the cancelled job ended (the same keys as a run's
          entry, V(null) when it had not ended within O(hang_cancel_wait)).
      type: dict
    needs_human:
      description: True when a person has to look at the run.
      type: bool
    reason:
      description: Why, in one line.
      type: str
      sample: "job 41 ended NODE_FAIL; resubmission 1 of 5, resume from step 40"
    last_job:
      description:
        - The run's newest job (job_id, job_id_raw, state, flags, state_raw, held, held_by,
          exit_code, signal, cancelled_by, requeued, reason, node_list, times), or V(null).
          Whether it was cancelled comes from its state, never from its exit code (a cancelled
          job shows C(0:15), C(143:0), C(0:9) or C(137:0), as its program ended).
      type: dict
    step:
      description: Step of the newest valid checkpoint, or V(null).
      type: int
    checkpoint:
      description: Path of the newest valid checkpoint, or V(null).
      type: str
    resubmissions:
      description: Resubmissions made so far (before this one).
      type: int
    max_resubmissions:
      description: The run's budget.
      type: int
    job_id:
      description: The job submitted now, or V(null).
      type: int
    command:
      description: The C(sbatch) command run (or that would run), for V(resubmit).
      type: list
      elements: str
    error:
      description: Why the resubmission failed (the run then needs a human).
      type: str
    warnings:
      description: What the checkpoint library noticed (skipped invalid checkpoints, pointers).
      type: list
      elements: str
    suspects:
      description: The run's suspect nodes Slurm knows (excluded from its resubmission), by name.
      type: list
      elements: str
    exclude:
      description: The same as a compressed hostlist (the C(--exclude) value), or V(null).
      type: str
      sample: "n[1,3]"
suspects:
  description:
    - Every suspect node found, by name - C(node), C(runs) (run names), C(jobs) (the failed job
      ids, oldest first), C(reason) (the drain reason), C(action) (V(drain) - drained now, or would
      be in check mode; V(already) - drained, down, failing or rebooting already, left as it is;
      V(overflow) - over O(suspect_drain_limit); V(unknown) - not a node of the cluster;
      V(drain_failed) - Slurm refused, see C(error)), C(state) (the node's state as read, e.g.
      V(IDLE), or V(null)) and C(current_reason) (its reason as read).
  returned: success
  type: list
  elements: dict
  sample: [{"node": "n1", "runs": ["llama-8b"], "jobs": ["41", "42"], "action": "drain", "state": "IDLE",
            "current_reason": "", "reason": "clusterops: suspect: run llama-8b failed on it (jobs 41,42)"}]
suspect_commands:
  description: The C(scontrol) drain commands run (or that would run in check mode), one per reason.
  returned: success
  type: list
  elements: list
suspect_report:
  description: One line per suspect node (also at the end of RV(report)), each ending in C([needs a human]).
  returned: success
  type: list
  elements: str
  sample:
    - "suspect node n1: run llama-8b failed on it (jobs 41,42) -> drained (was IDLE) [needs a human]"
resubmitted:
  description: Names of the runs resubmitted (or that would be).
  returned: success
  type: list
  elements: str
hung:
  description:
    - Names of the runs whose hung job this run cancelled (or would cancel, in check mode) - the
      watchdog's V(cancel_hung), when C(scancel) did not fail.
  returned: success
  type: list
  elements: str
needs_human:
  description: Names of the runs that need a human, registry errors included.
  returned: success
  type: list
  elements: str
errors:
  description: Registry entries that could not be read, C({name, error}).
  returned: success
  type: list
  elements: dict
report:
  description:
    - One line per run - its name, status, newest valid checkpoint step, the action and why -
      then one per registry error, then one per suspect node (RV(suspect_report)).
  returned: success
  type: list
  elements: str
  sample: ["llama-8b: failed, newest valid step 40 -> resubmit (job 57): job 41 ended NODE_FAIL; resubmission 1 of 5, resume from step 40"]
locked:
  description: True when another remediation held the registry lock past O(lock_timeout); nothing was done.
  returned: success
  type: bool
commands:
  description: Every Slurm command this task ran, each as an argument list.
  returned: always
  type: list
  elements: list
'''

import glob
import os
import re
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterops.slurm.plugins.module_utils._job_actions import (
    SubmitError,
    submit,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import (
    JobParseError,
    parse_time_option,
    read_jobs,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SlurmCLI,
    SlurmCommandError,
    effective_user,
    slurm_argument_spec,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist, expand_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._nodes import NodeParseError, read_nodes
from ansible_collections.clusterops.slurm.plugins.module_utils._training import (
    CANCEL_HUNG,
    RESUBMIT,
    STOP,
    SUSPECT_AFTER,
    SUSPECT_REASON_PREFIX,
    RegistryError,
    RegistryLock,
    checkpoint_status,
    decide,
    exclude_option,
    plan_suspects,
    read_progress,
    read_registry,
    read_state,
    record_hang_cancel,
    record_resubmission,
    record_stop,
    run_jobs,
    run_suspects,
    write_state,
)


def _brief(decision):
    last = decision["last_job"]
    return "%s%s" % (decision["status"], " (job %s %s)" % (last["job_id"], last["state"]) if last else "")


def resubmit(module, cli, me, run, decision, jobs, state):
    """Submit ``run``'s launcher as its owner; update ``decision`` and the run's state file."""
    params = module.params
    owner = run["owner"]
    runner = cli if owner == me else cli.as_user(owner)
    sbatch_args = exclude_option(decision.get("suspects") if decision.get("exclude") else []) + [run["launcher"]]
    decision["command"] = runner.prefix + cli.command("sbatch", sbatch_args)
    if module.check_mode:
        return
    if owner != me and os.geteuid() != 0:
        decision.update(needs_human=True, error="cannot submit as %s: this task runs as %s; run it as root "
                        "(become: true)" % (owner, me))
        return
    identity = {"name": run["name"], "user": owner, "key": run["name"]}
    known = [j["job_id_raw"] for j in run_jobs(run, jobs)]
    try:
        done = submit(runner, sbatch_args, identity, known,
                      retries=max(params["submit_retries"], 0), delay=max(params["retry_delay"], 0))
    except SubmitError as exc:
        decision.update(needs_human=True, error=exc.msg + (
            " (the job may have been submitted: check squeue before submitting it by hand)"
            if exc.maybe_accepted else ""))
        return
    decision["job_id"] = done["job_id"]
    decision["changed"] = True
    write_state(run["folder"],
                record_resubmission(state, decision, done["job_id"], time.time()))


#: Run on each node of a hung job (one task per node, as the run's owner): every process of the
#: job on this node with torchrun's RANK in its environment (a training rank), its Python stacks
#: with py-spy; when py-spy fails, SIGUSR2 (the reference trainer's faulthandler dump goes to the
#: job's log). $1 job id, $2 py-spy command.
EVIDENCE_SCRIPT = r"""job=$1 pyspy=$2 node=${SLURMD_NODENAME:-$(hostname)} found=0
for dir in /proc/[0-9]*; do
  env=$( { tr '\0' '\n' < "$dir/environ"; } 2>/dev/null) || continue
  grep -qx "SLURM_JOB_ID=$job" <<<"$env" || continue
  rank=$(sed -n 's/^RANK=//p' <<<"$env")
  [ -n "$rank" ] || continue
  wnode=$(sed -n 's/^SLURMD_NODENAME=//p' <<<"$env")
  [ -z "$wnode" ] || [ "$wnode" = "$node" ] || continue
  pid=${dir#/proc/} found=$((found + 1))
  echo "=== node $node rank $rank pid $pid: py-spy dump"
  if ! timeout 30 "$pyspy" dump --pid "$pid" 2>&1; then
    echo "=== node $node rank $rank pid $pid: py-spy failed; SIGUSR2 (faulthandler stacks in the job's log)"
    kill -USR2 "$pid" 2>&1
  fi
done
echo "=== node $node: $found rank(s)"
"""


def evidence_commands(cli, run, decision):
    """The srun command (as the run's owner) that collects the ranks' stacks of the hung job."""
    last = decision["last_job"]
    nodes = len(expand_hostlist(last["node_list"])) if last.get("node_list") else 1
    return cli.command("srun", ["--overlap", "--jobid=%s" % last["job_id_raw"], "--nodes=%d" % nodes,
                                "--ntasks=%d" % nodes, "--ntasks-per-node=1", "--immediate=30",
                                "--quiet", "--label",
                                "bash", "-c", EVIDENCE_SCRIPT, "clusterops-evidence",
                                str(last["job_id_raw"]), run["py_spy"]])


#: A line of ``srun --label`` output: the task number (padded with blanks to the widest), ": ", the line.
_TASK_LINE = re.compile(r"^ *(\d+): ?(.*)$")


def group_by_task(text):
    """``srun --label`` output (the tasks' lines interleave as they arrive) regrouped: every line
    of task 0, then of task 1 ..., each task's lines in their order, labels removed; lines without
    a label (srun's own) first. One task per node here, so one block per node."""
    tasks, other = {}, []
    for line in text.splitlines():
        match = _TASK_LINE.match(line)
        if match:
            tasks.setdefault(int(match.group(1)), []).append(match.group(2))
        else:
            other.append(line)
    return "\n".join(other + [line for task in sorted(tasks) for line in tasks[task]])


def collect_evidence(module, cli, me, run, decision, now):
    """Save the hung job's stacks next to the run's logs; the file's path (never raises for a
    failed collection: the evidence file then says why)."""
    last = decision["last_job"]
    folder = run.get("log_dir") or run.get("workdir") or run["checkpoint_dir"]
    path = os.path.join(folder, "hang-%s-%s.txt" % (last["job_id_raw"], time.strftime(
        "%Y%m%dT%H%M%SZ", time.gmtime(now))))
    owner = run["owner"]
    runner = cli if owner == me else cli.as_user(owner)
    args = decision["evidence_command"][1:]
    lines = ["# clusterops.slurm training_restart: run %s, job %s hung: %s" % (
        run["name"], last["job_id"], decision["reason"]),
        "# command: %s" % " ".join(runner.prefix + decision["evidence_command"])]
    try:
        rc, out, err = runner.run("srun", args, check=False, what="collect the hung job's stacks")
        lines += ["# rc %s" % rc, group_by_task(out), group_by_task(err)]
    except SlurmCommandError as exc:
        rc = None
        lines += ["# %s" % exc, group_by_task(exc.stdout or ""), group_by_task(exc.stderr or "")]
    text = "\n".join(lines)
    if "py-spy failed" in text or rc != 0:
        # The faulthandler dumps land in the job's logs: wait for them, then copy their tails.
        time.sleep(3)
        for log in sorted(glob.glob(os.path.join(run.get("log_dir") or folder, "%s-%s*" % (
                run["name"], last["job_id_raw"])))):
            try:
                with open(log, "rb") as handle:
                    handle.seek(max(0, os.path.getsize(log) - 64 * 1024))
                    tail = handle.read().decode("utf-8", "replace")
            except (OSError, IOError):
                continue
            text += "\n=== tail of %s\n%s" % (log, tail)
    try:
        with open(path, "w") as handle:
            handle.write(text + "\n")
        os.chmod(path, 0o644)
    except (OSError, IOError) as exc:
        module.warn("cannot write the hang evidence %s: %s" % (path, exc))
        return None
    return path


def cancel_hung(module, cli, me, run, decision, state, start):
    """Evidence, record, scancel, wait for the end, then decide again (and resubmit)."""
    last = decision["last_job"]
    decision["command"] = cli.command("scancel", [str(last["job_id_raw"])])
    if module.check_mode:
        return
    now = time.time()
    decision["evidence"] = collect_evidence(module, cli, me, run, decision, now)
    state = record_hang_cancel(state, decision, now, decision["evidence"])
    write_state(run["folder"], state)
    decision["changed"] = True
    try:
        cli.run("scancel", [str(last["job_id_raw"])], what="cancel the hung job %s" % last["job_id"])
    except SlurmCommandError as exc:
        decision.update(needs_human=True, error=str(exc))
        return
    deadline = time.time() + max(module.params["hang_cancel_wait"], 0)
    while True:
        rc, out, dummy = cli.run("squeue", ["-h", "-j", str(last["job_id_raw"]), "-o", "%T"], check=False,
                                 what="see whether the cancelled job ended")
        if rc == 0 and not out.strip():
            break
        if time.time() >= deadline:
            return
        time.sleep(2)
    jobs, dummy = read_jobs(cli, names=[run["name"]], users=[run["owner"]], start=start)
    ckpt = checkpoint_status(run["checkpoint_dir"], run["checkpoint_validate"],
                             run.get("checkpoint_name_template"))
    then = decide(run, jobs, ckpt, state)
    then.update(job_id=None, command=None, error=None, warnings=ckpt["warnings"], changed=False)
    if then["action"] == RESUBMIT:
        resubmit(module, cli, me, run, then, jobs, state)
    elif then["action"] == STOP:
        write_state(run["folder"], record_stop(state, then, time.time()))
    then.pop("changed", None)
    decision["then"] = then
    decision["step"] = then["step"]
    if then["needs_human"]:
        decision["needs_human"] = True


def suspect_nodes(module, cli, planned, jobs):
    """Suspect nodes of the runs failing now (action resubmit or stop): read the nodes once,
    drain the new ones within the blast radius (one scontrol call per reason; none in check
    mode) and set each run's ``suspects``/``exclude``. The result keys ``suspects``,
    ``suspect_commands`` and ``suspect_report``."""
    params = module.params
    out = {"suspects": [], "suspect_commands": [], "suspect_report": []}
    if not params["suspect_nodes"]:
        return out
    by_run = {}
    for run, decision, state in planned:
        if state is None or decision["action"] not in (RESUBMIT, STOP):
            continue
        found = run_suspects(run, jobs, params["suspect_after"])
        if found:
            by_run[run["name"]] = found
    if not by_run:
        return out
    nodes, dummy = read_nodes(cli)
    plan = plan_suspects(by_run, nodes, params["suspect_drain_limit"])
    for run, decision, state in planned:
        names = plan["exclude"].get(run["name"])
        if names:
            decision["suspects"] = names
            decision["exclude"] = compress_hostlist(names)
    failed = {}
    for change in plan["changes"]:
        argv = cli.command("scontrol", change.scontrol_args())
        out["suspect_commands"].append(argv)
        if module.check_mode:
            continue
        try:
            cli.run("scontrol", change.scontrol_args(), what="drain suspect nodes %s" % change.hostlist)
        except SlurmCommandError as exc:
            for name in change.nodes:
                failed[name] = str(exc)
    words = {"drain": "would drain it" if module.check_mode else "drained",
             "already": "already out of service, left as it is",
             "overflow": "over the blast radius of %d node(s) drained now, not drained" % plan["limit"],
             "unknown": "not a node of this cluster, neither drained nor excluded"}
    for item in plan["suspects"]:
        if item["node"] in failed:
            item.update(action="drain_failed", error=failed[item["node"]])
        what = words.get(item["action"]) or "drain FAILED: %s" % item.get("error")
        if item["action"] != "unknown":
            what += " (was %s%s)%s" % (item["state"], ", reason %r" % item["current_reason"] if item["current_reason"]
                                       else "", ", excluded" if item["action"] != "drain" else "")
        out["suspect_report"].append("suspect node %s: %s -> %s [needs a human]" % (
            item["node"], item["reason"][len(SUSPECT_REASON_PREFIX):], what))
    out["suspects"] = plan["suspects"]
    if any(i["action"] == "drain" for i in plan["suspects"]) and not module.check_mode:
        out["changed_nodes"] = True
    return out


def report_line(decision):
    """One line for the summary: name, status, newest valid step, action and why."""
    action = decision["action"]
    if action == RESUBMIT:
        action = "resubmit (job %s)" % decision["job_id"] if decision["job_id"] else (
            "resubmit (check mode)" if decision["error"] is None else "resubmit FAILED")
        if decision.get("exclude"):
            action += " excluding %s" % decision["exclude"]
    then = decision.get("then")
    if action == CANCEL_HUNG:
        action = "cancel_hung (evidence %s)" % decision.get("evidence") if decision.get("evidence") else (
            "cancel_hung (check mode)" if decision["error"] is None else "cancel_hung FAILED")
        if then and then["action"] == RESUBMIT:
            action += ", resubmit (job %s)" % then["job_id"] if then["job_id"] else ", resubmit FAILED"
        elif then:
            action += ", %s" % then["action"]
    line = "%s: %s, newest valid step %s -> %s: %s" % (
        decision["name"], decision["status"],
        decision["step"] if decision["step"] is not None else "none", action, decision["reason"])
    if then:
        line += "; then: %s" % then["reason"]
        if then.get("error"):
            line += " [error: %s]" % then["error"]
    if decision["error"]:
        line += " [error: %s]" % decision["error"]
    if decision["needs_human"]:
        line += " [needs a human]"
    return line


def main():
    module = AnsibleModule(
        argument_spec=slurm_argument_spec(
            registry=dict(type="path", default="/var/lib/clusterops/runs"),
            runs=dict(type="list", elements="str", default=[]),
            history=dict(type="str", default="now-30days"),
            lock_timeout=dict(type="int", default=60),
            submit_retries=dict(type="int", default=2),
            retry_delay=dict(type="float", default=10),
            hang_cancel_wait=dict(type="int", default=120),
            suspect_nodes=dict(type="bool", default=True),
            suspect_after=dict(type="int", default=SUSPECT_AFTER),
            suspect_drain_limit=dict(type="int", default=1),
        ),
        supports_check_mode=True,
    )
    params = module.params
    registry = params["registry"]
    result = dict(changed=False, runs=[], resubmitted=[], hung=[], needs_human=[], errors=[], locked=False,
                  report=[], suspects=[], suspect_commands=[], suspect_report=[])
    try:
        start = parse_time_option(params["history"])
    except ValueError as exc:
        module.fail_json(msg="history: %s" % exc)
    if params["suspect_after"] < 1 or params["suspect_drain_limit"] < 0:
        module.fail_json(msg="suspect_after must be 1 or more and suspect_drain_limit 0 or more "
                             "(suspect_nodes: false turns suspect nodes off)")
    try:
        runs, errors = read_registry(registry, params["runs"] or None)
    except RegistryError as exc:
        module.fail_json(msg=str(exc))
    result["errors"] = errors
    result["needs_human"] = [e["name"] for e in errors]
    if not runs:
        module.exit_json(commands=[], **result)
    for run in runs:
        run["folder"] = os.path.join(registry, run["name"])

    cli = SlurmCLI(module)
    lock = None
    if not module.check_mode:
        lock = RegistryLock(registry, timeout=max(params["lock_timeout"], 0))
        if not lock.acquire():
            result["locked"] = True
            module.warn("another remediation holds %s: training runs were left alone this time" % lock.path)
            module.exit_json(commands=cli.calls, **result)
    try:
        names = sorted(set(r["name"] for r in runs))
        users = sorted(set(r["owner"] for r in runs))
        jobs, _accounting = read_jobs(cli, names=names, users=users, start=start)
        diff = {"before": {}, "after": {}}
        me = effective_user()
        planned = []
        for run in runs:
            ckpt = checkpoint_status(run["checkpoint_dir"], run["checkpoint_validate"],
                                     run.get("checkpoint_name_template"))
            mine = run_jobs(run, jobs)
            progress = read_progress(run, mine[-1]["job_id_raw"] if mine else None)
            try:
                state = read_state(run["folder"])
            except RegistryError as exc:
                decision = decide(run, jobs, ckpt, {"resubmissions": []})
                decision.update(action="none", needs_human=True, status="ended", reason=str(exc))
                state = None
            else:
                decision = decide(run, jobs, ckpt, state, progress, time.time())
            decision.update(job_id=None, command=None, error=None, warnings=ckpt["warnings"], changed=False,
                            suspects=[], exclude=None)
            diff["before"][run["name"]] = _brief(decision)
            planned.append((run, decision, state))
        result.update(suspect_nodes(module, cli, planned, jobs))
        for run, decision, state in planned:
            if state is not None and decision["action"] == CANCEL_HUNG:
                decision["evidence_command"] = evidence_commands(cli, run, decision)
                cancel_hung(module, cli, me, run, decision, state, start)
            elif state is not None and decision["action"] == RESUBMIT:
                resubmit(module, cli, me, run, decision, jobs, state)
            elif state is not None and decision["action"] == STOP and not module.check_mode:
                write_state(run["folder"], record_stop(state, decision, time.time()))
                decision["changed"] = True
            after = decision["action"]
            if decision["action"] == RESUBMIT:
                after = "resubmitted as job %s" % decision["job_id"] if decision["job_id"] else (
                    "would resubmit" if module.check_mode else "resubmission failed")
            elif decision["action"] == CANCEL_HUNG:
                after = "would collect stacks and cancel the hung job" if module.check_mode else (
                    "cancelled the hung job; %s" % ((decision.get("then") or {}).get("action") or "not ended yet"))
            if decision["exclude"] and decision["action"] == RESUBMIT:
                after += " excluding %s" % decision["exclude"]
            diff["after"][run["name"]] = after if after != "none" else _brief(decision)
            result["runs"].append(decision)
    except (SlurmCommandError, JobParseError, NodeParseError) as exc:
        if isinstance(exc, SlurmCommandError):
            cli.fail(exc, runs=result["runs"])
        module.fail_json(msg=str(exc), commands=cli.calls, runs=result["runs"])
    except RegistryError as exc:
        module.fail_json(msg=str(exc), commands=cli.calls, runs=result["runs"])
    finally:
        if lock is not None:
            lock.release()

    for decision in result["runs"]:
        if decision["action"] == RESUBMIT and (decision["job_id"] or module.check_mode):
            result["resubmitted"].append(decision["name"])
        if (decision.get("then") or {}).get("job_id"):
            result["resubmitted"].append(decision["name"])
        if decision["action"] == CANCEL_HUNG and (module.check_mode or not decision["error"]):
            result["hung"].append(decision["name"])
        if decision["needs_human"]:
            result["needs_human"].append(decision["name"])
    result["report"] = [report_line(d) for d in result["runs"]] + [
        "%s: registry entry unusable -> none: %s [needs a human]" % (e["name"], e["error"])
        for e in result["errors"]] + result["suspect_report"]
    changed_nodes = result.pop("changed_nodes", False) or (
        module.check_mode and bool(result["suspect_commands"]))
    # A list, not a generator: every run's "changed" is popped, none is left to any()'s short circuit.
    runs_changed = [d.pop("changed") for d in result["runs"]]
    result["changed"] = any(runs_changed) or changed_nodes or (
        module.check_mode and any(d["action"] in (RESUBMIT, STOP, CANCEL_HUNG) for d in result["runs"]))
    if module._diff:
        result["diff"] = diff
    module.exit_json(commands=cli.calls, **result)


if __name__ == "__main__":
    main()

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
  - Exactly once - the whole read-decide-submit runs under an exclusive lock on the registry
    (C(flock) on C(<registry>/.remediate.lock)), so overlapping runs (AWX schedules overlap)
    never both submit; the submission itself checks the job identity (name, owner, and the key
    C(clusterops-key=<run>) in the comment) with C(squeue) first, as M(clusterops.slurm.slurm_job)
    does, and a resubmission is recorded in the run's C(state.json) before the next run reads it.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.slurm_cli
attributes:
  check_mode:
    support: full
    details: Reads everything and reports what it would do, with the exact C(sbatch), C(srun) and
      C(scancel) commands; submits, cancels and collects nothing, writes no state and takes no lock.
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
      then one per registry error.
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
from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import expand_hostlist
from ansible_collections.clusterops.slurm.plugins.module_utils._training import (
    CANCEL_HUNG,
    RESUBMIT,
    STOP,
    RegistryError,
    RegistryLock,
    checkpoint_status,
    decide,
    read_progress,
    read_registry,
    read_state,
    record_hang_cancel,
    record_resubmission,
    record_stop,
    run_jobs,
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
    decision["command"] = runner.prefix + cli.command("sbatch", [run["launcher"]])
    if module.check_mode:
        return
    if owner != me and os.geteuid() != 0:
        decision.update(needs_human=True, error="cannot submit as %s: this task runs as %s; run it as root "
                        "(become: true)" % (owner, me))
        return
    identity = {"name": run["name"], "user": owner, "key": run["name"]}
    known = [j["job_id_raw"] for j in run_jobs(run, jobs)]
    try:
        done = submit(runner, [run["launcher"]], identity, known,
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


def report_line(decision):
    """One line for the summary: name, status, newest valid step, action and why."""
    action = decision["action"]
    if action == RESUBMIT:
        action = "resubmit (job %s)" % decision["job_id"] if decision["job_id"] else (
            "resubmit (check mode)" if decision["error"] is None else "resubmit FAILED")
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
        ),
        supports_check_mode=True,
    )
    params = module.params
    registry = params["registry"]
    result = dict(changed=False, runs=[], resubmitted=[], hung=[], needs_human=[], errors=[], locked=False,
                  report=[])
    try:
        start = parse_time_option(params["history"])
    except ValueError as exc:
        module.fail_json(msg="history: %s" % exc)
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
            decision.update(job_id=None, command=None, error=None, warnings=ckpt["warnings"], changed=False)
            diff["before"][run["name"]] = _brief(decision)
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
            diff["after"][run["name"]] = after if after != "none" else _brief(decision)
            result["runs"].append(decision)
    except (SlurmCommandError, JobParseError) as exc:
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
        for e in result["errors"]]
    result["changed"] = any(d.pop("changed") for d in result["runs"]) or (
        module.check_mode and any(d["action"] in (RESUBMIT, STOP, CANCEL_HUNG) for d in result["runs"]))
    if module._diff:
        result["diff"] = diff
    module.exit_json(commands=cli.calls, **result)


if __name__ == "__main__":
    main()

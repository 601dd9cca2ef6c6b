#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: training_remediation
short_description: Resubmit failed training runs of the run registry once each, from their newest valid checkpoint
version_added: 0.2.0
description:
  - Reads the run registry (one folder per run, its C(run.json) written by M(clusterops.slurm.training_run),
    which the role C(clusterops.slurm.torchrun_launcher) uses), the jobs of every registered run with one C(sacct)
    and one C(squeue) call, and each run's checkpoint folder, then decides for each run.
  - A run with no job since O(history) is reported as not started.
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
  - clusterops.slurm.run_registry
  - clusterops.slurm.slurm_cli
  - clusterops.slurm.submit_retries
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
  lock_timeout:
    description:
      - Seconds to wait for another remediation holding the registry lock. When it is still
        held, nothing is read or submitted and RV(locked) is true.
    type: int
    default: 60
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
  - Cluster users are not trusted (C(docs/security.md)). Each run's checkpoint folder, heartbeat and job logs
    are read, and its hang evidence written, as the run's owner, in a forked child with the owner's uid, gid
    and groups that is killed after 120 s; a folder whose real path is not the registered one is refused. A
    run is acted on only while its C(run.json) is bound to its owner (owned by root or the user the task runs
    as, or, in a sticky registry users may write, by the owner itself; never O(registry) entries writable by
    others), its owner is not root and its launcher is controlled by none but them. Any fault of one run is
    reported for that run (RV(needs_human)); the others are still decided and acted on.
seealso:
  - module: clusterops.slurm.training_run
  - module: clusterops.slurm.slurm_job
  - module: clusterops.slurm.checkpoint_info
  - name: Training remediation
    description: How runs are registered, resumed and budgeted (docs/training-remediation.md).
    link: https://github.com/clusterops/slurm/blob/main/docs/training-remediation.md
  - name: Security
    description: Who is trusted, what runs as whom, and what a cluster user cannot make root do (docs/security.md).
    link: https://github.com/clusterops/slurm/blob/main/docs/security.md
'''

EXAMPLES = r'''
- name: Resubmit failed training runs
  clusterops.slurm.training_remediation:
    registry: /var/lib/clusterops/runs
  become: true
  register: training

- name: What would be resubmitted, without submitting
  clusterops.slurm.training_remediation:
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
  description:
    - What a person has to look at, one item per run - unusable registry entries first, then the
      runs whose RV(runs[].needs_human) is true. Suspect nodes are not in it - see RV(suspects), each
      of which needs a human.
  returned: success
  type: list
  elements: dict
  contains:
    run:
      description: The run's name (its registry folder's name).
      type: str
    why:
      description:
        - Its RV(runs[].reason) (for a registry entry, C(registry entry unusable) and the error),
          then the decision after a cancelled hung job when that one needs a human, then a failed
          action's error.
      type: str
    next:
      description:
        - What a person does next, by the run's status (and, for a job that ended, its state) - a line that begins
          with C(next) and ends with the runbook's section.
      type: str
  sample: [{"run": "llama-8b", "why": "job 41 ended OUT_OF_MEMORY: ran out of memory; the same job would fail again",
            "next": "next: raise the job's memory request or lower the batch size, then submit the launcher
            (docs/training-remediation.md#runbook-needs-a-human)"}]
errors:
  description: Registry entries that could not be read, C({name, error}).
  returned: success
  type: list
  elements: dict
report:
  description:
    - One line per run - its name, status, newest valid checkpoint step, the action and why -
      then one per registry error, then one per suspect node (RV(suspect_report)); first, when the
      registry folder does not exist on the host, a line that says so (also a warning).
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
failed_cause:
  description:
    - Why the task failed, one of C(configuration) (a setting or the host's set-up), C(permission) (the account
      may not do what it needs), C(accounting) (slurmdbd unreachable or no accounting storage), C(slurm_unreadable)
      (the controller did not answer, in time or in full), C(slurm_refused) (Slurm refused a change).
  returned: failure
  type: str
  sample: permission
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterops.slurm.plugins.module_utils._job_actions import SUBMIT_RETRY_OPTIONS
from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SLURM_COMMAND_OPTIONS, run_module
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.policy import SUSPECT_AFTER
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry import RegistryError
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry_options import REGISTRY_OPTIONS
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.runner import remediate


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            lock_timeout=dict(type="int", default=60),
            hang_cancel_wait=dict(type="int", default=120),
            suspect_nodes=dict(type="bool", default=True),
            suspect_after=dict(type="int", default=SUSPECT_AFTER),
            suspect_drain_limit=dict(type="int", default=1),
        ),
    ).merge(REGISTRY_OPTIONS, SLURM_COMMAND_OPTIONS, SUBMIT_RETRY_OPTIONS).module_kwargs())
    run_module(module, remediate, errors=(RegistryError,))


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: training_goodput_info
short_description: What the failures of registered training runs cost - goodput from Slurm's accounting and the runs' own records
version_added: 0.2.0
description:
  - Reads the run registry (as M(clusterops.slurm.training_remediation) does), the jobs of every
    registered run with one C(sacct) and one C(squeue) call, and each run's own records - its
    checkpoints (step and time written), its heartbeat, the trainer's event log (O(event_log)) and
    remediation's C(state.json) - and reports, per run, where its time went.
  - Wall time since the first submission, time queued, time running, time between jobs, node
    seconds; for each restart (a run of the training after the one before ended) its cause
    (V(node_failure), V(hang), V(time_limit), V(preemption), V(program_error), V(other)), who
    restarted it (Slurm's own requeue, remediation, someone else), the steps lost, the time spent
    recomputing them, and the time from the failure to training again split into detection,
    waiting for remediation, remediation, queue and start to first new step; then productive
    time and the effective training time ratio.
  - Each figure comes from a named source (see RV(runs)); a figure these sources cannot give is
    V(null), never guessed, and RV(runs[].unknown) says which and why. docs/goodput.md defines
    every figure.
  - Jobs before O(history) are not counted; a C(state.json) resubmission after a job outside that
    window is said in RV(runs[].unknown).
  - A read that is not a complete answer (C(sacct) or C(squeue) failing, an answer cut short)
    fails the task, as for every module of the collection; C(Slurm accounting storage is
    disabled) is read as no accounting (RV(accounting) false) and the figures then cover the jobs
    the controller still lists only.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.attributes
  - clusterops.slurm.attributes.IDEMPOTENT
  - clusterops.slurm.attributes.INFO_MODULE
  - clusterops.slurm.run_registry
  - clusterops.slurm.slurm_cli
options:
  event_log:
    description:
      - The trainer's event log of each run, one JSON object a line with C(event), C(step) and
        C(time) (the reference trainer's C(--events FILE)) - a path relative to the run's
        C(checkpoint_dir), or absolute. It gives the step times that the recompute time, the
        start to first step and the steps reached need.
      - Not set, or no such file, the run has none and those figures are unknown.
    type: str
  failed_nodes:
    description:
      - Name the failed node of each restart after a node failure (C(NODE_FAIL), C(BOOT_FAIL)) -
        RV(runs[].failures[].failed_nodes) - from Slurm's node events (one more call, C(sacctmgr
        show event) of the nodes of those jobs since the earliest of them started; none when no
        job of the runs ended so). The goodput report's playbook sets it.
      - V(false), the failed job's nodes are known (RV(runs[].failures[].node_list)) but not which of them failed.
    type: bool
    default: false
notes:
  - Runs on the host that holds the registry and sees the checkpoint folders. Each run's checkpoint
    folder, heartbeat, logs and event log are read as the run's owner, in a forked child with the
    owner's uid, gid and groups (as M(clusterops.slurm.training_remediation) reads them); a run whose
    C(run.json) is not bound to its owner is an RV(errors) entry.
  - Nothing is locked or written.
seealso:
  - module: clusterops.slurm.training_remediation
  - module: clusterops.slurm.slurm_job_info
  - name: Goodput
    description: The definitions and sources of every figure, and what cannot be known (docs/goodput.md).
    link: https://github.com/clusterops/slurm/blob/main/docs/goodput.md
'''

EXAMPLES = r'''
- name: Goodput of every registered run over the last week
  clusterops.slurm.training_goodput_info:
    history: now-7days
    event_log: events.jsonl
  become: true
  register: goodput

- name: Runs below 90 % effective training time
  ansible.builtin.debug:
    msg: "{{ item.name }}: {{ item.effective_ratio }} ({{ item.restarts }} restarts, {{ item.steps_lost }} steps lost)"
  loop: "{{ goodput.runs | selectattr('effective_ratio', 'number') | selectattr('effective_ratio', 'lt', 0.9) | list }}"

- name: Restarts of one run by cause
  clusterops.slurm.training_goodput_info:
    runs: [llama-8b]
  register: one
- ansible.builtin.debug:
    var: one.runs[0].restarts_by_cause
'''

RETURN = r'''
runs:
  description:
    - One entry per registered run, by name. Times are Unix seconds, durations seconds (floats),
      steps the trainer's. V(null) is unknown (see RV(runs[].unknown)).
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
    finished:
      description: The run's C(FINISHED) marker exists (the wall time then ends with its last job).
      type: bool
    now:
      description: When this was read; the end of every span still open (a job pending or running).
      type: float
    accounting:
      description: False when the cluster keeps no accounting (the figures cover the controller's jobs only).
      type: bool
    active:
      description: A job of the run is pending or running.
      type: bool
    first_submit:
      description: The first job's submit time (C(sacct) C(Submit)).
      type: int
    wall_time:
      description: Seconds from RV(runs[].first_submit) to RV(runs[].now) (to the last job's C(End) once finished).
      type: float
    queued_time:
      description: Sum over the jobs of C(Submit) to C(Start) (to now while pending), seconds.
      type: float
    running_time:
      description: Sum over the jobs of C(Start) to C(End) (to now while running), seconds.
      type: float
    between_jobs_time:
      description: Sum of a job's C(End) to the next job's C(Submit) - no job of the run existed - seconds.
      type: float
    node_seconds:
      description: Running time times the job's nodes (C(sacct) C(NodeList)), node-seconds.
      type: float
    recompute_time:
      description: Sum of the restarts' RV(runs[].failures[].recompute_time), seconds.
      type: float
    lost_to_detection:
      description: >-
        Sum of the restarts' RV(runs[].failures[].lost_to_detection): running time after the last
        progress before a failure, lost, not productive. Seconds.
      type: float
    productive_time:
      description: >-
        RV(runs[].running_time) less RV(runs[].recompute_time) and RV(runs[].lost_to_detection)
        (detection is lost, not productive), seconds.
      type: float
    productive_time_at_most:
      description: >-
        When a recompute or detection time is unknown, the running time less the known ones (an
        upper bound), else V(null).
      type: float
    effective_ratio:
      description: RV(runs[].productive_time) / RV(runs[].wall_time), 0 to 1.
      type: float
      sample: 0.93
    steps_lost:
      description: Sum of the restarts' RV(runs[].failures[].steps_lost), steps.
      type: int
    restarts:
      description: Runs of the training after the first (a Slurm requeue or a new job).
      type: int
    restarts_by_cause:
      description: >-
        Restarts by the cause of the job end before each - V(node_failure) (C(NODE_FAIL),
        C(BOOT_FAIL)), V(hang) (cancelled by remediation's watchdog, C(state.json) C(hang_cancels)),
        V(time_limit) (C(TIMEOUT)), V(preemption) (C(PREEMPTED)), V(program_error) (C(FAILED),
        C(OUT_OF_MEMORY)), V(other) (cancelled by a person, C(REQUEUED), C(DEADLINE), ...).
      type: dict
      sample: {"node_failure": 2, "hang": 1, "time_limit": 0, "preemption": 0, "program_error": 1, "other": 0}
    jobs:
      description: >-
        Every run of every job, oldest first (a job's runs that Slurm requeued before it) -
        job_id, job_id_raw, state, submit_time, start_time, end_time, node_list, nodes (count),
        active, requeue_of (Slurm requeued the run before into this one), queued and running (seconds).
      type: list
      elements: dict
    failures:
      description: One entry per restart, oldest first.
      type: list
      elements: dict
      contains:
        job_id:
          description: The job that ended.
          type: str
        job_id_raw:
          description: Its numeric id.
          type: int
        state:
          description: How it ended (C(sacct) C(State)).
          type: str
        cause:
          description: As in RV(runs[].restarts_by_cause).
          type: str
        restarted_by:
          description: >-
            V(slurm) (Slurm requeued the same job), V(remediation) (a C(state.json)
            resubmission names it) or V(unknown) (someone else submitted the next job).
          type: str
        next_job_id:
          description: The job that ran the training next.
          type: str
        reached_step:
          description: >-
            The step reached before the failure - the highest step of the trainer's event log
            while the job ran, else the heartbeat's step when it was written while the job ran.
          type: int
        reached_source:
          description: V(events) or V(heartbeat).
          type: str
        last_progress_time:
          description: The time of that last sign of progress.
          type: float
        resumed_step:
          description: >-
            The step the next job resumed from - its C(start) event, else the C(state.json)
            resubmission's C(step) (null there is 0, from scratch), else the newest checkpoint
            written before it started.
          type: int
        resumed_source:
          description: V(events), V(state.json) or V(checkpoints).
          type: str
        steps_lost:
          description: RV(runs[].failures[].reached_step) less RV(runs[].failures[].resumed_step), steps.
          type: int
        recompute_time:
          description: >-
            From the next job's start until its first step event above the step reached (its
            whole run when it never got there); 0 while it has not started. Seconds; event log only.
          type: float
        detection:
          description: >-
            From the last progress (for a hang C(hang_cancels) C(time - idle)) to when the
            failure was known (C(sacct) C(End); for a hang the watchdog's cancel), seconds.
          type: float
        waiting_for_remediation:
          description: >-
            From the end to the next submission when remediation resubmitted (its own reads
            included); 0 for a Slurm requeue and a hang. Seconds.
          type: float
        remediation:
          description: >-
            A hang's cancel to the next submission; a Slurm requeue's end to its new submit time;
            a resubmission's submit time to its C(state.json) time. Seconds.
          type: float
        queue:
          description: The next job's C(Submit) to C(Start) (to now while pending), seconds.
          type: float
        start_to_first_step:
          description: The next job's C(Start) to its first step event, seconds.
          type: float
        end_to_start:
          description: C(End) to the next job's C(Start) (C(sacct) alone), seconds.
          type: float
        time_to_training:
          description: The last progress before the failure to the first new step, seconds.
          type: float
        lost_to_detection:
          description: >-
            The failed job's running time after its last progress (for a hang C(hang_cancels)
            C(time - idle)) to its C(sacct) C(End) - the detection, and for a hang the cancel until
            the job ended - less what the restart before already counts as recompute; 0 for a job
            that never started. Lost, not productive. Seconds.
          type: float
        node_list:
          description: The failed job's nodes (C(sacct) C(NodeList), a hostlist).
          type: str
          sample: n[1-2]
        failed_nodes:
          description: >-
            After a node failure, the nodes of RV(runs[].failures[].node_list) with a node event
            of Slurm's accounting (C(sacctmgr show event): DOWN, not responding) from the job's start
            to 60 s after its end. V(null) when O(failed_nodes) is false, for other causes, or
            when no such event was found (then said in RV(runs[].failures[].unknown)).
          type: list
          elements: str
          sample: [n2]
        unknown:
          description: This restart's unknown figures, C({figure, why}).
          type: list
          elements: dict
    timeline:
      description:
        - What a picture of the run needs besides the figures (the report of the filter
          P(clusterops.slurm.goodput_report#filter) draws it), each list bounded in length.
      type: dict
      contains:
        progress:
          description:
            - The progress curve, C([[time, step], ...]) in time order - every record of the trainer's
              event log with a step (O(event_log)), downsampled evenly to at most 400 points, keeping
              the first, the last and the points around each drop of the step (a restart that resumed
              from an older checkpoint). V(null) when the run has no event log.
          type: list
          elements: list
          sample: [[1767000000.5, 0], [1767000001.2, 1]]
        checkpoints:
          description:
            - The run folder's checkpoints not invalid, C({step, time}) with C(time) when written (the
              entry's mtime), oldest first, the newest 200. V(null) when the folder could not be read.
          type: list
          elements: dict
        actions:
          description:
            - Remediation's actions on the run from its C(state.json), oldest first, the newest 200,
              each C({action, time, job_id, step, after_job, after_state, idle}) - C(action)
              V(resubmit) (a C(resubmissions) entry; C(job_id) submitted after C(after_job) ended
              C(after_state), resuming from checkpoint C(step)) or V(hang_cancel) (a C(hang_cancels)
              entry; C(job_id) cancelled at C(step) after C(idle) seconds without progress).
          type: list
          elements: dict
    unknown:
      description: The run's figures that are V(null) or cover only part of the run, each C({figure, why}).
      type: list
      elements: dict
      sample: [{"figure": "events", "why": "the run has no trainer event log: step times (recompute, first step) are unknown"}]
errors:
  description: Registry entries that could not be read, C({name, error}).
  returned: success
  type: list
  elements: dict
accounting:
  description: True when C(sacct) was read, false when the cluster keeps no accounting, V(null) when no run was read.
  returned: success
  type: bool
commands:
  description: The Slurm commands this task ran, each as an argument list.
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

from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import SLURM_COMMAND_OPTIONS, run_module
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.goodput_runner import goodput_info
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry import RegistryError
from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation.registry_options import REGISTRY_OPTIONS


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            event_log=dict(type="str"),
            failed_nodes=dict(type="bool", default=False),
        ),
    ).merge(REGISTRY_OPTIONS, SLURM_COMMAND_OPTIONS).module_kwargs())
    run_module(module, goodput_info, errors=(RegistryError,))


if __name__ == "__main__":
    main()

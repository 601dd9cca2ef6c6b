#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: slurm_job_info
short_description: Read Slurm jobs, active and finished, with their steps and requeue history
version_added: 0.1.0
description:
  - Reads jobs with one C(sacct) call (the accounting database, for finished jobs, their steps
    and earlier runs) and then one C(squeue) call (the controller, for the current state of
    every job it still knows), and returns one entry per job.
  - Both are read as delimited fields (C(sacct --parsable2 --delimiter), C(squeue -O) with a
    separator), never as fixed-width columns, and with times as Unix seconds.
  - Each state is split into a base state and flags (C(squeue) prints C(COMPLETING),
    C(REQUEUE_HOLD) or, from Slurm 25.11, C(EXPEDITING) instead of the base); C(CANCELLED by
    1234) becomes V(CANCELLED) with RV(jobs[].cancelled_by); exit codes are split into exit code
    and signal (C(0:9) of C(sacct) and of C(squeue) from 23.02, the raw wait status of 22.05's
    C(squeue)). Whether a job was cancelled comes from its state only - a cancelled job's exit
    code depends on how its program ended (C(0:15) killed by SIGTERM, C(143:0) when it exited
    128+15 itself after handling SIGTERM, C(0:9) or C(137:0) after SIGKILL; all seen on the
    dev clusters).
  - A state word this collection does not know (one a later Slurm release adds) does not fail
    the listing - the job is returned with RV(jobs[].state_known) false, its words in
    RV(jobs[].state_raw), and is neither active nor ended for the other modules.
  - Held jobs (RV(jobs[].held)) are those that wait for C(scontrol release) - held by a user or
    admin, or by Slurm itself (C(launch failed requeued held) after a launch or prolog failure,
    C(job requeued in held state), C(JobHoldMaxRequeue), the C(REQUEUE_HOLD) state...).
  - An answer that may be incomplete fails the task with Slurm's words, never reads as "no
    jobs" - a non-zero exit status (slurmdbd down - C(Problem talking to the database),
    controller unreachable), an error on stderr with exit status 0, an output cut short. Only
    C(Slurm accounting storage is disabled) is read as RV(accounting) false.
  - Steps (C(.batch), C(.extern), C(.interactive), C(.0)...) are attached to their job under
    RV(jobs[].steps) and never listed as jobs. A pending array's tasks that Slurm shows as one
    line (C(57829110_[5-100]), C(123_[1-5%2])) are one entry.
  - A job that Slurm requeued by itself after a node failure (or a preemption, or
    C(scontrol requeue)) has two or more accounting records with the same id - the one of the
    failed run (C(NODE_FAIL)) and the new one (C(PENDING)). It is reported once, with the
    current state, RV(jobs[].requeued) true and the failed runs in RV(jobs[].history), so
    that nothing submits it again.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.attributes
  - clusterops.slurm.attributes.IDEMPOTENT
  - clusterops.slurm.attributes.INFO_MODULE
  - clusterops.slurm.slurm_cli
options:
  job_ids:
    description:
      - Only these jobs (V(1234), V(1234_7), V(1234+1)); an array job id selects all its tasks.
    type: list
    elements: str
    default: []
  names:
    description: Only jobs with one of these names.
    type: list
    elements: str
    default: []
  users:
    description:
      - Only jobs of these users. Empty means every user (C(sacct --allusers); users who are not
        Slurm operators may still see only their own jobs, as Slurm's C(PrivateData) decides).
    type: list
    elements: str
    default: []
  states:
    description:
      - Keep only jobs whose base state, a flag or the word Slurm printed is one of these, long
        or compact (V(PENDING), V(PD), V(NODE_FAIL), V(OUT_OF_MEMORY), V(COMPLETING),
        V(EXPEDITING)...), compared whole. It is the current state; earlier runs are in
        RV(jobs[].history). A name that is no Slurm job state fails the task before any call.
    type: list
    elements: str
    default: []
  start:
    description:
      - Only jobs that existed at or after this time (C(sacct --starttime)). Unix seconds,
        V(YYYY-MM-DD), V(YYYY-MM-DDTHH:MM[:SS]) (local time of the target), V(now) or
        V(now-<n><unit>) (V(now-2hours), V(now-7days)).
      - Not set, C(sacct)'s own default applies - since midnight, or since ever with O(job_ids).
        Jobs the controller still lists are returned whatever the default.
    type: str
  end:
    description:
      - Only jobs that existed at or before this time (C(sacct --endtime)); same forms as O(start).
    type: str
  accounting:
    description:
      - Read the accounting database with C(sacct). V(false) reads only C(squeue) (active jobs and
        those ended less than C(MinJobAge) ago, without steps or history).
      - When the cluster keeps no accounting, the module reads only C(squeue) and says so in
        RV(accounting).
    type: bool
    default: true
  steps:
    description: Return the steps of each job (RV(jobs[].steps)).
    type: bool
    default: true
seealso:
  - module: clusterops.slurm.slurm_job
  - name: sacct(1)
    description: Slurm's sacct manual (fields, job state codes, C(--duplicates)).
    link: https://slurm.schedmd.com/sacct.html
  - name: squeue(1)
    description: Slurm's squeue manual (C(-O) fields, job reason codes).
    link: https://slurm.schedmd.com/squeue.html
'''

EXAMPLES = r'''
- name: The jobs of one training run, this week
  clusterops.slurm.slurm_job_info:
    names: [llm-70b-pretrain]
    start: now-7days
  register: runs

- name: Resubmit only when no job of the run is queued, running or being requeued
  ansible.builtin.debug:
    msg: "needs a restart"
  when: runs.jobs | selectattr('active') | list | length == 0

- name: Jobs that died with their node, and whether Slurm requeued them
  clusterops.slurm.slurm_job_info:
    states: [NODE_FAIL, PENDING]
    start: now-1days
  register: failed

- name: Report them
  ansible.builtin.debug:
    msg: "{{ item.job_id }}: {{ item.state }} requeued={{ item.requeued }} runs={{ item.history | length + 1 }}"
  loop: "{{ failed.jobs }}"
'''

RETURN = r'''
jobs:
  description: One entry per job, oldest submit first.
  returned: success
  type: list
  elements: dict
  contains:
    job_id:
      description: The id as Slurm writes it (squeue C(%i), sacct C(JobID)).
      type: str
      sample: "57829110_[5-100]"
    job_id_raw:
      description: The unique numeric id (squeue C(JobID), sacct C(JobIDRaw)).
      type: int
      sample: 57829110
    array_job_id:
      description: The array job id for an array task or an array's pending tasks, else V(null).
      type: int
    array_task_id:
      description: The task id of one array task, else V(null).
      type: int
    array_tasks:
      description: The pending tasks that one entry stands for (V(5-100)), else V(null).
      type: str
    array_max_running:
      description: The array's limit of tasks running at once (V(%2) in V(123_[1-5%2])), else V(null).
      type: int
    het_job_id:
      description: The leader's id of a heterogeneous job component (V(1234) in V(1234+1)), else V(null).
      type: int
    het_job_offset:
      description: The component's offset (V(1) in V(1234+1)), else V(null).
      type: int
    name:
      description: Job name.
      type: str
    user:
      description: User name.
      type: str
    partition:
      description: Partition.
      type: str
    cluster:
      description: Cluster name (sacct C(Cluster), lower case), V(null) when neither command says it.
      type: str
    comment:
      description: The job comment (squeue C(Comment)), V(null) when only accounting knows the job.
      type: str
    state:
      description: >-
        Base state (V(PENDING), V(RUNNING), V(SUSPENDED), V(COMPLETED), V(CANCELLED), V(FAILED),
        V(TIMEOUT), V(NODE_FAIL), V(PREEMPTED), V(BOOT_FAIL), V(DEADLINE), V(OUT_OF_MEMORY)),
        or V(null) when Slurm printed only a flag that does not say it (V(COMPLETING)).
      type: str
      sample: PENDING
    flags:
      description: Flag states Slurm printed (V(COMPLETING), V(REQUEUE_HOLD), V(CONFIGURING), V(EXPEDITING)...).
      type: list
      elements: str
    state_raw:
      description: The state as Slurm wrote it.
      type: str
      sample: "CANCELLED by 1234"
    state_known:
      description: >-
        False when a word of the state is unknown to this collection (a later Slurm release's);
        then RV(jobs[].state) is V(null) unless another word names the base, RV(jobs[].active)
        and RV(jobs[].held) are false, and the other modules act on no such job (a human should
        look at it).
      type: bool
    held:
      description: >-
        True when the job waits for C(scontrol release) (what
        O(clusterops.slurm.slurm_job#module:state=released) acts on); see RV(jobs[].held_by).
      type: bool
    held_by:
      description: >-
        V(user) (reason C(JobHeldUser)), V(admin) (C(JobHeldAdmin)), V(slurm) (Slurm held it
        itself - C(launch failed requeued held), C(job requeued in held state), C(job requeued
        in special exit state), C(JobHoldMaxRequeue), or the C(REQUEUE_HOLD), C(SPECIAL_EXIT),
        C(RESV_DEL_HOLD) states), or V(null) when not held.
      type: str
      sample: slurm
    active:
      description: >-
        True while the controller lists the job as queued, running or not finished yet (the
        states O(clusterops.slurm.slurm_job#module:state=present) treats as present). A job
        only the accounting database knows is never active, even when its last record says
        RUNNING (a stale record, e.g. after the controller lost its state).
      type: bool
    cancelled_by:
      description: The uid from C(CANCELLED by <uid>), else V(null).
      type: int
    reason:
      description: >-
        Why the job waits or ended (squeue C(Reason), sacct C(Reason)), V("") when none. squeue
        prints the text slurmctld wrote when there is one (V(launch failed requeued held)).
      type: str
      sample: BeginTime
    exit_code:
      description: Exit code (the number before the colon of C(0:9)), V(null) when unknown.
      type: int
    signal:
      description: The signal that ended it (after the colon), V(null) when unknown.
      type: int
    node_list:
      description: Allocated nodes as a hostlist, V("") when none.
      type: str
      sample: "n[1-2]"
    nodes:
      description: The same nodes, expanded.
      type: list
      elements: str
    submit_time:
      description: Submit time, Unix seconds. Slurm resets it when it requeues a job.
      type: int
    start_time:
      description: Start time, Unix seconds; V(null) while pending.
      type: int
    end_time:
      description: End time, Unix seconds; V(null) while active.
      type: int
    restart_count:
      description: How often Slurm restarted (requeued) the job (squeue C(RestartCnt)), V(null) when only accounting knows it.
      type: int
    requeued:
      description: True when the job was requeued (restart count above 0, earlier runs in RV(jobs[].history), or a requeue flag).
      type: bool
    history:
      description: >-
        Earlier runs of the same job that Slurm requeued into this one, oldest first (their
        accounting records): state, flags, state_raw, state_known, cancelled_by, reason,
        exit_code, signal, node_list, nodes, submit_time, start_time, end_time, steps.
      type: list
      elements: dict
      sample: [{"state": "NODE_FAIL", "exit_code": 0, "signal": 0, "node_list": "n2"}]
    steps:
      description: >-
        The job's steps from accounting, each with step_id (V(batch), V(extern), V(0)...), job_step
        (V(1234.batch)), name, state, flags, state_raw, state_known, cancelled_by, reason,
        exit_code, signal, node_list, nodes, start_time, end_time. Empty with O(steps=false).
      type: list
      elements: dict
    source:
      description: V(squeue) when the controller knows the job, V(sacct) when only accounting does.
      type: str
accounting:
  description: True when C(sacct) was read; false with O(accounting=false) or when the cluster keeps no accounting.
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

from ansible_collections.clusterops.slurm.plugins.module_utils._job_state import (
    parse_job_state,
    state_matches,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import (
    job_matches_states,
    read_jobs,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._options import (
    ArgumentSpec,
    option_value,
    parse_time_option,
    state_names_option,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SLURM_COMMAND_OPTIONS,
    run_module,
)


def read(module, cli):
    params = module.params
    start, end = [option_value(params, option, parse_time_option) for option in ("start", "end")]
    states = state_names_option(params, "states", state_matches, parse_job_state("PENDING"))
    jobs, used = read_jobs(cli, job_ids=params["job_ids"], names=params["names"], users=params["users"],
                           start=start, end=end, accounting=params["accounting"])
    if states:
        jobs = [j for j in jobs if job_matches_states(j, states)]
    if not params["steps"]:
        for job in jobs:
            job["steps"] = []
            for run in job["history"]:
                run["steps"] = []
    return dict(changed=False, jobs=jobs, accounting=used)


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            job_ids=dict(type="list", elements="str", default=[]),
            names=dict(type="list", elements="str", default=[]),
            users=dict(type="list", elements="str", default=[]),
            states=dict(type="list", elements="str", default=[]),
            start=dict(type="str"),
            end=dict(type="str"),
            accounting=dict(type="bool", default=True),
            steps=dict(type="bool", default=True),
        ),
    ).merge(SLURM_COMMAND_OPTIONS).module_kwargs())
    run_module(module, read)


if __name__ == "__main__":
    main()

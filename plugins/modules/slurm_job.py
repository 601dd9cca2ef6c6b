#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: slurm_job
short_description: Submit a Slurm batch job once, or cancel, requeue, hold or release it
version_added: 0.1.0
description:
  - V(present) submits a batch script with C(sbatch) unless a job with the same identity is
    already queued or running. A job's identity is its name (O(name)), its user (the user the
    task runs as, see O(user)) and, when O(key) is set, the key kept in its comment
    (C(clusterops-key=<key>)).
  - The identity counts as present while a job of it is in one of the states C(PENDING),
    C(CONFIGURING), C(RUNNING), C(SUSPENDED), C(STOPPED), C(RESIZING), C(SIGNALING), C(REQUEUED),
    C(REQUEUE_HOLD), C(REQUEUE_FED), C(SPECIAL_EXIT), C(RESV_DEL_HOLD), C(EXPEDITING) (Slurm
    25.11+, an expedited requeue in progress), C(COMPLETING) or C(STAGE_OUT). C(COMPLETING) is one
    of them on purpose - Slurm shows a job that it is requeueing (after a node failure, or
    C(scontrol requeue)) as C(COMPLETING) before it is C(PENDING) again, and a second copy must
    never be submitted in that window. A job that really ended leaves C(COMPLETING) within
    seconds; run the task again then. A held job (see V(released)) is present too.
  - A job of the identity (or O(job_id)) in a state this collection does not know (a word of a
    later Slurm release) is never acted on and no second copy is submitted next to it - the task
    fails naming the job and its state, for a human to look at.
  - When C(sbatch) fails in a way that leaves open whether C(slurmctld) took the job (C(Socket
    timed out on send/recv operation), C(Unable to contact slurm controller), O(command_timeout)
    reached), the module waits O(retry_delay) seconds and looks the identity up with C(squeue)
    before anything else. A new job of that identity is the one just submitted and is returned
    (RV(recovered)). Only when C(squeue) answers and shows no such job is C(sbatch) run again,
    at most O(submit_retries) more times. When C(squeue) cannot answer either, or its answer is
    not complete (an error on stderr, an output cut short), nothing is resubmitted and the task
    fails saying so.
  - V(absent) cancels (C(scancel)) the active jobs of the identity, or O(job_id); nothing to
    cancel is no change. A job already C(COMPLETING) is left to end.
  - V(requeued) requeues (C(scontrol requeue)) running jobs; a job already C(PENDING) is no
    change. With no active job, the newest finished job the controller still lists (for
    C(MinJobAge) seconds after it ended) is requeued, as Slurm allows for batch jobs.
  - V(held) holds (C(scontrol hold)) active jobs that are not held yet; V(released) releases
    (C(scontrol release)) held ones. A job is held when a user or admin held it (reason
    C(JobHeldUser), C(JobHeldAdmin)) and also when Slurm held it itself - reason C(launch failed
    requeued held) (a launch or prolog failure), C(job requeued in held state), C(job requeued in
    special exit state), C(JobHoldMaxRequeue), or the state C(REQUEUE_HOLD), C(SPECIAL_EXIT) or
    C(RESV_DEL_HOLD). Slurm holds a C(RUNNING) job too - it keeps running, and does not start
    again if it is requeued.
  - Every change is one command for all the jobs it concerns.
author:
  - clusterops.slurm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - clusterops.slurm.attributes
  - clusterops.slurm.attributes.IDEMPOTENT
  - clusterops.slurm.slurm_cli
  - clusterops.slurm.submit_retries
attributes:
  check_mode:
    support: full
    details: Reports the exact command it would run in RV(command) (for V(present) the whole
      C(sbatch) argument list) and changes nothing; only C(squeue) runs.
  diff_mode:
    support: none
options:
  state:
    description:
      - V(present) submits the job unless its identity is already active.
      - V(absent) cancels, V(requeued) requeues, V(held) holds, V(released) releases the jobs of
        the identity, or O(job_id).
    type: str
    choices: [present, absent, requeued, held, released]
    default: present
  name:
    description:
      - The job name (C(--job-name)), part of the identity. Required with O(state=present), and
        with the other states when O(job_id) is not given.
      - It cannot hold a comma (C(squeue --name) takes a comma-separated list).
    type: str
  user:
    description:
      - Whose jobs make the identity. Defaults to the user the task runs as, so with
        C(become_user=alice) the identity is alice's job of that name (C(squeue -u alice)).
      - With O(state=present) it must be that user - C(sbatch) submits as the user it runs as;
        use C(become) and C(become_user) to submit as someone else.
      - With the other states, another user's jobs can be named (as root or a Slurm operator).
    type: str
  key:
    description:
      - An extra identity key, kept in the job's comment as C(clusterops-key=<key>) (the
        O(comment), if any, follows after a space). Jobs of the same name and user but another
        key, or none, are other identities.
      - 'Letters, digits and these characters only: C(. _ : @ / + = -).'
    type: str
  job_id:
    description:
      - Act on this job instead of an identity (not with O(state=present)), e.g. V(1234),
        V(1234_7) (one array task) or V(1234+1) (one heterogeneous component).
      - With O(name), the job must also have that name.
    type: str
  script:
    description:
      - Absolute path of the batch script on the target. Mutually exclusive with O(script_content).
    type: path
  script_content:
    description:
      - The batch script itself, passed to C(sbatch) on standard input. It must start with C(#!).
    type: str
  partition:
    description: C(--partition).
    type: str
  nodes:
    description: C(--nodes), a count or a range (V(2), V(2-4)).
    type: str
  ntasks_per_node:
    description: C(--ntasks-per-node).
    type: int
  cpus_per_task:
    description: C(--cpus-per-task).
    type: int
  gres:
    description: C(--gres), e.g. V(gpu:h100:8).
    type: str
  gpus:
    description: C(--gpus) (per job), e.g. V(8) or V(h100:8).
    type: str
  gpus_per_node:
    description: C(--gpus-per-node).
    type: str
  time:
    description: C(--time), the time limit, e.g. V(2-00:00:00).
    type: str
  output:
    description:
      - C(--output), file pattern for the job's standard output (V(%j) is the job id). Without it
        Slurm writes C(slurm-<id>.out) into the job's working directory (O(chdir)).
    type: str
  error:
    description: C(--error).
    type: str
  dependency:
    description: C(--dependency), e.g. V(afterok:1234).
    type: str
  array:
    description: C(--array), e.g. V(0-15%4). RV(job_id) is then the array job id.
    type: str
  requeue:
    description:
      - V(true) passes C(--requeue), V(false) C(--no-requeue) (Slurm then does not requeue the job
        after a node failure). Not set, the cluster's C(JobRequeue) decides.
    type: bool
  signal:
    description: C(--signal), e.g. V(B:USR1@300) to warn the job 300 s before its time limit.
    type: str
  comment:
    description: C(--comment). With O(key) it follows the key after a space.
    type: str
  open_mode:
    description: C(--open-mode) for the output and error files.
    type: str
    choices: [append, truncate]
  environment:
    description:
      - Variables for the job. Their values are passed in C(sbatch)'s environment, never on its
        command line, so commas, spaces and V(=) in values are safe, and C(--export) names them
        (see O(export)).
    type: dict
  export:
    description:
      - C(--export). Not set, the job gets the task's whole environment plus O(environment)
        (V(ALL)). V(NONE) with O(environment) exports only those variables (and C(SLURM_*)).
    type: str
  chdir:
    description: C(--chdir), the job's working directory (on the compute nodes).
    type: str
  extra_args:
    description:
      - Further C(sbatch) arguments, one list item each, placed before the script, e.g.
        V([--exclusive, --mem=0]).
    type: list
    elements: str
    default: []
notes:
  - The identity is looked up with one C(squeue) call (C(-u <user> -n <name> --states=all)).
  - 'To submit as the owner of a run, use C(become: true) and C(become_user: <owner>) on the task:
    the module then runs as that user, C(sbatch) submits as that user and the identity is that
    user''s job. The Slurm client and its C(slurm.conf) must be usable by that user, and so must the
    Python interpreter Ansible runs the module with (one under C(/root) is not); where there is no
    C(sudo), C(become_method: su) works from root.'
  - The job inherits the environment of the task (C(--export=ALL)), except C(LC_ALL), which is
    the task's own; set O(export=NONE) for a clean one.
seealso:
  - module: clusterops.slurm.slurm_job_info
  - name: sbatch(1)
    description: Slurm's sbatch manual.
    link: https://slurm.schedmd.com/sbatch.html
  - name: scontrol(1)
    description: C(requeue), C(hold) and C(release).
    link: https://slurm.schedmd.com/scontrol.html
'''

EXAMPLES = r'''
- name: Submit the training run once (a second run of the play finds it and submits nothing)
  clusterops.slurm.slurm_job:
    name: llm-70b-pretrain
    key: run-2026-03-01
    script: /shared/runs/llm-70b/train.sbatch
    partition: train
    nodes: "16"
    ntasks_per_node: 8
    gpus_per_node: "8"
    time: "2-00:00:00"
    requeue: true
    signal: "B:USR1@600"
    output: /shared/runs/llm-70b/logs/%j.out
    environment:
      CHECKPOINT_DIR: /shared/runs/llm-70b/ckpt
  register: run

- name: Submit as the owner of the run
  clusterops.slurm.slurm_job:
    name: finetune-alice
    script_content: |
      #!/bin/bash
      srun python finetune.py
    chdir: /home/alice/finetune
  become: true
  become_user: alice

- name: Cancel the run (no change when nothing is queued or running)
  clusterops.slurm.slurm_job:
    name: llm-70b-pretrain
    key: run-2026-03-01
    state: absent

- name: Hold a queued job by id, then release it
  clusterops.slurm.slurm_job:
    job_id: "{{ run.job_id }}"
    state: "{{ item }}"
  loop: [held, released]
'''

RETURN = r'''
job_id:
  description:
    - The job submitted or found (the array job id for an array). With the other states, the
      one job acted on, if exactly one. V(null) in check mode when nothing exists yet.
  returned: success
  type: int
  sample: 60060368
cluster:
  description: The cluster C(sbatch) named (C(-M) / federation), else V(null).
  returned: success
  type: str
submitted:
  description: True when this task ran C(sbatch) and it created the job.
  returned: state is present
  type: bool
recovered:
  description: >-
    True when C(sbatch) failed (timeout) but C(squeue) then showed that Slurm had accepted the
    job: it was not submitted again.
  returned: state is present
  type: bool
attempts:
  description: How many times C(sbatch) ran.
  returned: state is present
  type: int
errors:
  description: >-
    What failed on the way and was overcome - C(sbatch) attempts that timed out, C(squeue) lookups
    that failed - in Slurm's words (also given as warnings).
  returned: state is present
  type: list
  elements: str
  sample: ["sbatch attempt 1: sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"]
command:
  description:
    - The command run, or in check mode or when nothing was needed the one that would have run,
      as an argument list. For V(present) the whole C(sbatch) command (the script of
      O(script_content) goes to its standard input); V(null) when another state had nothing to do.
  returned: success
  type: list
  elements: str
  sample: [/usr/bin/sbatch, --parsable, --job-name=llm-70b-pretrain, --partition=train, /shared/train.sbatch]
job:
  description:
    - The existing job that made O(state=present) a no-op, or the job found after a timed-out
      C(sbatch); same fields as the C(jobs) of M(clusterops.slurm.slurm_job_info) (from C(squeue),
      so without steps and history).
  returned: state is present
  type: dict
  sample: {"job_id": "4242", "job_id_raw": 4242, "name": "llm-70b-pretrain", "user": "alice",
           "state": "RUNNING", "flags": [], "state_raw": "RUNNING", "node_list": "n[1-2]"}
jobs:
  description: The jobs of the identity or O(job_id), as the controller listed them before any change.
  returned: success
  type: list
  elements: dict
job_ids:
  description: The ids acted on (or that would be in check mode), as passed to the command.
  returned: state is not present
  type: list
  elements: str
  sample: ["4242", "4250_3"]
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

import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterops.slurm.plugins.module_utils import _causes as causes
from ansible_collections.clusterops.slurm.plugins.module_utils._job_actions import (
    SUBMIT_RETRY_OPTIONS,
    ENV_NAME_RE,
    JOB_ACTIONS,
    KEY_RE,
    SubmitError,
    key_comment,
    matches_identity,
    plan_action,
    sbatch_environ,
    submission_id,
    submit,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._jobs import read_queue
from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_cli import (
    SLURM_COMMAND_OPTIONS,
    SlurmCommandError,
    effective_user,
    run_module,
)
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import job_action, submission
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure

_JOB_ID_RE = re.compile(r"^\d+(?:_\d+|\+\d+)?$")


def check_options(params, user, me):
    """Refuse what Slurm would take in another sense, before any call.

    Raises:
        TaskFailure: the option and why.
    """
    for option in ("name", "user"):
        # squeue --name/--user take comma-separated lists: "a,b" would look up a and b, never
        # find the job "a,b", and submit it again on every run.
        if params[option] is not None and ("," in params[option] or not params[option].strip()):
            raise TaskFailure("%s: %r cannot be looked up with squeue (empty, or holds a comma)"
                              % (option, params[option]))
    if params["key"] is not None and not KEY_RE.match(params["key"]):
        raise TaskFailure("key: only letters, digits and . _ : @ / + = - are allowed")
    for env_name in params["environment"] or {}:
        if not ENV_NAME_RE.match(env_name):
            raise TaskFailure("environment: %r is not a variable name" % env_name)
    if params["job_id"] is not None and not _JOB_ID_RE.match(params["job_id"]):
        raise TaskFailure("job_id: %r is not a job id (1234, 1234_7 or 1234+1)" % params["job_id"])
    if params["state"] == "present":
        if params["job_id"]:
            raise TaskFailure("job_id cannot be used with state=present: the identity is name, user and key")
        if user != me:
            raise TaskFailure("user %s: sbatch submits as the user the task runs as (%s); "
                              "use become_user: %s" % (user, me, user))
        if params["script"] and not os.path.isabs(params["script"]):
            raise TaskFailure("script: %s is not an absolute path" % params["script"])
        if params["script_content"] is not None and not params["script_content"].startswith("#!"):
            raise TaskFailure("script_content must start with #! and the interpreter, as sbatch requires")


def present(module, cli, user):
    params = module.params
    name, key = params["name"], params["key"]
    comment = key_comment(key, params["comment"])
    sbatch = submission(params, comment)
    command = cli.command(*sbatch)
    jobs = read_queue(cli, names=[name], users=[user])
    mine = [j for j in jobs if matches_identity(j, name, user, key)]
    active = [j for j in mine if j["active"]]
    result = dict(command=command, jobs=mine, submitted=False, recovered=False, attempts=0, errors=[])
    if active:
        job = active[0]
        return dict(result, changed=False, job_id=submission_id(job), cluster=job["cluster"], job=job)
    unknown = [j for j in mine if not j["state_known"]]
    if unknown:
        raise TaskFailure("not submitting: %s of this identity %s in a state this collection "
                          "does not know (%s; a later Slurm release?) and may still be active; "
                          "look at it with squeue" % (
                              ", ".join("job %s" % j["job_id"] for j in unknown),
                              "is" if len(unknown) == 1 else "are",
                              ", ".join(sorted(set(j["state_raw"] for j in unknown)))), **result)
    if module.check_mode:
        return dict(result, changed=True, job_id=None, cluster=None, job=None)
    data = params["script_content"]
    if data is not None and not data.endswith("\n"):
        data += "\n"
    identity = {"name": name, "user": user, "key": key}
    try:
        done = submit(cli, sbatch, identity, [j["job_id_raw"] for j in jobs], data=data,
                      environ=sbatch_environ(params["environment"]),
                      retries=max(params["submit_retries"], 0), delay=max(params["retry_delay"], 0))
    except SubmitError as exc:
        raise TaskFailure(exc.msg, maybe_accepted=exc.maybe_accepted, errors=exc.errors,
                          **(exc.exc.result() if exc.exc is not None else {"failed_cause": causes.SLURM_REFUSED}))
    for error in done["errors"]:
        module.warn(error)
    result.update(submitted=True, recovered=done["recovered"], attempts=done["attempts"],
                  errors=done["errors"])
    return dict(result, changed=True, job_id=done["job_id"], cluster=done["cluster"], job=done["job"])


def act(module, cli, user):
    params = module.params
    action, job_id, name = params["state"], params["job_id"], params["name"]

    def jobs_now():
        if job_id:
            return [j for j in read_queue(cli, job_ids=[job_id]) if name is None or j["name"] == name]
        return [j for j in read_queue(cli, names=[name], users=[user])
                if matches_identity(j, name, user, params["key"])]

    jobs = jobs_now()
    if not jobs and action != "absent":
        what = "job %s" % job_id if job_id else "a job named %s of user %s%s" % (
            name, user, " with key %s" % params["key"] if params["key"] else "")
        raise TaskFailure("the controller knows no %s (finished jobs are forgotten MinJobAge "
                          "seconds after they end)" % what, jobs=[])
    plan = plan_action(jobs, action, job_id)
    if plan["refused"]:
        raise TaskFailure("nothing was changed: %s" % "; ".join(
            "job %s %s" % item for item in sorted(plan["refused"].items())),
            refused=plan["refused"], jobs=jobs)
    targets = plan["targets"]
    result = dict(jobs=jobs, job_ids=targets, command=None,
                  job_id=int(targets[0]) if len(targets) == 1 and targets[0].isdigit() else None)
    if not targets:
        return dict(result, changed=False)
    call = job_action(action, targets)
    result["command"] = cli.command(*call)
    if not module.check_mode:
        try:
            cli.run(*call, what="%s %s" % (action, ",".join(targets)))
        except SlurmCommandError as exc:
            # The job may have ended or changed meanwhile: what matters is whether anything
            # is still left to do.
            again = plan_action(jobs_now(), action, job_id)
            if again["targets"] or again["refused"]:
                raise TaskFailure(exc.msg, jobs=jobs, job_ids=targets, **exc.result())
    return dict(result, changed=True)


def run(module, cli):
    params = module.params
    me = effective_user()
    user = params["user"] or me
    check_options(params, user, me)
    return (present if params["state"] == "present" else act)(module, cli, user)


def main():
    module = AnsibleModule(**ArgumentSpec(
        dict(
            state=dict(type="str", default="present", choices=["present"] + list(JOB_ACTIONS)),
            name=dict(type="str"),
            user=dict(type="str"),
            key=dict(type="str", no_log=False),
            job_id=dict(type="str"),
            script=dict(type="path"),
            script_content=dict(type="str"),
            partition=dict(type="str"),
            nodes=dict(type="str"),
            ntasks_per_node=dict(type="int"),
            cpus_per_task=dict(type="int"),
            gres=dict(type="str"),
            gpus=dict(type="str"),
            gpus_per_node=dict(type="str"),
            time=dict(type="str"),
            output=dict(type="str"),
            error=dict(type="str"),
            dependency=dict(type="str"),
            array=dict(type="str"),
            requeue=dict(type="bool"),
            signal=dict(type="str"),
            comment=dict(type="str"),
            open_mode=dict(type="str", choices=["append", "truncate"]),
            environment=dict(type="dict"),
            export=dict(type="str"),
            chdir=dict(type="str"),
            extra_args=dict(type="list", elements="str", default=[]),
        ),
        mutually_exclusive=[("script", "script_content")],
        required_if=[
            ("state", "present", ["name"]),
            ("state", "present", ["script", "script_content"], True),
        ],
        required_one_of=[("name", "job_id")],
    ).merge(SLURM_COMMAND_OPTIONS, SUBMIT_RETRY_OPTIONS).module_kwargs())
    run_module(module, run)


if __name__ == "__main__":
    main()

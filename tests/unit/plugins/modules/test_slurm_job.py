# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""slurm_job as data (community.general style): for each case, the module arguments and every
run_command call expected, with rc/stdout/stderr recorded from the real dev cluster
(tests/unit/fixtures/devcluster, dev/cluster/record-jobs.sh). squeue's answer to
``--name=X --user=root`` is the recorded ``squeue --states=all`` output cut down to X's records,
as squeue itself filters."""

from __future__ import annotations

import io
import json
import os

import pytest

from ansible.module_utils import basic
from ansible_collections.clusterops.slurm.tests.unit.plugins.modules.module_args import patch_module_args

from ansible_collections.clusterops.slurm.plugins.modules import slurm_job

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "devcluster")
US = "\x1f"
RS = "\x1e"
SQUEUE_FIELDS = ["JobID", "JobArrayID", "Name", "UserName", "State", "Reason", "exit_code", "NodeList",
                 "SubmitTime", "StartTime", "EndTime", "RestartCnt", "Partition", "Cluster", "Comment"]
SQUEUE = ["/usr/bin/squeue", "--noheader", "--states=all",
          "--Format=" + ",".join(f + ":" + US for f in SQUEUE_FIELDS[:-1]) + ",Comment:" + RS]
SBATCH = "/usr/bin/sbatch"
SCRIPT = "#!/bin/sh\nsleep 600\n"


def recorded(name):
    """A recorded output: ``devcluster/<name>`` (22.05), or ``slurm-24.11/...`` given as such."""
    path = os.path.join(FIXTURES, "..", name) if name.startswith("slurm-") else os.path.join(FIXTURES, name)
    with io.open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def with_field(squeue_text, field, value):
    """A recorded squeue answer with one field of every record set to ``value``: for what no
    release can record yet (a state word of a later release) or the dev clusters did not record
    (noted where used). Slurm prints these words in exactly that field."""
    index = SQUEUE_FIELDS.index(field)
    records = []
    for record in [r for r in squeue_text.split(RS + "\n") if r]:
        fields = record.split(US)
        fields[index] = value
        records.append(US.join(fields))
    return "".join(r + RS + "\n" for r in records)


def answer_2411(index):
    """(rc, stdout, stderr) of answer ``index`` of slurm-24.11/raw-job-answers.txt (2: sbatch,
    3: sbatch --parsable, 4: sbatch -p nosuch); the file does not separate the two streams: a
    failure's text is taken as stderr, where sbatch writes its errors."""
    answers, lines = [], []
    for line in recorded("slurm-24.11/raw-job-answers.txt").splitlines():
        if line.startswith("rc=") and line[3:].isdigit():
            text = "\n".join(lines) + "\n"
            answers.append((int(line[3:]), text, "") if line == "rc=0" else (int(line[3:]), "", text))
            lines = []
        else:
            lines.append(line)
    return answers[index]


NF_2411 = "slurm-24.11/10-after-node-fail/squeue-product.out"


def captured(name):
    """(rc, stdout, stderr) of a recorded ``# command: / # rc: / # stdout: / # stderr:`` file;
    lines the recording script added after stderr (two-space indented) are not output."""
    text = recorded(name)
    head, dummy, rest = text.partition("# stdout:\n")
    stdout, dummy, stderr = rest.partition("# stderr:\n")
    stderr = "".join(line for line in stderr.splitlines(True) if not line.startswith("  "))
    return int(head.split("# rc: ", 1)[1].splitlines()[0]), stdout, stderr


def queue(name, job_name=None):
    """A recorded squeue output, only the records of ``job_name`` (all when None)."""
    records = [r for r in recorded(name).split(RS + "\n") if r]
    if job_name is not None:
        records = [r for r in records if r.split(US)[2] == job_name]
    return "".join(r + RS + "\n" for r in records)


def lookup(job_name, user="root"):
    return SQUEUE + ["--name=" + job_name, "--user=" + user]


def sbatch(job_name, *extra):
    return [SBATCH, "--parsable", "--job-name=" + job_name] + list(extra)


def call(cmd, result):
    rc, out, err = result
    return (cmd, rc, out, err)


EMPTY = (0, "", "")
# the reason slurmctld writes after a launch or prolog failure (job_mgr.c; recorded on 26.05 by
# dev/cluster/record-fixtures.sh), in the recorded 24.11 PENDING record of nsl-nf
HELD_BY_SLURM = with_field(queue(NF_2411, "nsl-nf"), "Reason", "launch failed requeued held")

CASES = [
    dict(id="nothing of that identity: sbatch once, the id from --parsable",
         args={"name": "rec-new", "script_content": SCRIPT, "output": "/dev/null"},
         calls=[call(lookup("rec-new"), EMPTY),
                call(sbatch("rec-new", "--output=/dev/null"), captured("sbatch_parsable.txt"))],
         changed=True, job_id=35, submitted=True, recovered=False),
    dict(id="the identity runs: nothing submitted, its id returned",
         args={"name": "rec-run", "script_content": SCRIPT},
         calls=[call(lookup("rec-run"), (0, queue("squeue_states.txt", "rec-run"), ""))],
         changed=False, job_id=45, submitted=False),
    dict(id="held job of the identity: present",
         args={"name": "rec-held", "script_content": SCRIPT},
         calls=[call(lookup("rec-held"), (0, queue("squeue_states.txt", "rec-held"), ""))],
         changed=False, job_id=46),
    dict(id="pending array (one line for its tasks): its array job id",
         args={"name": "rec-array", "script_content": SCRIPT},
         calls=[call(lookup("rec-array"), (0, queue("squeue_states.txt", "rec-array"), ""))],
         changed=False, job_id=47),
    dict(id="Slurm requeued it after NODE_FAIL (PENDING): no second copy",
         args={"name": "rec-node-fail", "script_content": SCRIPT},
         calls=[call(lookup("rec-node-fail"), (0, queue("squeue_node_fail_requeued.txt", "rec-node-fail"), ""))],
         changed=False, job_id=57),
    dict(id="still COMPLETING on the healthy node while Slurm requeues it: no second copy",
         args={"name": "rec-node-fail-2n", "script_content": SCRIPT},
         calls=[call(lookup("rec-node-fail-2n"),
                     (0, queue("squeue_node_fail_completing.txt", "rec-node-fail-2n"), ""))],
         changed=False, job_id=58),
    dict(id="only finished jobs of the identity: submitted",
         args={"name": "rec-done", "script": "/shared/train.sbatch"},
         calls=[call(lookup("rec-done"), (0, queue("squeue_states.txt", "rec-done"), "")),
                call(sbatch("rec-done", "/shared/train.sbatch"), captured("sbatch_plain.txt"))],
         changed=True, job_id=34, submitted=True),
    dict(id="another key is another identity: submitted with the key in the comment",
         args={"name": "rec-run", "key": "run-7", "comment": "nightly", "script_content": SCRIPT},
         calls=[call(lookup("rec-run"), (0, queue("squeue_states.txt", "rec-run"), "")),
                call(sbatch("rec-run", "--comment=clusterops-key=run-7 nightly"),
                     captured("sbatch_parsable_on_cluster.txt"))],
         changed=True, job_id=37, cluster="devcluster"),
    dict(id="check mode: squeue only, the exact sbatch command reported",
         args={"name": "rec-new", "script": "/shared/train.sbatch", "partition": "train", "nodes": "2",
               "requeue": True, "_ansible_check_mode": True},
         calls=[call(lookup("rec-new"), EMPTY)],
         changed=True, job_id=None, submitted=False,
         command=sbatch("rec-new", "--partition=train", "--nodes=2", "--requeue", "/shared/train.sbatch")),
    dict(id="sbatch timed out but Slurm had taken the job: found by identity, never sent twice",
         args={"name": "rec-lost-answer", "script_content": SCRIPT, "retry_delay": 0},
         calls=[call(lookup("rec-lost-answer"), EMPTY),
                call(sbatch("rec-lost-answer"), captured("sbatch_timeout_accepted.txt")),
                call(lookup("rec-lost-answer"), (0, queue("squeue_states.txt", "rec-lost-answer"), ""))],
         changed=True, job_id=39, submitted=True, recovered=True, attempts=1),
    dict(id="sbatch timed out and squeue shows no job: submitted again, once",
         args={"name": "rec-new", "script_content": SCRIPT, "retry_delay": 0},
         calls=[call(lookup("rec-new"), EMPTY),
                call(sbatch("rec-new"), captured("sbatch_timeout_accepted.txt")),
                call(lookup("rec-new"), EMPTY),
                call(sbatch("rec-new"), captured("sbatch_parsable.txt"))],
         changed=True, job_id=35, submitted=True, recovered=False, attempts=2),
    dict(id="a finished job of the identity listed before sbatch is not taken for the new one",
         args={"name": "rec-done", "script_content": SCRIPT, "retry_delay": 0},
         calls=[call(lookup("rec-done"), (0, queue("squeue_states.txt", "rec-done"), "")),
                call(sbatch("rec-done"), captured("sbatch_connect_failure.txt")),
                call(lookup("rec-done"), (0, queue("squeue_states.txt", "rec-done"), "")),
                call(sbatch("rec-done"), captured("sbatch_parsable.txt"))],
         changed=True, job_id=35, recovered=False, attempts=2),
    dict(id="sbatch timed out and squeue cannot answer: nothing resubmitted, the task fails",
         args={"name": "rec-new", "script_content": SCRIPT, "retry_delay": 0, "submit_retries": 2},
         calls=[call(lookup("rec-new"), EMPTY),
                call(sbatch("rec-new"), captured("sbatch_connect_failure.txt")),
                call(lookup("rec-new"), captured("squeue_connect_failure.txt")),
                call(lookup("rec-new"), captured("squeue_connect_failure.txt")),
                call(lookup("rec-new"), captured("squeue_connect_failure.txt"))],
         failed=True, maybe_accepted=True,
         msg_contains="squeue could not tell whether Slurm accepted the job; it was NOT submitted again"),
    dict(id="sbatch timed out and squeue's answers are cut short: nothing resubmitted",
         args={"name": "rec-lost-answer", "script_content": SCRIPT, "retry_delay": 0, "submit_retries": 1},
         calls=[call(lookup("rec-lost-answer"), EMPTY),
                call(sbatch("rec-lost-answer"), captured("sbatch_timeout_accepted.txt")),
                call(lookup("rec-lost-answer"), (0, queue("squeue_states.txt", "rec-lost-answer")[:-9], "")),
                call(lookup("rec-lost-answer"), (0, queue("squeue_states.txt", "rec-lost-answer")[:-9], ""))],
         failed=True, maybe_accepted=True,
         msg_contains="squeue could not tell whether Slurm accepted the job; it was NOT submitted again"),
    dict(id="timeouts every time: gives up after submit_retries, squeue said no job each time",
         args={"name": "rec-new", "script_content": SCRIPT, "retry_delay": 0, "submit_retries": 1},
         calls=[call(lookup("rec-new"), EMPTY),
                call(sbatch("rec-new"), captured("sbatch_timeout_accepted.txt")),
                call(lookup("rec-new"), EMPTY),
                call(sbatch("rec-new"), captured("sbatch_timeout_accepted.txt")),
                call(lookup("rec-new"), EMPTY)],
         failed=True, maybe_accepted=False, msg_contains="sbatch failed 2 times"),
    dict(id="Slurm refuses the job (invalid partition): no retry",
         args={"name": "rec-new", "script_content": SCRIPT, "partition": "nosuch"},
         calls=[call(lookup("rec-new"), EMPTY),
                call(sbatch("rec-new", "--partition=nosuch"), captured("sbatch_invalid_partition.txt"))],
         failed=True, maybe_accepted=False,
         msg_contains="sbatch failed (rc=1) while trying to submit the job: sbatch: error: invalid partition"),
    dict(id="squeue cannot answer before anything: nothing submitted",
         args={"name": "rec-new", "script_content": SCRIPT},
         calls=[call(lookup("rec-new"), captured("squeue_connect_failure.txt"))],
         failed=True, msg_contains="squeue failed (rc=1) while trying to read jobs"),
    dict(id="absent: the running job is cancelled",
         args={"name": "rec-run", "state": "absent"},
         calls=[call(lookup("rec-run"), (0, queue("squeue_states.txt", "rec-run"), "")),
                call(["/usr/bin/scancel", "45"], captured("scancel_two.txt"))],
         changed=True, job_ids=["45"], job_id=45),
    dict(id="absent: an array is cancelled once, by its array id (pending line and running tasks)",
         args={"name": "rec-array", "state": "absent"},
         calls=[call(lookup("rec-array"), (0, queue("squeue_states.txt", "rec-array"), "")),
                call(["/usr/bin/scancel", "47"], captured("scancel_two.txt"))],
         changed=True, job_ids=["47"]),
    dict(id="absent: already cancelled: no scancel",
         args={"name": "rec-cancel", "state": "absent"},
         calls=[call(lookup("rec-cancel"), (0, queue("squeue_states.txt", "rec-cancel"), ""))],
         changed=False, job_ids=[], command=None),
    dict(id="absent by id the controller forgot: no change",
         args={"job_id": "999999", "state": "absent"},
         calls=[call(SQUEUE + ["--jobs=999999"], captured("squeue_unknown_job.txt"))],
         changed=False, job_ids=[]),
    dict(id="held by id the controller forgot: fails",
         args={"job_id": "999999", "state": "held"},
         calls=[call(SQUEUE + ["--jobs=999999"], captured("squeue_unknown_job.txt"))],
         failed=True, msg_contains="the controller knows no job 999999"),
    dict(id="held: a running job is held too (rc 0 recorded, it keeps running)",
         args={"name": "rec-run", "state": "held"},
         calls=[call(lookup("rec-run"), (0, queue("squeue_states.txt", "rec-run"), "")),
                call(["/usr/bin/scontrol", "hold", "45"], captured("scontrol_hold_running.txt"))],
         changed=True, job_ids=["45"]),
    dict(id="held: already held (JobHeldAdmin): nothing runs",
         args={"name": "rec-run", "state": "held"},
         calls=[call(lookup("rec-run"), (0, queue("squeue_held_running.txt", "rec-run"), ""))],
         changed=False, job_ids=[]),
    dict(id="released: the held job",
         args={"name": "rec-held", "state": "released"},
         calls=[call(lookup("rec-held"), (0, queue("squeue_states.txt", "rec-held"), "")),
                call(["/usr/bin/scontrol", "release", "46"], captured("scontrol_release_held.txt"))],
         changed=True, job_ids=["46"]),
    dict(id="requeued: the running job",
         args={"name": "rec-run", "state": "requeued"},
         calls=[call(lookup("rec-run"), (0, queue("squeue_states.txt", "rec-run"), "")),
                call(["/usr/bin/scontrol", "requeue", "45"], captured("scontrol_requeue_running.txt"))],
         changed=True, job_ids=["45"]),
    dict(id="requeued: PENDING again after scontrol requeue: nothing runs",
         args={"name": "rec-run", "state": "requeued"},
         calls=[call(lookup("rec-run"), (0, queue("squeue_after_actions.txt", "rec-run"), ""))],
         changed=False, job_ids=[]),
    dict(id="requeued: no active job, the newest finished one is requeued (Slurm allows it)",
         args={"name": "rec-fail", "state": "requeued"},
         calls=[call(lookup("rec-fail"), (0, queue("squeue_states.txt", "rec-fail"), "")),
                call(["/usr/bin/scontrol", "requeue", "42"], captured("scontrol_requeue_finished.txt"))],
         changed=True, job_ids=["42"]),
    dict(id="requeued by id: its own id is passed on",
         args={"job_id": "47_1", "state": "requeued"},
         calls=[call(SQUEUE + ["--jobs=47_1"], (0, queue("squeue_states.txt", "rec-array").split(RS + "\n")[1] + RS + "\n", "")),
                call(["/usr/bin/scontrol", "requeue", "47_1"], captured("scontrol_requeue_running.txt"))],
         changed=True, job_ids=["47_1"], job_id=None),
    dict(id="requeue while COMPLETING is refused, nothing runs",
         args={"name": "rec-node-fail-2n", "state": "requeued"},
         calls=[call(lookup("rec-node-fail-2n"),
                     (0, queue("squeue_node_fail_completing.txt", "rec-node-fail-2n"), ""))],
         failed=True, msg_contains="job 58 is COMPLETING"),
    # Slurm 24.11.5 (slurm-24.11/, recorded in podman)
    dict(id="24.11: the identity runs (key in the comment): nothing submitted",
         args={"name": "nsl-train", "key": "k1", "script_content": SCRIPT},
         calls=[call(lookup("nsl-train"), (0, queue("slurm-24.11/08-jobs/squeue-product.out", "nsl-train"), ""))],
         changed=False, job_id=1, submitted=False),
    dict(id="24.11: nothing of that identity: sbatch --parsable answered 7",
         args={"name": "nsl-new", "script_content": SCRIPT},
         calls=[call(lookup("nsl-new"), EMPTY), call(sbatch("nsl-new"), answer_2411(3))],
         changed=True, job_id=7, submitted=True),
    dict(id="24.11: Slurm refuses the job (invalid partition): no retry",
         args={"name": "nsl-new", "script_content": SCRIPT, "partition": "nosuch"},
         calls=[call(lookup("nsl-new"), EMPTY), call(sbatch("nsl-new", "--partition=nosuch"), answer_2411(4))],
         failed=True, maybe_accepted=False, msg_contains="sbatch: error: invalid partition specified: nosuch"),
    dict(id="24.11: Slurm requeued it after NODE_FAIL (PENDING, BeginTime): no second copy",
         args={"name": "nsl-nf", "script_content": SCRIPT},
         calls=[call(lookup("nsl-nf"), (0, queue(NF_2411, "nsl-nf"), ""))],
         changed=False, job_id=8),
    dict(id="released: a job Slurm held itself after a launch failure is released",
         args={"name": "nsl-nf", "state": "released"},
         calls=[call(lookup("nsl-nf"), (0, HELD_BY_SLURM, "")),
                call(["/usr/bin/scontrol", "release", "8"], captured("scontrol_release_held.txt"))],
         changed=True, job_ids=["8"], job_id=8),
    dict(id="held: a job Slurm held itself is held already: nothing runs",
         args={"name": "nsl-nf", "state": "held"},
         calls=[call(lookup("nsl-nf"), (0, HELD_BY_SLURM, ""))],
         changed=False, job_ids=[]),
    dict(id="present: a job Slurm held itself counts as present (release it, never a copy)",
         args={"name": "nsl-nf", "script_content": SCRIPT},
         calls=[call(lookup("nsl-nf"), (0, HELD_BY_SLURM, ""))],
         changed=False, job_id=8, submitted=False),
    # a state word of a later release (none can be recorded yet), in the recorded 24.11 record
    dict(id="present: a job in a state of a later release: no copy, the task fails",
         args={"name": "nsl-nf", "script_content": SCRIPT},
         calls=[call(lookup("nsl-nf"), (0, with_field(queue(NF_2411, "nsl-nf"), "State", "WARPING"), ""))],
         failed=True, msg_contains="not submitting: job 8 of this identity is in a state this "
                                   "collection does not know (WARPING"),
    dict(id="absent: a job in a state of a later release is not touched, the task fails",
         args={"name": "nsl-nf", "state": "absent"},
         calls=[call(lookup("nsl-nf"), (0, with_field(queue(NF_2411, "nsl-nf"), "State", "WARPING"), ""))],
         failed=True, msg_contains="job 8 is in state WARPING, which this collection does not know"),
    dict(id="released: a job in a state of a later release is not touched either",
         args={"job_id": "8", "state": "released"},
         calls=[call(SQUEUE + ["--jobs=8"], (0, with_field(queue(NF_2411, "nsl-nf"), "State", "WARPING"), ""))],
         failed=True, msg_contains="nothing was changed"),
    dict(id="another user's jobs by name (as root)",
         args={"name": "rec-alice", "user": "clusterops-alice", "state": "absent"},
         calls=[call(lookup("rec-alice", "clusterops-alice"), (0, queue("squeue_states.txt", "rec-alice"), ""))],
         changed=False, job_ids=[]),
    dict(id="present as another user: become_user is the way",
         args={"name": "x", "user": "clusterops-alice", "script_content": SCRIPT},
         calls=[], failed=True, msg_contains="use become_user: clusterops-alice"),
    dict(id="a name with a comma could never be found again: refused before any call",
         args={"name": "train,eval", "script_content": SCRIPT},
         calls=[], failed=True, msg_contains="cannot be looked up with squeue"),
    dict(id="a script_content that sbatch would refuse fails before any call",
         args={"name": "x", "script_content": "sleep 1\n"},
         calls=[], failed=True, msg_contains="script_content must start with #!"),
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_slurm_job(case, run_module, monkeypatch):
    def check_call(argv, kwargs):
        env = kwargs.get("environ_update") or {}
        if argv[0].endswith("squeue"):
            assert env.get("SLURM_TIME_FORMAT") == "%s"
        if argv[0].endswith("sbatch"):
            assert "SLURM_TIME_FORMAT" not in env   # would reach the job through --export=ALL
            if case["args"].get("script_content"):
                assert kwargs.get("data", "").startswith("#!")

    monkeypatch.setattr(slurm_job, "effective_user", lambda: "root")
    result = run_module(slurm_job, case["args"], case["calls"], on_call=check_call)
    assert bool(result.get("failed")) is case.get("failed", False), result
    assert result.get("changed", False) is case.get("changed", False)
    for key in ("job_id", "submitted", "recovered", "attempts", "job_ids", "command", "cluster",
                "maybe_accepted"):
        if key in case:
            assert result[key] == case[key], key
    if "msg_contains" in case:
        assert case["msg_contains"] in result["msg"]
    if case["calls"]:
        assert result["commands"] == [c[0] for c in case["calls"]]


def test_environment_goes_through_sbatch_environment(monkeypatch, capsys):
    """Values travel in sbatch's environment, --export names them; the script on stdin."""
    calls = []

    def run_command(self, args, **kwargs):
        calls.append((args, kwargs))
        if args[0].endswith("squeue"):
            return 0, "", ""
        return captured("sbatch_stdin_script.txt")

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)
    monkeypatch.setattr(slurm_job, "effective_user", lambda: "root")
    monkeypatch.delenv("LC_ALL", raising=False)
    args = {"name": "rec-stdin", "script_content": "#!/bin/sh\ntrue", "export": "NONE",
            "environment": {"RUN_ARGS": "--lr=3e-4, --seed=1", "CKPT": "/shared/ckpt"},
            "command_timeout": 0}
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            slurm_job.main()
    result = json.loads(capsys.readouterr().out)
    assert result["changed"] and result["job_id"] == 38
    sbatch_args, kwargs = calls[1]
    assert sbatch_args == [SBATCH, "--parsable", "--job-name=rec-stdin", "--export=CKPT,RUN_ARGS"]
    assert kwargs["data"] == "#!/bin/sh\ntrue\n"
    env = kwargs["environ_update"]
    assert env["RUN_ARGS"] == "--lr=3e-4, --seed=1" and env["CKPT"] == "/shared/ckpt"
    assert env["LC_ALL"] == ""   # not the command layer's C: the job would inherit it

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The hang watchdog's evidence script (training_evidence.EVIDENCE_SCRIPT) on this machine, against
real processes: which processes it picks (the job's ranks on this node) and how it chooses between
py-spy and the SIGUSR2 fallback. No Slurm: the script is what ``srun --overlap`` runs on each node,
given a job id and the py-spy command; here it runs under bash directly, with "ranks" that are
Python processes carrying that job id and a RANK in their environment, as torchrun's workers do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import evidence as training_evidence

#: A rank: faulthandler on SIGUSR2 (as the reference trainer), then blocked in stuck_here().
RANK_PROGRAM = r"""
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGUSR2, all_threads=True)
def stuck_here():
    print("ready", flush=True)
    while True:
        time.sleep(0.2)
stuck_here()
"""

PY_SPY = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")


@pytest.fixture()
def ranks(tmp_path):
    """Start processes as ranks of a job: ``start(rank, node=None, job=JOB)`` -> (proc, stderr path)."""
    job = str(900000000 + os.getpid())  # a job id no real process here carries
    procs = []

    def start(rank, node=None, job_id=job):
        env = dict(os.environ, SLURM_JOB_ID=job_id, RANK=str(rank))
        env.pop("SLURMD_NODENAME", None)
        if node:
            env["SLURMD_NODENAME"] = node
        err = tmp_path / ("rank%s-%s.err" % (rank, len(procs)))
        proc = subprocess.Popen([sys.executable, "-c", RANK_PROGRAM], env=env, stdout=subprocess.PIPE,
                                stderr=open(str(err), "w"), universal_newlines=True)
        procs.append(proc)
        assert proc.stdout.readline().strip() == "ready"
        return proc, err

    start.job = job
    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def evidence(job, py_spy, node="n1"):
    """Run the script as srun would on node ``node``; (rc, stdout + stderr)."""
    env = dict(os.environ, SLURMD_NODENAME=node)
    proc = subprocess.run(["bash", "-c", training_evidence.EVIDENCE_SCRIPT, "clusterops-evidence", job, py_spy],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=90, check=False)
    return proc.returncode, proc.stdout


def dumped(err, timeout=10.0):
    """The faulthandler dump the process wrote to its stderr ('' when none came)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = err.read_text()
        if "stuck_here" in text:
            return text
        time.sleep(0.1)
    return err.read_text()


def test_without_py_spy_each_rank_gets_sigusr2_and_dumps_its_stacks(ranks, tmp_path):
    one, err1 = ranks(0)
    two, err2 = ranks(1, node="n1")
    missing = str(tmp_path / "no-such-dir" / "py-spy")
    rc, out = evidence(ranks.job, missing)
    assert rc == 0, out
    for rank, proc in ((0, one), (1, two)):
        assert "=== node n1 rank %d pid %d: py-spy failed; SIGUSR2" % (rank, proc.pid) in out, out
    assert "=== node n1: 2 rank(s)" in out, out
    for err in (err1, err2):
        text = dumped(err)
        assert "in stuck_here" in text, text  # faulthandler: 'File "<string>", line 6 in stuck_here'
    assert one.poll() is None and two.poll() is None, "SIGUSR2 ended a rank"


@pytest.mark.skipif(PY_SPY is None, reason="py-spy is not installed (requirements-test.txt pins it)")
def test_with_py_spy_the_stacks_come_from_py_spy_and_no_rank_is_signalled(ranks):
    one, err = ranks(0)
    rc, out = evidence(ranks.job, PY_SPY)
    assert rc == 0, out
    if "py-spy failed" in out and "ptrace" in out.lower():
        pytest.skip("py-spy may not attach here (ptrace): %s" % out[-300:])
    assert "=== node n1 rank 0 pid %d: py-spy dump" % one.pid in out, out
    assert "stuck_here" in out and "py-spy failed" not in out, out
    time.sleep(1)
    assert "stuck_here" not in err.read_text(), "py-spy worked, yet the rank got SIGUSR2"


def test_only_the_jobs_ranks_on_this_node_are_touched(ranks, tmp_path):
    mine, err_mine = ranks(0, node="n1")
    elsewhere, err_elsewhere = ranks(1, node="n2")  # the same job's rank on another node
    other_job, err_other = ranks(0, job_id=str(int(ranks.job) + 1))
    rc, out = evidence(ranks.job, str(tmp_path / "missing-py-spy"))
    assert rc == 0, out
    assert "pid %d:" % mine.pid in out and "=== node n1: 1 rank(s)" in out, out
    assert "pid %d:" % elsewhere.pid not in out and "pid %d:" % other_job.pid not in out, out
    assert "in stuck_here" in dumped(err_mine)
    time.sleep(1)
    assert "stuck_here" not in err_elsewhere.read_text() and "stuck_here" not in err_other.read_text()


@pytest.mark.parametrize("what, text, expected", [
    ("the interleaving seen on the dev cluster (22.05): task 0's header, then all of task 1, then task 0's stacks",
     "0: === node n1 rank 1 pid 111: py-spy dump\n"
     "1: === node n2 rank 0 pid 81: py-spy dump\n"
     "1: Thread 81 (idle): \"MainThread\"\n"
     "1:     all_reduce (torch/distributed/distributed_c10d.py:3252)\n"
     "1: === node n2: 1 rank(s)\n"
     "0: Thread 111 (idle): \"MainThread\"\n"
     "0:     injected_hang (reference_trainer.py:441)\n"
     "0: === node n1: 1 rank(s)\n",
     "=== node n1 rank 1 pid 111: py-spy dump\n"
     "Thread 111 (idle): \"MainThread\"\n"
     "    injected_hang (reference_trainer.py:441)\n"
     "=== node n1: 1 rank(s)\n"
     "=== node n2 rank 0 pid 81: py-spy dump\n"
     "Thread 81 (idle): \"MainThread\"\n"
     "    all_reduce (torch/distributed/distributed_c10d.py:3252)\n"
     "=== node n2: 1 rank(s)"),
    ("labels padded to the widest task number; task 10 after task 2, not before it",
     "10: ten\n 2: two\n 0: zero\n10: ten again\n", "zero\ntwo\nten\nten again"),
    ("an empty line of a task keeps its place", "0: a\n0:\n0: b\n", "a\n\nb"),
    ("srun's own lines (no label) come first", "1: x\nsrun: error: something\n0: y\n",
     "srun: error: something\ny\nx"),
    ("nothing", "", ""),
])
def test_group_by_task(what, text, expected):
    assert training_evidence.group_by_task(text) == expected, what

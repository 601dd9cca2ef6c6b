# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Slurm command forms (_slurm_commands): each form's argument list, and that no other file
of plugins/ builds a Slurm argument list itself."""

from __future__ import annotations

import ast
import os

import pytest

from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import (
    MAX_NODES_ARG,
    REC_END,
    SEP,
    accounting,
    export_value,
    job_action,
    node_change,
    node_events,
    nodes_json,
    nodes_text,
    queue,
    resubmission,
    stack_collection,
    submission,
    version,
)

PLUGINS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins")
SLURM_COMMANDS = frozenset(("sinfo", "scontrol", "squeue", "sacct", "sacctmgr", "sbatch", "scancel", "srun",
                            "salloc", "strigger", "sdiag", "sstat", "sprio", "sshare", "sreport"))
FORMS = os.path.join("module_utils", "_slurm_commands.py")


def literal_slurm_calls(path):
    """(line, call) of each call in ``path`` whose first argument is a Slurm command's name as a
    string literal, e.g. ``cli.run("squeue", [...])``: an argument list built outside the table."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value in SLURM_COMMANDS and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("run", "command", "run_json"):
            found.append((node.lineno, ast.unparse(node)[:80]))
    return found


def test_no_argument_list_outside_the_table():
    offenders = []
    for folder, dummy, files in os.walk(PLUGINS):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith(".py") and not path.endswith(FORMS):
                offenders += ["%s:%d: %s" % (os.path.relpath(path, PLUGINS), line, call)
                              for line, call in literal_slurm_calls(path)]
    assert offenders == []


def test_the_check_sees_a_literal_call(tmp_path):
    path = tmp_path / "reader.py"
    path.write_text('def f(cli):\n    return cli.run("squeue", ["-h", "-j", "5", "-o", "%T"], check=False)\n')
    assert [line for line, dummy in literal_slurm_calls(str(path))] == [2]


def test_reads():
    assert version() == ("sinfo", ["--version"])
    fields = ("%N", "%P", "%T", "%c", "%m", "%G", "%f", "%u", "%H", "%E")
    assert nodes_text() == ("sinfo", ["-N", "-h", "-o", SEP.join(fields)])
    assert nodes_json((22, 5, 8)) == ("sinfo", ["--json"])
    assert nodes_json((23, 2, 0)) == nodes_json((26, 5, 5)) == ("scontrol", ["show", "nodes", "--json"])


@pytest.mark.parametrize("args, expected", [
    (("drain", "n[1-2]", "gpu lost"), ["update", "NodeName=n[1-2]", "State=DRAIN", "Reason=gpu lost"]),
    (("resume", "n1", "ignored"), ["update", "NodeName=n1", "State=RESUME"]),
    (("reason", "n1", "new words"), ["update", "NodeName=n1", "Reason=new words"]),
    (("reboot", "n[1-4]", "clusterops: kill task failed", True, "resume"),
     ["reboot", "ASAP", "nextstate=RESUME", "reason=clusterops: kill task failed", "n[1-4]"]),
    (("reboot", "n1"), ["reboot", "n1"]),
    (("cancel_reboot", "n1"), ["cancel_reboot", "n1"]),
])
def test_node_change(args, expected):
    assert node_change(*args) == ("scontrol", expected)


def test_stack_collection_runs_one_task_per_node_inside_the_allocation():
    name, args = stack_collection(42, 3, "echo $1", ["label", "42"])
    assert name == "srun" and args[:6] == ["--overlap", "--jobid=42", "--nodes=3", "--ntasks=3",
                                           "--ntasks-per-node=1", "--immediate=30"]
    assert args[-5:] == ["bash", "-c", "echo $1", "label", "42"]


def test_args_never_fixed_width():
    name, args = queue(job_ids=["5", "6_1"], names=["a"], users=["alice"])
    assert name == "squeue"
    assert args[:2] == ["--noheader", "--states=all"]
    assert args[2].startswith("--Format=JobID:" + SEP + ",JobArrayID:" + SEP)
    assert args[2].endswith("Comment:" + REC_END)
    assert args[3:] == ["--jobs=5,6_1", "--name=a", "--user=alice"]
    name, args = accounting(names=["a"])
    assert name == "sacct"
    assert "--parsable2" in args and "--delimiter=" + SEP in args and "--duplicates" in args
    assert "--allusers" in args
    assert accounting(users=["bob"])[1][-1] == "--user=bob"


@pytest.mark.parametrize("export, environment, expected", [
    (None, None, None),
    ("NONE", None, "NONE"),
    (None, {"B": "1", "A": "x,y=z"}, "ALL"),
    ("ALL", {"A": "1"}, "ALL"),
    ("NONE", {"B": "1", "A": "2"}, "A,B"),
    ("HOME,PATH", {"A": "1"}, "HOME,PATH,A"),
])
def test_export_value(export, environment, expected):
    assert export_value(export, environment) == expected


def test_submission_every_option():
    params = dict(name="train", partition="gpu", nodes="2-4", ntasks_per_node=8, cpus_per_task=6,
                  gres="gpu:h100:8", gpus="16", gpus_per_node="8", time="1-00:00:00",
                  output="/tmp/o-%j.out", error="/tmp/e-%j.err", dependency="afterok:1",
                  array="0-15%4", requeue=False, signal="B:USR1@300", open_mode="append",
                  chdir="/scratch/run", export=None, environment={"A": "a,b"},
                  extra_args=["--exclusive", "--mem=0"], script="/shared/train.sbatch")
    assert submission(params, "clusterops-key=k note") == ("sbatch", [
        "--parsable", "--job-name=train", "--partition=gpu", "--nodes=2-4", "--ntasks-per-node=8",
        "--cpus-per-task=6", "--gres=gpu:h100:8", "--gpus=16", "--gpus-per-node=8",
        "--time=1-00:00:00", "--output=/tmp/o-%j.out", "--error=/tmp/e-%j.err",
        "--dependency=afterok:1", "--array=0-15%4", "--signal=B:USR1@300", "--open-mode=append",
        "--chdir=/scratch/run", "--no-requeue", "--comment=clusterops-key=k note", "--export=ALL",
        "--exclusive", "--mem=0", "/shared/train.sbatch"])


def test_submission_minimal_and_stdin():
    assert submission(dict(name="-x", requeue=True, script=None), None) == (
        "sbatch", ["--parsable", "--job-name=-x", "--requeue"])


def test_job_action_one_call():
    assert job_action("absent", ["5", "7"]) == ("scancel", ["5", "7"])
    assert job_action("requeued", ["5", "7"]) == ("scontrol", ["requeue", "5,7"])
    assert job_action("held", ["5"]) == ("scontrol", ["hold", "5"])
    assert job_action("released", ["5", "6"]) == ("scontrol", ["release", "5,6"])


def test_every_node_when_none_given():
    assert "nodes=" not in " ".join(node_events(0)[1])


def test_every_node_when_the_hostlist_is_too_long_for_one_argument():
    names = ["gpu%05d" % i for i in range(0, 40000, 2)]  # no two in a row: no range to fold
    assert len(",".join(names)) > MAX_NODES_ARG
    assert "nodes=" not in " ".join(node_events(0, names)[1])
    assert "nodes=" + ",".join(names[:3]) in node_events(0, names[:3])[1]


def test_resubmission_excludes_one_compressed_hostlist():
    assert resubmission("/runs/a/launch.sbatch", ["n3", "n1", "n2"]) == (
        "sbatch", ["--exclude=n[1-3]", "/runs/a/launch.sbatch"])
    assert resubmission("/runs/a/launch.sbatch", []) == ("sbatch", ["/runs/a/launch.sbatch"])

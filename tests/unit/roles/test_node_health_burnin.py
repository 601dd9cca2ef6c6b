# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The burn-in tests (roles/node_health/files/clusterops_burnin, issue 42): real torch on the CPU - the
matrix products and their check, the all-reduce across two gloo ranks started by torch.distributed.run
as a training job is - judged against floors (the operator's, or the fleet's median); a wrong result, a
slow figure and a test that cannot run each fail, never pass."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import types

import pytest

# real torch (the project's venv); the ansible-core matrix's sessions have none
torch = pytest.importorskip("torch")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FILES = os.path.join(REPO, "roles", "node_health", "files")

sys.path.insert(0, FILES)
try:
    from clusterops_burnin import collective, compute, judge  # noqa: E402
finally:
    sys.path.remove(FILES)


def cli(*args, env=None, launcher=()):
    """python -m clusterops_burnin (under torch.distributed.run with ``launcher``): (rc, [JSON objects])."""
    environment = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=FILES)
    environment.update(env or {})
    proc = subprocess.run([sys.executable] + list(launcher) + ["-m", "clusterops_burnin"] + list(args),
                          env=environment, cwd=FILES, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300, check=False)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_the_products_are_timed_and_right_on_the_cpu():
    result = compute.matmul_test(torch, "cpu", 128, 2)
    assert result["gflops"] > 0 and result["max_error"] < compute.TOLERANCE


def faulty(torch_module, scale=1.5):
    """torch as a device that computes float32 products wrongly (one element scaled), float64 ones right."""
    def matmul(a, b):
        out = torch_module.matmul(a, b)
        if out.dtype == torch_module.float32:
            out = out.clone()
            out[0, 0] *= scale
        return out
    return types.SimpleNamespace(**dict((name, getattr(torch_module, name)) for name in (
        "Generator", "randn", "float32", "float64", "cuda")), matmul=matmul)


def test_a_device_that_computes_wrongly_fails_on_its_error():
    result = compute.matmul_test(faulty(torch), "cpu", 64, 1)
    assert result["max_error"] > compute.TOLERANCE
    verdict = judge.judge("n1", [{"test": "compute", "figure": "gflops", "value": result["gflops"],
                                  "operator_floor": None, "correct": result["max_error"] <= compute.TOLERANCE}], [], 0.8)
    assert not verdict["passed"] and verdict["reason"].startswith("clusterops-burnin: compute: wrong result")


def history(values, node="n9"):
    return [{"node": "%s-%d" % (node, i), "time": 0, "test": "collective", "figure": "busbw_gbps", "value": v,
             "passed": True} for i, v in enumerate(values)]


@pytest.mark.parametrize("operator_floor, past, value, passed, source", [
    (None, [], 1.0, True, "none"),                          # no floor yet: recorded, judged from the next runs
    (None, [10.0, 10.0], 1.0, True, "none"),                # fewer than MIN_HISTORY other nodes
    (None, [10.0, 12.0, 8.0], 7.0, False, "0.8 of the fleet median of 3"),   # floor 8.0
    (None, [10.0, 12.0, 8.0], 8.5, True, "0.8 of the fleet median of 3"),
    (5.0, [10.0, 12.0, 8.0], 4.9, False, "operator"),       # the operator's floor wins
    (5.0, [], 5.0, True, "operator"),
])
def test_a_figure_is_judged_against_its_floor(operator_floor, past, value, passed, source):
    figure = {"test": "collective", "figure": "busbw_gbps", "value": value, "operator_floor": operator_floor,
              "correct": True}
    verdict = judge.judge("n1", [figure], history(past), 0.8)
    assert verdict["passed"] is passed and verdict["figures"][0]["source"] == source
    if not passed:
        assert verdict["reason"] == "clusterops-burnin: collective: busbw_gbps %.3g below its floor %.3g (%s)" % (
            value, verdict["figures"][0]["floor"], source)


def test_a_node_never_sets_its_own_floor():
    own = history([1.0, 1.0, 1.0])
    for entry in own:
        entry["node"] = "n1"
    assert judge.floor_of("collective", "busbw_gbps", "n1", None, own, 0.8)["floor"] is None


def test_the_history_skips_lines_it_cannot_read_and_grows_by_one_line_per_figure(tmp_path):
    path = str(tmp_path / "burnin.jsonl")
    with open(path, "w") as handle:
        handle.write('{"node": "n2", "time": 1, "test": "compute", "figure": "gflops", "value": 9, "passed": true}\n'
                     '{"node": "n3", "test": "compute", "fig\n'        # cut short by a killed writer
                     '{"node": "n4", "time": 1, "test": "compute", "figure": "gflops", "value": true, "passed": true}\n'
                     '\xff\n')
    assert [e["node"] for e in judge.read_history(path)] == ["n2"]
    judge.append_history(path, "n1", 5, [{"test": "compute", "figure": "gflops", "value": 3.0}], False)
    assert judge.read_history(path)[-1] == {"node": "n1", "time": 5, "test": "compute", "figure": "gflops",
                                            "value": 3.0, "passed": False}


def test_the_command_passes_a_healthy_cpu_and_records_it(tmp_path):
    path = str(tmp_path / "burnin.jsonl")
    rc, (out,) = cli("--node", "n1", "--history", path, "compute", "--size", "128", "--iterations", "2")
    assert rc == 0 and out["verdict"]["passed"] and out["node"] == "n1"
    assert [e["node"] for e in judge.read_history(path)] == ["n1"]


def test_the_command_fails_a_slow_node_with_the_figure_in_its_reason():
    rc, (out,) = cli("--node", "n1", "compute", "--size", "128", "--iterations", "2", "--min-gflops", "1e9")
    assert rc == 1 and out["verdict"]["reason"].startswith("clusterops-burnin: compute: gflops ")
    assert "below its floor 1e+09 (operator)" in out["verdict"]["reason"]


def test_a_burnin_that_cannot_run_fails(tmp_path):
    """torch missing from the Python that runs it: exit 2, a reason that says so - never a pass."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no torch here')\n")
    rc, (out,) = cli("compute", env={"PYTHONPATH": "%s:%s" % (tmp_path, FILES)})
    reason = "clusterops-burnin: compute: could not run: ImportError"
    assert rc == 2 and out["verdict"] == {"passed": False, "reason": reason}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def test_the_all_reduce_across_two_gloo_ranks_passes_and_a_floor_above_it_fails(tmp_path):
    launcher = ["-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port"]
    rc, outs = cli("collective", "--bytes", "262144", "--iterations", "3", launcher=launcher + [free_port()])
    assert rc == 0 and sorted(o["verdict"]["figures"][0]["rank"] for o in outs) == [0, 1]
    assert all(o["verdict"]["figures"][0]["correct"] and o["verdict"]["figures"][0]["world_size"] == 2 for o in outs)
    rc, outs = cli("collective", "--bytes", "262144", "--iterations", "3", "--min-busbw", "1e9",
                   launcher=launcher + [free_port()])
    assert rc != 0 and all(o["verdict"]["reason"].startswith("clusterops-burnin: collective: busbw_gbps ")
                           for o in outs) and len(outs) == 2


def test_the_all_reduce_sum_is_checked():
    """One rank's contribution lost (an all-reduce that does nothing): the sum is wrong, not correct."""
    fake_dist = types.SimpleNamespace(get_rank=lambda: 0, get_world_size=lambda: 2, get_backend=lambda: "gloo",
                                      all_reduce=lambda tensor: None, barrier=lambda: None)
    result = collective.allreduce_test(torch, fake_dist, 1024, 1)
    assert result["correct"] is False and result["world_size"] == 2

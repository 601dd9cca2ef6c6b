# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Integration tests run against the real dev cluster (``make cluster-up``).

Helpers here read Slurm directly (never through the code under test), drive faults through
the dev cluster's own make targets, run single modules through pytest-ansible (``module()``:
its ``ansible_adhoc`` fixture on the dev cluster's inventory) and playbooks with
ansible-playbook as an operator would.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time

import ansible.constants
import pytest
from pytest_ansible.module_dispatcher.v213 import ModuleDispatcherV213

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "dev", "cluster"))
from devcluster.releases import HOST_RELEASE, state_dir  # noqa: E402 pylint: disable=C0413
# ensure_user: a local user, created once under a host-wide lock (lanes run side by side).
from devcluster.processes import ensure_user  # noqa: E402,F401 pylint: disable=C0413,W0611
# attempts, read_events, until: for the tests.
from observe import attempts, read_events, rpc_counts, until  # noqa: E402,F401 pylint: disable=C0413,W0611

#: The dev cluster's release: SLURM=<release> of dev/cluster/releases.txt (default: the one on the
#: host; the others run in podman), as for `make cluster-up SLURM=...`; DEVCLUSTER_DIR, when set,
#: names its state dir.
SLURM_RELEASE = os.environ.get("SLURM") or HOST_RELEASE
STATE_DIR = os.environ.get("DEVCLUSTER_DIR") or state_dir(REPO, SLURM_RELEASE)
SLURM_CONF = os.path.join(STATE_DIR, "etc", "slurm.conf")
INVENTORY = os.path.join(STATE_DIR, "inventory.yml")
#: Client command wrappers of a containerised release (`podman exec`, root only); absent on the host.
SLURM_BIN = os.path.join(STATE_DIR, "bin")
VENV_BIN = os.path.dirname(sys.executable)


def cluster_info():
    """<state dir>/cluster.json: slurm_version, container, venv and shared_dir (containers)."""
    try:
        with open(os.path.join(STATE_DIR, "cluster.json")) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def job_venv(default):
    """The venv training jobs activate: the container's own (cluster.json "venv", Debian's torch)
    for 24.11/26.05, else ``default`` (the repo's venv on the host)."""
    return cluster_info().get("venv") or default


def shared_tmpdir(prefix):
    """A new folder that the cluster's commands and jobs see at the same path: under the
    container's shared folder (cluster.json "shared_dir") for 24.11/26.05, else in /tmp. Put
    slurm.conf copies (the slurmctld proxy's), job scripts and run folders there."""
    import tempfile  # pylint: disable=import-outside-toplevel
    shared = cluster_info().get("shared_dir")
    return tempfile.mkdtemp(prefix=prefix, dir=shared or None)


def slurm_env():
    env = dict(os.environ)
    env["SLURM_CONF"] = SLURM_CONF
    env["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
    if os.path.isdir(SLURM_BIN):
        env["PATH"] = SLURM_BIN + os.pathsep + env["PATH"]
    env["SLURM"] = SLURM_RELEASE
    env["DEVCLUSTER_DIR"] = STATE_DIR
    env["LC_ALL"] = "C.UTF-8"
    return env


def run(cmd, check=True, timeout=300, **kwargs):
    env = kwargs.pop("env", None) or slurm_env()
    proc = subprocess.run(cmd, check=False, cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (rc=%s):\n%s" % (cmd, proc.returncode, proc.stdout))
    return proc


def _number(value):
    """23.02+ writes numbers as {"set": bool, "infinite": bool, "number": n}."""
    if isinstance(value, dict):
        return value.get("number") if value.get("set") else None
    return value


def nodes():
    """{name: {"state": "IDLE+DRAIN"-like compound, "reason": str, "boot_time": int}}, one entry
    per node: 22.05's `sinfo --json` (a flat node list), else `scontrol show nodes --json` (23.02+
    `sinfo --json` groups nodes that share a state under one reason)."""
    doc = json.loads(run(["sinfo", "--json"]).stdout)
    if "nodes" not in doc:
        doc = json.loads(run(["scontrol", "show", "nodes", "--json"]).stdout)
    result = {}
    for node in doc["nodes"]:
        state = node["state"]
        parts = [p.upper() for p in (state if isinstance(state, list) else [state])]
        parts += [f.upper() for f in node.get("state_flags", [])]
        result[node["name"]] = {"state": "+".join(parts), "flags": set(parts[1:]), "base": parts[0],
                                "reason": node.get("reason") or "",
                                "boot_time": _number(node.get("boot_time"))}
    return result


def wait_for(predicate, what, timeout=120, interval=1.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = nodes()
        if predicate(last):
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %ss waiting for %s; nodes: %s" % (timeout, what, last))


def is_healthy(node):
    return node["base"] in ("IDLE", "MIXED", "ALLOCATED") and not (
        node["flags"] & {"DRAIN", "NOT_RESPONDING", "FAIL", "REBOOT_REQUESTED", "REBOOT_ISSUED"})


def make(target, **variables):
    variables.setdefault("SLURM", SLURM_RELEASE)
    variables.setdefault("DEVCLUSTER_DIR", STATE_DIR)
    args = ["make", "-s", target] + ["%s=%s" % kv for kv in variables.items()]
    return run(args, timeout=600)


def scontrol(*args):
    return run(["scontrol"] + list(args))


#: When the running test began (set by the ``healthy`` fixture): see ``playbook()``.
TEST_STARTED = [time.time()]


def cluster_name(state_dir=None):
    """ClusterName of a dev cluster (default: the one under test), read from its slurm.conf (not
    through the code under test)."""
    state_dir = state_dir or STATE_DIR
    with open(os.path.join(state_dir, "etc", "slurm.conf")) as handle:
        for line in handle:
            if line.startswith("ClusterName="):
                return line.strip().split("=", 1)[1]
    raise AssertionError("no ClusterName in %s" % state_dir)


def heal_since():
    """Extra variables that make remediate.yml count only the heals of the running test: an
    absolute time (Unix seconds, the first whole second after the test began), not a window
    measured when ansible-playbook starts, which would end a few seconds later than the test's
    first heal when the playbook starts slowly."""
    return {"remediate_nodes_heal_since": int(TEST_STARTED[0]) + 1}


def playbook(*args, **kwargs):
    """ansible-playbook playbooks/remediate.yml (or another) against the dev inventory; returns
    (proc, recap) where recap is {"ok": n, "changed": n, "failed": n, ...} for localhost.

    The healing budget counts heals in Slurm's accounting, which outlives a test: heals before
    the test began do not count (remediate_nodes_heal_since), so each test sees a node history of
    its own (a test may override it with a later ``-e``)."""
    cmd = ["ansible-playbook", "-i", INVENTORY, "-e", json.dumps(heal_since())]
    cmd += list(args)
    proc = run(cmd, check=kwargs.pop("check", True), **kwargs)
    recap = {}
    match = re.search(r"^localhost\s*:\s*(.*)$", proc.stdout, re.MULTILINE)
    if match:
        recap = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", match.group(1)))
    return proc, recap


#: pytest-ansible's ``ansible_adhoc`` of the running test (the autouse fixture ``adhoc``): how
#: ``module()`` reaches the plugin without every test asking for a fixture.
ADHOC = []


class _ModuleDispatcher(ModuleDispatcherV213):
    """pytest-ansible's module dispatcher, whose one-task play also carries the play keywords
    ``check_mode`` and ``diff`` (options of the same names, bool) and ``become_method``.

    pytest-ansible 26.10 passes check mode and diff nowhere (its ``--ansible-check`` is parsed
    and never used), and the become method only as command line arguments, which Ansible keeps
    from the first call in a process on (its CLI arguments are a singleton)."""

    def _build_play_ds(self, complex_args):
        play = super()._build_play_ds(complex_args)
        play.update(check_mode=bool(self.options.get("check_mode")), diff=bool(self.options.get("diff")),
                    become_method=self.options.get("become_method"))
        return play


@contextlib.contextmanager
def _environment(env):
    """os.environ is ``env`` inside: the in-process play's workers, and so the module and the
    Slurm commands it runs, inherit it."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def module(name, args, check_mode=False, diff=False, become_user=None):
    """Run one module (FQCN) on the dev cluster's controller (``localhost`` of INVENTORY) through
    pytest-ansible's ``ansible_adhoc``, in this process, with slurm_env() as its environment.

    ``check_mode``/``diff``: as ``ansible --check``/``--diff``. ``become_user``: run it as that
    user (become method su: the dev machine has no sudo) with Debian's python3, which every user
    can run (the venv's lives under /root). Returns (rc, result): rc 0, or 2 where the module
    failed (what ``ansible`` exits with), and the module's result dict (``diff`` holds
    ``{"before", "after"}`` when asked, ``warnings`` the module's warnings)."""
    if not ADHOC:
        raise AssertionError("module() runs inside a test: it uses pytest-ansible's ansible_adhoc")
    become = {"become": True, "become_user": become_user, "become_method": "su"} if become_user else {}
    hosts = ADHOC[0](**become)
    if become_user:
        hosts.options["variable_manager"].set_host_variable(
            "localhost", "ansible_python_interpreter", "/usr/bin/python3")
    dispatcher = _ModuleDispatcher(**dict(hosts.options, check_mode=check_mode, diff=diff))
    with _environment(slurm_env()):
        contacted = getattr(dispatcher, name)(**(args or {}))
    result = dict(contacted["localhost"])
    return (2 if result.get("failed") else 0), result


def sdiag_rpc_counts():
    """{message type: count} from sdiag's "Remote Procedure Call statistics by message type"."""
    return rpc_counts(run(["sdiag"]).stdout)


def reset_cluster():
    """Every node powered on and back in service, no jobs, no pending reboots."""
    current = nodes()
    for name, node in current.items():
        if not node["flags"] & {"NOT_RESPONDING"} and node["base"] != "DOWN":
            continue
        make("cluster-poweron", NODE=name)
    run(["scancel", "--full", "--quiet", "-u", "root"], check=False)
    last_resume = [0.0]

    def resume_broken(ns):
        # A node powered on above registers with a new boot time some seconds later and comes
        # back DOWN "Node unexpectedly rebooted" after a resume sent before that: resume what
        # responds but is still out of service, every few seconds, until all are back.
        if all(is_healthy(v) for v in ns.values()):
            return True
        # A reboot still pending is cancelled. slurmctld may issue it between the read and the
        # cancel ("Invalid node state transition", seen on 26.05 in CI): the node then reboots
        # and comes back by itself, or is cancelled on the next round.
        pending = [n for n, v in ns.items() if "REBOOT_REQUESTED" in v["flags"] and "REBOOT_ISSUED" not in v["flags"]]
        if pending:
            run(["scontrol", "cancel_reboot", ",".join(pending)], check=False)
        broken = [n for n, v in ns.items() if not is_healthy(v) and "NOT_RESPONDING" not in v["flags"]]
        if broken and time.time() - last_resume[0] > 5:
            run(["scontrol", "update", "NodeName=%s" % ",".join(broken), "State=RESUME"], check=False)
            last_resume[0] = time.time()
        return False

    return wait_for(resume_broken, "every node back in service", timeout=180)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line(
        "markers", "every_release: run on the dev cluster of every Slurm release in SLURM_RELEASES "
        "(make integration); the others run on the default release only")
    # pytest-ansible (before its own pytest_configure): ansible_adhoc and ansible_module act on the
    # dev cluster's controller, localhost of INVENTORY (DEVCLUSTER_DIR chooses the cluster).
    config.option.ansible_inventory = INVENTORY
    config.option.ansible_host_pattern = "localhost"
    # Its plays run in this process with the ansible.cfg Ansible found at start: it must be the
    # repository's, as for the commands run() starts (slurm_env()).
    if os.path.realpath(ansible.constants.CONFIG_FILE or "") != os.path.realpath(os.path.join(REPO, "ansible.cfg")):
        raise pytest.UsageError("Ansible read %s: start pytest in %s or set ANSIBLE_CONFIG=%s/ansible.cfg"
                                % (ansible.constants.CONFIG_FILE, REPO, REPO))
    # The plugin loads collections from ANSIBLE_COLLECTIONS_PATH (--ansible-unit-inject-only): here
    # ansible.cfg's collections_path (.collections, make collection), instead of a collections/
    # tree of links it would build in the repository (pytest started next to galaxy.yml).
    os.environ["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(ansible.constants.COLLECTIONS_PATHS)
    config.option.ansible_unit_inject_only = True


@pytest.fixture(autouse=True)
def adhoc(ansible_adhoc):
    """pytest-ansible's ansible_adhoc, for module() during the test."""
    ADHOC[:] = [ansible_adhoc]
    yield ansible_adhoc
    del ADHOC[:]


@pytest.fixture(scope="session")
def cluster():
    if not os.path.exists(SLURM_CONF):
        if os.environ.get("CLUSTEROPS_REQUIRE_CLUSTER"):
            pytest.fail("the dev cluster is not up (%s missing): run make cluster-up" % SLURM_CONF)
        pytest.skip("the dev cluster is not up: run make cluster-up")
    proc = run(["sinfo", "-h"], check=False)
    if proc.returncode != 0:
        pytest.fail("the dev cluster does not answer: %s" % proc.stdout)
    return nodes()


@pytest.fixture()
def healthy(cluster):
    """Each test starts from a cluster with every node in service (and a node history of its own)."""
    state = reset_cluster()
    TEST_STARTED[0] = time.time()
    return state

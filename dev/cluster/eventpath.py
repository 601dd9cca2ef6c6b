# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make events-up / events-down: the event path on the dev cluster (docs/events.md).

    make events-up [SLURM=<release>] [EVENTS_VARS=vars.json]   .venv/bin/python dev/cluster/eventpath.py up [--vars F]
    make events-down [SLURM=<release>]                         .venv/bin/python dev/cluster/eventpath.py down

``up`` applies the role clusterops.slurm.slurm_events to the dev cluster's controller (the trigger program,
its wrappers, configuration and secret under ``<state dir>/events``, the three permanent node triggers, and
the job-end program the dev cluster's EpilogSlurmctld runs once it is there) and starts ansible-rulebook
(.venv-eda) with the collection's rulebook on a free port of 127.0.0.1, in the background. Its playbook is
this repository's playbooks/remediate.yml over the dev cluster's inventory, whose variables ``--vars`` (a
JSON object: the run registry, remediate_nodes_heal_since, ...) add to; its ``remediate_training_registry`` is
also the job-end program's ``slurm_events_registry`` (only its runs' ends are sent). A rulebook already running is
stopped first. ``down`` stops the rulebook and clears the triggers (the files stay).

Files under ``<state dir>/events``: ``secret`` (0600), ``inventory.yml``, ``vars.yml``, ``rulebook.log``,
``rulebook.pid``, ``libexec/``, ``event.json``, ``log/`` (what the trigger program could not send). Every
release works: a containerised release shares the host's network and sees the state dir at the same path.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from devcluster.releases import HOST_RELEASE, state_dir  # noqa: E402  # pylint: disable=wrong-import-position

SLURM = os.environ.get("SLURM") or HOST_RELEASE
STATE = os.environ.get("DEVCLUSTER_DIR") or state_dir(REPO, SLURM)
EVENTS = os.path.join(STATE, "events")
EDA_BIN = os.path.join(REPO, ".venv-eda", "bin")
RULEBOOK_LOG = os.path.join(EVENTS, "rulebook.log")
PID_FILE = os.path.join(EVENTS, "rulebook.pid")
#: The source's log line for each event it took (extensions/eda/plugins/event_source/slurm_events.py).
ACCEPTED = re.compile(r"slurm_events: accepted (\w+) of (\S+) \((\S+)\) sent at ([0-9.]+), received at ([0-9.]+)")


def env() -> Dict[str, str]:
    """The environment of the role's play and of the rulebook: the dev cluster's Slurm, the repository's
    collection and ansible.cfg, ansible-rulebook's venv first on PATH."""
    path = [EDA_BIN, os.path.dirname(os.path.abspath(sys.executable)), os.environ.get("PATH", "/usr/bin:/bin")]
    if os.path.isdir(os.path.join(STATE, "bin")):  # a containerised release's client commands
        path.insert(0, os.path.join(STATE, "bin"))
    return dict(os.environ, SLURM_CONF=os.path.join(STATE, "etc", "slurm.conf"), PATH=os.pathsep.join(path),
                ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), LC_ALL="C.UTF-8")


def role_vars(port: int, state: str = "present", registry: str = "") -> Dict[str, Any]:
    """The role's variables; ``registry``: the run registry (only its runs' job ends are sent), "" every job's."""
    return {"slurm_events_url": "http://127.0.0.1:%d/events" % port, "slurm_events_secret": secret(),
            "slurm_events_secret_file": os.path.join(EVENTS, "secret"), "slurm_events_dir": os.path.join(EVENTS, "libexec"),
            "slurm_events_config": os.path.join(EVENTS, "event.json"), "slurm_events_log_dir": os.path.join(EVENTS, "log"),
            "slurm_events_job_end": True, "slurm_events_registry": registry, "slurm_events_state": state}


def secret() -> str:
    """The shared secret: the one in events/secret, else a new one (64 hex digits)."""
    path = os.path.join(EVENTS, "secret")
    try:
        with open(path) as handle:
            return handle.readline().strip()
    except FileNotFoundError:
        return secrets.token_hex(32)


def apply_role(port: int, state: str, registry: str = "") -> None:
    play = os.path.join(EVENTS, "role.yml")
    with open(play, "w") as handle:
        handle.write("- hosts: slurm_controller\n  gather_facts: false\n  roles:\n    - clusterops.slurm.slurm_events\n")
    with open(play + ".json", "w") as handle:
        os.fchmod(handle.fileno(), 0o600)  # it holds the secret
        json.dump(role_vars(port, state, registry), handle)
    proc = subprocess.run(["ansible-playbook", "-i", os.path.join(STATE, "inventory.yml"), play, "-e", "@" + play + ".json"],
                          cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit("the role slurm_events failed (%s):\n%s" % (state, proc.stdout[-3000:]))


def write_inventory(extra: Dict[str, Any]) -> str:
    """The dev cluster's inventory (as ansible-inventory reads it) with ``extra`` as variables of every
    host, written as JSON (which YAML reads); on the host release the playbook's modules run under the
    repository's venv (the dev inventory says ansible_playbook_python: under the rulebook, .venv-eda's)."""
    listed = json.loads(subprocess.run(["ansible-inventory", "-i", os.path.join(STATE, "inventory.yml"), "--list"],
                                       cwd=REPO, env=env(), stdout=subprocess.PIPE, text=True, check=True).stdout)
    hosts = {}
    for name in listed["slurm_controller"]["hosts"]:
        host = dict(listed["_meta"]["hostvars"].get(name, {}), **extra)
        if host.get("ansible_connection") == "local":
            host["ansible_python_interpreter"] = sys.executable
        hosts[name] = host
    path = os.path.join(EVENTS, "inventory.yml")
    with open(path, "w") as handle:
        json.dump({"all": {"children": {"slurm_controller": {"hosts": hosts}}}}, handle, indent=1)
    return path


def running() -> Optional[int]:
    """The rulebook's pid while it runs, else None."""
    try:
        with open(PID_FILE) as handle:
            pid = int(handle.read().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def stop_rulebook() -> None:
    pid = running()
    if pid is None:
        return
    os.killpg(pid, signal.SIGTERM)  # the rulebook leads its own session: its playbook runs go too
    deadline = time.monotonic() + 30
    while running() and time.monotonic() < deadline:
        time.sleep(0.2)
    if running():
        os.killpg(pid, signal.SIGKILL)
    os.unlink(PID_FILE)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def up(extra: Optional[Dict[str, Any]] = None, port: Optional[int] = None) -> int:
    """Set the triggers and start the rulebook; returns its port once it listens. Raises SystemExit."""
    if not os.path.exists(os.path.join(STATE, "etc", "slurm.conf")):
        raise SystemExit("the dev cluster is not up: make cluster-up")
    if not os.path.exists(os.path.join(EDA_BIN, "ansible-rulebook")):
        raise SystemExit("ansible-rulebook is not installed: make eda-venv")
    stop_rulebook()
    os.makedirs(EVENTS, mode=0o755, exist_ok=True)
    os.chmod(EVENTS, 0o755)  # nosec B103  # a folder, not a file: SlurmUser runs the programs under it; only root writes it
    port = port or int(os.environ.get("EVENTS_PORT") or free_port())
    apply_role(port, "present", (extra or {}).get("remediate_training_registry", ""))
    inventory = write_inventory(extra or {})
    with open(os.path.join(EVENTS, "vars.yml"), "w") as handle:
        json.dump({"slurm_events_port": port, "slurm_events_secret_file": os.path.join(EVENTS, "secret"),
                   "slurm_events_playbook": os.path.join(REPO, "playbooks", "remediate.yml")}, handle)
    with open(RULEBOOK_LOG, "w") as log:
        engine = subprocess.Popen([os.path.join(EDA_BIN, "ansible-rulebook"), "-r", "clusterops.slurm.slurm_events",
                                   "-i", inventory, "--vars", os.path.join(EVENTS, "vars.yml"), "-v"],
                                  cwd=REPO, env=env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    with open(PID_FILE, "w") as handle:
        handle.write("%d\n" % engine.pid)
    deadline = time.monotonic() + 120
    while "slurm_events: listening" not in read_log():
        if engine.poll() is not None or time.monotonic() > deadline:
            stop_rulebook()
            raise SystemExit("the rulebook did not start listening:\n%s" % read_log()[-3000:])
        time.sleep(0.3)
    return port


def down() -> None:
    """Stop the rulebook and clear the triggers (nothing to do when the cluster is down)."""
    stop_rulebook()
    if os.path.exists(os.path.join(STATE, "etc", "slurm.conf")) and os.path.isdir(EVENTS):
        apply_role(0, "absent")


def read_log() -> str:
    try:
        with open(RULEBOOK_LOG, errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        return ""


def accepted() -> List[Dict[str, Any]]:
    """The events the source took, in order: kind, cluster, subject, sent and received (Unix seconds)."""
    return [dict(kind=m.group(1), cluster=m.group(2), subject=m.group(3), sent=float(m.group(4)),
                 received=float(m.group(5))) for m in ACCEPTED.finditer(read_log())]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("action", choices=("up", "down"))
    parser.add_argument("--vars", help="a JSON file of remediate.yml's variables for the rulebook's runs")
    args = parser.parse_args()
    if args.action == "down":
        down()
        print("events: the rulebook is stopped and the triggers cleared")
        return 0
    extra = {}
    if args.vars:
        with open(args.vars) as handle:
            extra = json.load(handle)
    port = up(extra)
    print("events: ansible-rulebook listens on 127.0.0.1:%d (pid %d, log %s); slurmctld's triggers and "
          "EpilogSlurmctld send to it" % (port, running() or 0, RULEBOOK_LOG))
    return 0


if __name__ == "__main__":
    sys.exit(main())

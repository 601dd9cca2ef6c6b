# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The command line and one run: read the node, check, drain or resume it, check again after a reboot."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

from .base import (EXIT_CONFIG, EXIT_FAILED, EXIT_OK, EXIT_SLURM, EXIT_TIMEOUT, ConfigError, OverallTimeout,
                   SlurmError, log)
from .checks import Context, run_checks
from .config import CONFIG_ENV, DEFAULT_CONFIG, NODE_ENV_VARS, load_config, node_name, setup_logging
from .nhc import run_nhc
from .slurm import REBOOT_FLAGS, decide, parse_show_node, scontrol, state_flags, wait_registered


def check_and_act(config, args, node, deadline, started):
    """Read the node, run the checks, drain/resume/leave it -> (exit status, node was rebooting)."""
    slurm_timeout = float(config.get("scontrol_timeout", 10))
    fields = parse_show_node(scontrol(config, ["show", "node", node], slurm_timeout))
    state, reason = fields.get("State", ""), fields.get("Reason", "")
    rebooting = bool(state_flags(state) & REBOOT_FLAGS)
    features = set((fields.get("AvailableFeatures") or "").split(",")) - {"(null)", ""}
    failures = run_checks(config, Context(config, node, features), deadline)
    action, why = decide(failures, state, reason, bool(config.get("resume_own_drain", True)))
    if args.dry_run:
        print(json.dumps({"node": node, "failures": failures, "state": state, "reason": reason,
                          "action": action, "new_reason": why}))
        return (EXIT_FAILED if failures else EXIT_OK), rebooting
    if action == "drain":
        scontrol(config, ["update", "nodename=" + node, "state=drain", "reason=" + why], slurm_timeout)
        log.warning("%s drained: %s", node, why)
    elif action == "resume":
        scontrol(config, ["update", "nodename=" + node, "state=resume"], slurm_timeout)
        log.info("%s resumed (every check passed; was drained: %s)", node, why)
    elif failures:
        log.info("%s left as is (%s)", node, why)
    log.info("%s: %d check(s), %d failed, action %s, %.2fs", node, len(config["checks"]),
             len(failures), action, time.monotonic() - started)
    return (EXIT_FAILED if failures else EXIT_OK), rebooting


def recheck_after_reboot(program, config_path, node):
    """slurmd runs the program at start BEFORE the node registers; a reboot with nextstate=resume
    then clears every drain when the node registers (seen on 22.05). So when the node was
    rebooting, a detached copy of this program (``program``, its absolute path) waits for the
    registration and checks again."""
    argv = [sys.executable, program, "--config", config_path, "--node", node, "--after-reboot"]
    try:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        log.info("%s is rebooting: checking again once it has registered", node)
    except OSError as exc:
        log.warning("cannot start the check after reboot: %s (HealthCheckInterval will)", exc)


def main(argv=None, program=None):
    """Run once with the command line ``argv`` (default sys.argv[1:]) -> the exit status.

    ``program``: the absolute path of the program, which the check after a reboot runs again (the
    program passes its own; default the running script, sys.argv[0]).
    """
    try:
        return _main(argv, program or os.path.abspath(sys.argv[0]))
    finally:
        signal.alarm(0)  # the guard below must not outlive a run (in-process callers, tests)


def _main(argv, program):
    ap = argparse.ArgumentParser(description="Slurm HealthCheckProgram (see docs/node-health.md)")
    ap.add_argument("--config", default=os.environ.get(CONFIG_ENV, DEFAULT_CONFIG))
    ap.add_argument("--node", help="node name (default: $SLURMD_NODENAME, then $SLURM_NODE_NAME)")
    ap.add_argument("--dry-run", action="store_true", help="run the checks, print the decision, change nothing")
    ap.add_argument("--after-reboot", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        sys.stderr.write("clusterops-healthcheck: %s\n" % exc)
        return EXIT_CONFIG
    node, source = node_name(args.node)
    setup_logging(config, args.verbose, node or "unknown")
    overall = float(config.get("timeout", 30))
    deadline = time.monotonic() + overall
    started = time.monotonic()
    # Belt and braces against a hang anywhere (slurmd kills us at 60 s in any case).
    signal.signal(signal.SIGALRM, lambda *_: os._exit(EXIT_TIMEOUT))
    signal.alarm(int(overall) + 5)
    if config.get("mode") == "nhc":
        try:
            return run_nhc(config, overall)
        except ConfigError as exc:   # NHC not installed where the config says: a usage error
            log.error("%s", exc)
            return EXIT_CONFIG
    if not node:
        log.error("no node name: give --node or run under slurmd ($%s)", " or $".join(NODE_ENV_VARS))
        return EXIT_CONFIG
    log.debug("node %s (from %s)", node, source)
    try:
        slurm_timeout = float(config.get("scontrol_timeout", 10))
        if args.after_reboot:
            # Two passes: Slurm may still be processing the registration on the first one.
            for _pass in range(2):
                wait_registered(config, node, slurm_timeout)
                rc, _rebooting = check_and_act(config, args, node, time.monotonic() + overall, started)
                if rc != EXIT_FAILED:
                    return rc
                time.sleep(2)
            return rc
        rc, rebooting = check_and_act(config, args, node, deadline, started)
        if rc == EXIT_FAILED and rebooting and not args.dry_run:
            # slurmd runs us before the node registers; the reboot's nextstate=resume then clears
            # any drain (also one that was already set with our reason): check again after it.
            recheck_after_reboot(program, args.config, node)
        return rc
    except OverallTimeout:
        log.error("overall timeout of %ss reached", overall)
        return EXIT_TIMEOUT
    except SlurmError as exc:
        log.error("%s", exc)
        return EXIT_SLURM
    except ConfigError as exc:
        log.error("%s", exc)
        return EXIT_CONFIG

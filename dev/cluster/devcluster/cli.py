"""The command line: `python3 dev/cluster/devcluster [--dir DIR] [--slurm RELEASE] COMMAND ...`."""

import argparse
import os
import signal
import sys

from .cluster import Cluster
from .config import container_env_lines
from .container import ContainerCluster, container_init
from .paths import CLUSTER_NAME, CLUSTER_NAME_VAR, CONTAINER_VAR, ClusterError, Paths
from .power import node_init
from .processes import flocked, read_json
from .releases import CONTAINER_RELEASES, HOST_RELEASE

DESCRIPTION = f"Manage a real multi-node Slurm {HOST_RELEASE} cluster on one Debian 12 machine."
# Commands that name one node, with their help.
NODE_COMMANDS = (("crash", "power loss of a node"), ("poweron", "boot a node"),
                 ("reboot", "power-cycle a node"),
                 ("slurmd-kill", "kill only the node's slurmd (jobs survive)"),
                 ("slurmd-start", "start the node's slurmd again (same boot time)"),
                 ("prolog-fail", "the Prolog fails on the node from now on"),
                 ("prolog-ok", "the Prolog succeeds on the node again"))
# Commands that stop or start one daemon alone.
DAEMON_COMMANDS = (("slurmctld-stop", "stop slurmctld only (the controller does not answer)"),
                   ("slurmctld-start", "start slurmctld again, keeping its state"),
                   ("slurmdbd-stop", "stop slurmdbd only (accounting does not answer)"),
                   ("slurmdbd-start", "start slurmdbd again"))


def build_parser():
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("--dir", default=os.environ.get("DEVCLUSTER_DIR", ".devcluster"),
                    help="state directory (default: $DEVCLUSTER_DIR or ./.devcluster)")
    ap.add_argument("--cluster-name", default=os.environ.get(CLUSTER_NAME_VAR) or None,
                    help=f"slurm.conf ClusterName (default: ${CLUSTER_NAME_VAR}, else the state dir's, "
                         f"else {CLUSTER_NAME}); "
                         "another host cluster of a fleet also needs its own --dir and "
                         "DEVCLUSTER_PORT_OFFSET")
    ap.add_argument("--slurm", default=HOST_RELEASE,
                    choices=(HOST_RELEASE,) + CONTAINER_RELEASES,
                    help=f"Slurm release (default {HOST_RELEASE}, on the host; the others run "
                         "in a podman container)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start the cluster (idempotent)")
    up.add_argument("--nodes", type=int, default=4)
    up.add_argument("--slurmd-nodes", type=int, default=None,
                    help="how many of the nodes run a slurmd (default: all)")
    up.add_argument("--slurmd-timeout", type=int, default=None,
                    help="slurm.conf SlurmdTimeout in seconds (default: 10 on the host, 30 in a "
                         "container; 0: nodes are never marked DOWN, silent ones pinged every 100 s)")
    sub.add_parser("down", help="stop everything the cluster started")
    sub.add_parser("status", help="show daemons, sinfo and squeue")
    sub.add_parser("env", help="print eval-able export lines")
    for name, text in NODE_COMMANDS:
        sp = sub.add_parser(name, help=text)
        sp.add_argument("node")
    gf = sub.add_parser("gpu-fault", help="emulate a GPU fault on a node (none clears it)")
    gf.add_argument("node")
    gf.add_argument("fault")
    for name, text in DAEMON_COMMANDS:
        sub.add_parser(name, help=text)
    sub.add_parser("powerd", help=argparse.SUPPRESS)
    sub.add_parser("container-init", help=argparse.SUPPRESS)
    ni = sub.add_parser("node-init", help=argparse.SUPPRESS)
    ni.add_argument("argv", nargs=argparse.REMAINDER)
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    # Behave like other CLI tools when piped into `head`.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if args.cmd == "node-init":
        cmd = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        return node_init(cmd)
    if args.cmd == "container-init":
        return container_init()
    # On the host, a release in a container (SLURM=24.11 or 26.05) is run through podman.
    containerised = args.slurm != HOST_RELEASE and not os.environ.get(CONTAINER_VAR)
    if os.geteuid() != 0 and args.cmd != "env":
        why = "podman's root containers" if containerised else "SlurmUser=root, private daemons"
        print(f"devcluster: must run as root ({why})", file=sys.stderr)
        return 1
    try:
        check_release(Paths(args.dir), args.slurm)
        if containerised:
            return command(ContainerCluster(args.dir, args.slurm), args, container_command)
        return command(Cluster(args.dir, args.slurm, args.cluster_name), args, cluster_command)
    except ClusterError as exc:
        print(f"devcluster: ERROR: {exc}", file=sys.stderr)
        return 1


def check_release(paths, release):
    """Refuse a state dir that holds another release's cluster (SLURM= and DEVCLUSTER_DIR mixed)."""
    cfg = read_json(paths.cluster_json) or {}
    if cfg.get("slurm") and cfg["slurm"] != release:
        raise ClusterError(f"{paths.root} holds a Slurm {cfg['slurm']} dev cluster, not {release}: "
                           "give SLURM= and DEVCLUSTER_DIR= of the same release")


def command(c, args, side_command):
    """up, down and status, alike on a Cluster and a ContainerCluster; the other commands through
    ``side_command`` (cluster_command or container_command). Returns the exit status."""
    if args.cmd == "up":
        c.up(args.nodes, args.slurmd_nodes, args.slurmd_timeout)
    elif args.cmd == "down":
        c.down()
    elif args.cmd == "status":
        return c.status() or 0
    else:
        return side_command(c, args)
    return 0


def cluster_command(c, args):
    """A command on this machine's cluster: the host's release, or the inside of a container."""
    if args.cmd == "env":
        print("\n".join(c.env_lines()))
    elif args.cmd == "crash":
        c.crash(args.node)
    elif args.cmd == "poweron":
        c.poweron(args.node)
    elif args.cmd == "reboot":
        c.reboot(args.node)
    elif args.cmd in ("slurmd-kill", "slurmd-start"):
        c.slurmd_signal(args.node, start=args.cmd == "slurmd-start")
    elif args.cmd in ("prolog-fail", "prolog-ok"):
        c.prolog_fail(args.node, args.cmd == "prolog-fail")
    elif args.cmd == "gpu-fault":
        c.gpu_fault(args.node, args.fault)
    elif args.cmd in dict(DAEMON_COMMANDS):
        daemon, action = args.cmd.split("-")
        c.p.ensure_dirs()
        with flocked(c.p.lock):
            if action == "stop":
                c.stop_only(daemon)
            elif daemon == "slurmctld":
                c.start_slurmctld(clean=False)
            else:
                c.start_slurmdbd()
    elif args.cmd == "powerd":
        c.powerd()
    return 0


def container_command(c, args):
    """A command on the host side of a containerised release (SLURM=<one in a container>)."""
    if args.cmd == "env":
        print("\n".join(container_env_lines(c.p, args.slurm)))
    elif args.cmd in dict(NODE_COMMANDS):
        c.require_running()
        return c.inner([args.cmd, args.node])
    elif args.cmd == "gpu-fault":
        c.require_running()
        return c.inner([args.cmd, args.node, args.fault])
    elif args.cmd in dict(DAEMON_COMMANDS):
        c.require_running()
        return c.inner([args.cmd])
    else:
        raise ClusterError(f"{args.cmd} runs inside the container only")
    return 0

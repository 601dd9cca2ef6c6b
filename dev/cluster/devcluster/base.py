"""What every part of a cluster shares: its paths, ports, environments, pid records, size."""

import contextlib
import os
import secrets
import signal

from .paths import (CLUSTER_NAME, CONTAINER_VAR, DIR_VAR, MARIADB_PORT, MARKER_VAR, NODE_VAR,
                    SLURMCTLD_PORT, SLURMD_PORT_BASE, SLURMDBD_PORT, SYSTEM_PATH, ClusterError,
                    Paths, log)
from .processes import is_alive, kill_and_wait, read_json, run, spawn, write_file, write_json
from .releases import HOST_RELEASE, PORT_OFFSETS


class ClusterBase:
    """One dev cluster on this machine: the host's release, or the inside of a container.

    The parts (config, daemons, faults, power) are mixins on this base; ``cluster.Cluster`` joins
    them."""

    def __init__(self, root, release=HOST_RELEASE, cluster_name=None):
        self.p = Paths(root)
        self.release = release
        # Given, else the one this state dir was started with, else the default cluster's.
        self.cluster_name = (cluster_name or (read_json(self.p.cluster_json) or {}).get("cluster_name")
                             or CLUSTER_NAME)
        # The container this package runs in (set by the host side), or None on the host.
        self.container = os.environ.get(CONTAINER_VAR) or None
        # DEVCLUSTER_PORT_OFFSET moves a host cluster's ports (two checkouts on one machine).
        offset = int(os.environ.get("DEVCLUSTER_PORT_OFFSET") or PORT_OFFSETS[release])
        self.port_offset = offset
        self.slurmctld_port = SLURMCTLD_PORT + offset
        self.slurmdbd_port = SLURMDBD_PORT + offset
        self.mariadb_port = MARIADB_PORT + offset
        self.slurmd_port_base = SLURMD_PORT_BASE + offset

    def slurm_version(self):
        """'24.11.5' from `slurmctld -V` ("slurm 24.11.5"), or '' when it does not run."""
        res = run(["slurmctld", "-V"], check=False)
        words = res.stdout.split()
        return words[1] if res.returncode == 0 and len(words) > 1 else ""

    # ---- environment -----------------------------------------------------
    def client_env(self):
        env = dict(os.environ)
        env["SLURM_CONF"] = self.p.slurm_conf
        return env

    def daemon_env(self, node=None):
        """A small, explicit environment for daemons (no user/venv leftovers)."""
        env = {
            "PATH": SYSTEM_PATH,
            "LANG": "C.UTF-8",
            "HOME": "/root",
            "SLURM_CONF": self.p.slurm_conf,
            DIR_VAR: self.p.root,
            MARKER_VAR: self.p.root,
        }
        if node:
            env[NODE_VAR] = node
        if self.container:
            env[CONTAINER_VAR] = self.container
        return env

    def marker(self):
        return f"{MARKER_VAR}={self.p.root}".encode()

    # ---- pid records -----------------------------------------------------
    def spawn(self, name, argv, env, record=True):
        """Start a long-running daemon in the foreground mode, detached from us."""
        rec = spawn(name, argv, env, cwd=self.p.root, log_dir=self.p.log)
        if record:
            write_json(self.p.pidrec(name), rec)
        return rec

    def daemon_pid(self, name):
        """Pid of one of our daemons if it runs, else None."""
        rec = read_json(self.p.pidrec(name))
        if rec and is_alive(rec.get("pid"), rec.get("starttime")):
            return rec["pid"]
        return None

    def stop_daemon(self, name, timeout=20.0):
        pid = self.daemon_pid(name)
        if pid:
            log(f"stopping {name} (pid {pid})")
            kill_and_wait([pid], signal.SIGTERM, timeout)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.p.pidrec(name))

    # ---- size and nodes --------------------------------------------------
    def load_config(self):
        return read_json(self.p.cluster_json)

    def node_names(self, cfg=None):
        cfg = cfg or self.load_config() or {}
        return [f"n{i}" for i in range(1, int(cfg.get("nodes", 0)) + 1)]

    def slurmd_node_names(self, cfg=None):
        cfg = cfg or self.load_config() or {}
        return self.node_names(cfg)[: int(cfg.get("slurmd_nodes", 0))]

    def node_record(self, node):
        return read_json(self.p.node_rec(node))

    def check_node(self, node):
        cfg = self.load_config()
        if not cfg:
            raise ClusterError("the cluster was never configured; run cluster-up first")
        if node not in self.node_names(cfg):
            raise ClusterError(f"unknown node {node!r}; nodes are n1..n{cfg['nodes']}")

    def db_password(self):
        if not os.path.exists(self.p.mysql_password):
            write_file(self.p.mysql_password, secrets.token_hex(16) + "\n", 0o600)
        with open(self.p.mysql_password, encoding="ascii") as f:
            return f.read().strip()

    def slurmd_timeout(self, cfg):
        """slurm.conf SlurmdTimeout (s): the cluster's own (``up --slurmd-timeout``), else 30 in a
        container and 10 on the host."""
        if cfg.get("slurmd_timeout") is not None:
            return int(cfg["slurmd_timeout"])
        return 30 if self.container else 10

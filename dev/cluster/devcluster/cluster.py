"""A dev cluster on this machine (the host's release, or the inside of a container): its parts
joined, and the commands that use them all: up, down, status."""

import contextlib
import os
import signal
import time

from .config import ClusterConfig
from .daemons import ClusterDaemons
from .paths import CONTAINER_VENV, SHARED_DIR, ClusterError, log
from .power import ClusterPower
from .processes import (all_pids, environ_has, flocked, is_alive, kill_and_wait, pidns_of, read_json,
                        run, write_json)


class Cluster(ClusterConfig, ClusterDaemons, ClusterPower):
    """The whole cluster: configuration (config), daemons (daemons), node power and faults (power,
    faults), on the paths, ports and pid records of base.ClusterBase."""

    def infra(self):
        return ["munged", "mariadb", "slurmdbd", "slurmctld", "powerd"]

    def up(self, nodes, slurmd_nodes, slurmd_timeout=None):
        if slurmd_nodes is None:
            slurmd_nodes = nodes
        if nodes < 1 or not 0 <= slurmd_nodes <= nodes:
            raise ClusterError("need NODES >= 1 and 0 <= SLURMD_NODES <= NODES")
        if slurmd_timeout is not None and slurmd_timeout < 0:
            raise ClusterError("need SLURMD_TIMEOUT >= 0")
        cfg = {"nodes": nodes, "slurmd_nodes": slurmd_nodes, "slurmd_timeout": slurmd_timeout}
        self.p.ensure_dirs()
        with flocked(self.p.lock):
            if self.daemon_pid("slurmctld"):
                old = self.load_config() or {}
                old = {k: old.get(k) for k in cfg}
                if old != cfg:
                    raise ClusterError(
                        f"cluster is already up with {old}; requested {cfg}. "
                        "Run cluster-down first to change its size.")
                # Already up: restart any infrastructure daemon that died, but do not
                # touch the nodes (a crashed node stays off until cluster-poweron).
                self.start_munged()
                self.start_mariadb()
                self.start_slurmdbd()
                self.start_powerd()
                self.write_client_files()
                log("cluster already up; nothing to do")
                return
            t0 = time.monotonic()
            # Clean start: clear any leftovers of a previous, interrupted run.
            self._down(verbose=False)
            for name in os.listdir(self.p.nodes_run):
                os.unlink(os.path.join(self.p.nodes_run, name))
            for name in os.listdir(self.p.power_requests):
                os.unlink(os.path.join(self.p.power_requests, name))
            version = self.slurm_version()
            write_json(self.p.cluster_json, dict(
                cfg, slurm_version=version, slurm=".".join(version.split(".")[:2]),
                container=self.container, shared_dir=SHARED_DIR if self.container else None,
                venv=CONTAINER_VENV if self.container else None,
                slurm_conf=self.p.slurm_conf, bin_dir=self.p.bin if self.container else None,
                inventory=self.p.inventory, cluster_name=self.cluster_name,
                port_offset=self.port_offset))
            self.write_configs(cfg)
            try:
                self.start_munged()
                self.start_mariadb()
                self.start_slurmdbd()
                self.start_slurmctld()
                self.start_powerd()
                started = self.slurmd_node_names(cfg)
                log(f"starting {len(started)} slurmd(s) of {nodes} nodes")
                for node in started:
                    self.poweron(node, quiet=True)
                self.wait_nodes_idle(started)
                self.wait_sacct()
            except ClusterError as exc:
                raise ClusterError(
                    f"{exc}\nThe cluster is left as it is for inspection (logs in "
                    f"{self.p.log}); run cluster-down to clean up.") from None
            log(f"cluster up in {time.monotonic() - t0:.1f}s"
                + ("" if self.container else
                   f"; `eval \"$(make cluster-env)\"` or `. {self.p.env_sh}`"))

    def _leftover_pids(self):
        """Processes we started that are still alive (marker env or node namespace)."""
        me = {os.getpid(), os.getppid()}
        marker = self.marker()
        namespaces = set()
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.p.nodes_run):
                if name.endswith(".json"):
                    rec = read_json(os.path.join(self.p.nodes_run, name)) or {}
                    if rec.get("pidns"):
                        namespaces.add(rec["pidns"])
        out = []
        for pid in all_pids():
            if pid in me or not is_alive(pid):
                continue
            if environ_has(pid, marker) or (namespaces and pidns_of(pid) in namespaces):
                out.append(pid)
        return out

    def _down(self, verbose=True):
        # powerd first (no reboot may start a node behind our back), then the
        # controller, then the nodes (power off), then accounting and auth.
        self.stop_daemon("powerd")
        self.stop_daemon("slurmctld")
        cfg = self.load_config() or {}
        for node in self.node_names(cfg):
            if self.node_record(node):
                self.crash(node, quiet=True, reason="cluster-down")
        self.stop_daemon("slurmdbd")
        self.stop_daemon("mariadb", timeout=60)
        self.stop_daemon("munged")
        left = self._leftover_pids()
        if left:
            log(f"killing leftover processes: {left}")
            kill_and_wait(left, signal.SIGTERM, 10)
        left = self._leftover_pids()
        if left:
            raise ClusterError(f"processes survived cluster-down: {left}")
        if verbose:
            log("cluster down; no daemon left")

    def down(self):
        if not os.path.isdir(self.p.root):
            log("cluster down (no state dir)")
            return
        self.p.ensure_dirs()
        with flocked(self.p.lock):
            self._down()

    def status(self):
        print(f"state dir: {self.p.root}")
        print(f"SLURM_CONF={self.p.slurm_conf}")
        print("daemons:")
        for name in self.infra():
            pid = self.daemon_pid(name)
            print(f"  {name:<10} {'running pid ' + str(pid) if pid else 'not running'}")
        cfg = self.load_config() or {}
        nodes = self.node_names(cfg)
        with_slurmd = set(self.slurmd_node_names(cfg))
        shown = 0
        for node in nodes:
            rec = self.node_record(node)
            if not rec and node not in with_slurmd:
                continue  # defined in slurm.conf only, never runs a slurmd
            shown += 1
            if self.node_running(node):
                slurmd = "slurmd up" if self.slurmd_pids(rec) else "slurmd DEAD"
                print(f"  node {node:<6} powered on, {slurmd}, outer pid {rec['outer_pid']} "
                      f"(boot #{rec.get('boots', 1)})")
            else:
                print(f"  node {node:<6} powered off")
        if len(nodes) > shown:
            print(f"  ({len(nodes) - shown} more nodes are defined without a slurmd)")
        if self.daemon_pid("slurmctld"):
            for argv in (["sinfo"], ["squeue"]):
                print(f"$ {' '.join(argv)}", flush=True)
                res = run(argv, env=self.client_env(), check=False)
                print((res.stdout + res.stderr).rstrip(), flush=True)
        else:
            print("slurmctld is not running: cluster is down")


# --------------------------------------------------------------------------
# A release in a container (24.11, 26.05): the host side

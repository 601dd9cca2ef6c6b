"""Node power: boot (poweron), power loss (crash), reboot, slurmd alone killed or started; powerd,
which performs the reboots RebootProgram asks for; node_init, pid 1 of a node's namespaces."""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict

from .faults import ClusterFaults
from .paths import DIR_VAR, PACKAGE, ClusterError, log
from .processes import (all_pids, children_of, flocked, host_uptime_seconds, is_alive, kill_and_wait,
                        pidns_of, proc_stat, reap_children, wait_for, write_json)


def node_init(argv):
    """pid 1 of a node's PID namespace, its "kernel": runs slurmd and reaps orphans.

    slurmstepd daemonizes, so finished steps are re-parented to the namespace's
    pid 1, and slurmd would not reap them. Like a real node, the node stays up
    (jobs keep running) when slurmd dies. Signals from outside:
      SIGUSR1  start slurmd again if it is not running (slurmd-start)
      SIGUSR2  SIGKILL slurmd only, jobs survive (slurmd-kill)
      SIGTERM  stop slurmd, then the node (and with it every job process)
      SIGKILL  kills the whole node at once (power loss; crash)
    """
    state: Dict[str, Any] = {"child": None, "stop": False}
    # Node names resolve inside the node, like on a real cluster: the namespace's own view of
    # /etc/hosts (unshare made the mount namespace private, so the machine is not touched).
    hosts = os.path.join(os.environ.get(DIR_VAR, "/nonexistent"), "etc", "hosts")
    if os.path.isfile(hosts):
        subprocess.run(["mount", "--bind", hosts, "/etc/hosts"], check=False)

    def start_slurmd(*_):
        if state["child"] is None and not state["stop"]:
            pid = os.fork()
            if pid == 0:
                try:
                    os.execvp(argv[0], argv)
                finally:
                    os._exit(127)
            state["child"] = pid

    def kill_slurmd(*_):
        if state["child"] is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(state["child"], signal.SIGKILL)

    def stop(signum, _frame):
        state["stop"] = True
        if state["child"] is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(state["child"], signum)

    signal.signal(signal.SIGUSR1, start_slurmd)
    signal.signal(signal.SIGUSR2, kill_slurmd)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    start_slurmd()
    while True:
        try:
            pid, _status = os.wait()
        except ChildProcessError:
            # Nothing left to reap: slurmd is dead and no job runs.
            if state["stop"]:
                return 0
            time.sleep(0.2)
            continue
        if pid == state["child"]:
            state["child"] = None
            if state["stop"]:
                return 0


class ClusterPower(ClusterFaults):
    """Each node's power (a mixin of cluster.Cluster; a boot writes the node's kernel log, so on
    top of the faults)."""

    def node_running(self, node):
        """True if the node's namespace (outer unshare or inner slurmd) lives."""
        rec = self.node_record(node)
        if not rec or not rec.get("powered"):
            return False
        return (is_alive(rec.get("outer_pid"), rec.get("outer_starttime"))
                or is_alive(rec.get("inner_pid"), rec.get("inner_starttime")))

    def node_pids(self, rec):
        """Every live process of a node: outer, inner and all of its namespace."""
        pids = set()
        if is_alive(rec.get("outer_pid"), rec.get("outer_starttime")):
            pids.add(rec["outer_pid"])
        if is_alive(rec.get("inner_pid"), rec.get("inner_starttime")):
            pids.add(rec["inner_pid"])
        ns = rec.get("pidns")
        if ns:
            for pid in all_pids():
                if pid not in pids and pidns_of(pid) == ns and is_alive(pid):
                    pids.add(pid)
        return pids

    def poweron(self, node, quiet=False):
        """Boot a node: a new slurmd in fresh PID + mount + time namespaces."""
        self.check_node(node)
        with flocked(self.p.node_lock(node)):
            if self.node_running(node):
                if not quiet:
                    log(f"{node} is already powered on")
                return
            old = self.node_record(node) or {}
            # Move the namespace's boot clock back by the host's uptime, so inside it
            # uptime starts at ~0: slurmd then reports boot time = now, a NEW boot.
            # unshare takes whole seconds and the kernel rejects a clock below 0, so
            # the offset is -floor(uptime); starting right after a second boundary of
            # the host's boot clock makes the node's uptime start at ~0.0 rather than
            # anywhere in [0, 1). This matters: slurmd reports uptime rounded UP
            # (sysinfo), and slurmctld only completes a reboot whose boot time is not
            # before the reboot request, so a boot time 2 s too early can make a
            # quick reboot look like it never happened ("reboot timed out").
            frac = host_uptime_seconds() % 1.0
            if frac > 0.02:
                time.sleep(1.0 - frac)
            offset = -int(host_uptime_seconds())
            self.write_kernel_log(node)
            argv = [
                "unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
                "--time", f"--boottime={offset}", "--",
                # pid 1 of the namespace: a tiny init that reaps orphans (slurmstepd
                # daemonizes) and runs slurmd; if slurmd exits, the node goes down.
                sys.executable, PACKAGE, "--dir", self.p.root,
                "node-init", "--", "slurmd", "-D", "-N", node,
            ]
            rec = self.spawn(f"slurmd-{node}", argv, self.daemon_env(node), record=False)
            outer = rec["pid"]

            def inner():
                kids = [k for k in children_of(outer) if pidns_of(k) != pidns_of(outer)]
                return kids[0] if kids else None
            try:
                inner_pid = wait_for(f"{node}'s slurmd to start", inner, 10, 0.02)
            except ClusterError:
                kill_and_wait([outer], signal.SIGKILL)
                raise
            st = proc_stat(inner_pid)
            write_json(self.p.node_rec(node), {
                "node": node,
                "powered": True,
                "outer_pid": outer,
                "outer_starttime": rec["starttime"],
                "inner_pid": inner_pid,
                "inner_starttime": st[2] if st else None,
                "pidns": pidns_of(inner_pid),
                "boots": int(old.get("boots", 0)) + 1,
                "booted_at": time.time(),
            })
            if not quiet:
                log(f"{node} powered on (outer pid {outer}, slurmd pid {inner_pid})")

    def crash(self, node, quiet=False, reason="crash"):
        """Power loss: SIGKILL the node's slurmd and every process of its jobs at once."""
        self.check_node(node)
        with flocked(self.p.node_lock(node)):
            rec = self.node_record(node)
            if not rec:
                if not quiet:
                    log(f"{node} is already powered off")
                return
            pids = self.node_pids(rec)
            if not pids:
                if not quiet:
                    log(f"{node} is already powered off")
            else:
                # A power loss stops every process at once. SIGKILLs sent one after another
                # let a slurmstepd see its job's process die and report the job FAILED
                # (NonZeroExitCode) before it dies itself, instead of the NODE_FAIL Slurm
                # records for a lost node (seen on a loaded machine): stop them all first
                # (a stopped process notices nothing), until no new one appeared, then kill.
                for _attempt in range(5):
                    for pid in pids:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGSTOP)
                    now = self.node_pids(rec)
                    if set(now) <= set(pids):
                        break
                    pids = sorted(set(pids) | set(now))
                # Inner (the namespace's init) and outer together: when the init of a
                # PID namespace dies the kernel SIGKILLs everything else in it.
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                wait_for(f"{node}'s processes to die",
                         lambda: not self.node_pids(rec), 10, 0.05)
                if not quiet:
                    log(f"{node} powered off ({reason}): killed {len(pids)} processes")
            rec["powered"] = False
            rec["powered_off_at"] = time.time()
            write_json(self.p.node_rec(node), rec)

    def slurmd_pids(self, rec):
        """Host pids of the slurmd process(es) inside a node's namespace."""
        out = []
        for pid in self.node_pids(rec):
            try:
                with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
                    if f.read().strip() == "slurmd":
                        out.append(pid)
            except OSError:
                pass
        return out

    def slurmd_signal(self, node, start):
        """Kill only slurmd (jobs keep running) or start it again, same boot time."""
        self.check_node(node)
        with flocked(self.p.node_lock(node)):
            if not self.node_running(node):
                raise ClusterError(f"{node} is powered off; use cluster-poweron")
            rec = self.node_record(node)
            running = bool(self.slurmd_pids(rec))
            if start and running:
                log(f"{node}: slurmd already running")
                return
            if not start and not running:
                log(f"{node}: slurmd already dead")
                return
            os.kill(rec["inner_pid"], signal.SIGUSR1 if start else signal.SIGUSR2)
            wait_for(f"{node}'s slurmd to {'start' if start else 'die'}",
                     lambda: bool(self.slurmd_pids(rec)) == start, 10, 0.05)
            log(f"{node}: slurmd {'started (boot time unchanged)' if start else 'killed (jobs keep running)'}")

    def reboot(self, node):
        """Power-cycle a node (what RebootProgram asks powerd for)."""
        self.crash(node, quiet=True, reason="reboot")
        # Stay off for 2 s: the boot time slurmd reports (whole seconds, uptime
        # rounded up) must be clearly later than slurmctld's reboot request time.
        time.sleep(2)
        self.poweron(node, quiet=True)
        log(f"{node} rebooted")

    def _reboot_logged(self, node):
        try:
            self.reboot(node)
        except (ClusterError, OSError) as exc:
            log(f"reboot of {node} failed: {exc}")

    def powerd(self):
        """Loop: perform the reboots that reboot-program.sh requested."""
        log(f"powerd running, watching {self.p.power_requests}")
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        while not stop:
            try:
                names = sorted(os.listdir(self.p.power_requests))
            except FileNotFoundError:
                names = []
            for name in names:
                if not name.endswith(".reboot"):
                    continue
                node = name[: -len(".reboot")]
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.p.power_requests, name))
                log(f"reboot requested for {node}")
                # One thread per reboot: `scontrol reboot n[1-64]` reboots the nodes
                # in parallel, like real hardware. Nodes have their own locks.
                threading.Thread(target=self._reboot_logged, args=(node,),
                                 name=f"reboot-{node}", daemon=True).start()
            reap_children()  # nodes we booted that were crashed meanwhile
            time.sleep(0.2)
        log("powerd stopping")

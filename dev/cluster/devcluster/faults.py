"""Fault injection: a GPU fault (through the GPU stand-ins), a failing Prolog, one daemon stopped."""

import contextlib
import os
import sys

from .base import ClusterBase
from .paths import HERE, ClusterError, log
from .processes import write_file


def gpu_standin_module():
    """dev/cluster/gpu_standin.py, the GPU stand-ins (fault files, kernel log lines)."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import gpu_standin  # pylint: disable=import-outside-toplevel
    return gpu_standin


class ClusterFaults(ClusterBase):
    """What `make cluster-gpu-fault`, `cluster-prolog-fail` and `cluster-<daemon>-stop` do (a mixin
    of cluster.Cluster)."""

    def write_kernel_log(self, node):
        """A node boots: its kernel log "since boot" holds the lines of the fault it has now."""
        gpu_standin = gpu_standin_module()
        d = os.path.join(self.p.gpu, node)
        os.makedirs(d, exist_ok=True)
        write_file(gpu_standin.kernel_log_file(self.p.root, node),
                   gpu_standin.fault_kernel_lines(gpu_standin.current_fault(self.p.root, node)))

    def gpu_fault(self, node, fault):
        """Set a node's GPU fault (none clears it). nvidia-smi shows it at once; the kernel log
        gets the fault's Xid lines now (a running node) and again at every boot while it lasts."""
        gpu_standin = gpu_standin_module()
        self.check_node(node)
        if fault not in gpu_standin.FAULTS:
            raise ClusterError(f"unknown FAULT {fault!r}; one of {', '.join(gpu_standin.FAULTS)}")
        d = os.path.join(self.p.gpu, node)
        os.makedirs(d, exist_ok=True)
        path = gpu_standin.fault_file(self.p.root, node)
        if fault == "none":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        else:
            write_file(path, fault + "\n")
            with open(gpu_standin.kernel_log_file(self.p.root, node), "a", encoding="utf-8") as handle:
                handle.write(gpu_standin.fault_kernel_lines(fault))
        log(f"{node}: GPU fault {fault}" + (" (the kernel log keeps its Xid lines until the next boot)"
                                            if fault == "none" else ""))

    def prolog_fail(self, node, fail):
        """Make the Prolog fail (or succeed again) on one node."""
        self.check_node(node)
        flag = os.path.join(self.p.fail_prolog, node)
        if fail:
            write_file(flag, "")
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(flag)
        log(f"{node}: prolog {'fails from now on' if fail else 'succeeds again'}")

    def stop_only(self, daemon):
        """Stop only slurmctld or slurmdbd; the rest keeps running. Without slurmctld the
        controller is gone (nodes, jobs, slurmdbd run on); without slurmdbd accounting is gone,
        so sacct and sacctmgr cannot answer while the cluster itself runs on."""
        if not self.daemon_pid(daemon):
            log(f"{daemon} is not running")
            return
        self.stop_daemon(daemon)
        again = " with its state" if daemon == "slurmctld" else ""
        log(f"{daemon} stopped; `cluster-{daemon}-start` starts it again{again}")

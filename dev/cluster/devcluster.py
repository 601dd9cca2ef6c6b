#!/usr/bin/env python3
"""Manage a real multi-node Slurm 22.05 cluster on one Debian 12 machine.

This is the default target for the collection's demo and integration tests.
Everything lives in one state directory (DEVCLUSTER_DIR, default
<repo>/.devcluster) and every daemon is private to it:

* munged       own key, socket and pid file (AuthInfo=socket=... in the configs)
* mariadbd     own datadir, socket and pid file, TCP on 127.0.0.1:16830
* slurmdbd     port 16819, reads slurmdbd.conf next to slurm.conf
* slurmctld    port 16817
* slurmd x N   one per compute node n1..nN, port 17000+i, `slurmd -N nI`,
               each in its own PID + mount + time namespace (see "Nodes")
* powerd       a tiny helper of ours that performs reboots (see "Reboots")

Nodes
    Each slurmd runs as
        unshare --pid --fork --kill-child --mount-proc --time --boottime -<uptime> \
            slurmd -D -N nI
    We track the OUTER pid (unshare) and the inner one (slurmd, pid 1 in its
    namespace). SIGKILL to both kills every process of the node at once, job
    steps included: that is our "power loss". The time namespace moves the boot
    clock so that a freshly started slurmd reports a NEW boot time to
    slurmctld, which is what Slurm needs to consider a reboot done.

Reboots
    slurmd runs RebootProgram (reboot-program.sh) inside the node's PID
    namespace. Nothing started from there can outlive the namespace (setsid and
    nohup do not help: when the namespace's init dies the kernel kills every
    process in it), so the reboot program only drops a request file and
    returns; `powerd`, which runs outside all node namespaces, picks it up,
    "powers off" that node and boots it again with a new boot time.

Usage (normally through dev/cluster/cluster.mk):
    devcluster.py --dir DIR up [--nodes N] [--slurmd-nodes M]
    devcluster.py --dir DIR down | status | env
    devcluster.py --dir DIR crash NODE | poweron NODE | reboot NODE
    devcluster.py --dir DIR slurmd-kill NODE | slurmd-start NODE
"""

import argparse
import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Dict

CLUSTER_NAME = "devcluster"
# ClusterName of another dev cluster of the fleet (`make cluster-up CLUSTER=b`: ClusterName b).
CLUSTER_NAME_VAR = "DEVCLUSTER_NAME"

# Non-standard ports, so a real Slurm/MariaDB on the machine is never hit.
SLURMCTLD_PORT = 16817
SLURMDBD_PORT = 16819
MARIADB_PORT = 16830
SLURMD_PORT_BASE = 17000  # node nI listens on SLURMD_PORT_BASE + I (+ offset)
# Containers share the host's network (so host-side tools, e.g. the tests' slurmctld proxy, reach
# them): each release adds its own offset to every port above, so releases run side by side.
PORT_OFFSETS = {"22.05": 0, "24.11": 6000, "26.05": 12000}

DB_NAME = "slurm_acct_db"
DB_USER = "slurm"

HERE = os.path.dirname(os.path.abspath(__file__))
REBOOT_PROGRAM = os.path.join(HERE, "reboot-program.sh")
# HealthCheckProgram: the node_health role's program, straight from the repository, with a dev
# config whose nvidia-smi and kernel log are the GPU stand-ins (gpu_standin.py).
HEALTHCHECK_PROGRAM = os.path.join(os.path.dirname(os.path.dirname(HERE)), "roles", "node_health",
                                   "files", "clusterops-healthcheck")
GPU_STANDIN = os.path.join(HERE, "gpu_standin.py")
# slurm.conf HealthCheckInterval: short enough that a fault injected into a running node is
# caught within a test, long enough that 4 nodes x one Python start stay noise on 2 cores.
HEALTHCHECK_INTERVAL = 30

# Environment marker set on every daemon we start, so `down` can find any
# leftover by scanning /proc/*/environ even if a pid file was lost.
MARKER_VAR = "CLUSTEROPS_DEVCLUSTER_DAEMON"
# Set on every slurmd (and so inherited by RebootProgram): which node it is.
NODE_VAR = "CLUSTEROPS_DEV_NODE"
DIR_VAR = "CLUSTEROPS_DEV_DIR"

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# The release the host runs (Debian 12's Slurm): everything else runs in a podman container of
# its own image (dev/cluster/images/build.sh), with this same script inside it.
HOST_RELEASE = "22.05"
CONTAINER_RELEASES = ("24.11", "26.05")
IMAGE = "localhost/clusterops-slurm:{release}"
CONTAINER = "clusterops-slurm-{release}"
# Set by the host side on every `podman exec` of this script: the name of the container it runs in.
CONTAINER_VAR = "CLUSTEROPS_DEV_CONTAINER"
# In the images: bookworm's libmariadb.so.3 for slurmdbd (see images/Containerfile) and the
# training venv (Debian's python3-torch through system site packages).
BOOKWORM_LIBMARIADB = "/opt/clusterops/bookworm-libmariadb"
CONTAINER_VENV = "/opt/clusterops/venv"
# Same path inside every container and on the host: training registries, checkpoints, logs.
SHARED_DIR = "/var/tmp/clusterops-shared"  # nosec B108  # one fixed path for the bind mounts; made by make_shared_dir()
# Users the tests and the demo submit as, created in the containers with the host's uid/gid.
DEV_USERS = ("clusterops-alice",)
# Client commands that get a wrapper in <state dir>/bin for a containerised release.
CLIENT_COMMANDS = ("sinfo", "scontrol", "squeue", "sacct", "sacctmgr", "sbatch", "scancel",
                   "srun", "salloc", "sdiag", "sstat", "sprio", "sshare", "sreport", "strigger")


class ClusterError(Exception):
    """A failure we report as one clear line and exit code 1."""


def log(msg):
    print(f"devcluster: {msg}", flush=True)


# --------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------
class Paths:
    """Every file the cluster uses, all under one state directory."""

    def __init__(self, root):
        root = os.path.abspath(root)
        if any(c.isspace() for c in root):
            # slurm.conf has no quoting for paths.
            raise ClusterError(f"state dir must not contain whitespace: {root!r}")
        self.root = root
        self.etc = os.path.join(root, "etc")
        self.slurm_conf = os.path.join(self.etc, "slurm.conf")
        self.slurmdbd_conf = os.path.join(self.etc, "slurmdbd.conf")
        self.plugstack_conf = os.path.join(self.etc, "plugstack.conf")
        # RebootProgram: a two-line script naming this state dir (26.05 runs RebootProgram with
        # an environment holding only SLURM_NODE_NAME), which runs reboot-program.sh.
        self.reboot_program = os.path.join(self.etc, "reboot-program")
        # Client command wrappers of a containerised release (podman exec), see write_client_files.
        self.bin = os.path.join(root, "bin")
        # Bind-mounted over /etc/hosts inside each node's mount namespace (see node_init).
        self.hosts = os.path.join(self.etc, "hosts")
        self.cluster_json = os.path.join(root, "cluster.json")
        self.env_sh = os.path.join(root, "env.sh")
        self.inventory = os.path.join(root, "inventory.yml")
        self.log = os.path.join(root, "log")
        self.run = os.path.join(root, "run")
        self.nodes_run = os.path.join(self.run, "nodes")
        self.power_requests = os.path.join(self.run, "power-requests")
        # Prolog: succeeds, unless run/fail-prolog/<node> exists (fault injection: Slurm drains
        # the node "Prolog error" and requeues the job held, "launch failed requeued held").
        self.prolog = os.path.join(self.etc, "prolog")
        self.fail_prolog = os.path.join(self.run, "fail-prolog")
        # GPU fault emulation: run/gpu/<node>/fault (the fault now) and kernel.log (since boot).
        self.gpu = os.path.join(self.run, "gpu")
        # HealthCheckProgram wrapper (names the config; slurmd passes no arguments) and config.
        self.healthcheck = os.path.join(self.etc, "healthcheck")
        self.healthcheck_json = os.path.join(self.etc, "healthcheck.json")
        self.lock = os.path.join(self.run, "devcluster.lock")
        # munged insists that every directory above its socket is world-executable
        # and not world-writable; 0755 satisfies it.
        self.munge = os.path.join(root, "munge")
        self.munge_key = os.path.join(self.munge, "munge.key")
        self.munge_socket = os.path.join(self.munge, "munged.sock")
        self.munge_seed = os.path.join(self.munge, "munged.seed")
        self.mysql = os.path.join(root, "mysql")
        self.mysql_data = os.path.join(self.mysql, "data")
        self.mysql_tmp = os.path.join(self.mysql, "tmp")
        self.mysql_socket = os.path.join(self.mysql, "mysqld.sock")
        self.mysql_password = os.path.join(self.mysql, "slurm-db-password")
        self.slurm_state = os.path.join(root, "slurm", "state")
        self.slurm_spool = os.path.join(root, "slurm", "spool")
        for sock in (self.munge_socket, self.mysql_socket):
            if len(sock) > 100:  # sun_path is 108 bytes
                raise ClusterError(f"state dir path too long for a unix socket: {sock}")

    def pidrec(self, name):
        """Our own record of a daemon's pid (and start time, against pid reuse)."""
        return os.path.join(self.run, f"{name}.json")

    def node_rec(self, node):
        return os.path.join(self.nodes_run, f"{node}.json")

    def ensure_dirs(self):
        for d, mode in (
            (self.root, 0o755),
            (self.etc, 0o755),
            (self.log, 0o755),
            (self.run, 0o755),
            (self.nodes_run, 0o755),
            (self.power_requests, 0o755),
            (self.fail_prolog, 0o755),
            (self.gpu, 0o755),
            (self.munge, 0o755),
            (self.mysql, 0o700),
            (self.mysql_tmp, 0o700),
            (self.slurm_state, 0o700),
            (self.slurm_spool, 0o755),
        ):
            os.makedirs(d, exist_ok=True)
            os.chmod(d, mode)


# --------------------------------------------------------------------------
# Process helpers
# --------------------------------------------------------------------------
def proc_stat(pid):
    """Return (state, ppid, starttime) of a pid, or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm may contain spaces and parentheses: split after the LAST ')'.
    rest = data[data.rindex(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[19])


def is_alive(pid, starttime=None):
    """True if pid runs (zombies count as dead) and, if given, started at starttime."""
    if not pid:
        return False
    st = proc_stat(pid)
    if st is None or st[0] in ("Z", "X"):
        return False
    return starttime is None or st[2] == starttime


def all_pids():
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def children_of(pid):
    out = []
    for p in all_pids():
        st = proc_stat(p)
        if st and st[1] == pid:
            out.append(p)
    return out


def reap_children():
    """Collect exited children so they do not linger as zombies."""
    while True:
        try:
            pid = os.waitpid(-1, os.WNOHANG)[0]
        except ChildProcessError:
            return
        if pid == 0:
            return


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


def pidns_of(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def environ_has(pid, needle):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def make_shared_dir():
    """SHARED_DIR, mode 1777 like /tmp (every user's runs, checkpoints and logs), never through a
    link or a folder someone else planted at that fixed path in /var/tmp (a chmod through a link to
    /etc would make /etc world-writable): opened with O_NOFOLLOW, it must be this user's directory."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(SHARED_DIR, 0o700)
    try:
        fd = os.open(SHARED_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ClusterError(f"{SHARED_DIR}: not a directory, or a link ({exc.strerror}): remove it") from exc
    try:
        owner = os.fstat(fd).st_uid
        if owner != os.geteuid():
            raise ClusterError(f"{SHARED_DIR} belongs to uid {owner}, not to {os.geteuid()}: remove it")
        os.fchmod(fd, 0o1777)  # nosec B103  # shared like /tmp (sticky): the dev users' jobs write their runs there
    finally:
        os.close(fd)


def write_file(path, text, mode=0o644):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def write_json(path, data):
    write_file(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def kill_and_wait(pids, sig=signal.SIGTERM, timeout=15.0):
    """Send sig to live pids, wait for them to exit, SIGKILL what is left."""
    pids = [p for p in pids if is_alive(p)]
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [p for p in pids if is_alive(p)]
        if not pids:
            return
        time.sleep(0.1)
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(is_alive(p) for p in pids):
        time.sleep(0.05)


def run(argv, env=None, check=True, timeout=60, input_text=None):
    """Run a command (argument list, no shell) and return CompletedProcess."""
    res = subprocess.run(
        argv, env=env, input=input_text, capture_output=True, text=True,
        timeout=timeout, check=False,
    )
    if check and res.returncode != 0:
        raise ClusterError(
            f"command failed (rc={res.returncode}): {' '.join(argv)}\n"
            f"{res.stdout}{res.stderr}".rstrip()
        )
    return res


@contextlib.contextmanager
def flocked(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def wait_for(what, predicate, timeout, interval=0.25):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def tcp_listening(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def host_uptime_seconds():
    with open("/proc/uptime", encoding="ascii") as f:
        return float(f.read().split()[0])


# --------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------
class Cluster:
    def __init__(self, root, release=HOST_RELEASE, cluster_name=None):
        self.p = Paths(root)
        self.release = release
        # Given, else the one this state dir was started with, else the default cluster's.
        self.cluster_name = (cluster_name or (read_json(self.p.cluster_json) or {}).get("cluster_name")
                             or CLUSTER_NAME)
        # The container this script runs in (set by the host side), or None on the host.
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
        # Foreground stdout/stderr; Slurm daemons also write their own LogFile.
        logf = os.path.join(self.p.log, f"{name}.out")
        with open(logf, "ab") as out:
            proc = subprocess.Popen(  # noqa: S603 - fixed argument list
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=env, cwd=self.p.root, start_new_session=True, close_fds=True,
            )
        st = proc_stat(proc.pid)
        rec = {"pid": proc.pid, "starttime": st[2] if st else None, "argv": argv}
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

    # ---- configuration ---------------------------------------------------
    def load_config(self):
        return read_json(self.p.cluster_json)

    def node_names(self, cfg=None):
        cfg = cfg or self.load_config() or {}
        return [f"n{i}" for i in range(1, int(cfg.get("nodes", 0)) + 1)]

    def slurmd_node_names(self, cfg=None):
        cfg = cfg or self.load_config() or {}
        return self.node_names(cfg)[: int(cfg.get("slurmd_nodes", 0))]

    def db_password(self):
        if not os.path.exists(self.p.mysql_password):
            write_file(self.p.mysql_password, secrets.token_hex(16) + "\n", 0o600)
        with open(self.p.mysql_password, encoding="ascii") as f:
            return f.read().strip()

    def render_slurm_conf(self, cfg):
        p = self.p
        cpus = os.cpu_count() or 1
        lines = [
            "# Generated by dev/cluster/devcluster.py -- do not edit, rerun cluster-up.",
            f"# Dev cluster: {cfg['nodes']} nodes, {cfg['slurmd_nodes']} of them run a slurmd.",
            f"ClusterName={self.cluster_name}",
            # slurmctld accepts "localhost" as its own name, whatever the hostname.
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={self.slurmctld_port}",
            # Default slurmd port; the nodes below override it with a port each (Port=[a-b]).
            f"SlurmdPort={self.slurmd_port_base}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "",
            "# Private munged: both authentication and job credentials use its socket.",
            "AuthType=auth/munge",
            f"AuthInfo=socket={p.munge_socket}",
            "CredType=cred/munge",
            "",
            f"StateSaveLocation={p.slurm_state}",
            f"SlurmdSpoolDir={p.slurm_spool}/%n",
            f"SlurmctldPidFile={p.run}/slurmctld.pid",
            # Inside its PID namespace slurmd writes "1" here; devcluster.py tracks
            # the real (outer) pid itself in run/nodes/<node>.json.
            f"SlurmdPidFile={p.run}/slurmd-%n.pid",
            f"SlurmctldLogFile={p.log}/slurmctld.log",
            f"SlurmdLogFile={p.log}/slurmd-%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            f"PlugStackConfig={p.plugstack_conf}",
            "",
            "# No cgroups on this machine.",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/linux",
            "JobAcctGatherFrequency=10",
            "PropagateResourceLimits=NONE",
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MailProg=/bin/true",
            "",
            "# Accounting through our private slurmdbd.",
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={self.slurmdbd_port}",
            "# Connections to slurmdbd do NOT use AuthInfo: with auth/munge they take the",
            "# munged socket from AccountingStoragePass (Slurm's \"alternate MUNGE daemon\"",
            "# for slurmdbd). Without it slurmctld, sacct and sacctmgr would use",
            "# /run/munge/munge.socket.2.",
            f"AccountingStoragePass={p.munge_socket}",
            "JobCompType=jobcomp/none",
            "",
            "# Failure handling.",
            f"# A node whose slurmd stops answering is marked DOWN after {self.slurmd_timeout(cfg)} s.",
            "# In a container (24.11, 26.05) 10 s marked healthy nodes \"Not responding\" (ping",
            "# gaps of up to 15 s were seen); 30 s was stable. 0 (SLURMD_TIMEOUT=0, the scaling",
            "# benchmark): no node is marked DOWN, the nodes that do not answer are pinged every 100 s",
            "# instead of every SlurmdTimeout/3 (with TreeWidth below, one slurmctld thread each).",
            f"SlurmdTimeout={self.slurmd_timeout(cfg)}",
            "SlurmctldTimeout=30",
            "MessageTimeout=10",
            "KillWait=5",
            "InactiveLimit=0",
            "MinJobAge=300",
            "# ReturnToService=0 is Slurm's default and what production clusters use: a",
            "# node that was DOWN (crash, not responding) stays DOWN when its slurmd comes",
            "# back, until an admin (or the remediation playbook) resumes it. Keeping the",
            "# default means the dev cluster shows the same states the playbook sees.",
            "ReturnToService=0",
            "# `scontrol reboot` runs this on the node; it asks powerd to power-cycle it.",
            f"RebootProgram={p.reboot_program}",
            "# Succeeds unless `cluster-prolog-fail NODE=..` asked it to fail on that node.",
            f"Prolog={p.prolog}",
            "# The node_health role's health check (GPU stand-ins, make cluster-gpu-fault): run by",
            "# slurmd at start and every HealthCheckInterval, on nodes in any state.",
            f"HealthCheckProgram={p.healthcheck}",
            f"HealthCheckInterval={HEALTHCHECK_INTERVAL}",
            "HealthCheckNodeState=ANY",
            "# A node that was asked to reboot must register with a new boot time within",
            "# ResumeTimeout or it is set DOWN \"reboot timed out\". Our reboot takes ~2 s;",
            "# 60 s leaves room for a slow, loaded machine without making tests wait long.",
            "ResumeTimeout=60",
            "",
            "# slurmd reports the configured sizes below instead of probing the machine",
            "# (all nodes share the same CPUs), so no node is drained for low resources.",
            "SlurmdParameters=config_overrides",
            "# Talk to every slurmd directly: with nodes that run no slurmd, tree",
            "# forwarding through a dead node would make live nodes look unresponsive.",
            "TreeWidth=65533",
            "",
        ]
        # One line for every node, as a real cluster defines its nodes (a hostlist, here with a
        # port range: each slurmd has its own port), not one per node: every Slurm command
        # parses slurm.conf first, and 16,384 NodeName lines cost each one 0.5 s (sinfo --version).
        count = len(self.node_names(cfg))
        names, ports = "n1", str(self.slurmd_port_base + 1)
        if count > 1:
            names = f"n[1-{count}]"
            ports = f"[{self.slurmd_port_base + 1}-{self.slurmd_port_base + count}]"
        lines.append(f"NodeName={names} NodeHostname=localhost NodeAddr=127.0.0.1 "
                     f"Port={ports} CPUs={cpus} RealMemory=1024 State=UNKNOWN")
        lines += [
            "",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "PartitionName=train Nodes=ALL Default=NO MaxTime=INFINITE State=UP",
            "",
        ]
        return "\n".join(lines)

    def slurmd_timeout(self, cfg):
        """slurm.conf SlurmdTimeout (s): the cluster's own (``up --slurmd-timeout``), else 30 in a
        container and 10 on the host."""
        if cfg.get("slurmd_timeout") is not None:
            return int(cfg["slurmd_timeout"])
        return 30 if self.container else 10

    def render_reboot_program(self):
        """RebootProgram: names the state dir and runs reboot-program.sh.

        slurmd 22.05 passes its own environment (CLUSTEROPS_DEV_NODE, CLUSTEROPS_DEV_DIR) to
        RebootProgram; 26.05 passes only SLURM_NODE_NAME, so the state dir is written here and
        reboot-program.sh takes the node from either variable.
        """
        return "\n".join([
            "#!/bin/sh",
            "# Generated by dev/cluster/devcluster.py: the dev cluster's RebootProgram.",
            f"PATH={SYSTEM_PATH}",
            f"{DIR_VAR}={self.p.root}",
            f"export PATH {DIR_VAR}",
            f'exec {REBOOT_PROGRAM} "$@"',
            "",
        ])

    def render_prolog(self):
        return "\n".join([
            "#!/bin/sh",
            "# Generated by dev/cluster/devcluster.py: fails on a node while",
            f"# {self.p.fail_prolog}/<node> exists (make cluster-prolog-fail NODE=<node>).",
            'node="${SLURMD_NODENAME:-${SLURM_NODE_NAME:-}}"',
            f'if [ -n "$node" ] && [ -e "{self.p.fail_prolog}/$node" ]; then',
            '  echo "dev cluster: prolog failure injected on $node" >&2',
            "  exit 1",
            "fi",
            "exit 0",
            "",
        ])

    def render_healthcheck(self):
        """HealthCheckProgram: runs the role's program with the dev config (slurmd gives none)."""
        return "\n".join([
            "#!/bin/sh",
            "# Generated by dev/cluster/devcluster.py: the dev cluster's HealthCheckProgram.",
            f"PATH={SYSTEM_PATH}",
            "export PATH",
            f'exec /usr/bin/python3 {HEALTHCHECK_PROGRAM} --config {self.p.healthcheck_json} "$@"',
            "",
        ])

    def healthcheck_config(self):
        """The dev config: 8 GPUs per node from the stand-in nvidia-smi and kernel log."""
        standin = ["/usr/bin/python3", GPU_STANDIN, "--dir", self.p.root, "--node", "{node}"]
        return {
            "mode": "checks",
            "scontrol": "scontrol",
            "slurm_conf": self.p.slurm_conf,
            "timeout": 30,
            "check_timeout": 10,
            "resume_own_drain": True,
            "nvidia_smi": standin + ["nvidia-smi"],
            "kernel_log_commands": [standin + ["kernel-log"]],
            "log_file": os.path.join(self.p.log, "healthcheck-{node}.log"),
            "log_max_bytes": 1048576,
            "log_backups": 2,
            "debug": True,
            "checks": [
                # Xid first: the most specific cause, the one a remediation class keys on.
                {"type": "gpu_xid", "ignore": [13, 31, 43, 45, 94]},
                {"type": "gpu_state"},
                {"type": "gpu_count", "expected": 8},
            ],
        }

    def write_kernel_log(self, node):
        """A node boots: its kernel log "since boot" holds the lines of the fault it has now."""
        sys.path.insert(0, HERE)
        import gpu_standin  # pylint: disable=import-outside-toplevel
        d = os.path.join(self.p.gpu, node)
        os.makedirs(d, exist_ok=True)
        write_file(gpu_standin.kernel_log_file(self.p.root, node),
                   gpu_standin.fault_kernel_lines(gpu_standin.current_fault(self.p.root, node)))

    def gpu_fault(self, node, fault):
        """Set a node's GPU fault (none clears it). nvidia-smi shows it at once; the kernel log
        gets the fault's Xid lines now (a running node) and again at every boot while it lasts."""
        sys.path.insert(0, HERE)
        import gpu_standin  # pylint: disable=import-outside-toplevel
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

    def render_slurmdbd_conf(self):
        p = self.p
        return "\n".join([
            "# Generated by dev/cluster/devcluster.py -- do not edit, rerun cluster-up.",
            "AuthType=auth/munge",
            f"AuthInfo=socket={p.munge_socket}",
            "DbdHost=localhost",
            "DbdAddr=127.0.0.1",
            f"DbdPort={self.slurmdbd_port}",
            "SlurmUser=root",
            f"PidFile={p.run}/slurmdbd.pid",
            f"LogFile={p.log}/slurmdbd.log",
            "DebugLevel=info",
            "StorageType=accounting_storage/mysql",
            "StorageHost=127.0.0.1",
            f"StoragePort={self.mariadb_port}",
            f"StorageUser={DB_USER}",
            f"StoragePass={self.db_password()}",
            f"StorageLoc={DB_NAME}",
            "",
        ])

    def write_configs(self, cfg):
        p = self.p
        write_file(p.slurm_conf, self.render_slurm_conf(cfg))
        # slurmdbd refuses a slurmdbd.conf readable by others (it holds a password).
        write_file(p.slurmdbd_conf, self.render_slurmdbd_conf(), 0o600)
        write_file(p.plugstack_conf, "# empty: no SPANK plugins in the dev cluster\n")
        write_file(p.reboot_program, self.render_reboot_program(), 0o755)
        write_file(p.prolog, self.render_prolog(), 0o755)
        write_file(p.healthcheck, self.render_healthcheck(), 0o755)
        write_json(p.healthcheck_json, self.healthcheck_config())
        if self.container:
            # The container is this cluster's machine: its default slurm.conf is the cluster's,
            # so commands run without SLURM_CONF (a user's login shell after `su -`) find it.
            os.makedirs("/etc/slurm", exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                os.unlink("/etc/slurm/slurm.conf")
            os.symlink(p.slurm_conf, "/etc/slurm/slurm.conf")
        write_file(p.hosts, self.render_hosts(cfg))
        self.write_client_files()

    def render_hosts(self, cfg):
        """The machine's /etc/hosts plus one line naming every node 127.0.0.1.

        Jobs resolve node names as on a real cluster (a launcher takes MASTER_ADDR from
        `scontrol show hostnames`), without touching the machine's own /etc/hosts: only
        processes inside the node namespaces see this file.
        """
        try:
            with open("/etc/hosts", encoding="utf-8") as handle:
                base = handle.read()
        except OSError:
            base = "127.0.0.1 localhost\n"
        if not base.endswith("\n"):
            base += "\n"
        return base + "# dev cluster nodes (devcluster.py)\n127.0.0.1 " + " ".join(
            self.node_names(cfg)) + "\n"

    def env_lines(self):
        return [f"export SLURM_CONF={self.p.slurm_conf}", f"export DEVCLUSTER_DIR={self.p.root}",
                f"export SLURM={HOST_RELEASE}"]

    def write_client_files(self):
        if self.container:
            ContainerCluster.write_client_files(self.p, self.container)
            return
        write_file(self.p.env_sh, "# Source me: points Slurm commands at the dev cluster.\n"
                   + "\n".join(self.env_lines()) + "\n")
        write_file(self.p.inventory, "\n".join([
            "# Generated by dev/cluster/devcluster.py: the dev cluster as an Ansible inventory.",
            "all:",
            "  children:",
            "    slurm_controller:",
            "      hosts:",
            "        localhost:",
            "          ansible_connection: local",
            '          ansible_python_interpreter: "{{ ansible_playbook_python }}"',
            "      vars:",
            f"        slurm_conf: {self.p.slurm_conf}",
            "",
        ]))

    # ---- munged ----------------------------------------------------------
    def start_munged(self):
        p = self.p
        if self.daemon_pid("munged"):
            return
        if not os.path.exists(p.munge_key):
            # Same as `mungekey -c`: 1024 random bytes, readable by its owner only.
            with open(p.munge_key, "wb") as f:
                f.write(os.urandom(1024))
            os.chmod(p.munge_key, 0o400)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p.munge_socket)
        log("starting munged")
        self.spawn("munged", [
            "munged", "--foreground", "--force",
            f"--socket={p.munge_socket}", f"--key-file={p.munge_key}",
            f"--pid-file={p.run}/munged.pid", f"--log-file={p.log}/munged.log",
            f"--seed-file={p.munge_seed}", "--num-threads=4",
        ], self.daemon_env())
        wait_for("munged socket", lambda: os.path.exists(p.munge_socket), 15)
        # Prove it: encode and decode a credential through our socket.
        cred = run(["munge", "-n", "-S", p.munge_socket]).stdout
        run(["unmunge", "-S", p.munge_socket], input_text=cred)

    # ---- MariaDB ---------------------------------------------------------
    def mysql_cli(self, sql):
        return run(["mariadb", "--no-defaults", f"--socket={self.p.mysql_socket}",
                    "-u", "root", "-e", sql])

    def start_mariadb(self):
        p = self.p
        if self.daemon_pid("mariadb"):
            return
        if not os.path.isdir(os.path.join(p.mysql_data, "mysql")):
            log("initialising private MariaDB datadir (mysql_install_db)")
            shutil.rmtree(p.mysql_data, ignore_errors=True)
            # MariaDB 11 (trixie, forky) dropped the mysql_* names.
            install_db = shutil.which("mariadb-install-db") or "mysql_install_db"
            run([install_db, "--no-defaults", f"--datadir={p.mysql_data}",
                 "--user=root", "--auth-root-authentication-method=socket",
                 "--skip-test-db", "--skip-name-resolve"], timeout=180)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p.mysql_socket)
        log(f"starting MariaDB on 127.0.0.1:{self.mariadb_port}")
        self.spawn("mariadb", [
            "mariadbd", "--no-defaults", f"--datadir={p.mysql_data}",
            f"--socket={p.mysql_socket}", f"--pid-file={p.mysql}/mysqld.pid",
            f"--port={self.mariadb_port}", "--bind-address=127.0.0.1",
            f"--log-error={p.log}/mariadb-error.log", f"--tmpdir={p.mysql_tmp}",
            "--user=root", "--skip-name-resolve", "--skip-log-bin",
            # Values Slurm's accounting docs recommend (smaller buffer pool).
            "--innodb-buffer-pool-size=128M", "--innodb-log-file-size=64M",
            "--innodb-lock-wait-timeout=900", "--max-connections=200",
        ], self.daemon_env())

        def ready():
            if not self.daemon_pid("mariadb"):
                raise ClusterError(f"MariaDB exited, see {p.log}/mariadb-error.log")
            return run(["mariadb-admin", "--no-defaults", f"--socket={p.mysql_socket}",
                        "-u", "root", "ping"], check=False).returncode == 0
        wait_for("MariaDB", ready, 60)
        pw = self.db_password()
        # Idempotent: the user exists after the first start; keep its password in sync.
        stmts = []
        for host in ("127.0.0.1", "localhost"):
            stmts += [
                f"CREATE USER IF NOT EXISTS '{DB_USER}'@'{host}' IDENTIFIED BY '{pw}';",
                f"ALTER USER '{DB_USER}'@'{host}' IDENTIFIED BY '{pw}';",
                f"GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'{host}';",
            ]
        self.mysql_cli(" ".join(stmts) + f" CREATE DATABASE IF NOT EXISTS {DB_NAME};")

    # ---- slurmdbd / slurmctld -------------------------------------------
    def start_slurmdbd(self):
        if self.daemon_pid("slurmdbd"):
            return
        log(f"starting slurmdbd on port {self.slurmdbd_port}")
        env = self.daemon_env()
        if os.path.isdir(BOOKWORM_LIBMARIADB):
            # slurmdbd 24.11/26.05 die against libmariadb3 11.8 ("Number of columns in result
            # (=1) set execeeds maxmimum allowed number of columns (=0)"); bookworm's 10.11 works.
            env["LD_LIBRARY_PATH"] = BOOKWORM_LIBMARIADB
        self.spawn("slurmdbd", ["slurmdbd", "-D"], env)

        def ready():
            if not self.daemon_pid("slurmdbd"):
                raise ClusterError(f"slurmdbd exited, see {self.p.log}/slurmdbd.log")
            return tcp_listening(self.slurmdbd_port)
        wait_for("slurmdbd", ready, 60)
        # Register the cluster before slurmctld connects (harmless if it exists).
        res = run(["sacctmgr", "-n", "-P", "show", "cluster", "format=Cluster"],
                  env=self.client_env())
        if self.cluster_name not in res.stdout.split():
            run(["sacctmgr", "-i", "add", "cluster", self.cluster_name], env=self.client_env())

    def start_slurmctld(self, clean=True):
        if self.daemon_pid("slurmctld"):
            return
        log(f"starting slurmctld on port {self.slurmctld_port}")
        # A state dir started before under another ClusterName: slurmctld refuses ("CLUSTER NAME
        # MISMATCH") the name it saved; a clean start keeps no state anyway.
        saved = os.path.join(self.p.slurm_state, "clustername")
        with contextlib.suppress(OSError):
            with open(saved, encoding="utf-8") as handle:
                if clean and handle.read().strip() != self.cluster_name:
                    os.unlink(saved)
        # -c: start from a clean state (no jobs, node states from slurm.conf), so
        # every cluster-up gives the same pristine cluster. slurmctld-start keeps the state.
        self.spawn("slurmctld", ["slurmctld", "-D"] + (["-c"] if clean else []), self.daemon_env())

        def ready():
            if not self.daemon_pid("slurmctld"):
                raise ClusterError(f"slurmctld exited, see {self.p.log}/slurmctld.log")
            return run(["scontrol", "ping"], env=self.client_env(),
                       check=False).returncode == 0
        wait_for("slurmctld", ready, 60)

    def start_powerd(self):
        if self.daemon_pid("powerd"):
            return
        log("starting powerd (performs node reboots requested by RebootProgram)")
        self.spawn("powerd", [sys.executable, os.path.abspath(__file__), "--dir", self.p.root,
                              "--slurm", self.release, "powerd"], self.daemon_env())

    # ---- nodes -----------------------------------------------------------
    def node_record(self, node):
        return read_json(self.p.node_rec(node))

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

    def check_node(self, node):
        cfg = self.load_config()
        if not cfg:
            raise ClusterError("the cluster was never configured; run cluster-up first")
        if node not in self.node_names(cfg):
            raise ClusterError(f"unknown node {node!r}; nodes are n1..n{cfg['nodes']}")

    def poweron(self, node, quiet=False):
        """Boot a node: a new slurmd in fresh PID + mount + time namespaces."""
        self.check_node(node)
        with flocked(os.path.join(self.p.nodes_run, f"{node}.lock")):
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
                sys.executable, os.path.abspath(__file__), "--dir", self.p.root,
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
        with flocked(os.path.join(self.p.nodes_run, f"{node}.lock")):
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
        with flocked(os.path.join(self.p.nodes_run, f"{node}.lock")):
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

    # ---- Slurm views -----------------------------------------------------
    def node_states(self, nodes):
        """{name: sinfo state word} of ``nodes`` only: sinfo -N formats every node it lists, which
        takes minutes at 16,384 defined nodes (151 s measured), while the few nodes asked for
        with -n take as long as the RPC itself."""
        if not nodes:
            return {}
        res = run(["sinfo", "-N", "-h", "-n", ",".join(nodes), "-o", "%N|%T"],
                  env=self.client_env(), check=False)
        if res.returncode != 0:
            return None
        return dict(line.split("|", 1) for line in res.stdout.split() if "|" in line)

    def wait_nodes_idle(self, nodes, timeout=90):
        def ready():
            states = self.node_states(nodes) or {}
            return all(states.get(n) == "idle" for n in nodes)
        try:
            wait_for(f"nodes {','.join(nodes) or '-'} to be idle", ready, timeout, 0.5)
        except ClusterError:
            res = run(["sinfo", "-N", "-n", ",".join(nodes), "-o", "%N %T %E"], env=self.client_env(),
                      check=False)
            raise ClusterError(f"nodes did not become idle:\n{res.stdout}{res.stderr}"
                               f"see {self.p.log}/slurmctld.log and slurmd-*.log") from None

    def wait_sacct(self, timeout=60):
        def ready():
            res = run(["sacct", "-X", "-n", "-P", "-a", "-S", "now-1hours", "-o", "JobID"],
                      env=self.client_env(), check=False)
            return res.returncode == 0 and "error" not in res.stderr.lower()
        wait_for("sacct to reach slurmdbd", ready, timeout, 0.5)

    # ---- top-level commands -----------------------------------------------
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
# --------------------------------------------------------------------------
def container_init():
    """pid 1 of a release's container: reaps orphans (our daemons are re-parented here when the
    `podman exec` that started them ends) and exits on SIGTERM (`podman stop` is immediate)."""
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    while not stop:
        reap_children()
        time.sleep(0.5)
    return 0


class ContainerCluster:
    """One privileged podman container per release, running this script inside it.

    The state dir, the repository (read-only) and SHARED_DIR are bind-mounted at the same paths
    inside, so every path in slurm.conf, cluster.json and the inventory means the same file on
    both sides. The container shares the host's network (host-side tools reach its daemons) and
    each release uses its own ports (PORT_OFFSETS), so several releases run at once. Inside, devcluster.py
    starts the same daemons as on the host (with CONTAINER_VAR set): see Cluster.
    """

    def __init__(self, root, release):
        self.p = Paths(root)
        self.release = release
        self.name = CONTAINER.format(release=release)
        self.image = IMAGE.format(release=release)
        self.repo = os.path.dirname(os.path.dirname(HERE))

    # ---- podman ------------------------------------------------------------
    def podman(self, *args, check=True, timeout=120):
        return run(["podman"] + list(args), check=check, timeout=timeout)

    def state(self):
        """'running', 'stopped' or None (no such container)."""
        res = self.podman("container", "inspect", "--format", "{{.State.Running}}", self.name,
                          check=False)
        if res.returncode != 0:
            return None
        return "running" if res.stdout.strip() == "true" else "stopped"

    def inner(self, args):
        """Run this script inside the container; its output goes straight to ours."""
        argv = ["podman", "exec", "-e", f"{CONTAINER_VAR}={self.name}", self.name,
                "/usr/bin/python3", os.path.abspath(__file__), "--dir", self.p.root,
                "--slurm", self.release] + list(args)
        return subprocess.run(argv, check=False).returncode  # noqa: S603 - fixed list

    def require_running(self):
        if self.state() != "running":
            raise ClusterError(f"container {self.name} is not running: make cluster-up SLURM={self.release}")

    # ---- users -------------------------------------------------------------
    def ensure_users(self):
        """DEV_USERS in the container with the host's uid/gid (created on the host first if
        missing, as the tests and the demo would): files in SHARED_DIR have one owner."""
        import grp  # pylint: disable=import-outside-toplevel
        import pwd  # pylint: disable=import-outside-toplevel
        for user in DEV_USERS:
            try:
                ent = pwd.getpwnam(user)
            except KeyError:
                run(["useradd", "-m", "-s", "/bin/bash", user])
                ent = pwd.getpwnam(user)
            group = grp.getgrgid(ent.pw_gid).gr_name
            if self.podman("exec", self.name, "getent", "passwd", user, check=False).returncode == 0:
                continue
            if self.podman("exec", self.name, "getent", "group", group, check=False).returncode != 0:
                self.podman("exec", self.name, "groupadd", "-g", str(ent.pw_gid), group)
            self.podman("exec", self.name, "useradd", "-m", "-s", "/bin/bash", "-u",
                        str(ent.pw_uid), "-g", str(ent.pw_gid), user)

    # ---- commands ------------------------------------------------------------
    def up(self, nodes, slurmd_nodes, slurmd_timeout=None):
        t0 = time.monotonic()
        res = subprocess.run(["bash", os.path.join(HERE, "images", "build.sh"), self.release],
                             check=False)  # noqa: S603,S607 - fixed list
        if res.returncode != 0:
            raise ClusterError(f"building {self.image} failed (dev/cluster/images/build.sh)")
        self.p.ensure_dirs()
        make_shared_dir()
        state = self.state()
        if state == "running":
            used = self.podman("container", "inspect", "--format", "{{.Image}}", self.name).stdout
            built = self.podman("image", "inspect", "--format", "{{.Id}}", self.image).stdout
            if used.strip() != built.strip():
                # A changed image (new inputs) is a changed cluster: start it anew, as the host
                # cluster does for a changed size, rather than keep testing the old build.
                log(f"{self.name} runs an older build of {self.image}: restarting the cluster")
                self.down()
                state = None
        if state == "stopped":
            self.podman("rm", "--force", self.name)
        if state != "running":
            log(f"starting container {self.name} from {self.image}")
            self.podman(
                "run", "--detach", "--privileged", "--network", "host",
                "--shm-size", "1g", "--name", self.name,
                "--label", f"org.clusterops.devcluster={self.p.root}",
                "--volume", f"{self.repo}:{self.repo}:ro",
                "--volume", f"{self.p.root}:{self.p.root}",
                "--volume", f"{SHARED_DIR}:{SHARED_DIR}",
                "--env", "LANG=C.UTF-8", "--env", f"SLURM_CONF={self.p.slurm_conf}",
                self.image, "/usr/bin/python3", os.path.abspath(__file__), "container-init")
        self.ensure_users()
        args = ["up", "--nodes", str(nodes)]
        if slurmd_nodes is not None:
            args += ["--slurmd-nodes", str(slurmd_nodes)]
        if slurmd_timeout is not None:
            args += ["--slurmd-timeout", str(slurmd_timeout)]
        if self.inner(args) != 0:
            raise ClusterError(f"cluster-up inside {self.name} failed; logs in {self.p.log}")
        log(f"Slurm {self.release} up in {time.monotonic() - t0:.1f}s (container {self.name}); "
            f"`eval \"$(make -s cluster-env SLURM={self.release})\"` or `. {self.p.env_sh}`")

    def down(self):
        state = self.state()
        if state == "running" and self.inner(["down"]) != 0:
            raise ClusterError(f"cluster-down inside {self.name} failed")
        if state is not None:
            self.podman("rm", "--force", "--time", "10", self.name, timeout=60)
            log(f"container {self.name} removed")
        else:
            log(f"cluster down (no container {self.name})")

    def status(self):
        if self.state() != "running":
            print(f"state dir: {self.p.root}")
            print(f"container {self.name} is not running: cluster is down")
            return 0
        print(f"container: {self.name} ({self.image})")
        return self.inner(["status"])

    # ---- client files (written from inside the container) --------------------
    @staticmethod
    def env_lines(paths, release):
        return [
            f"export SLURM_CONF={paths.slurm_conf}",
            f"export DEVCLUSTER_DIR={paths.root}",
            f"export SLURM={release}",
            f'export PATH={paths.bin}:"$PATH"',
        ]

    @staticmethod
    def render_wrapper(paths, container, command):
        """<state dir>/bin/<command>: the release's own command, run in its container.

        Root only (podman's root containers). Passes the caller's SLURM_CONF (default: the
        cluster's; another one must lie in a folder the container sees, e.g. SHARED_DIR),
        SLURM_*/S<CMD>_* variables, LANG, LC_ALL and TZ; runs in the caller's folder when it
        exists inside (repository, state dir, SHARED_DIR), else in /tmp; DEVCLUSTER_USER=<user>
        runs the command as that user.
        """
        repo = os.path.dirname(os.path.dirname(HERE))
        return "\n".join([
            "#!/bin/bash",
            f"# Generated by dev/cluster/devcluster.py: `{command}` of the dev cluster in the",
            f"# container {container} (root only). DEVCLUSTER_USER=<user> runs it as that user.",
            f'args=(exec -i -e "SLURM_CONF=${{SLURM_CONF:-{paths.slurm_conf}}}")',
            "while IFS= read -r -d '' kv; do",
            '  name="${kv%%=*}"',
            '  case "${name}" in',
            "    SLURM_CONF) ;;",
            "    SLURM_*|SQUEUE_*|SINFO_*|SACCT_*|SBATCH_*|SALLOC_*|SRUN_*|SCONTROL_*|SCANCEL_*|"
            "SACCTMGR_*|SDIAG_*|SSTAT_*|SPRIO_*|SSHARE_*|SREPORT_*|LANG|LC_ALL|TZ)",
            '      args+=(-e "${name}") ;;',
            "  esac",
            "done < <(env -0)",
            'case "${PWD}" in',
            f"  {repo}|{repo}/*|{paths.root}|{paths.root}/*|{SHARED_DIR}|{SHARED_DIR}/*)"
            ' args+=(-w "${PWD}") ;;',
            "  *) args+=(-w /tmp) ;;",
            "esac",
            '[[ -n "${DEVCLUSTER_USER:-}" ]] && args+=(--user "${DEVCLUSTER_USER}")',
            f'exec podman "${{args[@]}}" {container} {command} "$@"',
            "",
        ])

    @staticmethod
    def write_client_files(paths, container):
        release = container.rsplit("-", 1)[-1]
        os.makedirs(paths.bin, exist_ok=True)
        for command in CLIENT_COMMANDS:
            write_file(os.path.join(paths.bin, command),
                       ContainerCluster.render_wrapper(paths, container, command), 0o755)
        write_file(paths.env_sh, f"# Source me: points Slurm commands at the dev cluster "
                   f"(Slurm {release}, container {container}).\n"
                   + "\n".join(ContainerCluster.env_lines(paths, release)) + "\n")
        write_file(paths.inventory, "\n".join([
            "# Generated by dev/cluster/devcluster.py: the dev cluster as an Ansible inventory.",
            f"# Modules run inside the container {container}, with Slurm {release}'s own commands.",
            "all:",
            "  children:",
            "    slurm_controller:",
            "      hosts:",
            "        localhost:",
            "          ansible_connection: containers.podman.podman",
            f"          ansible_host: {container}",
            "          ansible_python_interpreter: /usr/bin/python3",
            f"          clusterops_dev_venv: {CONTAINER_VENV}",
            f"          clusterops_dev_shared_dir: {SHARED_DIR}",
            "      vars:",
            f"        slurm_conf: {paths.slurm_conf}",
            "",
        ]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
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
    for name, text in (("crash", "power loss of a node"), ("poweron", "boot a node"),
                       ("reboot", "power-cycle a node"),
                       ("slurmd-kill", "kill only the node's slurmd (jobs survive)"),
                       ("slurmd-start", "start the node's slurmd again (same boot time)"),
                       ("prolog-fail", "the Prolog fails on the node from now on"),
                       ("prolog-ok", "the Prolog succeeds on the node again")):
        sp = sub.add_parser(name, help=text)
        sp.add_argument("node")
    gf = sub.add_parser("gpu-fault", help="emulate a GPU fault on a node (none clears it)")
    gf.add_argument("node")
    gf.add_argument("fault")
    sub.add_parser("slurmctld-stop", help="stop slurmctld only (the controller does not answer)")
    sub.add_parser("slurmctld-start", help="start slurmctld again, keeping its state")
    sub.add_parser("slurmdbd-stop", help="stop slurmdbd only (accounting does not answer)")
    sub.add_parser("slurmdbd-start", help="start slurmdbd again")
    sub.add_parser("powerd", help=argparse.SUPPRESS)
    sub.add_parser("container-init", help=argparse.SUPPRESS)
    ni = sub.add_parser("node-init", help=argparse.SUPPRESS)
    ni.add_argument("argv", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
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
            return container_command(ContainerCluster(args.dir, args.slurm), args)
        return cluster_command(Cluster(args.dir, args.slurm, args.cluster_name), args)
    except ClusterError as exc:
        print(f"devcluster: ERROR: {exc}", file=sys.stderr)
        return 1


def check_release(paths, release):
    """Refuse a state dir that holds another release's cluster (SLURM= and DEVCLUSTER_DIR mixed)."""
    cfg = read_json(paths.cluster_json) or {}
    if cfg.get("slurm") and cfg["slurm"] != release:
        raise ClusterError(f"{paths.root} holds a Slurm {cfg['slurm']} dev cluster, not {release}: "
                           "give SLURM= and DEVCLUSTER_DIR= of the same release")


def cluster_command(c, args):
    """A command on this machine's cluster: the host's 22.05, or the inside of a container."""
    if args.cmd == "up":
        c.up(args.nodes, args.slurmd_nodes, args.slurmd_timeout)
    elif args.cmd == "down":
        c.down()
    elif args.cmd == "status":
        c.status()
    elif args.cmd == "env":
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
    elif args.cmd in ("slurmctld-stop", "slurmctld-start", "slurmdbd-stop", "slurmdbd-start"):
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
    """A command on the host side of a containerised release (SLURM=24.11 or 26.05)."""
    if args.cmd == "up":
        c.up(args.nodes, args.slurmd_nodes, args.slurmd_timeout)
    elif args.cmd == "down":
        c.down()
    elif args.cmd == "status":
        return c.status()
    elif args.cmd == "env":
        print("\n".join(ContainerCluster.env_lines(c.p, args.slurm)))
    elif args.cmd in ("crash", "poweron", "reboot", "slurmd-kill", "slurmd-start",
                      "prolog-fail", "prolog-ok"):
        c.require_running()
        return c.inner([args.cmd, args.node])
    elif args.cmd == "gpu-fault":
        c.require_running()
        return c.inner([args.cmd, args.node, args.fault])
    elif args.cmd in ("slurmctld-stop", "slurmctld-start", "slurmdbd-stop", "slurmdbd-start"):
        c.require_running()
        return c.inner([args.cmd])
    else:
        raise ClusterError(f"{args.cmd} runs inside the container only")
    return 0


if __name__ == "__main__":
    sys.exit(main())

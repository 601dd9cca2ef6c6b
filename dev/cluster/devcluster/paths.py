"""Names, ports and paths of the dev cluster: every file it uses lies under one state directory."""

import os

CLUSTER_NAME = "devcluster"
# ClusterName of another dev cluster of the fleet (`make cluster-up CLUSTER=b`: ClusterName b).
CLUSTER_NAME_VAR = "DEVCLUSTER_NAME"

# Non-standard ports, so a real Slurm/MariaDB on the machine is never hit.
SLURMCTLD_PORT = 16817
SLURMDBD_PORT = 16819
MARIADB_PORT = 16830
SLURMD_PORT_BASE = 17000  # node nI listens on SLURMD_PORT_BASE + I (+ offset)
# Containers share the host's network (so host-side tools, e.g. the tests' slurmctld proxy, reach
# them): each release adds its own offset (PORT_OFFSETS, dev/cluster/releases.txt) to every port
# above, so releases run side by side.

DB_NAME = "slurm_acct_db"
DB_USER = "slurm"

#: This package: `python3 <PACKAGE> ...` runs it (powerd, node-init, and inside a container).
PACKAGE = os.path.dirname(os.path.abspath(__file__))
#: dev/cluster, the package's folder, with the programs the cluster runs.
HERE = os.path.dirname(PACKAGE)
REPO = os.path.dirname(os.path.dirname(HERE))
TEMPLATES = os.path.join(PACKAGE, "templates")
REBOOT_PROGRAM = os.path.join(HERE, "reboot-program.sh")
# HealthCheckProgram: the node_health role's program, straight from the repository, with a dev
# config whose nvidia-smi and kernel log are the GPU stand-ins (gpu_standin.py).
HEALTHCHECK_PROGRAM = os.path.join(REPO, "roles", "node_health", "files", "clusterops-healthcheck")
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

# The release the host runs (HOST_RELEASE, Debian 12's Slurm): everything else runs in a podman
# container of its own image (dev/cluster/images/build.sh), with this same package inside it.
IMAGE = "localhost/clusterops-slurm:{release}"
CONTAINER = "clusterops-slurm-{release}"
# Set by the host side on every `podman exec` of this package: the name of the container it runs in.
CONTAINER_VAR = "CLUSTEROPS_DEV_CONTAINER"
# In the images: bookworm's libmariadb.so.3 for slurmdbd (see images/Containerfile) and the
# training venv (Debian's python3-torch through system site packages).
BOOKWORM_LIBMARIADB = "/opt/clusterops/bookworm-libmariadb"
CONTAINER_VENV = "/opt/clusterops/venv"
# Same path inside every container and on the host: training registries, checkpoints, logs.
SHARED_DIR = "/var/tmp/clusterops-shared"  # nosec B108  # one fixed path for the bind mounts; made by make_shared_dir()
# Users the tests and the demo submit as, created in the containers with the host's uid/gid.
DEV_USERS = ("clusterops-alice",)
# The host-wide lock every creation of a local user takes (processes.ensure_user): the lanes of
# `make test` run side by side, and useradd gives up at once while another holds /etc/passwd.
USERS_LOCK = "/run/clusterops-devcluster-users.lock"
# Client commands that get a wrapper in <state dir>/bin for a containerised release.
CLIENT_COMMANDS = ("sinfo", "scontrol", "squeue", "sacct", "sacctmgr", "sbatch", "scancel",
                   "srun", "salloc", "sdiag", "sstat", "sprio", "sshare", "sreport", "strigger")


class ClusterError(Exception):
    """A failure we report as one clear line and exit code 1."""


def log(msg):
    print(f"devcluster: {msg}", flush=True)


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
        # EpilogSlurmctld: runs the event path's job-end program when `make events-up` installed it
        # under events/ (role clusterops.slurm.slurm_events), else nothing.
        self.epilog_slurmctld = os.path.join(self.etc, "epilog-slurmctld")
        self.events = os.path.join(root, "events")
        self.job_end_program = os.path.join(self.events, "libexec", "clusterops-slurm-event-job_fini")
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

    def node_lock(self, node):
        """The lock one node's power changes take (poweron, crash, slurmd signals)."""
        return os.path.join(self.nodes_run, f"{node}.lock")

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

"""The cluster's configuration: slurm.conf, slurmdbd.conf, the programs slurmd runs (RebootProgram,
Prolog, HealthCheckProgram) and its config, the nodes' /etc/hosts, and the client files (env.sh,
the inventory, a container's command wrappers).

Each text comes from a ``string.Template`` file in ``templates/`` (the dev cluster runs under
Debian's python3, stdlib only): ``$name`` is a value given here, ``$$`` a shell's own ``$``. Notes
on slurm.conf.in: slurmctld accepts ``localhost`` as its own name, whatever the hostname; the nodes'
one NodeName line overrides SlurmdPort with a port each (``Port=[a-b]``); inside its PID namespace
slurmd writes ``1`` into SlurmdPidFile, and the power module tracks the real (outer) pid itself in
run/nodes/<node>.json.
"""

import contextlib
import os
import string
import subprocess

from .base import ClusterBase
from .paths import (CLIENT_COMMANDS, CONTAINER_VENV, DB_NAME, DB_USER, DIR_VAR, GPU_STANDIN,
                    HEALTHCHECK_INTERVAL, HEALTHCHECK_PROGRAM, REBOOT_PROGRAM, REPO, SHARED_DIR,
                    SYSTEM_PATH, TEMPLATES)
from .processes import write_file, write_json
from .releases import HOST_RELEASE


def render(template, **values):
    """templates/<template> with ``values`` substituted (KeyError for a missing one)."""
    with open(os.path.join(TEMPLATES, template), encoding="utf-8") as handle:
        return string.Template(handle.read()).substitute(values)


class ClusterConfig(ClusterBase):
    """Renders and writes the cluster's files (a mixin of cluster.Cluster)."""

    def render_slurm_conf(self, cfg):
        p = self.p
        # One line for every node, as a real cluster defines its nodes (a hostlist, here with a
        # port range: each slurmd has its own port), not one per node: every Slurm command
        # parses slurm.conf first, and 16,384 NodeName lines cost each one 0.5 s (sinfo --version).
        count = len(self.node_names(cfg))
        names, ports = "n1", str(self.slurmd_port_base + 1)
        if count > 1:
            names = f"n[1-{count}]"
            ports = f"[{self.slurmd_port_base + 1}-{self.slurmd_port_base + count}]"
        return render(
            "slurm.conf.in", nodes=cfg["nodes"], slurmd_nodes=cfg["slurmd_nodes"],
            cluster_name=self.cluster_name, slurmctld_port=self.slurmctld_port,
            slurmd_port_base=self.slurmd_port_base, slurmdbd_port=self.slurmdbd_port,
            munge_socket=p.munge_socket, slurm_state=p.slurm_state, slurm_spool=p.slurm_spool,
            run=p.run, log=p.log, plugstack_conf=p.plugstack_conf,
            slurmd_timeout=self.slurmd_timeout(cfg), reboot_program=p.reboot_program,
            prolog=p.prolog, epilog_slurmctld=p.epilog_slurmctld, healthcheck=p.healthcheck, healthcheck_interval=HEALTHCHECK_INTERVAL,
            slurmctld_parameters=self.slurmctld_parameters(),
            node_names=names, node_ports=ports, cpus=os.cpu_count() or 1)

    @staticmethod
    def slurmctld_parameters():
        """slurm.conf's SlurmctldParameters line: ``enable_expedited_requeue`` where slurmctld has it
        (25.05 and later: ``sbatch --requeue=expedite``; 26.05 of the dev clusters), else a comment."""
        version = subprocess.run(["slurmctld", "-V"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 universal_newlines=True, check=False).stdout.split()
        release = tuple(int(x) for x in version[-1].split(".")[:2]) if len(version) == 2 else (0, 0)
        if release >= (25, 5):
            return "SlurmctldParameters=enable_expedited_requeue"
        return "# SlurmctldParameters=enable_expedited_requeue: Slurm 25.05 and later, not %s" % " ".join(version)

    def render_reboot_program(self):
        """RebootProgram: names the state dir and runs reboot-program.sh.

        slurmd 22.05 passes its own environment (CLUSTEROPS_DEV_NODE, CLUSTEROPS_DEV_DIR) to
        RebootProgram; 26.05 passes only SLURM_NODE_NAME, so the state dir is written here and
        reboot-program.sh takes the node from either variable.
        """
        return render("reboot-program.in", system_path=SYSTEM_PATH, dir_var=DIR_VAR,
                      root=self.p.root, reboot_program=REBOOT_PROGRAM)

    def render_prolog(self):
        return render("prolog.in", fail_prolog=self.p.fail_prolog)

    def render_epilog_slurmctld(self):
        return render("epilog-slurmctld.in", job_end_program=self.p.job_end_program)

    def render_healthcheck(self):
        """HealthCheckProgram: runs the role's program with the dev config (slurmd gives none)."""
        return render("healthcheck.in", system_path=SYSTEM_PATH,
                      healthcheck_program=HEALTHCHECK_PROGRAM, healthcheck_json=self.p.healthcheck_json)

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

    def render_slurmdbd_conf(self):
        p = self.p
        return render("slurmdbd.conf.in", munge_socket=p.munge_socket, slurmdbd_port=self.slurmdbd_port,
                      run=p.run, log=p.log, mariadb_port=self.mariadb_port, db_user=DB_USER,
                      db_password=self.db_password(), db_name=DB_NAME)

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
        return base + "# dev cluster nodes (dev/cluster/devcluster)\n127.0.0.1 " + " ".join(
            self.node_names(cfg)) + "\n"

    def write_configs(self, cfg):
        p = self.p
        write_file(p.slurm_conf, self.render_slurm_conf(cfg))
        # slurmdbd refuses a slurmdbd.conf readable by others (it holds a password).
        write_file(p.slurmdbd_conf, self.render_slurmdbd_conf(), 0o600)
        write_file(p.plugstack_conf, "# empty: no SPANK plugins in the dev cluster\n")
        write_file(p.reboot_program, self.render_reboot_program(), 0o755)
        write_file(p.prolog, self.render_prolog(), 0o755)
        write_file(p.epilog_slurmctld, self.render_epilog_slurmctld(), 0o755)
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

    def env_lines(self):
        return [f"export SLURM_CONF={self.p.slurm_conf}", f"export DEVCLUSTER_DIR={self.p.root}",
                f"export SLURM={HOST_RELEASE}"]

    def write_client_files(self):
        if self.container:
            write_container_client_files(self.p, self.container)
            return
        write_file(self.p.env_sh, "# Source me: points Slurm commands at the dev cluster.\n"
                   + "\n".join(self.env_lines()) + "\n")
        write_file(self.p.inventory, render("inventory-host.yml.in", slurm_conf=self.p.slurm_conf))


# ---- client files of a release in a container (written from inside it) -------------------------
def container_env_lines(paths, release):
    return [
        f"export SLURM_CONF={paths.slurm_conf}",
        f"export DEVCLUSTER_DIR={paths.root}",
        f"export SLURM={release}",
        f'export PATH={paths.bin}:"$PATH"',
    ]


def render_wrapper(paths, container, command):
    """<state dir>/bin/<command>: the release's own command, run in its container.

    Root only (podman's root containers). Passes the caller's SLURM_CONF (default: the
    cluster's; another one must lie in a folder the container sees, e.g. SHARED_DIR),
    SLURM_*/S<CMD>_* variables, LANG, LC_ALL and TZ; runs in the caller's folder when it
    exists inside (repository, state dir, SHARED_DIR), else in /tmp; DEVCLUSTER_USER=<user>
    runs the command as that user.
    """
    return render("client-command.in", command=command, container=container,
                  slurm_conf=paths.slurm_conf, repo=REPO, root=paths.root, shared_dir=SHARED_DIR)


def write_container_client_files(paths, container):
    release = container.rsplit("-", 1)[-1]
    os.makedirs(paths.bin, exist_ok=True)
    for command in CLIENT_COMMANDS:
        write_file(os.path.join(paths.bin, command), render_wrapper(paths, container, command), 0o755)
    write_file(paths.env_sh, f"# Source me: points Slurm commands at the dev cluster "
               f"(Slurm {release}, container {container}).\n"
               + "\n".join(container_env_lines(paths, release)) + "\n")
    write_file(paths.inventory, render("inventory-container.yml.in", container=container,
                                       release=release, venv=CONTAINER_VENV, shared_dir=SHARED_DIR,
                                       slurm_conf=paths.slurm_conf))

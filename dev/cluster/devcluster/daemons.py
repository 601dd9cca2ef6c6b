"""The cluster's daemons: munged, MariaDB, slurmdbd, slurmctld, powerd; waiting for Slurm to answer."""

import contextlib
import os
import shutil
import sys

from .base import ClusterBase
from .paths import BOOKWORM_LIBMARIADB, DB_NAME, DB_USER, PACKAGE, ClusterError, log
from .processes import run, tcp_listening, wait_for


class ClusterDaemons(ClusterBase):
    """Starts each daemon unless it runs, and waits until it answers (a mixin of cluster.Cluster)."""

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
        self.spawn("powerd", [sys.executable, PACKAGE, "--dir", self.p.root,
                              "--slurm", self.release, "powerd"], self.daemon_env())

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

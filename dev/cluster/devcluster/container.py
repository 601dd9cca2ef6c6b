"""A release in a container (CONTAINER_RELEASES of dev/cluster/releases.txt): the host side."""

import os
import signal
import subprocess
import time

from .paths import (CONTAINER, CONTAINER_VAR, DEV_USERS, HERE, IMAGE, PACKAGE, REPO, SHARED_DIR,
                    ClusterError, Paths, log)
from .processes import ensure_user, make_shared_dir, reap_children, run


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
    """One privileged podman container per release, running this package inside it.

    The state dir, the repository (read-only) and SHARED_DIR are bind-mounted at the same paths
    inside, so every path in slurm.conf, cluster.json and the inventory means the same file on
    both sides. The container shares the host's network (host-side tools reach its daemons) and
    each release uses its own ports (its port offset in dev/cluster/releases.txt), so several
    releases run at once. Inside, this package starts the same daemons as on the host (with
    CONTAINER_VAR set): see cluster.Cluster.
    """

    def __init__(self, root, release):
        self.p = Paths(root)
        self.release = release
        self.name = CONTAINER.format(release=release)
        self.image = IMAGE.format(release=release)
        self.repo = REPO

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

    def served_dir(self):
        """The state dir the container of this name serves (its label org.clusterops.devcluster):
        another clone's cluster when it is not ours, whose paths are not mounted here."""
        return self.podman("container", "inspect", "--format",
                           '{{ index .Config.Labels "org.clusterops.devcluster" }}', self.name,
                           check=False).stdout.strip()

    def answers(self):
        """Whether `podman exec` reaches the container. podman keeps calling a container running
        whose processes are gone when its conmon was killed with the session that started it;
        exec then answers 'cannot exec in a stopped container'."""
        return self.podman("exec", self.name, "true", check=False, timeout=30).returncode == 0

    def clear_unusable(self):
        """state(), after removing a container podman calls running that cannot serve this
        cluster: one that serves another clone's state dir (it holds this release's ports) or
        does not answer podman exec. Returns None then, as for no container."""
        state = self.state()
        if state != "running":
            return state
        served = self.served_dir()
        if served == self.p.root and self.answers():
            return state
        why = f"serves {served or 'no state dir'}" if served != self.p.root else "does not answer podman exec"
        log(f"{self.name} {why}: removing it and starting the cluster anew")
        self.podman("rm", "--force", "--time", "10", self.name, timeout=60)
        return None

    def inner(self, args):
        """Run this package inside the container; its output goes straight to ours."""
        argv = ["podman", "exec", "-e", f"{CONTAINER_VAR}={self.name}", self.name,
                "/usr/bin/python3", PACKAGE, "--dir", self.p.root,
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
        for user in DEV_USERS:
            ent = ensure_user(user)
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
        state = self.clear_unusable()
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
                self.image, "/usr/bin/python3", PACKAGE, "container-init")
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
        served = self.served_dir() if state is not None else None
        if served not in (None, self.p.root):
            log(f"{self.name} serves {served or 'no state dir'}: left alone (cluster-down there stops it)")
            return
        if state == "running" and not self.answers():
            log(f"{self.name} does not answer podman exec: removing it without a cluster-down inside")
        elif state == "running" and self.inner(["down"]) != 0:
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

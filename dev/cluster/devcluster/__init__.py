"""Manage a real multi-node Slurm cluster on one Debian machine: the dev cluster.

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

The release table dev/cluster/releases.txt says which release runs on the host (Debian 12's
packages) and which run in a podman container (container.py), and moves each release's ports.

Nodes
    Each slurmd runs as
        unshare --pid --fork --kill-child --mount-proc --time --boottime -<uptime> \
            python3 dev/cluster/devcluster node-init -- slurmd -D -N nI
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

Modules
    releases   the release table's Python reader (also used by the tests)
    paths      names, ports, the state directory's paths (Paths), ClusterError, log
    processes  /proc readers, spawn, kill_and_wait, wait_for, atomic writes, locks
    base       ClusterBase: environments, pid records, the cluster's size
    config     slurm.conf, slurmdbd.conf, RebootProgram, Prolog, health check, hosts and client
               files, from the string.Template files in templates/
    daemons    munged, MariaDB, slurmdbd, slurmctld, powerd; waiting for Slurm
    faults     GPU faults, a failing Prolog, one daemon stopped
    power      poweron, crash, reboot, slurmd signals, powerd's loop, node_init
    cluster    Cluster (all of the above): up, down, status
    container  ContainerCluster, the host side of a release in a container
    cli        the command line (argparse, main)

Usage (normally through dev/cluster/cluster.mk):
    python3 dev/cluster/devcluster --dir DIR up [--nodes N] [--slurmd-nodes M]
    python3 dev/cluster/devcluster --dir DIR down | status | env
    python3 dev/cluster/devcluster --dir DIR crash NODE | poweron NODE | reboot NODE
    python3 dev/cluster/devcluster --dir DIR slurmd-kill NODE | slurmd-start NODE
"""

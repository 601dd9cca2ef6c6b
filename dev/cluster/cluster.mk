# Dev Slurm cluster targets. Included by the main Makefile
# (`include dev/cluster/cluster.mk`); usable alone too:
#   make -f dev/cluster/cluster.mk cluster-up NODES=4
#
# Targets:
#   cluster-deps      install Debian packages (dev/cluster/install-deps.sh)
#   cluster-up        start the cluster and wait until all slurmd nodes are idle
#                     and sacct works (idempotent)
#   cluster-down      stop every daemon and job process the cluster started
#   cluster-status    daemons, sinfo, squeue
#   cluster-env       print eval-able `export SLURM_CONF=...` lines
#   cluster-crash     NODE=n2: power loss of one node (slurmd + its jobs die)
#   cluster-poweron   NODE=n2: boot a powered-off node (new boot time)
#   cluster-reboot    NODE=n2: power-cycle a node (what RebootProgram does)
#   cluster-slurmd-kill  NODE=n2: only slurmd dies; the node and its jobs stay up
#   cluster-slurmd-start NODE=n2: start that slurmd again (boot time unchanged)

# Directory of this fragment, valid wherever it is included from.
DEVCLUSTER_MK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))

# State dir: configs, logs, pid files, MariaDB datadir, munge key. Absolute.
DEVCLUSTER_DIR ?= $(CURDIR)/.devcluster
# Debian's python3: the manager uses the stdlib only, and a pyenv shim on PATH
# may point at an interpreter that is not installed.
DEVCLUSTER_PYTHON ?= /usr/bin/python3
# Compute nodes n1..n$(NODES); only the first $(SLURMD_NODES) run a slurmd
# (empty = all of them), so a benchmark can define many nodes with few daemons.
NODES ?= 4
SLURMD_NODES ?=
NODE ?=

DEVCLUSTER := "$(DEVCLUSTER_PYTHON)" "$(DEVCLUSTER_MK_DIR)/devcluster.py" --dir "$(abspath $(DEVCLUSTER_DIR))"

.PHONY: cluster-deps cluster-up cluster-down cluster-status cluster-env \
        cluster-crash cluster-poweron cluster-reboot cluster-slurmd-kill cluster-slurmd-start

cluster-deps:
	"$(DEVCLUSTER_MK_DIR)/install-deps.sh"

cluster-up:
	$(DEVCLUSTER) up --nodes "$(NODES)" $(if $(strip $(SLURMD_NODES)),--slurmd-nodes "$(SLURMD_NODES)")

cluster-down:
	$(DEVCLUSTER) down

cluster-status:
	@$(DEVCLUSTER) status

# Silent, so that `eval "$(make -s cluster-env)"` works.
cluster-env:
	@$(DEVCLUSTER) env

cluster-crash cluster-poweron cluster-reboot cluster-slurmd-kill cluster-slurmd-start:
	@test -n "$(NODE)" || { echo "usage: make $@ NODE=n2" >&2; exit 2; }
	$(DEVCLUSTER) $(patsubst cluster-%,%,$@) "$(NODE)"

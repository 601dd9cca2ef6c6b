# Dev Slurm cluster targets. Included by the main Makefile
# (`include dev/cluster/cluster.mk`); usable alone too:
#   make -f dev/cluster/cluster.mk cluster-up NODES=4        (the host's release only: the others
#                                                            need the main Makefile's molecule-setup)
# Every target takes SLURM=<release> of dev/cluster/releases.txt: the host's (default) or one in
# podman.
#
# Targets:
#   cluster-deps      install Debian packages (dev/cluster/install-deps.sh)
#   cluster-up        start the cluster and wait until all slurmd nodes are idle
#                     and sacct works (idempotent); CLUSTER=b: another one next to it (a fleet)
#   cluster-down      stop every daemon and job process the cluster started (without
#                     CLUSTER: the fleet's other clusters too)
#   cluster-status    daemons, sinfo, squeue
#   cluster-env       print eval-able `export SLURM_CONF=...` lines
#   cluster-crash     NODE=n2: power loss of one node (slurmd + its jobs die)
#   cluster-poweron   NODE=n2: boot a powered-off node (new boot time)
#   cluster-reboot    NODE=n2: power-cycle a node (what RebootProgram does)
#   cluster-slurmd-kill  NODE=n2: only slurmd dies; the node and its jobs stay up
#   cluster-slurmd-start NODE=n2: start that slurmd again (boot time unchanged)
#   cluster-prolog-fail  NODE=n2: the Prolog fails on n2 (drain "Prolog error", job held)
#   cluster-prolog-ok    NODE=n2: the Prolog succeeds on n2 again
#   cluster-slurmctld-stop       only slurmctld stops: the controller does not answer
#   cluster-slurmctld-start      slurmctld starts again with its saved state
#   cluster-gpu-fault NODE=n2 FAULT=fallen-off-bus   emulate a GPU fault (FAULT=none clears it)
#   cluster-slurmdbd-stop        only slurmdbd stops: accounting (sacct, sacctmgr) does not answer
#   cluster-slurmdbd-start       slurmdbd starts again

# Directory of this fragment, valid wherever it is included from.
DEVCLUSTER_MK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))

# Slurm releases, from the release table dev/cluster/releases.txt (dev/cluster/releases.sh reads
# it): the host's release runs on this machine (Debian 12's packages), the others in a privileged
# podman container of a locally built image. Several releases can run at once (own state dir,
# container and network namespace each).
DEVCLUSTER_RELEASES := $(shell bash "$(DEVCLUSTER_MK_DIR)/releases.sh" release_names)
DEVCLUSTER_HOST_RELEASE := $(shell bash "$(DEVCLUSTER_MK_DIR)/releases.sh" release_host)
ifeq ($(DEVCLUSTER_HOST_RELEASE),)
$(error $(DEVCLUSTER_MK_DIR)/releases.txt names no release that runs on the host)
endif
SLURM ?= $(DEVCLUSTER_HOST_RELEASE)
# State dir: configs, logs, pid files, MariaDB datadir, munge key. Absolute.
DEVCLUSTER_DEFAULT_DIR := $(CURDIR)/.devcluster$(if $(filter $(DEVCLUSTER_HOST_RELEASE),$(SLURM)),,-$(SLURM))
# A fleet: CLUSTER=b (c, d) is another cluster of the host's release next to the default one,
# with its own state dir .devcluster-$(CLUSTER) (so its own munge key, MariaDB and accounting database), ClusterName
# $(CLUSTER) and every port moved by its DEVCLUSTER_PORT_OFFSET (b 4500, c 3000, d 1500; another
# name needs DEVCLUSTER_PORT_OFFSET=<n> given). `make cluster-down` without CLUSTER stops them all.
# .devcluster-fleet.yml, rewritten by cluster-up and cluster-down, lists every running dev cluster.
CLUSTER ?=
DEVCLUSTER_FLEET_OFFSETS := b=4500 c=3000 d=1500
DEVCLUSTER_FLEET_INVENTORY := $(CURDIR)/.devcluster-fleet.yml
ifneq ($(strip $(CLUSTER)),)
ifneq ($(SLURM),$(DEVCLUSTER_HOST_RELEASE))
$(error CLUSTER=$(CLUSTER): a fleet cluster runs Slurm $(DEVCLUSTER_HOST_RELEASE) on the host (SLURM=$(SLURM) has one cluster))
endif
DEVCLUSTER_CLUSTER_OFFSET := $(patsubst $(CLUSTER)=%,%,$(filter $(CLUSTER)=%,$(DEVCLUSTER_FLEET_OFFSETS)))
ifneq ($(DEVCLUSTER_CLUSTER_OFFSET),)
export DEVCLUSTER_PORT_OFFSET := $(DEVCLUSTER_CLUSTER_OFFSET)
else ifneq ($(origin DEVCLUSTER_PORT_OFFSET),command line)
$(error CLUSTER=$(CLUSTER): no port offset known for it; give DEVCLUSTER_PORT_OFFSET=<n> too)
endif
export DEVCLUSTER_NAME := $(CLUSTER)
DEVCLUSTER_DEFAULT_DIR := $(CURDIR)/.devcluster-$(CLUSTER)
endif
DEVCLUSTER_DIR ?= $(DEVCLUSTER_DEFAULT_DIR)
# `make ... SLURM=26.05` after `eval "$(make -s cluster-env SLURM=24.11)"`: the environment's
# DEVCLUSTER_DIR is the other release's; SLURM (or CLUSTER) given on the command line wins.
ifeq ($(origin DEVCLUSTER_DIR)/$(origin SLURM),environment/command line)
override DEVCLUSTER_DIR := $(DEVCLUSTER_DEFAULT_DIR)
endif
ifeq ($(origin DEVCLUSTER_DIR)/$(origin CLUSTER),environment/command line)
override DEVCLUSTER_DIR := $(DEVCLUSTER_DEFAULT_DIR)
endif
# Debian's python3: the manager uses the stdlib only, and a pyenv shim on PATH
# may point at an interpreter that is not installed.
DEVCLUSTER_PYTHON ?= /usr/bin/python3
# Compute nodes n1..n$(NODES); only the first $(SLURMD_NODES) run a slurmd
# (empty = all of them), so a benchmark can define many nodes with few daemons.
NODES ?= 4
SLURMD_NODES ?=
# slurm.conf SlurmdTimeout in seconds (empty = 10 on the host, 30 in a container). 0 for many
# nodes without a slurmd: slurmctld then pings them every 100 s, not every few seconds (with
# 16,384 such nodes each ping round is 16,384 threads, which a 2-core machine feels).
SLURMD_TIMEOUT ?=
NODE ?=

# The manager: the package dev/cluster/devcluster/, run as `python3 dev/cluster/devcluster`.
DEVCLUSTER_PACKAGE := $(DEVCLUSTER_MK_DIR)/devcluster
DEVCLUSTER := "$(DEVCLUSTER_PYTHON)" "$(DEVCLUSTER_PACKAGE)" --slurm "$(SLURM)" --dir "$(abspath $(DEVCLUSTER_DIR))"
# A containerised release needs the host's packages (cluster-deps: libmariadb3 is copied into
# the image, python3-venv for the venv), then podman, runc and debootstrap (molecule-setup, from
# tests/molecule/molecule.mk: only through the main Makefile); it builds its image on the first
# cluster-up. On a fresh machine `make cluster-up SLURM=24.11` installs all of it.
DEVCLUSTER_PREREQ := $(if $(filter $(DEVCLUSTER_HOST_RELEASE),$(SLURM)),,cluster-deps molecule-setup)

.PHONY: cluster-deps cluster-up cluster-down cluster-status cluster-env \
        cluster-crash cluster-poweron cluster-reboot cluster-slurmd-kill cluster-slurmd-start \
        cluster-prolog-fail cluster-prolog-ok cluster-slurmctld-stop cluster-slurmctld-start \
        cluster-slurmdbd-stop cluster-slurmdbd-start

cluster-deps:
	"$(DEVCLUSTER_MK_DIR)/install-deps.sh"

DEVCLUSTER_FLEET_WRITE := "$(DEVCLUSTER_PYTHON)" "$(DEVCLUSTER_MK_DIR)/fleet_inventory.py" --output "$(DEVCLUSTER_FLEET_INVENTORY)"

cluster-up: $(DEVCLUSTER_PREREQ)
	$(DEVCLUSTER) up --nodes "$(NODES)" $(if $(strip $(SLURMD_NODES)),--slurmd-nodes "$(SLURMD_NODES)") \
	  $(if $(strip $(SLURMD_TIMEOUT)),--slurmd-timeout "$(SLURMD_TIMEOUT)")
	@$(DEVCLUSTER_FLEET_WRITE)

# Without CLUSTER (and without a DEVCLUSTER_DIR of its own) on the host's release: the fleet's clusters too.
cluster-down:
	$(DEVCLUSTER) down
ifeq ($(strip $(CLUSTER))/$(SLURM)/$(filter command line,$(origin DEVCLUSTER_DIR)),/$(DEVCLUSTER_HOST_RELEASE)/)
	@for pair in $(DEVCLUSTER_FLEET_OFFSETS); do \
	  name=$${pair%%=*}; dir="$(CURDIR)/.devcluster-$$name"; \
	  if [ -f "$$dir/cluster.json" ]; then \
	    DEVCLUSTER_NAME=$$name DEVCLUSTER_PORT_OFFSET=$${pair#*=} "$(DEVCLUSTER_PYTHON)" \
	      "$(DEVCLUSTER_PACKAGE)" --slurm $(DEVCLUSTER_HOST_RELEASE) --dir "$$dir" down || exit 1; \
	  fi; \
	done
endif
	@$(DEVCLUSTER_FLEET_WRITE)

cluster-status:
	@$(DEVCLUSTER) status

# Silent, so that `eval "$(make -s cluster-env)"` works.
cluster-env:
	@$(DEVCLUSTER) env

cluster-slurmctld-stop cluster-slurmctld-start cluster-slurmdbd-stop cluster-slurmdbd-start:
	$(DEVCLUSTER) $(patsubst cluster-%,%,$@)

cluster-crash cluster-poweron cluster-reboot cluster-slurmd-kill cluster-slurmd-start \
cluster-prolog-fail cluster-prolog-ok:
	@test -n "$(NODE)" || { echo "usage: make $@ NODE=n2" >&2; exit 2; }
	$(DEVCLUSTER) $(patsubst cluster-%,%,$@) "$(NODE)"

# GPU fault emulation (dev/cluster/gpu_standin.py, samples in dev/cluster/gpu-samples/):
# FAULT=none|fallen-off-bus|dbe-ecc|row-remap-failure|gpu-lost|spoofed-xid (a user's text in the kernel's lines, no fault). The stand-in nvidia-smi shows it at
# once; the node's kernel log gets its Xid lines now and again at every boot until FAULT=none
# (a cleared fault is gone from the kernel log after the next boot).
.PHONY: cluster-gpu-fault
cluster-gpu-fault:
	@test -n "$(NODE)" -a -n "$(FAULT)" || { echo "usage: make $@ NODE=n2 FAULT=fallen-off-bus|dbe-ecc|row-remap-failure|gpu-lost|none" >&2; exit 2; }
	$(DEVCLUSTER) gpu-fault "$(NODE)" "$(FAULT)"

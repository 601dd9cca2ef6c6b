# clusterops.slurm: one entry point for set-up, the demo and the tests.
# On a fresh Debian 12 machine, as root:  make demo   |   make test
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Debian's own python3: the venv must be usable by other users too (training jobs of the
# end-to-end tests run as the user clusterops-alice), which a python under /root is not.
PYTHON ?= /usr/bin/python3
VENV ?= $(CURDIR)/.venv
VENV_PY := $(VENV)/bin/python
# nox, the runner of the ansible-core matrix (noxfile.py), in a venv of its own: the matrix's sessions make
# their venvs under .nox/. NOXFLAGS: nox arguments, e.g. NOXFLAGS='-s "sanity(2.18)"' for one session.
NOX_VENV ?= $(CURDIR)/.venv-nox
NOXFLAGS ?=
COLLECTION_LINK := $(CURDIR)/.collections/ansible_collections/clusterops/slurm
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_PYTHON_INTERPRETER := $(VENV_PY)
export PATH := $(VENV)/bin:$(PATH)
# Slurm releases `make integration` and `make molecule` (and so `make test`) run on, each on its
# own dev cluster or Molecule image. `make integration SLURM_RELEASES=24.11` runs one of them;
# CLUSTEROPS_SLURM_RELEASES in the environment works too. Default: every release of the release
# table dev/cluster/releases.txt (DEVCLUSTER_RELEASES, read by dev/cluster/cluster.mk).
SLURM_RELEASES ?= $(or $(CLUSTEROPS_SLURM_RELEASES),$(DEVCLUSTER_RELEASES))

include dev/cluster/cluster.mk
include tests/molecule/molecule.mk

.PHONY: help setup deps venv collection importer eda-venv events events-up events-down tarball demo demo-hang demo-replica demo-events report test unit typecheck matrix integration integration-release pruning-role packaging sanity lint security benchmark trainers clean

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | sort

deps: ## Install the Debian packages (Slurm, munge, MariaDB, Python venv) when missing
	bash dev/cluster/install-deps.sh

# `python3 -m venv` needs Debian's python3-venv (ensurepip): install it first when missing, so that
# `make unit`, `make matrix`, `make packaging` or `make lint` alone work on a new machine too.
ENSURE_PYTHON_VENV = $(PYTHON) -c 'import ensurepip' 2>/dev/null || bash dev/cluster/install-deps.sh

$(VENV)/.installed: requirements.txt requirements-unit.txt requirements-test.txt requirements-molecule.txt
	@# Never run `venv` over a working venv (another python would rewrite its pyvenv.cfg); a
	@# broken one is made anew.
	@if [ -e $(VENV)/pyvenv.cfg ] && ! $(VENV_PY) -c 'import math' 2>/dev/null; then rm -rf $(VENV); fi
	@test -x $(VENV_PY) || $(ENSURE_PYTHON_VENV)
	test -x $(VENV_PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-test.txt
	touch $@

venv: $(VENV)/.installed ## Python virtual environment with pinned ansible-core and test tools

# A tool's venv of its own: $(call tool_venv,FOLDER,REQUIREMENTS) makes it (anew when broken), installs the
# requirements and touches FOLDER/.installed.
define tool_venv
@if [ -e $(1)/pyvenv.cfg ] && ! $(1)/bin/python -c 'import math' 2>/dev/null; then rm -rf $(1); fi
@test -x $(1)/bin/python || $(ENSURE_PYTHON_VENV)
test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
$(1)/bin/pip install --quiet -r $(2)
touch $(1)/.installed
endef

# galaxy-importer (Galaxy's and Automation Hub's import checks) in a venv of its own: tests/packaging runs it
# on the tarball it builds.
IMPORTER_VENV ?= $(CURDIR)/.venv-importer
$(IMPORTER_VENV)/.installed: requirements-importer.txt
	$(call tool_venv,$(IMPORTER_VENV),requirements-importer.txt)

importer: $(IMPORTER_VENV)/.installed ## galaxy-importer in .venv-importer (what make packaging runs on the tarball)

# ansible-rulebook (Event-Driven Ansible) in a venv of its own (requirements-eda.txt): tests/events.
EDA_VENV ?= $(CURDIR)/.venv-eda
$(EDA_VENV)/.installed: requirements-eda.txt
	$(call tool_venv,$(EDA_VENV),requirements-eda.txt)

eda-venv: $(EDA_VENV)/.installed ## ansible-rulebook and the pinned ansible-core in .venv-eda (what make events runs)

# The real-library checkpoint suite (tests/trainers, issue 39) in a venv of its own (.venv-trainers, pinned in
# tests/trainers/requirements.txt): transformers, accelerate, lightning, deepspeed (without its compiled ops) and
# the CPU torch. Each library trains tiny models on the CPU, one thread each; its saves are killed at each file and
# damaged, and it resumes from the collection's answer.
TRAINERS_VENV ?= $(CURDIR)/.venv-trainers
$(TRAINERS_VENV)/.installed: export DS_BUILD_OPS := 0
$(TRAINERS_VENV)/.installed: tests/trainers/requirements.txt
	$(call tool_venv,$(TRAINERS_VENV),tests/trainers/requirements.txt)

trainers: $(TRAINERS_VENV)/.installed ## Checkpoint validity against the real libraries: saves killed at each file and damaged, each library resumes from the collection's answer
	cd tests/trainers && OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(TRAINERS_VENV)/bin/python -m pytest -q -p no:cacheprovider .

$(NOX_VENV)/.installed: requirements-nox.txt
	$(call tool_venv,$(NOX_VENV),requirements-nox.txt)

# The link is left alone when it is right: `make test` runs suites in parallel, and `ln -sfn` replaces
# it (unlink, then symlink) under a playbook that may be reading through it.
collection: ## Make the repository importable as ansible_collections.clusterops.slurm
	@mkdir -p $(dir $(COLLECTION_LINK))
	@[ "$$(readlink $(COLLECTION_LINK))" = "$(CURDIR)" ] || ln -sfn $(CURDIR) $(COLLECTION_LINK)

setup: deps venv collection ## Everything the demo and the tests need

demo: setup ## A training run loses a node of the dev cluster for real; remediate.yml heals the nodes and the run finishes from its checkpoint
	$(MAKE) cluster-up
	SLURM=$(SLURM) DEVCLUSTER_DIR=$(DEVCLUSTER_DIR) bash dev/demo.sh

demo-hang: setup ## A training run hangs (--hang-at-step); remediate.yml's watchdog saves its stacks, cancels and resubmits it, and it finishes from its checkpoint
	$(MAKE) cluster-up
	SLURM=$(SLURM) DEVCLUSTER_DIR=$(DEVCLUSTER_DIR) $(VENV_PY) dev/demo_hang.py

demo-replica: setup ## A training run's newest checkpoint is lost on its file system; it resumes from the verified copy in its replica folder
	$(MAKE) cluster-up
	SLURM=$(SLURM) DEVCLUSTER_DIR=$(DEVCLUSTER_DIR) bash dev/demo_replica.sh

demo-events: setup eda-venv ## No schedule: Slurm's events start remediation through ansible-rulebook; a node crash and a failed job, each phase timed
	$(MAKE) cluster-up
	SLURM=$(SLURM) DEVCLUSTER_DIR=$(DEVCLUSTER_DIR) $(VENV_PY) dev/demo_events.py

# The event path on the dev cluster (dev/cluster/eventpath.py): the role slurm_events' triggers and job-end program, and
# ansible-rulebook with the collection's rulebook in the background; EVENTS_VARS=<json file>: remediate.yml's
# variables for its runs (the run registry...).
events-up: setup eda-venv ## Start the event path on the dev cluster (slurmctld's triggers -> ansible-rulebook -> remediate.yml)
	SLURM=$(SLURM) DEVCLUSTER_DIR=$(DEVCLUSTER_DIR) $(VENV_PY) dev/cluster/eventpath.py up $(if $(EVENTS_VARS),--vars $(EVENTS_VARS))

events-down: ## Stop the dev cluster's event path (the rulebook; the triggers cleared)
	SLURM=$(SLURM) DEVCLUSTER_DIR=$(DEVCLUSTER_DIR) $(VENV_PY) dev/cluster/eventpath.py down

# RUN=<run>: the page of that run of the dev cluster's registry (the demo's by default; REGISTRY=,
# REPORT_DIR= for others), through playbooks/goodput_report.yml; prints its path.
report: venv collection ## The goodput page of a training run after make demo (RUN=demo-llm): timeline, progress curve with the lost work, goodput table
	@RUN="$(RUN)" SLURM=$(SLURM) DEVCLUSTER_DIR=$(DEVCLUSTER_DIR) bash dev/report.sh

unit: venv collection ## Unit tests (parsers, state model, policy), no cluster needed
	$(VENV_PY) -m pytest tests/unit -q

# What it checks and leaves out: mypy.ini (the plugins, under their ansible_collections import path) and
# mypy-scripts.ini (benchmarks/ and dev/, under the module names their sys.path gives them): two runs, since
# the checkpoint benchmarks import plugins/module_utils/_checkpoint as top-level `_checkpoint`.
typecheck: venv collection ## mypy on the plugins (module_utils, modules, filters, doc fragments), benchmarks/ and dev/
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --config-file mypy-scripts.ini

# nox sessions unit(<line>) and sanity(<line>) for each ansible-core line requires_ansible claims (noxfile.py).
matrix: $(NOX_VENV)/.installed collection ## Unit tests and ansible-test sanity on every ansible-core line requires_ansible claims (nox)
	$(NOX_VENV)/bin/nox $(NOXFLAGS)

# The whole suite on the host's release (the default), the tests marked every_release on
# the other releases of SLURM_RELEASES (in podman).
integration: setup ## Integration tests on the real dev cluster of each release in SLURM_RELEASES
	@failed=""; for release in $(SLURM_RELEASES); do \
	  $(MAKE) --no-print-directory integration-release SLURM=$$release || failed="$$failed $$release"; \
	done; \
	if [ -n "$$failed" ]; then echo "integration: failed on Slurm$$failed" >&2; exit 1; fi; \
	echo "integration: passed on Slurm $(SLURM_RELEASES)"

# One release (SLURM=...): start its cluster, run its tests; a release in podman is stopped
# afterwards, so that the next one has the machine's two cores to itself.
integration-release: setup eda-venv
	$(MAKE) cluster-up SLURM=$(SLURM)
	@echo "integration: Slurm $(SLURM)"
	SLURM=$(SLURM) CLUSTEROPS_REQUIRE_CLUSTER=1 $(VENV_PY) -m pytest tests/integration -q \
	  --ignore=$(PRUNING_ROLE_TEST) $(if $(filter $(DEVCLUSTER_HOST_RELEASE),$(SLURM)),,-m every_release); \
	status=$$?; $(if $(filter $(DEVCLUSTER_HOST_RELEASE),$(SLURM)),,$(MAKE) cluster-down SLURM=$(SLURM);) exit $$status

# The checkpoint_pruning role applied to this machine (its crontabs, a local user): no Slurm cluster, so
# it is not part of integration-release; `make test` runs it in the lane of checks.
PRUNING_ROLE_TEST := tests/integration/test_checkpoint_pruning_role.py
pruning-role: venv collection ## The checkpoint_pruning role applied to this machine (crontabs of root and a user; no cluster)
	$(VENV_PY) -m pytest $(PRUNING_ROLE_TEST) -q

# The event path without a cluster: the trigger program, the source plugin and the rulebook on the real
# ansible-rulebook (Java), each event signed; tests/events.
events: deps eda-venv collection ## The event path's programs and the rulebook on the real ansible-rulebook (no cluster)
	$(EDA_VENV)/bin/python -m pytest tests/events -q

packaging: venv collection importer ## The tarball's content and galaxy-importer, EE definition (ansible-builder create), awx_setup.yml, ansible-doc of every plugin and role, docsite, changelog lint
	CLUSTEROPS_IMPORTER_PYTHON=$(IMPORTER_VENV)/bin/python $(VENV_PY) -m pytest tests/packaging -q

# What a publisher uploads: the operator's guide written as the docsite's RST first
# (docs/docsite/rst, from docs/*.md), then ansible-galaxy's build; tests/packaging builds the same way.
tarball: venv ## The collection tarball to publish, in dist/ (with the operator's guide for the docsite)
	$(VENV_PY) tests/docsite/guide_rst.py >/dev/null
	$(VENV)/bin/ansible-galaxy collection build --force --output-path dist .

sanity: venv collection ## ansible-test sanity on a copy of the collection
	bash tests/sanity/run.sh

# In a HOME of its own: ansible-lint looks in ~/.ansible/collections before ansible.cfg's .collections,
# and Molecule installs a copy of the collection there (an older one fails lint on today's modules).
lint: venv collection ## ansible-lint, production profile
	@home=$$(mktemp -d) && status=0 && HOME=$$home $(VENV)/bin/ansible-lint --offline --profile production || status=$$?; \
	  rm -rf "$$home"; exit $$status

# bandit.yaml: how an exception is written (inline, with its reason) and why tests/ is not scanned. The
# roles' Python programs without .py (roles/node_health/files/clusterops-healthcheck) are found by their
# first line and named to bandit, which reads a named file whatever its name. A file bandit cannot
# parse is skipped with exit status 0: the target fails on it too.
ROLE_PROGRAMS = $(shell find roles -type f ! -name '*.*' -exec sh -c \
  'head -n 1 "$$1" | grep -qE "^\#!.*python|^\# -\*- coding" && echo "$$1"' sh {} \; | sort)
security: venv ## bandit on the collection's Python, medium severity and up
	@report=$$($(VENV)/bin/bandit --configfile bandit.yaml --severity-level medium --confidence-level medium \
	  --recursive plugins roles dev benchmarks $(ROLE_PROGRAMS) 2>&1); status=$$?; echo "$$report"; \
	  if ! grep -q '^Files skipped (0):' <<<"$$report"; then echo "security: bandit skipped a file" >&2; status=1; fi; \
	  exit $$status

# tests/run-all.sh: the suites in lanes side by side (the host's integration tests; the containers'
# releases one after the other; Molecule; the checks that need no cluster at nice 19), each lane's output
# printed when it ends, one line per suite and the total at the end (a warning first past 60 minutes).
# setup's deps installed promtool (Debian's prometheus): CLUSTEROPS_REQUIRE_PROMTOOL makes the alert rules'
# tests fail without it, not skip; and chromium: CLUSTEROPS_REQUIRE_CHROMIUM makes the goodput report's
# tests fail without it. `python3 tests/durations.py` then tabulates the run's test times (tests/README.md).
test: setup ## Everything: unit, typecheck, integration on the dev cluster, packaging and docs, sanity, lint, security, the ansible-core matrix, Molecule
	CLUSTEROPS_REQUIRE_PROMTOOL=1 CLUSTEROPS_REQUIRE_CHROMIUM=1 SLURM_RELEASES="$(SLURM_RELEASES)" MAKE="$(MAKE)" bash tests/run-all.sh

benchmark: setup ## remediate.yml at 8/512/4,096 nodes; checkpoint scan and prune of 10,000; training remediation
	$(VENV_PY) benchmarks/remediate_scaling.py
	$(VENV_PY) benchmarks/checkpoint_scan.py
	$(VENV_PY) benchmarks/checkpoint_prune.py
	$(MAKE) cluster-up
	$(VENV_PY) benchmarks/training_remediation.py

clean: ## Stop the dev cluster and remove build output
	-$(MAKE) cluster-down
	rm -rf .collections tests/output .pytest_cache .mypy_cache .cache/docsite build context .nox dist docs/docsite/rst

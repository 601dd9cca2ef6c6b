# Molecule scenarios on podman (extensions/molecule/<name>/), for `include tests/molecule/molecule.mk`
# in the Makefile. Uses the Makefile's VENV and its venv/collection targets.
#   make molecule                              every scenario, as pytest tests (tests/molecule/,
#                                              pytest-ansible); `cluster` once per Slurm release
#                                              (dev/cluster/releases.txt; first run: image builds)
#   make molecule SCENARIOS=cluster            only these
#   make molecule SLURM_RELEASES="24.11"       `cluster` on these releases only
#   make molecule-images                       only the cached local images
# SLURM_RELEASES comes from the Makefile (default: every release of dev/cluster/releases.txt).
.PHONY: molecule molecule-setup molecule-images

molecule-setup: venv collection ## podman + runc + debootstrap (apt), containers.conf, pinned molecule
	VENV=$(VENV) bash tests/molecule/setup-podman.sh

molecule-images: molecule-setup ## Local Debian images with each Slurm release (SLURM_RELEASES) for Molecule (cached)
	bash tests/molecule/images/build.sh $(SLURM_RELEASES)

molecule: molecule-setup ## Molecule scenarios on podman through pytest (SCENARIOS=name ..., SLURM_RELEASES="24.11 ...")
	VENV=$(VENV) CLUSTEROPS_SLURM_RELEASES="$(SLURM_RELEASES)" bash tests/molecule/run.sh $(SCENARIOS)

# Molecule scenarios on podman (extensions/molecule/<name>/), for `include tests/molecule/molecule.mk`
# in the Makefile. Uses the Makefile's VENV and its venv/collection targets.
#   make molecule                      every scenario (first run: image builds, ~1.5-3.5 min)
#   make molecule SCENARIOS=cluster    only these
#   make molecule-images               only the cached local images
.PHONY: molecule molecule-setup molecule-images

molecule-setup: venv collection ## podman + runc + debootstrap (apt), containers.conf, pinned molecule
	VENV=$(VENV) bash tests/molecule/setup-podman.sh

molecule-images: molecule-setup ## Local Debian 12 and Slurm images for Molecule (cached)
	bash tests/molecule/images/build.sh

molecule: molecule-setup ## Molecule scenarios on podman (SCENARIOS=name ... for some)
	VENV=$(VENV) bash tests/molecule/run.sh $(SCENARIOS)

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The reference trainer as the torchrun_launcher role installs it (``reference_trainer.py`` and its
modules in ``reference_trainer_lib/`` beside it), without torch: what it decides before torch is
imported runs its own modules, whatever the job's working directory and ``$PYTHONPATH`` hold."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FILES = os.path.join(REPO, "roles", "torchrun_launcher", "files")
LIBRARY = os.path.join(REPO, "plugins", "module_utils", "_checkpoint")


def _install(dest):
    """reference_trainer.py and reference_trainer_lib/*.py, as the role's tasks copy them."""
    (dest / "reference_trainer_lib").mkdir(parents=True)
    shutil.copy(os.path.join(FILES, "reference_trainer.py"), str(dest))
    for name in os.listdir(os.path.join(FILES, "reference_trainer_lib")):
        if name.endswith(".py"):
            shutil.copy(os.path.join(FILES, "reference_trainer_lib", name), str(dest / "reference_trainer_lib"))
    return dest / "reference_trainer.py"


def test_installed_trainer_runs_its_own_modules_whatever_the_working_directory(tmp_path):
    program = _install(tmp_path / "tools")
    cwd = tmp_path / "work"
    (cwd / "reference_trainer_lib").mkdir(parents=True)
    for name in ("__init__.py", "plan.py", "signals.py"):
        (cwd / "reference_trainer_lib" / name).write_text("raise SystemExit('shadowed')\n")
    os.symlink(str(program), str(tmp_path / "train.py"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "FINISHED").write_text("{}\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(cwd), "."]), CLUSTEROPS_CHECKPOINT_TOOL=LIBRARY)
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(name, None)
    # -I: no $PYTHONPATH and not even the program's folder on sys.path but what the program puts there
    for argv in ([program], [tmp_path / "train.py"], ["-I", program]):
        proc = subprocess.run([sys.executable] + [str(a) for a in argv] + ["--checkpoint-dir", str(run_dir)],
                              cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, check=False)
        assert (proc.returncode, proc.stdout) == (0, "reference_trainer: %s already has FINISHED: nothing to do\n"
                                                  % run_dir), proc.stderr


def test_installed_trainer_refuses_before_torch(tmp_path):
    """A refused resume ends with exit 2 and one line before torch is imported (a torch that cannot
    be imported is never tried)."""
    program = _install(tmp_path / "tools")
    (tmp_path / "site" / "torch").mkdir(parents=True)
    (tmp_path / "site" / "torch" / "__init__.py").write_text("raise SystemExit('torch imported')\n")
    env = dict(os.environ, CLUSTEROPS_CHECKPOINT_TOOL=LIBRARY, PYTHONPATH=str(tmp_path / "site"))
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, str(program), "--checkpoint-dir", str(tmp_path / "run"),
                           "--resume", str(tmp_path / "nope")], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", "reference_trainer: error: --resume %s is not a checkpoint folder\n" % (tmp_path / "nope"))

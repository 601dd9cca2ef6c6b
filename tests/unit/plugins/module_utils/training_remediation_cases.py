# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Training-run cases shared by the policy, registry and runner tests: a run spec, jobs, a
checkpoint status and a state, each with the fields the code reads."""

from __future__ import annotations

from ansible_collections.clusterops.slurm.plugins.module_utils._training_remediation import registry as training_registry

OWNER = "alice"


def run_spec(**kw):
    spec = {"format": training_registry.RUN_FORMAT, "format_version": 1, "name": "llm", "owner": OWNER,
            "launcher": "/reg/llm/launcher.sbatch", "checkpoint_dir": "/ckpt/llm",
            "max_resubmissions": 3, "no_progress_limit": 2, "enabled": True}
    spec.update(kw)
    return spec


def run(**kw):
    return training_registry.validate_run(run_spec(**kw), "/reg/" + kw.get("name", "llm"))


def job(job_id, state, active=False, name="llm", user=OWNER, submit=None, **kw):
    out = {"job_id": str(job_id), "job_id_raw": job_id, "name": name, "user": user, "state": state,
           "active": active, "submit_time": submit if submit is not None else 1000 + job_id,
           "flags": [], "exit_code": None, "signal": None, "cancelled_by": None, "requeued": False,
           "history": [], "reason": "", "node_list": "n[1-2]", "start_time": None, "end_time": None}
    out.update(kw)
    return out


def ckpt(step=None, status=None, finished=False):
    if status is None:
        status = "valid" if step is not None else "none"
    return {"finished": finished, "status": status, "step": step,
            "checkpoint": "/ckpt/llm/step_%09d" % step if step is not None else None,
            "detail": "detail of %s" % status, "warnings": []}


def state(*steps, **kw):
    st = training_registry.empty_state()
    st["resubmissions"] = [{"time": 1, "job_id": 100 + i, "after_job": 50 + i, "after_state": "NODE_FAIL",
                            "step": s} for i, s in enumerate(steps)]
    st.update(kw)
    return st

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NVIDIA DCGM's health watches (``dcgmi health --check --json``): the dcgm_health check."""

from __future__ import absolute_import, division, print_function

import json
import re

from .base import log
from .commands import expand, run_cmd

__metaclass__ = type

# dcgmi health --check --json (DCGM 4.6.0 dcgmi/Health.cpp, GenerateOutputFromResponse, written by
# DcgmiOutputJson): {"header": ["Health Monitor Report"], "body": {"Overall Health": {"value": V},
# "<entity group>": {"children": {"<id>": {"value": V, "children": {"Errors": {"children":
# {"<system>": {"value": V, "overflow": [message parts]}}}}}}}}}, V one of DCGM_VERDICTS
# (HelperHealthToString; "Internal error" else). dcgmi exits 0 whatever the verdict, non-zero when
# it cannot look (no host engine, no health watches set: "Error: Health watches not enabled").
DCGM_VERDICTS = ("Healthy", "Warning", "Failure")
DCGM_OVERALL = "Overall Health"
# The findings DCGM's health watches report (modules/health/DcgmHealthWatch.cpp), by their message
# (dcgmlib/dcgm_errors.h, DCGM_FR_<NAME>_MSG, printf formats as patterns), so that the reason names
# DCGM's error: "dcgm_health: DCGM_FR_<NAME> <entity>: <message>". A message none matches is named
# DCGM_FR_UNRECOGNIZED. The remediation policy decides by the name (docs/node-remediation.md).
_N = r"-?[0-9]+"
DCGM_FINDINGS = (
    ("DCGM_FR_XID_ERROR", r"Detected XID %s for GPU %s" % (_N, _N)),
    ("DCGM_FR_VOLATILE_DBE_DETECTED", r"Detected %s volatile double-bit ECC error\(s\) in GPU %s" % (_N, _N)),
    ("DCGM_FR_PENDING_PAGE_RETIREMENTS", r"A pending retired page has been detected in GPU %s" % _N),
    ("DCGM_FR_ROW_REMAP_FAILURE", r"GPU %s had uncorrectable memory errors and row remapping failed" % _N),
    ("DCGM_FR_UNCORRECTABLE_ROW_REMAP_LIMIT", r"GPU %s exceeded uncorrectable row remap limit" % _N),
    ("DCGM_FR_UNCONTAINED_ERROR", r"GPU had an uncontained error \(XID 95\)"),
    ("DCGM_FR_CONTAINED_ERROR", r"GPU had a contained error"),
    ("DCGM_FR_FALLEN_OFF_BUS", r"GPU %s has fallen off the bus" % _N),
    ("DCGM_FR_GPU_RECOVERY_RESET", r"GPU %s requires a reset to recover from a fault" % _N),
    ("DCGM_FR_GPU_RECOVERY_REBOOT", r"GPU %s fault may have left the OS in an inconsistent state" % _N),
    ("DCGM_FR_GPU_RECOVERY_DRAIN_RESET", r"GPU %s operating at reduced capacity due to a fault" % _N),
    ("DCGM_FR_GPU_RECOVERY_DRAIN_P2P", r"GPU %s requires peer-to-peer traffic to be quiesced" % _N),
    ("DCGM_FR_RETIRED_PAGES_LIMIT", r"%s or more retired pages have been detected in GPU %s" % (_N, _N)),
    ("DCGM_FR_RETIRED_PAGES_DBE_LIMIT", r"An excess of %s retired pages due to DBEs have been detected" % _N),
    ("DCGM_FR_FAULTY_MEMORY", r"Found %s faulty memory elements on GPU %s" % (_N, _N)),
    ("DCGM_FR_CORRUPT_INFOROM", r"A corrupt InfoROM has been detected in GPU %s" % _N),
    ("DCGM_FR_PCI_REPLAY_RATE", r"Detected more than %s PCIe replays per minute for GPU %s" % (_N, _N)),
    ("DCGM_FR_NVLINK_DOWN", r"GPU %s's NvLink link %s is currently down" % (_N, _N)),
    ("DCGM_FR_NVLINK_ERROR_CRITICAL", r"Detected %s .* NvLink errors on GPU %s's NVLink \(should be 0\)"
     % (_N, _N)),
    ("DCGM_FR_NVLINK_ERROR_THRESHOLD", r"Detected %s .* NvLink errors on GPU %s's NVLink which exceeds" % (_N, _N)),
    ("DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD", r"NvLink errors found occuring per second on GPU %s" % _N),
    ("DCGM_FR_NVLINK_EFFECTIVE_BER_THRESHOLD", r"Detected effective BER \S+ exceeds minimum threshold on GPU %s" % _N),
    ("DCGM_FR_NVLINK_SYMBOL_BER_THRESHOLD", r"Detected symbol BER \S+ exceeds minimum threshold on GPU %s" % _N),
    ("DCGM_FR_NVSWITCH_FATAL_ERROR", r"Detected fatal errors on NvSwitch %s link %s" % (_N, _N)),
    ("DCGM_FR_NVSWITCH_NON_FATAL_ERROR", r"Detected nonfatal errors on NvSwitch %s link %s" % (_N, _N)),
    ("DCGM_FR_CLOCKS_EVENT_THERMAL", r"Detected clocks event due to thermal violation in GPU %s" % _N),
    ("DCGM_FR_CLOCKS_EVENT_POWER", r"Detected clocks event due to power violation in GPU %s" % _N),
    ("DCGM_FR_POWER_UNREADABLE", r"Cannot reliably read the power usage for GPU %s" % _N),
    ("DCGM_FR_FABRIC_PROBE_STATE", r"GPU %s: Fabric State is " % _N),
    ("DCGM_FR_IMEX_UNHEALTHY", r"IMEX .* status is "),
)
DCGM_FINDING_RES = tuple((name, re.compile(pattern)) for name, pattern in DCGM_FINDINGS)
DCGM_UNRECOGNIZED = "DCGM_FR_UNRECOGNIZED"


def dcgm_finding(message):
    """A DCGM health message -> the DCGM error name of DCGM_FINDINGS it matches, or DCGM_UNRECOGNIZED."""
    for name, pattern in DCGM_FINDING_RES:
        if pattern.search(message):
            return name
    return DCGM_UNRECOGNIZED


def dcgm_incidents(report):
    """``dcgmi health --check --json`` parsed -> (overall verdict, incidents).

    Each incident is ``{"entity": "GPU 1", "system": "Memory system", "verdict": "Failure",
    "message": str, "finding": "DCGM_FR_..."}`` in dcgmi's order; the message is the parts of
    ``overflow`` joined (dcgmi cuts messages at 54 characters). Raises ValueError when the report
    has no overall verdict of DCGM_VERDICTS, or when it is not Healthy and names no incident: a
    report that cannot be read is never healthy.
    """
    body = report.get("body") if isinstance(report, dict) else None
    overall = ((body or {}).get(DCGM_OVERALL) or {}).get("value") if isinstance(body, dict) else None
    if overall not in DCGM_VERDICTS:
        raise ValueError("dcgmi health: no %s of %s in the report: %r"
                         % (DCGM_OVERALL, "/".join(DCGM_VERDICTS), overall))
    incidents = []
    for group, tree in body.items():
        if group == DCGM_OVERALL or not isinstance(tree, dict):
            continue
        for entity, node in (tree.get("children") or {}).items():
            errors = (((node or {}).get("children") or {}).get("Errors") or {}).get("children") or {}
            for system, finding in errors.items():
                message = " ".join(part.strip() for part in (finding or {}).get("overflow") or [])
                incidents.append({"entity": "%s %s" % (group, entity), "system": system,
                                  "verdict": (finding or {}).get("value"), "message": message,
                                  "finding": dcgm_finding(message)})
    if overall != "Healthy" and not incidents:
        raise ValueError("dcgmi health: %s %s but no incident in the report" % (DCGM_OVERALL, overall))
    return overall, incidents


def dcgm_problem(overall, incidents, drain_on_warning=False):
    """The verdict and incidents of dcgm_incidents -> detail of the worst incident, or None.

    ``DCGM_FR_<NAME> <entity>: <message>`` (``DCGM_FR_VOLATILE_DBE_DETECTED GPU 1: Detected 2
    volatile double-bit ECC error(s) in GPU 1.``): the first Failure, else (with
    ``drain_on_warning``, or when the overall verdict is Failure) the first Warning. A Warning
    alone passes, logged: DCGM says the GPU can still work (thermal or power clock events, a
    contained error) unless told otherwise.
    """
    if overall == "Healthy":
        return None
    ranked = [i for i in incidents if i["verdict"] == "Failure"]
    if not ranked and (drain_on_warning or overall == "Failure"):
        ranked = [i for i in incidents if i["verdict"] != "Healthy"] or incidents
    for incident in incidents:
        log.warning("dcgmi health: %s %s %s: %s", incident["entity"], incident["system"], incident["verdict"],
                    incident["message"])
    if not ranked:
        return None
    worst = ranked[0]
    return "%s %s: %s" % (worst["finding"], worst["entity"], worst["message"] or worst["system"])


def check_dcgm_health(check, ctx, timeout):
    argv = expand(ctx.config.get("dcgmi") or ["dcgmi"], ctx.node) + ["health", "--check", "--json"]
    if check.get("group") not in (None, ""):
        argv += ["--group", str(check["group"])]
    rc, out, err = run_cmd(argv, timeout, ctx.env())
    if rc is None:
        return "dcgmi health timed out after %ss" % timeout
    if rc != 0:
        lines = [line.strip() for line in (out + "\n" + err).splitlines() if line.strip()]
        return "dcgmi health failed rc=%s: %s" % (rc, lines[0] if lines else "no output")
    try:
        overall, incidents = dcgm_incidents(json.loads(out))
    except ValueError as exc:
        return "dcgmi health unreadable: %s" % str(exc)[:120]
    return dcgm_problem(overall, incidents, bool(check.get("drain_on_warning", False)))

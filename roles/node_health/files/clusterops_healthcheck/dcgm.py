# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NVIDIA DCGM's health watches (``dcgmi health --check --json``): the dcgm_health check."""

from __future__ import annotations

import json
import re

from .base import log
from .commands import expand, run_cmd


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


def _part(value, kind, where):
    """``value`` when it is of ``kind`` (dict, list or str), else ValueError naming ``where`` (the
    report's path to it) and what was found there: a report of another shape is not read in part."""
    if not isinstance(value, kind):
        raise ValueError("dcgmi health: %s is %s, not %s" % (where, type(value).__name__, kind.__name__))
    return value


def _verdict(node, where):
    """The ``value`` of a report node: one of DCGM_VERDICTS, else ValueError."""
    value = node.get("value")
    if value not in DCGM_VERDICTS:
        raise ValueError("dcgmi health: %s has the verdict %r, not one of %s"
                         % (where, value, "/".join(DCGM_VERDICTS)))
    return value


def dcgm_incidents(report):
    """``dcgmi health --check --json`` parsed -> (overall verdict, incidents).

    Each incident is ``{"entity": "GPU 1", "system": "Memory system", "verdict": "Failure",
    "message": str, "finding": "DCGM_FR_..."}`` in dcgmi's order; the message is the parts of
    ``overflow`` joined (dcgmi cuts messages at 54 characters). Every part of the report must have
    the shape above (an object where an object is, a list of strings for ``overflow``, a verdict of
    DCGM_VERDICTS wherever a ``value`` is): anything else raises ValueError naming where, and so do a
    report without an overall verdict, one that is not Healthy and names no incident, and one that is
    Healthy and names an incident that is not. A report that cannot be fully read is never healthy.
    """
    body = _part(_part(report, dict, "the report").get("body"), dict, "body")
    overall = _verdict(_part(body.get(DCGM_OVERALL), dict, "body/" + DCGM_OVERALL), "body/" + DCGM_OVERALL)
    incidents = []
    for group, tree in body.items():
        if group == DCGM_OVERALL:
            continue
        where = "body/%s" % group
        entities = _part(_part(tree, dict, where).get("children", {}), dict, where + "/children")
        for entity, node in entities.items():
            at = "%s/children/%s" % (where, entity)
            node = _part(node, dict, at)
            if "value" in node:
                _verdict(node, at)
            errors = _part(_part(node.get("children", {}), dict, at + "/children").get("Errors", {}), dict,
                           at + "/children/Errors")
            for system, finding in _part(errors.get("children", {}), dict, at + "/children/Errors/children").items():
                path = "%s/children/Errors/children/%s" % (at, system)
                finding = _part(finding, dict, path)
                parts = _part(finding.get("overflow", []), list, path + "/overflow")
                message = " ".join(_part(part, str, path + "/overflow[]").strip() for part in parts)
                incidents.append({"entity": "%s %s" % (group, entity), "system": system,
                                  "verdict": _verdict(finding, path), "message": message,
                                  "finding": dcgm_finding(message)})
    if overall != "Healthy" and not incidents:
        raise ValueError("dcgmi health: %s %s but no incident in the report" % (DCGM_OVERALL, overall))
    if overall == "Healthy" and any(i["verdict"] != "Healthy" for i in incidents):
        raise ValueError("dcgmi health: %s Healthy but an incident is not" % DCGM_OVERALL)
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

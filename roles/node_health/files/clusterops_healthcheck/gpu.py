# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPUs as nvidia-smi shows them: the gpu_count and gpu_state checks."""

from __future__ import annotations

from .base import log
from .commands import expand, run_cmd


# nvidia-smi --query-gpu fields read by gpu_count and gpu_state (nvidia-smi --help-query-gpu).
GPU_FIELDS = ("index", "pci.bus_id", "name", "ecc.errors.uncorrected.volatile.total")
# Values nvidia-smi prints in a field of a GPU it cannot talk to.
BROKEN_VALUES = ("[GPU is lost]", "[Unknown Error]", "[GPU requires reset]")
# Values meaning "not available" (ECC off, field not supported): not a failure.
NA_VALUES = ("[N/A]", "N/A", "[Not Supported]", "")
# nvidia-smi's exit status -> what it means, from nvidia-smi(1) RETURN VALUE (driver 550 and
# later); 11, 16, 17 and 18 are NVML's nvmlReturn_t codes, which nvidia-smi exits with as they
# are (18: "Failed to initialize NVML: Driver/library version mismatch", gputil issue #55).
# The detail says "nvidia-smi failed rc=<N> (<meaning>): <first line>"; the remediation
# policy decides by N which a reboot may repair (docs/node-health.md has the table).
NVIDIA_SMI_EXIT = {
    2: "a supplied argument or flag is invalid",
    3: "the requested operation is not available on the target device",
    4: "no permission to access the device or perform the operation",
    6: "a query to find an object was unsuccessful (no devices were found)",
    8: "a device's external power cables are not properly attached",
    9: "the NVIDIA driver is not loaded",
    10: "the NVIDIA kernel detected an interrupt issue with a GPU",
    11: "the NVIDIA kernel detected an interrupt issue with a GPU (NVML_ERROR_IRQ_ISSUE)",
    12: "the NVML shared library could not be found or loaded",
    13: "the local NVML does not implement this function",
    14: "the infoROM is corrupted",
    15: "the GPU has fallen off the bus or has otherwise become inaccessible",
    16: "the GPU requires a reset before it can be used again",
    17: "the GPU control device is blocked by the operating system or cgroups",
    18: "the driver and the NVML library versions do not match",
    255: "other error or internal driver error",
}
# Exit statuses that are warnings: nvidia-smi still prints its table (and a line "WARNING:
# infoROM is corrupted at gpu 0000:B3:00.0", gpu-operator issues #20, #285); the GPUs are judged
# by the table and the warning is logged: a corrupted infoROM leaves the GPU working. When no
# table can be read, the status is a failure like any other.
NVIDIA_SMI_WARNINGS = (14,)


def parse_gpu_csv(text, fields=GPU_FIELDS):
    """``nvidia-smi --query-gpu=<fields> --format=csv,noheader`` -> list of dicts by field name.

    Values are stripped; a line with the wrong number of values raises ValueError.
    """
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            raise ValueError("unexpected nvidia-smi line: %r" % line)
        gpus.append(dict(zip(fields, values)))
    return gpus


def query_gpus(config, node, timeout, env):
    """nvidia-smi --query-gpu (the config's ``nvidia_smi``, ``{node}`` replaced) -> (list, None) or
    (None, error detail)."""
    argv = expand(config.get("nvidia_smi", ["nvidia-smi"]), node) + [
        "--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv,noheader"]
    rc, out, err = run_cmd(argv, timeout, env)
    if rc is None:
        return None, "nvidia-smi timed out after %ss" % timeout
    return read_nvidia_smi(rc, out, err)


def read_nvidia_smi(rc, out, err):
    """nvidia-smi's exit status and output -> (list of GPU rows, None) or (None, error detail).

    A non-zero status is ``nvidia-smi failed rc=<N> (<meaning>): <first line>`` (meaning from
    ``NVIDIA_SMI_EXIT``, "unknown exit status" else), except a warning status
    (``NVIDIA_SMI_WARNINGS``) whose output still parses: its rows are used and a warning logged.
    """
    if rc != 0:
        rows = None
        table = "\n".join(line for line in out.splitlines() if not line.startswith("WARNING: "))
        if rc in NVIDIA_SMI_WARNINGS and table.strip():
            try:
                rows = parse_gpu_csv(table)
            except ValueError:
                rows = None
        meaning = NVIDIA_SMI_EXIT.get(rc, "unknown exit status")
        if rows is not None:
            log.warning("nvidia-smi rc=%s (%s): a warning, the GPUs are judged by its output", rc, meaning)
            return rows, None
        lines = [line.strip() for line in (out + "\n" + err).splitlines() if line.strip()]
        return None, "nvidia-smi failed rc=%s (%s): %s" % (rc, meaning, lines[0] if lines else "no output")
    try:
        return parse_gpu_csv(out), None
    except ValueError as exc:
        return None, str(exc)


def expected_gpus(check, node, features):
    """Expected GPU count: per_node[node], else the first per_feature the node has, else expected."""
    per_node = check.get("per_node") or {}
    if node in per_node:
        return int(per_node[node])
    for feature, count in (check.get("per_feature") or {}).items():
        if feature in features:
            return int(count)
    return int(check.get("expected", 0))


def check_gpu_count(check, ctx, timeout):
    gpus, error = ctx.gpus(timeout)
    want = expected_gpus(check, ctx.node, ctx.features)
    if error:
        return "expected %d, %s" % (want, error) if want else None
    if len(gpus) != want:
        return "expected %d found %d" % (want, len(gpus))
    return None


def gpu_state_problems(gpus, max_uncorrected=0):
    """Broken GPUs in parsed nvidia-smi rows -> list of detail strings (empty when healthy)."""
    problems = []
    for gpu in gpus:
        where = "GPU %s (%s)" % (gpu.get("index", "?"), gpu.get("pci.bus_id", "?"))
        for field, value in gpu.items():
            if value in BROKEN_VALUES:
                problems.append("%s: %s %s" % (where, field, value))
                break
        else:
            ecc = gpu.get("ecc.errors.uncorrected.volatile.total", "")
            if ecc not in NA_VALUES:
                try:
                    count = int(ecc)
                except ValueError:
                    problems.append("%s: ecc.errors.uncorrected.volatile.total %r" % (where, ecc))
                    continue
                if count > max_uncorrected:
                    problems.append("%s: uncorrectable ECC errors %d" % (where, count))
    return problems


def check_gpu_state(check, ctx, timeout):
    gpus, error = ctx.gpus(timeout)
    if error:
        return error
    problems = gpu_state_problems(gpus, int(check.get("max_uncorrected_ecc", 0)))
    return problems[0] if problems else None

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Dev cluster stand-ins for a node's ``nvidia-smi`` and kernel log (GPU fault emulation).

    gpu_standin.py --dir STATE --node n2 nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader
    gpu_standin.py --dir STATE --node n2 kernel-log

``nvidia-smi`` prints the sample of the node's CURRENT fault (``<state>/run/gpu/<node>/fault``,
absent = none) from ``dev/cluster/gpu-samples/``: the requested ``--query-gpu`` columns, taken by
name from the sample's header (which is what ``--format=csv`` prints), without the header for
``noheader``. ``kernel-log`` prints ``<state>/run/gpu/<node>/kernel.log``, the node's kernel log
"since boot": dev/cluster/devcluster/ (faults.py) rewrites it at each power-on from the fault then
set, and appends the fault's lines when a fault is injected into a running node. See dev/cluster/README.md.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(HERE, "gpu-samples")
# fault name -> (nvidia-smi sample, kernel log samples appended when the fault happens)
FAULTS = {
    "none": ("nvidia-smi-8gpu.csv", ()),
    "fallen-off-bus": ("nvidia-smi-fallen-off-bus.csv", ("xid-79.log",)),
    "dbe-ecc": ("nvidia-smi-dbe-ecc.csv", ("xid-48.log",)),
    "row-remap-failure": ("nvidia-smi-8gpu.csv", ("xid-64.log",)),
    "gpu-lost": ("nvidia-smi-gpu-lost.csv", ()),
    # A user's crashing program, its file and process names chosen to carry the driver's words into the
    # kernel's own segfault and trap lines: no GPU fault at all (docs/security.md).
    "spoofed-xid": ("nvidia-smi-8gpu.csv", ("spoofed-xid.log",)),
}


def fault_file(state, node):
    return os.path.join(state, "run", "gpu", node, "fault")


def kernel_log_file(state, node):
    return os.path.join(state, "run", "gpu", node, "kernel.log")


def current_fault(state, node):
    try:
        with open(fault_file(state, node)) as handle:
            name = handle.read().strip()
    except FileNotFoundError:
        return "none"
    return name if name in FAULTS else "none"


def fault_kernel_lines(fault):
    """The kernel log lines a fault writes (real NVRM: Xid lines from the samples)."""
    text = ""
    for name in FAULTS[fault][1]:
        with open(os.path.join(SAMPLES, name)) as handle:
            text += handle.read()
    return text


def nvidia_smi(state, node, args):
    query = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
    fmt = next((a.split("=", 1)[1] for a in args if a.startswith("--format=")), "csv")
    if query is None:
        sys.stderr.write("gpu_standin: only --query-gpu=... --format=csv[,noheader] is emulated\n")
        return 2
    with open(os.path.join(SAMPLES, FAULTS[current_fault(state, node)][0])) as handle:
        lines = [line.rstrip("\n") for line in handle if line.strip()]
    header = [h.strip() for h in lines[0].split(",")]
    wanted = [q.strip() for q in query.split(",")]
    missing = [w for w in wanted if w not in header]
    if missing:
        # What the real nvidia-smi says for an unknown field.
        sys.stderr.write('Field "%s" is not a valid field to query.\n' % missing[0])
        return 2
    cols = [header.index(w) for w in wanted]
    if "noheader" not in fmt.split(","):
        print(", ".join(wanted))
    for line in lines[1:]:
        values = [v.strip() for v in line.split(",")]
        print(", ".join(values[c] for c in cols))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("what", choices=("nvidia-smi", "kernel-log"))
    ap.add_argument("args", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    if args.what == "nvidia-smi":
        return nvidia_smi(args.dir, args.node, args.args)
    try:
        with open(kernel_log_file(args.dir, args.node)) as handle:
            sys.stdout.write(handle.read())
    except FileNotFoundError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

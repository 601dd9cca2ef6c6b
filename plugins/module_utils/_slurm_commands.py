# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The Slurm command forms: every argument list this collection gives a Slurm command, declared once.

Private to the collection (the leading underscore): no API promise outside it.

Each form is a function that returns ``(command, args)``: the command's name (``sinfo``,
``scontrol``, ``squeue``, ``sacct``, ``sacctmgr``, ``sbatch``, ``scancel``, ``srun``, ``strigger``) and its
argument list, names, reasons and paths as single arguments (data, never parsed by a shell). The
command layer (``_slurm_cli.SlurmCLI.run(*form, ...)``) finds the program and runs it; the
readers (``_nodes``, ``_jobs``, ``_node_events``) parse what the forms here ask for, so the
fields and separators a form requests live here too. No other file builds a Slurm argument
list (a unit test, tests/unit/plugins/module_utils/test_slurm_commands.py, looks for one).

Every option below is in the man page of the command (22.05, 24.11 and 26.05), and every form
was run on the dev clusters of those releases (recorded in tests/unit/fixtures/).
"""

from __future__ import annotations

import time

from ansible_collections.clusterops.slurm.plugins.module_utils._hostlist import compress_hostlist

try:
    from typing import Any, Dict, List, Optional, Sequence, Tuple, Union  # noqa: F401

    Command = Tuple[str, List[str]]
except ImportError:  # pragma: no cover
    pass


# ---------------------------------------------------------------------------------------------
# Fields and separators the readers parse
# ---------------------------------------------------------------------------------------------

#: Field separator of the text the commands are asked for: ASCII unit separator, which Slurm
#: never prints in an id, node name, state, partition, GRES or time.
SEP = "\x1f"
#: squeue record end (suffix of its last field): ASCII record separator, so that a comment
#: holding a newline cannot split a record.
REC_END = "\x1e"

#: ``SLURM_TIME_FORMAT`` for every job read: strftime ``%s``, Unix seconds, whatever the time zone.
TIME_ENVIRON = {"SLURM_TIME_FORMAT": "%s"}

#: sinfo(1) ``-o`` fields of the node text source (``%N`` node, ``%P`` partition, ``%T`` state,
#: ``%c`` CPUs, ``%m`` memory, ``%G`` GRES, ``%f`` features, ``%u`` reason user, ``%H`` reason
#: time, ``%E`` reason). The reason (free text) is the LAST field, so even a reason holding
#: :data:`SEP` stays whole.
SINFO_FIELDS = ("%N", "%P", "%T", "%c", "%m", "%G", "%f", "%u", "%H", "%E")
SINFO_FORMAT = SEP.join(SINFO_FIELDS)

#: Node JSON of Slurm 23.02 and later comes from ``scontrol show nodes --json`` (one record per
#: node); ``sinfo --json`` of those releases groups nodes that share a state into one record
#: with ONE reason, so it cannot be read per node.
SCONTROL_JSON_SINCE = (23, 2)
#: ``sinfo --json`` exists from Slurm 21.08 on; 21.08 and 22.05 list one record per node.
SINFO_JSON_SINCE = (21, 8)

#: squeue(1) ``-O`` fields, in this order (names are matched without case; every one is in the
#: field table of src/squeue/opts.c of 22.05, 24.11 and 26.05, and each field's print function in
#: src/squeue/print.c is the same in 24.11 and 26.05; 22.05 differs in ``exit_code``, the raw wait
#: status, see ``_jobs.parse_wait_status``). ``JobID`` is the unique numeric id,
#: ``JobArrayID`` the id as Slurm writes it (``%i``: ``123_4``, ``123_[5-100]``, ``1234+1``),
#: which also gives the array and heterogeneous job parts. The free-text comment comes last.
SQUEUE_FIELDS = (
    "JobID", "JobArrayID", "Name", "UserName", "State", "Reason", "exit_code", "NodeList",
    "SubmitTime", "StartTime", "EndTime", "RestartCnt", "Partition", "Cluster", "Comment",
)
#: ``Field:`` with no width prints the whole value; the suffix separates the fields.
SQUEUE_FORMAT = ",".join("%s:%s" % (f, SEP) for f in SQUEUE_FIELDS[:-1]) + ",%s:%s" % (
    SQUEUE_FIELDS[-1], REC_END)

#: sacct(1) ``--format`` fields, in this order; the job name (free text) last. Every one is in the
#: field table of src/sacct/sacct.c of 22.05, 24.11 and 26.05; ``ExitCode`` is ``exit:signal``
#: there. A cancelled job's exit code depends on how its program ended (``0:15`` killed by
#: SIGTERM, ``143:0`` exited 128+15 itself, ``0:9`` / ``137:0`` after SIGKILL; all seen on the
#: dev clusters): a job's end is read from its state, never from its exit code.
SACCT_FIELDS = (
    "JobID", "JobIDRaw", "Cluster", "User", "Partition", "State", "ExitCode", "Reason",
    "NodeList", "Submit", "Start", "End", "JobName",
)

#: sacctmgr ``format=`` fields of a node event, in this order; the free-text reason last.
EVENT_FIELDS = ("NodeName", "TimeStart", "TimeEnd", "State", "User", "Reason")
#: The environment of the event read: Unix seconds, and ``start=`` read as UTC.
EVENT_ENVIRON = {"SLURM_TIME_FORMAT": "%s", "TZ": "UTC"}
#: The longest ``nodes=`` argument :func:`node_events` passes (characters); Linux refuses a single
#: argument over 128 KiB (MAX_ARG_STRLEN). A longer hostlist reads every node's events instead:
#: more lines, the same answer for the nodes asked for.
MAX_NODES_ARG = 65536

#: Desired job states of the slurm_job module besides ``present``, and the call for each: the
#: command and the arguments before the job ids.
JOB_ACTION_FORMS = {
    "absent": ("scancel", []),
    "requeued": ("scontrol", ["requeue"]),
    "held": ("scontrol", ["hold"]),
    "released": ("scontrol", ["release"]),
}

#: sbatch options that take a value, as (module option, sbatch long option).
SBATCH_VALUE_OPTIONS = (
    ("partition", "--partition"),
    ("nodes", "--nodes"),
    ("ntasks_per_node", "--ntasks-per-node"),
    ("cpus_per_task", "--cpus-per-task"),
    ("gres", "--gres"),
    ("gpus", "--gpus"),
    ("gpus_per_node", "--gpus-per-node"),
    ("time", "--time"),
    ("output", "--output"),
    ("error", "--error"),
    ("dependency", "--dependency"),
    ("array", "--array"),
    ("signal", "--signal"),
    ("open_mode", "--open-mode"),
    ("chdir", "--chdir"),
)

_TIME = "%Y-%m-%dT%H:%M:%S"


def slurm_time(epoch: Union[int, float]) -> str:
    """Unix seconds as ``YYYY-MM-DDTHH:MM:SS`` in local time, as sacct reads ``--starttime``."""
    return time.strftime(_TIME, time.localtime(int(epoch)))


def slurm_utc_time(epoch: Union[int, float]) -> str:
    """Unix seconds as ``YYYY-MM-DDTHH:MM:SS`` in UTC, for sacctmgr's ``start=`` under ``TZ=UTC``."""
    return time.strftime(_TIME, time.gmtime(int(epoch)))


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------

def version() -> Command:
    """``sinfo --version`` (``slurm 24.11.5``): the release of the client commands."""
    return "sinfo", ["--version"]


def nodes_text() -> Command:
    """``sinfo -N -h -o <SINFO_FORMAT>``: one line per node and partition, no header."""
    return "sinfo", ["-N", "-h", "-o", SINFO_FORMAT]


def nodes_json(release: Tuple[int, ...]) -> Command:
    """The node JSON read of ``release``: ``scontrol show nodes --json`` from 23.02 on, else
    ``sinfo --json`` (see :data:`SCONTROL_JSON_SINCE`)."""
    if tuple(release) >= SCONTROL_JSON_SINCE:
        return "scontrol", ["show", "nodes", "--json"]
    return "sinfo", ["--json"]


def _selection(job_ids: Optional[Sequence[str]], names: Optional[Sequence[str]], users: Optional[Sequence[str]]) -> List[str]:
    """``--jobs=``, ``--name=``, ``--user=`` (comma-separated lists, each only when given): the
    options squeue(1) and sacct(1) spell alike."""
    return [option + ",".join(values) for option, values in
            (("--jobs=", job_ids), ("--name=", names), ("--user=", users)) if values]


def queue(job_ids: Optional[Sequence[str]] = None, names: Optional[Sequence[str]] = None, users: Optional[Sequence[str]] = None) -> Command:
    """squeue of every state (finished jobs stay listed for MinJobAge) in :data:`SQUEUE_FORMAT`,
    of the given ids, names and users (all jobs when none is given); run with :data:`TIME_ENVIRON`."""
    return "squeue", ["--noheader", "--states=all", "--Format=" + SQUEUE_FORMAT] + _selection(job_ids, names, users)


def accounting(job_ids: Optional[Sequence[str]] = None,
               names: Optional[Sequence[str]] = None,
               users: Optional[Sequence[str]] = None,
               start: Optional[int] = None,
               end: Optional[int] = None) -> Command:
    """sacct of all records of each id (``--duplicates``), steps included, of every user unless
    ``users`` is given, in the window ``start``..``end`` (Unix seconds, local time for sacct);
    run with :data:`TIME_ENVIRON`."""
    args = ["--noheader", "--parsable2", "--delimiter=" + SEP, "--duplicates",
            "--format=" + ",".join(SACCT_FIELDS)] + _selection(job_ids, names, users)
    if not users:
        args.append("--allusers")
    if start is not None:
        args.append("--starttime=" + slurm_time(start))
    if end is not None:
        args.append("--endtime=" + slurm_time(end))
    return "sacct", args


def node_events(start: Union[int, float], nodes: Optional[Union[str, Sequence[str]]] = None) -> Command:
    """sacctmgr's events of ``nodes`` (hostlist or names; all when None, or when longer than
    :data:`MAX_NODES_ARG`) that were open at or after ``start`` (Unix seconds); run with
    :data:`EVENT_ENVIRON`."""
    args = ["--noheader", "--parsable2", "show", "event", "event=node",
            "start=" + slurm_utc_time(start)]
    hostlist = nodes if isinstance(nodes, str) else ",".join(nodes or ())
    if hostlist and len(hostlist) <= MAX_NODES_ARG:
        args.append("nodes=" + hostlist)
    args.append("format=" + ",".join(EVENT_FIELDS))
    return "sacctmgr", args


def accounting_configuration() -> Command:
    """sacctmgr's configuration of slurm.conf's accounting part and of slurmdbd (``SlurmDBD
    configuration:``, e.g. ``PurgeEventAfter = 12 months``): a constant-size answer."""
    return "sacctmgr", ["show", "configuration"]


def configuration() -> Command:
    """slurmctld's configuration as ``scontrol show config`` prints it (``SlurmUser = slurm(64030)``,
    ``ClusterName = dev``): a constant-size answer."""
    return "scontrol", ["show", "config"]


def admin_level(user: str) -> Command:
    """``sacctmgr -nP show user USER format=AdminLevel``: the user's administrator level in accounting
    (``None``, ``Operator``, ``Administrator``), one line; nothing for a user accounting does not know."""
    return "sacctmgr", ["-nP", "show", "user", user, "format=AdminLevel"]


#: strigger(1) options of the node events a trigger of this collection watches (every node: ``--node``
#: without a value), by the event kind the trigger program reports.
TRIGGER_EVENTS = {"node_down": "--down", "node_drained": "--drained", "node_fail": "--fail"}


def triggers() -> Command:
    """Every trigger slurmctld holds: ``strigger --get`` (a header, then ``TRIG_ID RES_TYPE RES_ID TYPE
    OFFSET USER FLAGS PROGRAM`` a line, read by ``_triggers.parse_triggers``)."""
    return "strigger", ["--get"]


# ---------------------------------------------------------------------------------------------
# Acting
# ---------------------------------------------------------------------------------------------

def trigger_set(event: str, program: str) -> Command:
    """A permanent trigger of every node for ``event`` (:data:`TRIGGER_EVENTS`) running ``program`` (a
    path, one argument: strigger splits ``--program``'s value at spaces, so the caller refuses paths
    with white space)."""
    return "strigger", ["--set", "--node", TRIGGER_EVENTS[event], "--flags=PERM", "--program=%s" % program]


def trigger_clear(trigger_id: int) -> Command:
    """Remove one trigger by its id: ``strigger --clear --id=N``."""
    return "strigger", ["--clear", "--id=%d" % trigger_id]


def node_change(action: str, hostlist: str, reason: Optional[str] = None, asap: bool = False,
                nextstate: Optional[str] = None) -> Command:
    """One scontrol call for the nodes of ``hostlist``: ``reboot [ASAP] [nextstate=X]
    [reason=R] HOSTLIST``, ``cancel_reboot HOSTLIST``, or ``update NodeName=HOSTLIST
    [State=DRAIN|DOWN|RESUME] [Reason=R]`` (``action`` ``reason``: the reason alone)."""
    if action == "reboot":
        args = ["reboot"]
        if asap:
            args.append("ASAP")
        if nextstate:
            args.append("nextstate=%s" % nextstate.upper())
        if reason:
            args.append("reason=%s" % reason)
        return "scontrol", args + [hostlist]
    if action == "cancel_reboot":
        return "scontrol", ["cancel_reboot", hostlist]
    args = ["update", "NodeName=%s" % hostlist]
    if action in ("drain", "down", "resume"):
        args.append("State=%s" % action.upper())
    if reason is not None and action != "resume":
        args.append("Reason=%s" % reason)
    return "scontrol", args


def job_action(action: str, targets: Sequence[str]) -> Command:
    """The call acting on all ``targets`` (job ids as Slurm writes them) at once:
    ``scancel ID ID...`` or ``scontrol requeue|hold|release ID,ID...``
    (:data:`JOB_ACTION_FORMS`)."""
    name, args = JOB_ACTION_FORMS[action]
    if name == "scancel":
        return name, list(targets)
    return name, args + [",".join(targets)]


def export_value(export: Optional[str], environment: Optional[Dict[str, Any]]) -> Optional[str]:
    """sbatch ``--export=`` for the module's ``export`` and ``environment``.

    The environment's values travel in sbatch's own environment (commas, spaces and ``=`` stay
    data); ``--export`` names them: ``ALL`` (default) propagates them with everything else;
    ``NONE`` becomes just their names (with NONE sbatch allows no variables); any other value
    gets them appended."""
    names = sorted(environment or {})
    if not names:
        return export
    if export is None or export.strip().upper() == "ALL":
        return "ALL"
    if export.strip().upper() == "NONE":
        return ",".join(names)
    return export + "," + ",".join(names)


def submission(params: Dict[str, Any], comment: Optional[str]) -> Command:
    """sbatch from the slurm_job module's options (``--option=value`` form, so a value
    starting with ``-`` stays a value), ``--parsable`` first. The script path comes last; with
    ``script_content`` no path is given and sbatch reads the script from standard input."""
    args = ["--parsable", "--job-name=" + params["name"]]
    for option, flag in SBATCH_VALUE_OPTIONS:
        value = params.get(option)
        if value is not None and value != "":
            args.append("%s=%s" % (flag, value))
    if params.get("requeue") is True:
        args.append("--requeue")
    elif params.get("requeue") is False:
        args.append("--no-requeue")
    if comment:
        args.append("--comment=" + comment)
    export = export_value(params.get("export"), params.get("environment"))
    if export:
        args.append("--export=" + export)
    args.extend(params.get("extra_args") or [])
    if params.get("script"):
        args.append(params["script"])
    return "sbatch", args


def resubmission(launcher: str, exclude: Sequence[str] = ()) -> Command:
    """sbatch of a run's launcher script, with ``--exclude=<hostlist>`` of ``exclude`` (node
    names; none: no option), the launcher's own ``#SBATCH`` lines deciding everything else."""
    args = ["--exclude=%s" % compress_hostlist(sorted(exclude))] if exclude else []
    return "sbatch", args + [launcher]


def stack_collection(job_id: int, nodes: int, script: str, argv: Sequence[str]) -> Command:
    """srun of one task on each of the ``nodes`` nodes of running job ``job_id`` (``--overlap``
    into its allocation, ``--immediate=30``: never queued behind it), running ``bash -c
    script`` with ``argv`` as ``$0 $1...``; ``--label`` prefixes each line with the task number."""
    return "srun", ["--overlap", "--jobid=%s" % job_id, "--nodes=%d" % nodes,
                    "--ntasks=%d" % nodes, "--ntasks-per-node=1", "--immediate=30",
                    "--quiet", "--label", "bash", "-c", script] + list(argv)

# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one command layer every clusterops.slurm module uses to run Slurm's commands, and the one
way a module reports a failure (:func:`run_module`).

Private to the collection (the leading underscore): no API promise outside it.

Commands always run with an argument list, never a shell, so node names, reasons and paths
are data: through ``AnsibleModule.run_command``, except reads whose answer grows with the
cluster (``sinfo --json``: 21 MB at 16,384 nodes), which :func:`read_large` captures in linear
time. Every call is recorded (``calls``) so modules can return the exact commands they ran and
tests can count Slurm calls.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess

from ansible.module_utils.common.text.converters import to_native

from ansible_collections.clusterops.slurm.plugins.module_utils import _causes as causes
from ansible_collections.clusterops.slurm.plugins.module_utils._options import ArgumentSpec
from ansible_collections.clusterops.slurm.plugins.module_utils._slurm_commands import version
from ansible_collections.clusterops.slurm.plugins.module_utils._task import TaskFailure, run_task

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Type  # noqa: F401

if TYPE_CHECKING:  # the type of the module argument; modules import it themselves
    from ansible.module_utils.basic import AnsibleModule  # noqa: F401


#: The options of the Slurm commands, which every module that runs them takes (read by
#: :class:`SlurmCLI`); documented in the ``clusterops.slurm.slurm_cli`` doc fragment.
SLURM_COMMAND_OPTIONS = ArgumentSpec(dict(
    slurm_conf=dict(type="path"),
    slurm_bin_dir=dict(type="path"),
    command_timeout=dict(type="int", default=60),
))

#: rc that coreutils timeout(1) returns when it had to stop the command.
TIMEOUT_RC = 124

#: How bytes that are not UTF-8 are decoded (a reason or job name typed in Latin-1 on an old
#: terminal): each becomes U+FFFD, so the output stays readable and the module's result stays
#: serialisable. Python's ``replace`` codec error handler.
DECODE_ERRORS = "replace"


def read_large(module: Any, argv: List[str], environ_update: Optional[Dict[str, str]] = None, errors: str = DECODE_ERRORS) -> Tuple[int, str, str]:
    """Run ``argv`` (a list, no shell) and return ``(rc, stdout, stderr)`` as text, like
    ``AnsibleModule.run_command`` with ``check_rc=False``, in time linear in the output's size.

    ``run_command`` appends each 32 KiB it reads to one bytes object, which copies the output
    read so far every time: 2.8 s for 21 MB on this project's dev machine, against 0.1 s here
    (``benchmarks/command_capture.py``). Same environment as ``run_command``: the process's own,
    then the module's ``run_command_environ_update`` (its locale), then ``environ_update``;
    standard input is empty; bytes that are not UTF-8 are decoded with ``errors``.

    Raises:
        OSError: the command cannot be started (missing, not executable).
    """
    env = dict(os.environ)
    env.update(getattr(module, "run_command_environ_update", None) or {})
    env.update(environ_update or {})
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, close_fds=True)
    out, err = proc.communicate()
    return (proc.returncode, to_native(out, errors=errors, nonstring="simplerepr"),
            to_native(err, errors=errors, nonstring="simplerepr"))


# "slurm 24.11.5", "slurm-wlm 22.05.8", "slurm 26.05.0-0rc1": what every Slurm command prints
# for --version.
_VERSION_RE = re.compile(r"^slurm(?:-wlm)?\s+(\d+)\.(\d+)(?:\.(\d+))?", re.IGNORECASE)

# A line of stderr that reports a failure, as opposed to a warning or debug line: Slurm's
# error()/fatal() print "<prog>: error: ..." and "fatal: ...", the API's slurm_perror()
# "<function> error: ...".
_STDERR_ERROR_RE = re.compile(r"\b(?:error|fatal)\s*:|(?:^|:\s)(?:error|fatal)\b", re.IGNORECASE)


#: What sacct and sacctmgr say when the cluster keeps no accounting (AccountingStorageType
#: none): ``Slurm accounting storage is disabled`` (src/sacct/options.c, 22.05-26.05), ``You are
#: not running a supported accounting_storage plugin`` (sacctmgr; recorded on 26.05,
#: tests/unit/fixtures/slurm-26.05/node-events-accounting-disabled).
NO_ACCOUNTING = re.compile(r"accounting storage is disabled|not running a supported accounting_storage",
                           re.IGNORECASE)


def stderr_errors(err: Optional[str]) -> List[str]:
    """The lines of a command's stderr that report an error (``sacct: error: ...``,
    ``slurm_load_jobs error: ...``, ``fatal: ...``), stripped; warnings are not errors."""
    return [line.strip() for line in (err or "").splitlines() if _STDERR_ERROR_RE.search(line)]


def slurm_words(rc: int, out: Optional[str], err: Optional[str]) -> str:
    """What Slurm said about a failed command, on one line: the error lines of its stderr
    (:func:`stderr_errors`) joined by ``"; "`` (all of them: the last one often says the most),
    else every line of its stderr, else the first line of its stdout (which may be a whole
    answer), else ``rc=<rc>, no output``. The one summary of a failure every message uses."""
    lines = stderr_errors(err) or [line.strip() for line in (err or "").splitlines() if line.strip()]
    if not lines:
        lines = [line.strip() for line in (out or "").splitlines() if line.strip()][:1]
    return "; ".join(lines) if lines else "rc=%s, no output" % rc


def parse_version(text: str) -> Tuple[int, int, int]:
    """``(major, minor, micro)`` from the first line of ``<command> --version``.

    Raises:
        ValueError: the text is not a Slurm version line.
    """
    first = (text or "").strip().splitlines()
    match = _VERSION_RE.match(first[0].strip()) if first else None
    if not match:
        raise ValueError("not a Slurm version line: %r" % (first[0] if first else text))
    return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))


def json_release(doc: Any) -> Optional[str]:
    """The Slurm release named in a ``--json`` document's ``meta`` (23.02+:
    ``meta.slurm.release``; 22.05: ``meta.Slurm.release``), or None."""
    if not isinstance(doc, dict) or not isinstance(doc.get("meta"), dict):
        return None
    meta = doc["meta"]
    for key in ("slurm", "Slurm"):
        if isinstance(meta.get(key), dict) and meta[key].get("release"):
            return str(meta[key]["release"])
    return None


def json_errors(doc: Any) -> List[str]:
    """The entries of a ``--json`` document's ``errors`` list, one line each (``description``
    or ``error``, ``errno``, ``source``). An empty list when there are none."""
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if not errors:
        return []
    lines = []
    for entry in errors if isinstance(errors, list) else [errors]:
        if isinstance(entry, dict):
            text = entry.get("description") or entry.get("error") or json.dumps(entry, sort_keys=True)
            extra = ["%s=%s" % (k, entry[k]) for k in ("error_number", "errno", "source")
                     if entry.get(k) not in (None, "", 0)]
            if entry.get("description") and entry.get("error") and entry["error"] != text:
                extra.insert(0, "error=%s" % entry["error"])
            lines.append(text + (" (%s)" % ", ".join(extra) if extra else ""))
        else:
            lines.append(str(entry))
    return lines


def effective_user() -> str:
    """Name of the user this process runs as (the effective uid), or the uid when it has none."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


class SlurmCommandError(Exception):
    """A Slurm command failed; carries cmd, rc, stdout, stderr and ``cause`` (``_causes``: what
    Slurm's words, the rc and the kind of command say, unless the caller knows better)."""

    def __init__(self, msg: str, cmd: List[str], rc: int, stdout: str, stderr: str,
                 cause: Optional[str] = None) -> None:
        super(SlurmCommandError, self).__init__(msg)
        self.msg = msg
        self.cmd = cmd
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.cause = cause or causes.of_slurm_command(cmd, rc, stdout, stderr)

    def result(self) -> Dict[str, Any]:
        """``cmd``, ``rc``, ``stdout``, ``stderr`` and ``failed_cause``, the keys a module's failure reports."""
        return dict(cmd=self.cmd, rc=self.rc, stdout=self.stdout, stderr=self.stderr, failed_cause=self.cause)


class SlurmAnswerError(ValueError):
    """A Slurm answer that cannot be read as a whole (cut short, a shape or a word this collection
    does not know): the base of each reader's parse error (``NodeParseError``,
    ``NodeEventParseError``, ``JobParseError``). Never read as an empty answer."""


def split_fields(records: Sequence[str], sep: str, fields: Sequence[str], what: str,
                 error: Type[SlurmAnswerError]) -> List[Tuple[int, List[str]]]:
    """Each non-blank record of a Slurm text answer split into ``len(fields)`` values at ``sep``:
    ``[(number, values), ...]``, numbered from 1 among all records (blank ones too). The last
    field keeps any further separators (a reason may hold ``|``).

    Raises:
        error: a record with fewer fields, named "``what`` N" (e.g. ``sinfo line 3``).
    """
    rows = []
    for number, record in enumerate(records, 1):
        if not record.strip():
            continue
        values = record.split(sep, len(fields) - 1)
        if len(values) != len(fields):
            raise error("%s %d has %d fields, expected %d: %r" % (what, number, len(values), len(fields), record))
        rows.append((number, values))
    return rows


def failure_words(exc: Exception) -> str:
    """Why a Slurm read or command failed, on one line: Slurm's words of a failed command
    (a :class:`SlurmCommandError`, :func:`slurm_words`), else the error's own text (an answer
    that could not be read)."""
    if isinstance(exc, SlurmCommandError):
        return slurm_words(exc.rc, exc.stdout, exc.stderr)
    return str(exc)


def check_answer(cli: Any, name: str, rc: int, out: str, err: str, what: Optional[str] = None) -> None:
    """Raise unless the last call of ``cli`` (a :class:`SlurmCLI`), ``name``, answered completely:
    rc 0 and no error line on stderr. An error on stderr with rc 0 means the command printed what
    it could, not everything, so its output is never read as an answer (e.g. as "no jobs").

    Raises:
        SlurmCommandError: rc not 0 (:meth:`SlurmCLI.failure`), or an error on stderr with rc 0.
    """
    if rc != 0:
        raise cli.failure(name, rc, out, err, what)
    errors = stderr_errors(err)
    if errors:
        raise SlurmCommandError(
            "%s exited 0 but reported an error while trying to %s (the answer is not trusted): %s"
            % (name, what or "run it", "; ".join(errors)), cli.calls[-1], rc, out, err)


class SlurmCLI(object):
    """Runs Slurm commands for a module.

    Args:
        module: the AnsibleModule; its params ``slurm_conf``, ``slurm_bin_dir`` and
            ``command_timeout`` (seconds, 0 or less for none) are honoured.
    """

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.calls: List[List[str]] = []
        self._paths: Dict[str, str] = {}
        params = module.params
        self.bin_dir = params.get("slurm_bin_dir")
        self.timeout = params.get("command_timeout") or 0
        self.environ: Dict[str, str] = {}
        self.prefix: List[str] = []
        self.user: Optional[str] = None
        self._release: Optional[Tuple[int, int, int]] = None
        if params.get("slurm_conf"):
            if not os.path.isfile(params["slurm_conf"]):
                # Slurm's commands would retry for a minute before saying so.
                raise TaskFailure("slurm_conf %s does not exist or is not a file" % params["slurm_conf"])
            self.environ["SLURM_CONF"] = params["slurm_conf"]
        # Slurm's own words in its output, whatever the target's locale.
        self.environ["LC_ALL"] = "C"

    def path(self, name: str) -> str:
        """Absolute path of Slurm command ``name`` (``slurm_bin_dir`` first, then PATH)."""
        if name not in self._paths:
            found = None
            if self.bin_dir:
                candidate = os.path.join(self.bin_dir, name)
                if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                    found = candidate
                else:
                    raise TaskFailure("%s not found in slurm_bin_dir %s" % (name, self.bin_dir))
            else:
                found = self.module.get_bin_path(name, required=False)
                if not found:
                    raise TaskFailure("%s not found on PATH; is the Slurm client installed? "
                                      "Set slurm_bin_dir if it lives elsewhere." % name)
            self._paths[name] = found
        return self._paths[name]

    def command(self, name: str, args: Sequence[str]) -> List[str]:
        """The argument list that would run ``name args...`` (for check mode and reports)."""
        return [self.path(name)] + [str(a) for a in args]

    def run(self,
            name: str,
            args: Sequence[str],
            check: bool = True,
            what: Optional[str] = None,
            data: Optional[str] = None,
            environ: Optional[Dict[str, str]] = None,
            large: bool = False) -> Tuple[int, str, str]:
        """Run Slurm command ``name`` with ``args``; return ``(rc, stdout, stderr)``.

        Args:
            name: the command, e.g. ``"scontrol"``.
            args: its arguments, one list item each; never joined into a shell line.
            check: raise :class:`SlurmCommandError` when rc is not 0.
            what: a few words for the error message ("read node states").
            data: text written to the command's standard input (e.g. a batch script for sbatch).
            environ: variables for this call only, on top of :attr:`environ` (which they override).
            large: the answer grows with the cluster: captured by :func:`read_large` (not with
                ``data``).

        Raises:
            SlurmCommandError: rc != 0 with ``check``, or the command ran past
            ``command_timeout`` seconds (rc 124).
        """
        cmd = self.command(name, args)
        self.calls.append(self.prefix + cmd)
        run_cmd = self.prefix + cmd
        wrapped = False
        if self.timeout > 0:
            timeout_bin = self.module.get_bin_path("timeout", required=False)
            if timeout_bin:
                run_cmd = [timeout_bin, "--kill-after=10", str(self.timeout)] + run_cmd
                wrapped = True
        env = dict(self.environ)
        env.update(environ or {})
        extra: Dict[str, Any] = {}
        if data is not None:
            extra["data"] = data
        if large and data is None:
            try:
                rc, out, err = read_large(self.module, run_cmd, environ_update=env)
            except OSError as exc:
                rc, out, err = 127, "", "cannot run %s: %s" % (run_cmd[0], exc)
        else:
            rc, out, err = self.module.run_command(
                run_cmd, environ_update=env, check_rc=False, use_unsafe_shell=False,
                errors=DECODE_ERRORS, **extra)
        if rc == TIMEOUT_RC and wrapped:
            raise SlurmCommandError(
                "%s did not answer within %s seconds (command_timeout) while trying to %s"
                % (name, self.timeout, what or "run it"), cmd, rc, out, err, cause=causes.SLURM_UNREADABLE)
        if check and rc != 0:
            raise self.failure(name, rc, out, err, what)
        return rc, out, err

    def as_user(self, user: str) -> SlurmCLI:
        """A runner whose commands run as ``user`` (``runuser -u USER --``), for root only.

        Slurm takes a job's owner from the submitting process, so root submits for a user this
        way. The copy shares :attr:`calls` (every command stays in the module's report) and
        :attr:`environ`; ``runuser`` keeps the environment, so ``SLURM_CONF`` still applies.
        """
        other = SlurmCLI.__new__(SlurmCLI)
        other.__dict__.update(self.__dict__)
        other.user = user
        other.prefix = [self.module.get_bin_path("runuser", required=True), "-u", user, "--"]
        return other

    def failure(self, name: str, rc: int, out: str, err: str, what: Optional[str] = None) -> SlurmCommandError:
        """The error for the last call, ``name``, that ended with ``rc``, in Slurm's words
        (:func:`slurm_words`).

        For callers that run with ``check=False`` to handle some failures themselves and
        report the others like :meth:`run` does.
        """
        return SlurmCommandError(
            "%s failed (rc=%s) while trying to %s: %s"
            % (name, rc, what or "run it", slurm_words(rc, out, err)),
            self.calls[-1], rc, out, err)

    def release(self) -> Tuple[int, int, int]:
        """The Slurm release of the client commands, ``(major, minor, micro)``, read once per
        task from ``sinfo --version`` (local: it does not ask slurmctld).

        Raises:
            SlurmCommandError: sinfo failed or printed no version.
        """
        if self._release is None:
            rc, out, err = self.run(*version(), what="read the Slurm release")
            try:
                self._release = parse_version(out)
            except ValueError as exc:
                raise SlurmCommandError("sinfo --version: %s" % exc, self.calls[-1], rc, out, err)
        return self._release

    def run_json(self, name: str, args: Sequence[str], what: Optional[str] = None) -> Any:
        """Run a command that prints JSON (``--json``) and return the decoded document.

        A read that may be partial is a failure, never an answer: besides a non-zero rc, the
        document must be a JSON object (a truncated one does not decode), its ``errors`` list
        (every release's data_parser) must be empty, and stderr must hold no error line
        (22.05's sinfo exits 0 with an error when slurmctld does not answer).

        Raises:
            SlurmCommandError: any of the above, with Slurm's own words.
        """
        rc, out, err = self.run(name, args, check=False, what=what, large=True)
        check_answer(self, name, rc, out, err, what)
        try:
            doc = json.loads(out)
        except ValueError as exc:
            raise SlurmCommandError(
                "%s printed no valid JSON (truncated or not JSON) while trying to %s: %s"
                % (name, what or "run it", exc), self.calls[-1], rc, out, err)
        if not isinstance(doc, dict):
            raise SlurmCommandError(
                "%s printed JSON that is not an object while trying to %s"
                % (name, what or "run it"), self.calls[-1], rc, out, err)
        errors = json_errors(doc)
        if errors:
            raise SlurmCommandError(
                "%s answered with errors while trying to %s (the controller may be unreachable; "
                "the answer is not trusted): %s" % (name, what or "run it", "; ".join(errors)),
                self.calls[-1], rc, out, err)
        return doc


def run_module(module: AnsibleModule, task: Callable[[Any, SlurmCLI], Dict[str, Any]], errors: Tuple[Type[Exception], ...] = ()) -> None:
    """Run ``task(module, cli)`` with a :class:`SlurmCLI` for ``module`` through
    ``_task.run_task``: it exits with the result the task returns plus ``commands`` (every Slurm
    command the task ran), or fails the one way every module of this collection fails, with
    ``commands`` too:

    - :class:`SlurmCommandError`: its message, ``cmd``, ``rc``, ``stdout``, ``stderr`` and its
      ``failed_cause``;
    - :class:`SlurmAnswerError` (an answer that could not be read): the error's text, cause
      ``slurm_unreadable``; ``errors`` (e.g. a module's policy errors): the error's text;
    - ``TaskFailure``: its message and result keys.

    Never returns: ``exit_json`` and ``fail_json`` end the module.
    """
    clis: List[SlurmCLI] = []  # made inside the task: a bad slurm_conf fails the one way too

    def slurm_task(module: AnsibleModule) -> Dict[str, Any]:
        clis.append(SlurmCLI(module))
        try:
            return task(module, clis[0])
        except SlurmCommandError as exc:
            raise TaskFailure(exc.msg, **exc.result())
        except SlurmAnswerError as exc:
            raise TaskFailure(str(exc), failed_cause=causes.SLURM_UNREADABLE)
    run_task(module, slurm_task, errors, always=lambda: {"commands": clis[0].calls if clis else []})

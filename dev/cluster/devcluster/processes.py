"""Processes and files: /proc readers, spawning and stopping, waiting, atomic writes, locks."""

import contextlib
import fcntl
import json
import os
import pwd
import signal
import socket
import subprocess
import time

from .paths import SHARED_DIR, USERS_LOCK, ClusterError


def proc_stat(pid):
    """Return (state, ppid, starttime) of a pid, or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm may contain spaces and parentheses: split after the LAST ')'.
    rest = data[data.rindex(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[19])


def is_alive(pid, starttime=None):
    """True if pid runs (zombies count as dead) and, if given, started at starttime."""
    if not pid:
        return False
    st = proc_stat(pid)
    if st is None or st[0] in ("Z", "X"):
        return False
    return starttime is None or st[2] == starttime


def all_pids():
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def children_of(pid):
    out = []
    for p in all_pids():
        st = proc_stat(p)
        if st and st[1] == pid:
            out.append(p)
    return out


def reap_children():
    """Collect exited children so they do not linger as zombies."""
    while True:
        try:
            pid = os.waitpid(-1, os.WNOHANG)[0]
        except ChildProcessError:
            return
        if pid == 0:
            return


def pidns_of(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def environ_has(pid, needle):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def make_shared_dir():
    """SHARED_DIR, mode 1777 like /tmp (every user's runs, checkpoints and logs), never through a
    link or a folder someone else planted at that fixed path in /var/tmp (a chmod through a link to
    /etc would make /etc world-writable): opened with O_NOFOLLOW, it must be this user's directory."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(SHARED_DIR, 0o700)
    try:
        fd = os.open(SHARED_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ClusterError(f"{SHARED_DIR}: not a directory, or a link ({exc.strerror}): remove it") from exc
    try:
        owner = os.fstat(fd).st_uid
        if owner != os.geteuid():
            raise ClusterError(f"{SHARED_DIR} belongs to uid {owner}, not to {os.geteuid()}: remove it")
        os.fchmod(fd, 0o1777)  # nosec B103  # shared like /tmp (sticky): the dev users' jobs write their runs there
    finally:
        os.close(fd)


def write_file(path, text, mode=0o644):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def write_json(path, data):
    write_file(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def kill_and_wait(pids, sig=signal.SIGTERM, timeout=15.0):
    """Send sig to live pids, wait for them to exit, SIGKILL what is left."""
    pids = [p for p in pids if is_alive(p)]
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [p for p in pids if is_alive(p)]
        if not pids:
            return
        time.sleep(0.1)
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(is_alive(p) for p in pids):
        time.sleep(0.05)


def run(argv, env=None, check=True, timeout=60, input_text=None):
    """Run a command (argument list, no shell) and return CompletedProcess."""
    res = subprocess.run(
        argv, env=env, input=input_text, capture_output=True, text=True,
        timeout=timeout, check=False,
    )
    if check and res.returncode != 0:
        raise ClusterError(
            f"command failed (rc={res.returncode}): {' '.join(argv)}\n"
            f"{res.stdout}{res.stderr}".rstrip()
        )
    return res


def spawn(name, argv, env, cwd, log_dir):
    """Start a long-running daemon in the foreground mode, detached from us: its stdout/stderr go
    to <log_dir>/<name>.out (Slurm daemons also write their own LogFile). Returns its record
    {"pid", "starttime", "argv"}."""
    logf = os.path.join(log_dir, f"{name}.out")
    with open(logf, "ab") as out:
        proc = subprocess.Popen(  # noqa: S603 - fixed argument list
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=env, cwd=cwd, start_new_session=True, close_fds=True,
        )
    st = proc_stat(proc.pid)
    return {"pid": proc.pid, "starttime": st[2] if st else None, "argv": argv}


@contextlib.contextmanager
def flocked(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_user(name):
    """The local user ``name``'s ``pwd`` entry, after ``useradd -m -s /bin/bash`` where it is missing.

    The check and the creation hold USERS_LOCK: two lanes of `make test` (or a lane and a
    container's cluster-up) that need the same user at once create it once, and never run two
    useradd side by side (the second fails: "cannot lock /etc/passwd")."""
    with flocked(USERS_LOCK):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            run(["useradd", "-m", "-s", "/bin/bash", name])
            return pwd.getpwnam(name)


def wait_for(what, predicate, timeout, interval=0.25):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def tcp_listening(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def host_uptime_seconds():
    with open("/proc/uptime", encoding="ascii") as f:
        return float(f.read().split()[0])

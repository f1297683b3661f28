"""Starting the workstation daemon from a client's `assern serve`, when none answers.

A client's `assern serve` (app/quick.py) joins the daemon of its `$ASSERN_HOME`. When no
daemon answers at `daemon.sock`, it starts one and then joins it:

- the daemon is `PYTHON -m assern.app.quick daemon --idle-exit SECONDS`, run by the very
  interpreter of this `assern serve` (so the same install), detached: a session of its
  own (no terminal's signal reaches it), its parent gone at once (a double fork: it is
  nobody's zombie), stdin and stdout on /dev/null, stderr appended to
  `$ASSERN_HOME/logs/daemon.err` (its structured log goes to `assern.log` as always);
- it runs in the user's home, with this client's environment (the daemon itself reads
  only `HOME`, `ASSERN_HOME`, `XDG_RUNTIME_DIR` and `PATH` from it: each connection's
  configuration is resolved from that connection's own hello);
- two clients that start at once both start one; `daemon.lock` decides, the loser says
  so in `daemon.err` and exits, and both clients join the winner;
- the client waits until `daemon.sock` accepts (at most `START_TIMEOUT`), or until the
  daemon it started has exited with nobody listening, and then serves itself as before
  (one instance per configuration), saying why on stderr.

`ASSERN_DAEMON_IDLE_EXIT` (seconds; default 600; 0 = never) is how long a daemon started
this way stays with no session and no backend. `ASSERN_NO_DAEMON=1` keeps the older
shape: one instance per configuration, shared by its clients (docs/operations.md).

Standard library only: this runs before anything else is imported.
"""

from __future__ import annotations

import os
import socket
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (app/quick.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

NO_DAEMON_VARIABLE = "ASSERN_NO_DAEMON"
IDLE_EXIT_VARIABLE = "ASSERN_DAEMON_IDLE_EXIT"
#: Set in a daemon's environment by the client that started it (read by `assern daemon`).
STARTED_BY_VARIABLE = "ASSERN_DAEMON_STARTED_BY"
DEFAULT_IDLE_EXIT = 600.0
#: How long a client waits for the daemon it started to accept.
START_TIMEOUT = 30.0
POLL_INTERVAL = 0.01
#: The daemon's stderr, beside assern.log.
STDERR_FILE = "daemon.err"
#: Seconds a daemon being superseded lets its calls in flight run before it stops anyway
#: (`assern daemon --supersede --drain SECONDS`).
DRAIN_DEADLINE = 60.0


def daemon_wanted(environ: Mapping[str, str]) -> bool:
    """Whether `ASSERN_NO_DAEMON` leaves the workstation daemon on."""
    return environ.get(NO_DAEMON_VARIABLE, "").strip() in ("", "0")


def idle_exit(environ: Mapping[str, str]) -> tuple[float, str | None]:
    """`ASSERN_DAEMON_IDLE_EXIT` in seconds, and a warning when it is not a number >= 0
    (the default is used then)."""
    text = environ.get(IDLE_EXIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_IDLE_EXIT, None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        return DEFAULT_IDLE_EXIT, (
            f"{IDLE_EXIT_VARIABLE}={text!r} is not a number of seconds >= 0; "
            f"the daemon exits after {DEFAULT_IDLE_EXIT:g} s unused"
        )
    return value, None


def daemon_argv(executable: str, idle: float) -> list[str]:
    """The command that runs the workstation daemon with this interpreter's install."""
    return [executable, "-m", "assern.app.quick", "daemon", "--idle-exit", f"{idle:g}"]


def spawn_detached(argv: list[str], *, cwd: str, environ: Mapping[str, str], stderr_path: str) -> int:
    """Start `argv` in a session of its own, re-parented at once (double fork); its pid.

    Raises:
        OSError: the fork or the pipe failed (an exec failure shows in `stderr_path`).
    """
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child, which execs or exits
        try:
            os.close(read_end)
            os.setsid()
            grandchild = os.fork()
            if grandchild:
                os.write(write_end, str(grandchild).encode())
                os._exit(0)
            os.close(write_end)
            _redirect(stderr_path)
            os.chdir(cwd)
            os.execve(argv[0], argv, dict(environ))
        except BaseException:
            os._exit(127)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            text = pipe.read()
    finally:
        os.waitpid(child, 0)
    if not text:
        raise OSError("the daemon's start process exited before it forked")
    return int(text)


def _redirect(stderr_path: str) -> None:  # pragma: no cover - in the forked child
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    try:
        err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        err = null
    os.dup2(err, 2)


def alive(pid: int) -> bool:
    """Whether a process with this pid runs. A zombie counts as gone: the daemon's parent
    is whoever adopted it, which may not reap it soon (a container's first process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except FileNotFoundError:
        return False
    except (OSError, IndexError):
        pass  # no /proc (macOS): ask the kernel
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_for_daemon(
    path: str, pid: int, timeout: float = START_TIMEOUT, pause: Callable[[float], object] = time.sleep
) -> socket.socket | None:
    """A socket connected to `path` once something listens there; None when `pid` (the
    daemon we started) exited with nobody listening, or after `timeout` seconds.

    `pause(seconds)` waits between tries; what it raises ends the wait (the resuming
    bridge's pause raises when its client closed stdin meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
        else:
            return sock
        if not alive(pid):
            # it may have lost the race to another daemon, which listens by now
            return connect_once(path)
        if time.monotonic() >= deadline:
            return None
        pause(POLL_INTERVAL)


def connect_once(path: str) -> socket.socket | None:
    """A socket connected to `path`, or None when nothing accepts there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def stderr_file(home: str) -> str:
    """The daemon's stderr file, its folder made (0700) when missing."""
    logs = os.path.join(home, "logs")
    try:
        os.makedirs(logs, mode=0o700, exist_ok=True)
    except OSError:
        pass  # the daemon's stderr falls back to /dev/null; its log says what failed
    return os.path.join(logs, STDERR_FILE)


def daemon_folder(environ: Mapping[str, str]) -> str:
    """Where the daemon runs: the user's home (`/` when there is none)."""
    home = environ.get("HOME") or "/"
    return home if os.path.isdir(home) else "/"


def spawn_daemon(home: str, environ: Mapping[str, str]) -> tuple[int | None, str]:
    """Start the workstation daemon, detached (without waiting for it): its pid (None when
    it could not be started) and what to tell the user (the idle-exit warning, or why)."""
    idle, warning = idle_exit(environ)
    env = dict(environ)
    env[STARTED_BY_VARIABLE] = f"assern serve (pid {os.getpid()})"
    try:
        pid = spawn_detached(
            daemon_argv(sys.executable, idle),
            cwd=daemon_folder(environ),
            environ=env,
            stderr_path=stderr_file(home),
        )
    except OSError as exc:
        return None, f"cannot start the workstation daemon: {exc.strerror or exc}"
    return pid, warning or ""


def start_daemon(
    home: str,
    environ: Mapping[str, str],
    socket_path: str,
    pause: Callable[[float], object] = time.sleep,
) -> tuple[socket.socket | None, str]:
    """Start the workstation daemon and connect to its MCP socket (`pause`: as
    `wait_for_daemon` takes it).

    Returns the connected socket (None when the daemon did not come up) and what to tell
    the user (the idle-exit warning, or why the daemon did not come up)."""
    pid, message = spawn_daemon(home, environ)
    if pid is None:
        return None, message
    sock = wait_for_daemon(socket_path, pid, pause=pause)
    if sock is None:
        return None, f"the workstation daemon did not start; see {stderr_file(home)} and `assernctl logs`"
    return sock, message

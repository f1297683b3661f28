"""Child processes that cannot outlive us: own process group, parent-death signal, and a
bounded stop ladder (close stdin -> wait -> SIGTERM to the group -> wait -> SIGKILL).

The parent-death signal is armed in the child between fork and exec. On Linux,
util-linux's `setpriv --pdeathsig TERM` does that and then execs the command, so no
Python code runs in the child and CPython can start it with vfork: the trio thread is
held for a fraction of a millisecond, and no copy of assern's memory is ever mapped
into the child. Without a usable `setpriv`, a `preexec_fn` arms it (a full fork, about
2.5 ms for a 50 MB assern, with the child briefly sharing all of assern's pages). Either
way the child is forked from the trio thread itself (not a worker thread), because
Linux delivers the parent-death signal when the *thread* that forked the child exits.
The preexec hook also exits when assern died before the signal was armed; with
`setpriv` that window (before the exec) is left to stdin EOF and the next start's
orphan sweep (below).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

# Re-exported: what a supervisor's shell needs of the reaper, beside the registry.
from assern.supervisor.io.reaper import group_members, process_alive, process_start_time, sweep_orphans

__all__ = [
    "ChildProcess",
    "PidRegistry",
    "group_members",
    "process_alive",
    "process_start_time",
    "spawn",
    "stop_process",
    "sweep_orphans",
]

#: The watchdog's command: the reaper as a script, isolated and without site-packages
#: (it needs only the standard library, and starts in a few milliseconds).
_WATCHDOG = (sys.executable, "-I", "-S", str(Path(__file__).with_name("reaper.py")))

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

_PR_SET_PDEATHSIG = 1


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up once in the parent (never in a freshly forked child)."""
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True).prctl  # the libc already loaded into us


def _parent_death_hook(parent_pid: int, prctl: Callable[..., int] | None) -> None:
    """Runs in the child between fork and exec: die with SIGTERM when assern dies."""
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)


@functools.cache
def pdeathsig_launcher() -> tuple[str, ...] | None:
    """The argv prefix that arms SIGTERM as parent-death signal and execs the rest, or None.

    util-linux's `setpriv` (2.33 and later have `--pdeathsig`), found on assern's own PATH
    on Linux; looked up once per process.
    """
    if not sys.platform.startswith("linux"):
        return None
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    try:
        usage = subprocess.run(
            [setpriv, "--help"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return (setpriv, "--pdeathsig", "TERM", "--") if "--pdeathsig" in usage else None


def _check_executable(command: str, env: Mapping[str, str], cwd: str | None) -> None:
    """Raise what exec would for `command`, before a launcher hides it behind its own exit."""
    if os.sep in command:
        path = command if cwd is None else os.path.join(cwd, command)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command)
    elif shutil.which(command, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)


@attrs.define(eq=False)
class ChildProcess:
    """A spawned child with trio streams on its pipes. Owned by one task."""

    popen: subprocess.Popen[bytes]
    stdin: trio.lowlevel.FdStream
    stdout: trio.lowlevel.FdStream
    stderr: trio.lowlevel.FdStream

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    async def wait(self) -> int:
        """Wait for the child to exit and reap it; returns its exit code (-N for signal N)."""
        code = self.popen.poll()
        if code is not None:
            return code
        if hasattr(os, "pidfd_open"):
            try:
                pidfd = os.pidfd_open(self.popen.pid)
            except OSError:
                pidfd = None
            if pidfd is not None:
                try:
                    await trio.lowlevel.wait_readable(pidfd)
                finally:
                    os.close(pidfd)
                return self.popen.wait()
        return await trio.to_thread.run_sync(self.popen.wait, abandon_on_cancel=True)

    def signal_group(self, sig: int) -> None:
        """Signal the child's whole process group (grandchildren included), if any remain."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    launcher: tuple[str, ...] | None = None,
) -> ChildProcess:
    """Start `argv` in a new session (its own process group) with piped stdio.

    Synchronous on purpose (see the module docstring). `launcher` is the argv prefix that
    arms the parent-death signal (default: `pdeathsig_launcher()`); `()` arms it with a
    preexec hook instead. Raises OSError (e.g. FileNotFoundError) when the command
    cannot be started.
    """
    if launcher is None:
        launcher = pdeathsig_launcher() or ()
    preexec: Callable[[], None] | None = None
    if launcher:
        _check_executable(argv[0], env, cwd)
        command = [*launcher, *argv]
    else:
        parent, prctl = os.getpid(), _prctl()
        command = list(argv)

        def preexec() -> None:
            _parent_death_hook(parent, prctl)

    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    try:
        popen = subprocess.Popen(
            command,
            stdin=stdin_r,
            stdout=stdout_w,
            stderr=stderr_w,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=preexec,
            close_fds=True,
        )
    except BaseException:
        for fd in (stdin_w, stdout_r, stderr_r):
            os.close(fd)
        raise
    finally:
        for fd in (stdin_r, stdout_w, stderr_w):
            os.close(fd)
    return ChildProcess(
        popen=popen,
        stdin=trio.lowlevel.FdStream(stdin_w),
        stdout=trio.lowlevel.FdStream(stdout_r),
        stderr=trio.lowlevel.FdStream(stderr_r),
    )


async def stop_process(child: ChildProcess, *, grace: float = 2.0, term_timeout: float = 2.0) -> int | None:
    """Stop the child and its process group; every wait is bounded and shielded.

    Closes stdin (the MCP way to ask a stdio server to exit), waits `grace` seconds,
    sends SIGTERM to the group, waits `term_timeout`, then SIGKILLs the group. The group
    is signalled even when the leader exited by itself, so grandchildren die too.
    Returns the exit code, or None if the child survived SIGKILL's bounded wait.
    """
    code: int | None = None
    with trio.CancelScope(shield=True):
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
            await child.stdin.aclose()
        with trio.move_on_after(grace):
            code = await child.wait()
        if code is None:
            child.signal_group(signal.SIGTERM)
            with trio.move_on_after(term_timeout):
                code = await child.wait()
        child.signal_group(signal.SIGKILL)
        if code is None:
            with trio.move_on_after(term_timeout):
                code = await child.wait()
        for stream in (child.stdout, child.stderr):
            with contextlib.suppress(trio.ClosedResourceError, OSError):
                await stream.aclose()
    return code


# ----------------------------------------------------------------- pid registry
#
# A record of the process groups this supervisor started, so that its watchdog (or the
# next start's sweep) removes what it left behind when it was killed: the parent-death
# signal reaches a child, not the grandchildren it started (reaper.py).


class PidRegistry:
    """The process groups of one running supervisor, in `DIR/<pid>.json`.

    `guard()` starts the watchdog (reaper.py) that kills the recorded groups when this
    process dies, by any signal; `close()` tells it nothing is left to do.
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = directory / f"{os.getpid()}.json"
        self._owner = {"pid": os.getpid(), "start": process_start_time(os.getpid())}
        self._groups: dict[str, dict[str, int | None]] = {}
        self._watchdog: subprocess.Popen[bytes] | None = None

    def guard(self) -> int:
        """Start the watchdog of this registry; returns its pid.

        It runs in a session of its own, reads a pipe only this process writes to, and
        sweeps the registry once that pipe ends without a `done` (reaper.py).
        """
        if self._watchdog is None:
            self._watchdog = subprocess.Popen(
                [*_WATCHDOG, str(self.path), str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                close_fds=True,
                start_new_session=True,
            )
        return self._watchdog.pid

    def record(self, key: str, pid: int | None) -> None:
        """Remember (pid) or forget (None) the process group started for `key`."""
        if pid is None:
            if self._groups.pop(key, None) is None:
                return
        else:
            self._groups[key] = {"pgid": pid, "start": process_start_time(pid)}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"owner": self._owner, "groups": self._groups}))
        tmp.replace(self.path)

    def close(self) -> None:
        """Every recorded group was stopped: forget them, and let the watchdog go."""
        self.path.unlink(missing_ok=True)
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None and watchdog.stdin is not None:
            with contextlib.suppress(OSError):
                watchdog.stdin.write(b"done\n")
                watchdog.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                watchdog.wait(timeout=2.0)  # it exits at once: reap it, no zombie is left

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
# A record of the process groups this assern started, so that the next assern can
# remove what a killed one (kill -9 gives no chance to clean up) left behind: the
# parent-death signal reaches a backend, not the grandchildren it started.


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (field 3 on), or None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields


def _process_group(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[2]) if fields is not None else None


def group_members(pgid: int, *, started_after: int | None = None) -> list[int]:
    """Pids in process group `pgid` (Linux /proc), optionally only those started later."""
    members: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return members
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if _process_group(pid) != pgid:
            continue
        start = process_start_time(pid)
        if started_after is not None and start is not None and start < started_after:
            continue
        members.append(pid)
    return members


class PidRegistry:
    """The process groups of one running assern, in `DIR/<assern-pid>.json`."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = directory / f"{os.getpid()}.json"
        self._owner = {"pid": os.getpid(), "start": process_start_time(os.getpid())}
        self._groups: dict[str, dict[str, int | None]] = {}

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
        self.path.unlink(missing_ok=True)


def process_alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie (dead, waiting for a parent that does not reap) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not (Path("/proc").is_dir() and _stat_fields(pid) is None)


def _owner_alive(owner: dict[str, int | None]) -> bool:
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    if pid == os.getpid():
        return True
    if not process_alive(pid):
        return False
    start = owner.get("start")
    return start is None or process_start_time(pid) == start


def sweep_orphans(directory: Path) -> list[int]:
    """Kill what dead assern instances left in `directory`'s registry; returns the pids.

    Only registries whose owner is gone are swept, and only processes of a recorded
    group that started no earlier than that group's leader (so a recycled group id of
    an unrelated program is left alone).
    """
    killed: list[int] = []
    if not directory.is_dir():
        return killed
    for path in directory.glob("*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if _owner_alive(data.get("owner", {})):
            continue
        for group in data.get("groups", {}).values():
            pgid, start = group.get("pgid"), group.get("start")
            if not isinstance(pgid, int):
                continue
            for pid in group_members(pgid, started_after=start):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
        path.unlink(missing_ok=True)
    return killed

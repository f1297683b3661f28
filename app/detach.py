"""A primary that outlives the client that started it.

MCP clients stop their server by closing its stdin and then signalling its whole
process group (the official SDK: SIGTERM after 2 s, SIGKILL after 2 more). A primary
that stayed in that group would take every proxied client down with it. So the
`assern serve` that wins the election forks before it starts anything: the child calls
`setsid()` and becomes the primary (it runs the tree and serves the client's stdio
pipes, which it inherited, directly); the parent, the launcher, stays in the client's
process group as the process the client knows, and only waits:

- the launcher exits (status 0) once the primary lets it go: when the stdio session
  ended and the primary stopped, or when it stays up for socket clients;
- when the launcher dies or is signalled (SIGTERM, SIGINT, SIGHUP), the primary learns
  through a pipe that its stdio client is gone, ends that session, and stops unless
  socket clients remain.

Nothing else is inherited: the launcher closes its copies of the listening sockets and
of the stdio pipes, so only the primary holds them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import Callable

#: What the primary writes before letting its launcher go: it stopped cleanly, it stays
#: up for socket clients, or it stopped on an error (the launcher exits with status 1).
STOPPED = b"0"
STAYING = b"s"
FAILED = b"1"


class LauncherLink:
    """The primary's side of the two pipes to its launcher.

    Args:
        alive: Read end of a pipe only the launcher writes to (never does): EOF means
            the launcher is gone.
        done: Write end of the pipe the launcher waits on.
    """

    def __init__(self, alive: int, done: int) -> None:
        self._alive = alive
        self._done: int | None = done

    async def gone(self) -> None:
        """Return once the launcher exited (or was told to stop by its client)."""
        stream = trio.lowlevel.FdStream(os.dup(self._alive))
        async with stream:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                while await stream.receive_some(64):
                    pass

    def release(self, status: bytes) -> None:
        """Let the launcher exit (idempotent): STOPPED or STAYING."""
        if self._done is None:
            return
        fd, self._done = self._done, None
        with contextlib.suppress(OSError):
            os.write(fd, status)
        os.close(fd)


def _reap(child: int, limit: float = 2.0) -> None:
    """Collect the exit of a primary that is stopping, so it leaves no zombie behind."""
    deadline = time.monotonic() + limit
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(child, os.WNOHANG) == (0, 0) and time.monotonic() < deadline:
            time.sleep(0.01)


def _launcher(child: int, alive: int, done: int) -> int:
    """The parent's life after the fork: wait for the primary to let go."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # only the primary holds the client's pipes now
    os.dup2(null, 1)
    os.close(null)

    def let_go(_signum: int, _frame: object) -> None:
        nonlocal alive
        if alive >= 0:
            fd, alive = alive, -1
            os.close(fd)  # the primary ends our client's session

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, let_go)
    status = b""
    while chunk := os.read(done, 16):
        status += chunk
    os.close(done)
    if status != STAYING:
        _reap(child)
    if status in (STOPPED, STAYING):
        return 0
    print("assern: the primary stopped on an error; see the log in $ASSERN_HOME/logs", file=sys.stderr)
    return 1


def detach(close_in_launcher: Callable[[], None]) -> LauncherLink | int:
    """Fork; the child becomes the primary in a session of its own.

    Args:
        close_in_launcher: Closes the parent's copies of what only the primary may
            hold (the listening sockets).

    Returns:
        In the primary: its `LauncherLink`. In the launcher, once it is let go: the exit
        status for `assern serve` (0, or 1 when the primary failed or died).
    """
    alive_read, alive_write = os.pipe()
    done_read, done_write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.close(alive_write)
        os.close(done_read)
        return LauncherLink(alive_read, done_write)
    os.close(alive_read)
    os.close(done_write)
    close_in_launcher()
    return _launcher(pid, alive_write, done_read)

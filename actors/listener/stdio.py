"""Our own stdin/stdout as trio streams, with the standard descriptors diverted meanwhile.

While claimed, fd 0 reads the null device and fd 1 writes to stderr, so nothing else in
the process (a library's print, a child that inherits them) can corrupt the MCP wire.
`assern serve` claims stdio before it imports the tree (app/cli.py, for the
front door); the listener claims it itself when nobody did (`claim_stdio`). A primary
that keeps serving socket clients after its own stdio client left lets go of the
standard descriptors altogether (`release_stdio`).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import Iterator


class StdioClaim:
    """Our stdin and stdout taken as the MCP wire (`stdin`, `stdout`) until `release()`."""

    def __init__(self) -> None:
        wire_in = os.dup(0)
        wire_out = os.dup(1)
        self._saved: tuple[int, int] | None = (os.dup(0), os.dup(1))
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        self.stdin = trio.lowlevel.FdStream(wire_in)
        self.stdout = trio.lowlevel.FdStream(wire_out)

    def release(self) -> None:
        """Close our copies of the wire and restore fds 0 and 1 (idempotent)."""
        if self._saved is None:
            return
        saved, self._saved = self._saved, None
        # Our copies of the wire go now: a primary that outlives its stdio client must
        # not keep that client's pipes open.
        self.stdin.close()
        self.stdout.close()
        # FdStream made the shared descriptions non-blocking; a terminal must not stay so.
        for fd in saved:
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)
        for fd, target in zip(saved, (0, 1), strict=True):
            os.dup2(fd, target)
            os.close(fd)


@contextlib.contextmanager
def claim_stdio() -> Iterator[tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream]]:
    claim = StdioClaim()
    try:
        yield claim.stdin, claim.stdout
    finally:
        claim.release()


def release_stdio() -> None:
    """Point fds 0, 1 and 2 at the null device (the process outlives its stdio client).

    Afterwards nothing in this process holds the client's pipes, and a stray write to
    stderr cannot fail with a broken pipe.
    """
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in (0, 1, 2):
            os.dup2(null, fd)
    finally:
        os.close(null)

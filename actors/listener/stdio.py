"""Our own stdin/stdout as trio streams, with the standard descriptors diverted meanwhile.

While serving, fd 0 reads the null device and fd 1 writes to stderr, so nothing else in
the process (a library's print, a child that inherits them) can corrupt the MCP wire.
A primary that keeps serving socket clients after its own stdio client left lets go of
the standard descriptors altogether (`release_stdio`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import trio


@contextlib.contextmanager
def claim_stdio() -> Iterator[tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream]]:
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    saved_in = os.dup(0)
    saved_out = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    stdin, stdout = trio.lowlevel.FdStream(wire_in), trio.lowlevel.FdStream(wire_out)
    try:
        yield stdin, stdout
    finally:
        # Our copies of the wire go now: a primary that outlives its stdio client must
        # not keep that client's pipes open.
        stdin.close()
        stdout.close()
        # FdStream made the shared descriptions non-blocking; a terminal must not stay so.
        for fd in (saved_in, saved_out):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


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

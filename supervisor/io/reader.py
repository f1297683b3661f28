"""Reading a pipe or socket with one pass through trio's scheduler per read, not two.

trio's own `receive_some` yields to the scheduler first, then reads, and when nothing
is there yet (the usual case for a line-at-a-time peer such as an MCP client waiting
for its answer) waits for the descriptor: two passes through the run loop for each
message. `receive_some` here reads first and waits only when nothing is there, so an
idle connection costs one pass; when data was there at once it still yields once, so
a peer that never stops writing cannot starve the other tasks. Either way each call is
a checkpoint, as trio requires of every async function.

Streams without a descriptor (in-memory ones, in tests) are read through their own
`receive_some`.
"""

from __future__ import annotations

import errno
import os

import trio

from assern.supervisor.io.writer import descriptor


async def receive_some(stream: trio.abc.ReceiveStream, max_bytes: int) -> bytes:
    """Up to `max_bytes` bytes from `stream`; b"" once the other side closed it.

    Raises:
        trio.ClosedResourceError: the stream was closed on our side (also while waiting).
        trio.BrokenResourceError: reading failed otherwise.
    """
    fd = descriptor(stream)
    if fd is None:
        return await stream.receive_some(max_bytes)
    waited = False
    while True:
        try:
            data = os.read(fd, max_bytes)
        except BlockingIOError:
            # wait_readable is the checkpoint; it raises ClosedResourceError if the
            # stream is closed meanwhile (trio's notify_closing).
            await trio.lowlevel.wait_readable(fd)
            waited = True
            fd = descriptor(stream)  # -1 once closed: the read then fails with EBADF
            continue
        except OSError as exc:
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError("the stream was closed") from None
            raise trio.BrokenResourceError(str(exc)) from exc
        if not waited:
            await trio.lowlevel.checkpoint()
        return data

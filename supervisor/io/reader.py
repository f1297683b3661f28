"""Reading a pipe or socket: one pass through trio's scheduler per read, and whole lines.

trio's own `receive_some` yields to the scheduler first, then reads, and when nothing
is there yet (the usual case for a line-at-a-time peer such as an MCP client waiting
for its answer) waits for the descriptor: two passes through the run loop for each
message. `receive_some` here reads first and waits only when nothing is there, so an
idle connection costs one pass; when data was there at once it still yields once, so
a peer that never stops writing cannot starve the other tasks. Either way each call is
a checkpoint, as trio requires of every async function.

Streams without a descriptor (in-memory ones, in tests) are read through their own
`receive_some`.

`LineReader` cuts a stream into newline-terminated lines and refuses to hold a line
longer than the limit its owner gives (the JSON-RPC framing sets one limit for every
peer: actors/jsonrpc/framing.py).
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
    found = descriptor(stream)
    if found is None:
        return bytes(await stream.receive_some(max_bytes))
    fd = found
    waited = False
    while True:
        try:
            data = os.read(fd, max_bytes)
        except BlockingIOError:
            # wait_readable is the checkpoint; it raises ClosedResourceError if the
            # stream is closed meanwhile (trio's notify_closing).
            await trio.lowlevel.wait_readable(fd)
            waited = True
            now = descriptor(stream)  # -1 once closed: the read then fails with EBADF
            fd = -1 if now is None else now
            continue
        except OSError as exc:
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError("the stream was closed") from None
            raise trio.BrokenResourceError(str(exc)) from exc
        if not waited:
            await trio.lowlevel.checkpoint()
        return data


class LineTooLong(ValueError):
    """A line grew beyond the reader's `max_line`. The reader skips the rest of it: the
    next `receive` returns the line after it.

    Attributes:
        head: The line's first bytes (up to `HEAD` of them), for whoever answers it.
    """

    def __init__(self, max_line: int, head: bytes) -> None:
        super().__init__(f"a line exceeded {max_line} bytes")
        self.head = head


#: How much of an over-long line `LineTooLong` keeps.
HEAD = 64 * 1024


class LineReader:
    """The lines of a byte stream, one at a time (without their newline).

    Args:
        stream: What to read.
        max_line: The longest line held, in bytes. A longer one raises `LineTooLong`
            once, and the reader then skips it up to its newline and goes on.
        chunk: How much one read asks for.
    """

    def __init__(self, stream: trio.abc.ReceiveStream, max_line: int, chunk: int = 65536) -> None:
        self._stream = stream
        self._max_line = max_line
        self._chunk = chunk
        self._buffer = bytearray()
        self._start = 0
        self._eof = False
        #: inside a line that was refused: drop bytes up to its newline
        self._skipping = False

    @property
    def max_line(self) -> int:
        return self._max_line

    async def receive(self) -> bytes | None:
        """The next line; None once the peer closed its side.

        A last line without a newline is returned as it is (unless it is blank).
        Cancellation leaves the reader as it was: what was read stays buffered.

        Raises:
            LineTooLong: a line grew beyond `max_line` (the reader goes on after it).
            trio.ClosedResourceError, trio.BrokenResourceError: as `receive_some`.
        """
        while True:
            end = self._buffer.find(b"\n", self._start)
            if self._skipping:
                if end >= 0:
                    self._skipping = False
                    self._start = end + 1
                    continue
                self._buffer.clear()
                self._start = 0
            elif end >= 0:
                line = bytes(self._buffer[self._start : end])
                self._start = end + 1
                return line
            if self._eof:
                rest = bytes(self._buffer[self._start :])
                self._buffer.clear()
                self._start = 0
                return rest if rest.strip() else None
            del self._buffer[: self._start]
            self._start = 0
            if len(self._buffer) > self._max_line:
                head = bytes(self._buffer[:HEAD])
                self._buffer.clear()
                self._skipping = True
                raise LineTooLong(self._max_line, head)
            data = await receive_some(self._stream, self._chunk)
            if data:
                self._buffer += data
            else:
                self._eof = True

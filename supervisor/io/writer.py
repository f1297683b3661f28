"""Writing to a pipe or socket from synchronous code, in order, without a task switch.

A `DirectWriter` writes a line straight into the descriptor when nothing is waiting
before it and the descriptor takes it (the usual case: the reader keeps up). Otherwise
the line is queued, and the writer's own task, `pump`, writes the queue in order as the
other side drains it. Synchronous callers are refused once `limit` bytes are queued
(they can then take a slower way that waits); `write` waits for room instead. A broken
pipe is remembered: later writes are refused and `pump` returns.

Streams without a descriptor (in-memory ones, in tests and in-process clients) always
go through the queue and `pump`.
"""

from __future__ import annotations

import collections
import errno
import os

import trio

#: Bytes that may wait in the queue before writers are refused (or, in `write`, wait).
QUEUE_LIMIT = 4 * 1024 * 1024


def descriptor(stream: object) -> int | None:
    """The non-blocking descriptor under a trio stream, when it has one (-1 once closed)."""
    if isinstance(stream, trio.lowlevel.FdStream):
        return stream.fileno()
    if isinstance(stream, trio.SocketStream):
        return stream.socket.fileno()
    return None


class DirectWriter:
    """Writes to `stream` at once when it can, else through `pump` (which must be running)."""

    def __init__(self, stream: trio.abc.SendStream, limit: int = QUEUE_LIMIT) -> None:
        self._stream = stream
        self._direct = descriptor(stream) is not None
        self._limit = limit
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._busy = False  # `pump` is in the middle of writing one queued item
        self._wake = trio.Event()
        self._room = trio.Event()
        #: why the other side cannot be written any more (None while it works)
        self.broken: OSError | None = None

    def write_nowait(self, data: bytes) -> bool:
        """Write `data` or queue it behind what waits; False (nothing written) when refused."""
        if self.broken is not None:
            return False
        if self._queue or self._busy or not self._direct:
            if self._queued and self._queued + len(data) > self._limit:
                return False
            self._enqueue(data)
            return True
        try:
            # Asked every time: once the stream is closed it is -1 (EBADF), never a
            # number the process has since given to another file.
            fd = descriptor(self._stream)
            written = os.write(-1 if fd is None else fd, data)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            self._break(exc)
            return False
        if written < len(data):
            self._enqueue(data[written:])
        return True

    async def write(self, data: bytes) -> None:
        """Write `data` in order with everything else, waiting while the queue is full.

        Raises trio.BrokenResourceError once the other side is gone.
        """
        while not self.write_nowait(data):
            if self.broken is not None:
                raise trio.BrokenResourceError(str(self.broken)) from self.broken
            if self._room.is_set():
                self._room = trio.Event()
            await self._room.wait()
        await trio.lowlevel.checkpoint()

    async def drain(self) -> None:
        """Wait until everything written so far is out (or the other side is gone)."""
        while (self._queue or self._busy) and self.broken is None:
            if self._room.is_set():
                self._room = trio.Event()
            await self._room.wait()
        await trio.lowlevel.checkpoint()

    async def pump(self) -> None:
        """Write the queue as the other side drains; returns once it is broken."""
        while self.broken is None:
            if not self._queue:
                await self._wake.wait()
                self._wake = trio.Event()
                continue
            data = self._queue[0]
            self._busy = True
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                cause = exc.__cause__
                self._break(cause if isinstance(cause, OSError) else OSError(errno.EPIPE, str(exc)))
            except OSError as exc:
                self._break(exc)
            finally:
                self._busy = False
                if self._queue and self._queue[0] is data:
                    self._queue.popleft()
                    self._queued -= len(data)
                    self._room.set()

    def _enqueue(self, data: bytes) -> None:
        self._queue.append(data)
        self._queued += len(data)
        self._wake.set()

    def _break(self, exc: OSError) -> None:
        if self.broken is None:
            self.broken = exc
        self._queue.clear()
        self._queued = 0
        self._wake.set()
        self._room.set()

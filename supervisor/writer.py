"""Writing to a pipe from synchronous code, in order, without a task switch per write.

A `DirectWriter` writes a line straight into the pipe when nothing is waiting before
it and the pipe takes it (the usual case: the reader keeps up). Otherwise the line is
queued, and the writer's own task, `pump`, writes the queue in order as the pipe drains.
Synchronous callers are refused once the queue holds `limit` bytes (they can then take
a slower way that waits); `write` waits for nothing and never refuses while the pipe
works. A broken pipe is remembered: later writes are refused and `pump` returns.
"""

from __future__ import annotations

import collections
import errno
import os

import trio

#: Bytes a synchronous caller may leave queued before its writes are refused.
QUEUE_LIMIT = 4 * 1024 * 1024


class DirectWriter:
    """Writes to `stream` at once when it can, else through `pump` (which must be running)."""

    def __init__(self, stream: trio.lowlevel.FdStream, limit: int = QUEUE_LIMIT) -> None:
        self._stream = stream
        self._fd = stream.fileno()
        self._limit = limit
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._busy = False  # `pump` is in the middle of writing one queued item
        self._wake = trio.Event()
        #: why the pipe cannot be written any more (None while it works)
        self.broken: OSError | None = None

    def write_nowait(self, data: bytes) -> bool:
        """Write `data` or queue it behind what waits; False (nothing written) when refused."""
        if self.broken is not None:
            return False
        if self._queue or self._busy:
            if self._queued + len(data) > self._limit:
                return False
            self._enqueue(data)
            return True
        try:
            written = os.write(self._fd, data)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            self._break(exc)
            return False
        if written < len(data):
            self._enqueue(data[written:])
        return True

    async def write(self, data: bytes) -> None:
        """Write `data` in order with everything else (queued without limit if need be).

        Raises trio.BrokenResourceError once the pipe is broken.
        """
        if not self.write_nowait(data):
            if self.broken is not None:
                raise trio.BrokenResourceError(str(self.broken)) from self.broken
            self._enqueue(data)
        await trio.lowlevel.checkpoint()

    async def pump(self) -> None:
        """Write the queue as the pipe drains; returns once the pipe is broken."""
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

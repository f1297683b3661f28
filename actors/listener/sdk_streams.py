"""The `mcp` SDK's message streams over JSON lines: what its `Server` and `Client` run on.

The SDK reads and writes `SessionMessage`s on anyio memory streams; assern's
connections are lines (jsonl.py). `message_streams` pumps between the two: lines in
(after messages already read, `lead`), messages out as lines through the connection's
writer. A line that is not JSON-RPC is answered here, as everywhere else.

It imports the SDK, so only the paths that still run on it import this module: a
2026-07-28 client's connection (modern.py) and the in-process SDK client (inproc.py).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import structlog
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from assern.actors.jsonrpc.sdk import write_lines
from assern.actors.listener.jsonl import END, SendRaw, next_value, parse_message

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

    import mcp_types as types

    from assern.supervisor.io.reader import LineReader

log = structlog.get_logger()

ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]

#: What a lost peer's pipe or socket raises.
_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


@contextlib.asynccontextmanager
async def message_streams(
    reader: LineReader, out: SendRaw, lead: Sequence[types.JSONRPCMessage] = ()
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """Yield (read, write) SDK streams over a connection's lines.

    `read` gives `lead` first, then what `reader` reads, and ends when the peer closes
    its side; what goes into `write` is written through `out` (whose pump must run).
    Leaving the block stops the pumps.
    """

    async def source(into: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        for message in lead:
            await into.send(SessionMessage(message))
        while (raw := await next_value(reader, out)) is not END:
            parsed = parse_message(raw)
            if isinstance(parsed, bytes):
                await out.write(parsed)
            else:
                await into.send(SessionMessage(parsed))

    async with _streams(source, out) as streams:
        yield streams


@contextlib.asynccontextmanager
async def channel_streams(
    messages: trio.MemoryReceiveChannel[types.JSONRPCMessage], out: SendRaw
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """As `message_streams`, for messages already read: `read` gives what `messages`
    gives and ends when its sender closes."""

    async def source(into: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        async with messages:
            async for message in messages:
                await into.send(SessionMessage(message))

    async with _streams(source, out) as streams:
        yield streams


@contextlib.asynccontextmanager
async def _streams(
    source: Callable[[MemoryObjectSendStream[SessionMessage | Exception]], Awaitable[None]], out: SendRaw
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](32)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](32)

    async def pump_in() -> None:
        async with read_send:
            try:
                await source(read_send)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, *_GONE):
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_in)
        nursery.start_soon(write_lines, write_recv, out)
        try:
            yield read_recv, write_send
        finally:
            nursery.cancel_scope.cancel()

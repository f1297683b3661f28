"""The listener: accepts clients and runs one MCP server session per connection.

It also fans backend notifications (resource updates, log messages) out to the
connected clients. Connections live in their own nursery, apart from the accept loops.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import attrs
import mcp_types as types
import structlog
import trio

from assern.actors.listener.jsonl import jsonl_streams
from assern.actors.listener.session import ClientConnection, SessionContext
from assern.actors.listener.stdio import claim_stdio

log = structlog.get_logger()


@attrs.frozen(kw_only=True)
class BackendNote:
    server: str
    note: types.ServerNotification


class ListenerActor:
    def __init__(
        self,
        shared: SessionContext,
        notes: trio.MemoryReceiveChannel[BackendNote],
        *,
        stdio: bool = True,
        on_stdio_closed: Callable[[], None] = lambda: None,
    ) -> None:
        self.shared = shared
        self.notes = notes
        self.stdio = stdio
        self._on_stdio_closed = on_stdio_closed
        self.connections: dict[str, ClientConnection] = {}
        self._ids = itertools.count(1)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with structlog.contextvars.bound_contextvars(actor="listener"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._fan_out)
                if self.stdio:
                    nursery.start_soon(self._serve_stdio)
                task_status.started()

    async def serve_connection(
        self, kind: str, receive: trio.abc.ReceiveStream, send: trio.abc.SendStream
    ) -> None:
        """Serve one client over a byte stream pair until it disconnects."""
        client_id = f"{kind}-{next(self._ids)}"
        connection = ClientConnection(client_id, self.shared)
        self.connections[client_id] = connection
        try:
            async with jsonl_streams(receive, send, connection.intercept) as (read, write, send_raw):
                await connection.serve(read, write, send_raw)
        finally:
            del self.connections[client_id]

    async def _serve_stdio(self) -> None:
        with claim_stdio() as (stdin, stdout):
            await self.serve_connection("stdio", stdin, stdout)
        log.info("stdio_closed")
        self._on_stdio_closed()

    async def _fan_out(self) -> None:
        async for item in self.notes:
            for connection in list(self.connections.values()):
                try:
                    await connection.backend_notification(item.server, item.note)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass

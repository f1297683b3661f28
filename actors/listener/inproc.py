"""An in-process MCP client of the aggregate, for `assern list`, `assern demo` and direct calls.

It drives a real `ClientConnection` through the official SDK client over memory streams,
so the CLI sees exactly what an external client would.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import trio
from mcp import Client
from mcp.shared.message import SessionMessage

from assern.actors.listener.session import ClientConnection, SessionContext


@contextlib.asynccontextmanager
async def _pair(connection: ClientConnection) -> AsyncIterator[tuple[object, object]]:
    to_server_send, to_server_recv = anyio.create_memory_object_stream[SessionMessage | Exception](32)
    to_client_send, to_client_recv = anyio.create_memory_object_stream[SessionMessage | Exception](32)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection.serve, to_server_recv, to_client_send)
        try:
            yield to_client_recv, to_server_send
        finally:
            to_server_send.close()
            nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def inproc_client(shared: SessionContext, name: str = "cli") -> AsyncIterator[Client]:
    connection = ClientConnection(name, shared)
    async with Client(_pair(connection), mode="legacy", cache=None) as client:  # type: ignore[arg-type]
        yield client

"""The edge of the `mcp` SDK, for the paths that still run on it: errors and outgoing lines.

Imported only by those paths (HTTP backends, 2026-07-28 clients): importing it loads
the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import trio
from mcp.shared.exceptions import MCPError

from assern.actors.jsonrpc.errors import RpcError

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream
    from mcp.shared.message import SessionMessage


def from_sdk(exc: MCPError) -> RpcError:
    return RpcError(code=exc.code, message=exc.message, data=exc.data)


def to_sdk(exc: RpcError) -> MCPError:
    return MCPError(code=exc.code, message=exc.message, data=exc.data)


class LineOut(Protocol):
    async def write(self, data: bytes) -> None:
        """Write one encoded line; raises trio.BrokenResourceError once the peer is gone."""


async def write_lines(messages: MemoryObjectReceiveStream[SessionMessage], out: LineOut) -> None:
    """Write what the SDK sends as JSON lines, until it stops sending or the peer is gone."""
    async with messages:
        async for message in messages:
            data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
            try:
                await out.write(data.encode() + b"\n")
            except trio.BrokenResourceError:
                return

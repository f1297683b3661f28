"""Errors across the edge of the `mcp` SDK, for the paths that still run on it.

Imported only by those paths (HTTP backends, 2026-07-28 clients): importing it loads
the SDK.
"""

from __future__ import annotations

from mcp.shared.exceptions import MCPError

from assern.actors.jsonrpc.errors import RpcError


def from_sdk(exc: MCPError) -> RpcError:
    return RpcError(code=exc.code, message=exc.message, data=exc.data)


def to_sdk(exc: RpcError) -> MCPError:
    return MCPError(code=exc.code, message=exc.message, data=exc.data)

"""What every client connection shares: published snapshots and the error mapping."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import mcp_types as types
import trio
from mcp.shared.exceptions import MCPError

from assern.actors.backend.handle import BackendHandle
from assern.actors.backend.messages import BackendUnavailable
from assern.actors.listener.front_door import SERVER_NAME
from assern.actors.listener.stats import CallStats
from assern.actors.router.catalog import Catalog
from assern.supervisor.cell import Cell

UNAVAILABLE = -32003  # server-defined JSON-RPC error: the owning backend cannot answer

Directory = Callable[[], Mapping[str, BackendHandle]]


@attrs.frozen(kw_only=True)
class SessionContext:
    """What every client connection reads: published snapshots, never mutable state."""

    catalog: Cell[Catalog]
    directory: Directory
    #: set once every eager backend had its first start attempt (ready or not)
    settled: trio.Event
    #: how long a list request waits for slow-starting backends before answering
    list_wait: float = 10.0
    #: how long `initialize` may wait for backends whose capabilities are not known yet
    initialize_wait: float = 0.0
    #: capabilities remembered from earlier runs, for backends that are not ready yet
    remembered: Callable[[], Mapping[str, types.ServerCapabilities]] = dict
    #: `serverInfo.name` (the front door answers an early initialize with the same)
    server_name: str = SERVER_NAME
    instructions: str | None = None
    #: recent call latencies per backend, recorded by every connection (for status)
    stats: CallStats = attrs.field(factory=CallStats, eq=False)


def end_to_end_meta(meta: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What of a client's request `_meta` goes on to the backend with its call.

    Its own keys do; the progress token does not (the backend gets one of ours when the
    client asked for progress), nor do keys under a prefix reserved for MCP itself
    (`io.modelcontextprotocol/protocolVersion`, `…/clientInfo`: the 2026-07-28 envelope
    belongs to the client's connection to assern, and assern's connection to the
    backend has its own).
    """
    if not meta:
        return None
    kept = {
        key: value
        for key, value in meta.items()
        if key not in ("progressToken", "progress_token") and not _reserved(key)
    }
    return kept or None


def _reserved(key: str) -> bool:
    prefix, slash, _name = key.partition("/")
    return bool(slash) and any(label in ("modelcontextprotocol", "mcp") for label in prefix.split("."))


def to_mcp_error(exc: BackendUnavailable | Exception) -> MCPError:
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, BackendUnavailable):
        return MCPError(code=UNAVAILABLE, message=str(exc), data={"server": exc.server})
    if type(exc).__name__ == "BackendTimeout":
        return MCPError(code=types.REQUEST_TIMEOUT, message=str(exc))
    return MCPError(code=types.INTERNAL_ERROR, message=f"backend error: {exc}")

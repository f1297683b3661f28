"""What every client connection shares, and what a request handler gets besides its params.

`SessionContext` holds the published snapshots every connection reads. `RequestContext`
is what a request handler (handlers.py) knows about the request it serves: its id, and
the client as a `Peer` (progress notifications, server-to-client requests). Both
protocol eras give handlers the same context: the handshake-era session of protocol.py,
and the SDK's server for 2026-07-28 clients (modern.py). `to_rpc_error` maps what a
backend request fails with to the JSON-RPC error the client gets.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import mcp_types as types
import trio

from assern.actors.backend.handle import BackendHandle
from assern.actors.backend.messages import BackendUnavailable
from assern.actors.config.spec import Profile
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.handshake import SERVER_NAME
from assern.actors.listener.roots_check import SessionFolder
from assern.actors.listener.stats import CallStats
from assern.actors.router.catalog import Catalog
from assern.actors.router.views import CatalogViews
from assern.actors.search.learned import NOTHING, Learned, UseRecorder
from assern.supervisor.cell import Cell

if TYPE_CHECKING:
    from pydantic import BaseModel

    # Not a config class: its annotations are never resolved at run time.
    from assern.actors.search.semantic import Semantic  # noqa: TC004

UNAVAILABLE = -32003  # server-defined JSON-RPC error: the owning backend cannot answer

Directory = Callable[[], Mapping[str, BackendHandle]]

RequestId = int | str

#: The server-to-client requests a backend may have assern ask its client: the request
#: model (its params are checked before they go out) and the result model.
ASK: Mapping[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "sampling/createMessage": (types.CreateMessageRequest, types.CreateMessageResult),
    "elicitation/create": (types.ElicitRequest, types.ElicitResult),
    "roots/list": (types.ListRootsRequest, types.ListRootsResult),
}


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
    #: the catalog of every view: `catalog` (the settings') and each profile's
    views: CatalogViews = attrs.field(
        default=attrs.Factory(lambda self: CatalogViews(self.catalog), takes_self=True), eq=False
    )
    #: the profiles of the configuration in effect, to choose a client's by its name
    profiles: Callable[[], Sequence[Profile]] = tuple
    #: the model and tool vectors of semantic search (None: ranking by words only)
    semantic: Cell[Semantic | None] = attrs.field(factory=lambda: Cell(None), eq=False)
    #: set by the first search: the semantic model is loaded from then on even where the
    #: settings do not serve search exposure (semantic_actor.py)
    searched: trio.Event = attrs.field(factory=trio.Event, eq=False)
    #: whether searches learn from use now (`[settings.search] learn`, read per search)
    learning: Callable[[], bool] = attrs.field(default=lambda: False, eq=False)
    #: the folder the configuration in effect was resolved for (roots are checked
    #: against it, roots.py); a daemon gives each session its own instead
    folder: Callable[[], SessionFolder | None] = attrs.field(default=lambda: None, eq=False)
    #: the use counts searches are re-ranked with (actors/search/learned.py)
    learned: Cell[Learned] = attrs.field(factory=lambda: Cell(NOTHING), eq=False)
    #: the calls of searched tools since the last merge into the use file
    use: UseRecorder = attrs.field(factory=UseRecorder, eq=False)


class Peer(Protocol):
    """The client of a connection, as a request handler reaches it."""

    async def progress(
        self, token: str | int, progress: float, total: float | None, message: str | None
    ) -> None:
        """Send a progress notification for the request that carried `token`."""

    async def ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """Send the client a request and return its result.

        Raises:
            RpcError: the client answered with an error, or cannot be asked.
        """


@attrs.frozen(kw_only=True, eq=False)
class RequestContext:
    """The request a handler serves: its JSON-RPC id and the client that sent it."""

    request_id: RequestId | None
    peer: Peer
    #: the client takes `input_required` results itself (2026-07-28): a 2026-07-28
    #: backend's own input rounds pass through to it (client_rounds.py)
    input_rounds: bool = False


class Events(Protocol):
    """Where a 2026-07-28 connection's change events go (its `subscriptions/listen` streams)."""

    async def list_changed(self, kind: str) -> None:
        """`kind` is "tools", "prompts" or "resources"."""

    async def resource_updated(self, uri: str) -> None: ...


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


def sdk_error(exc: BaseException) -> RpcError | None:
    """An `mcp` SDK error (from a path that still runs on the SDK) as ours, else None.

    The SDK is never imported for this: while it is not loaded, nothing can have raised
    one of its errors.
    """
    if "mcp.shared.exceptions" not in sys.modules:
        return None
    from mcp.shared.exceptions import MCPError

    from assern.actors.jsonrpc.sdk import from_sdk

    return from_sdk(exc) if isinstance(exc, MCPError) else None


def to_rpc_error(exc: BackendUnavailable | Exception) -> RpcError:
    """The JSON-RPC error a client gets for a backend request that failed with `exc`."""
    if isinstance(exc, RpcError):
        return exc
    if isinstance(exc, BackendUnavailable):
        return RpcError(UNAVAILABLE, str(exc), {"server": exc.server})
    if type(exc).__name__ == "BackendTimeout":
        return RpcError(types.REQUEST_TIMEOUT, str(exc))
    converted = sdk_error(exc)
    if converted is not None:
        return converted
    return RpcError(types.INTERNAL_ERROR, f"backend error: {exc}")

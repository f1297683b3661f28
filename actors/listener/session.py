"""One client connection: an MCP server session that routes through the catalog snapshot.

Every connected client gets its own `ClientConnection` (and its own SDK `Server` whose
handlers are bound to it), so server-to-client requests of a backend go back to the
client whose call caused them. Lists are served from the router's immutable catalog;
calls go straight to the owning backend's mailbox: the router is not on the call path.
The request handlers live in handlers.py, the raw tools/call lane in raw_lane.py.

The stdio client of `assern serve` may have had its `initialize` answered already by
the front door (front_door.py), from the same facts `capabilities()` uses while the
catalog is empty: the SDK session still handles that request (it records the client
and the negotiated version), and jsonl.py drops its response.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping
from typing import Any

import mcp_types as types
import structlog
import trio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)

from assern.actors.backend.handle import BackendHandle
from assern.actors.backend.messages import BackendUnavailable, Origin
from assern.actors.backend.status import BackendState
from assern.actors.listener.context import UNAVAILABLE, Directory, SessionContext, to_mcp_error
from assern.actors.listener.front_door import SERVER_VERSION
from assern.actors.listener.handlers import HandlersMixin
from assern.actors.listener.jsonl import SendRaw
from assern.actors.listener.raw_lane import RawLaneMixin
from assern.actors.router import naming
from assern.actors.router.catalog import Catalog

__all__ = ["UNAVAILABLE", "ClientConnection", "Directory", "SessionContext", "to_mcp_error"]

log = structlog.get_logger()


class ClientConnection(HandlersMixin, RawLaneMixin):
    """The per-client state: its id, the session captured for notifications, subscriptions."""

    def __init__(self, client_id: str, shared: SessionContext) -> None:
        self.client_id = client_id
        self.shared = shared
        self.bus = InMemorySubscriptionBus()
        self._session: Any = None  # the handshake-era ServerSession, once initialized
        self._subscriptions: set[str] = set()
        self._send_raw: SendRaw | None = None
        self._init_options: Any = None
        self._nursery: trio.Nursery | None = None
        #: raw-lane calls in flight, by the client's request id (for its cancellations)
        self._forwarded: dict[str | int, Any] = {}
        self._origin_cache: tuple[Any, Origin] | None = None
        self._seen_version = shared.catalog.version
        #: when the client connected (epoch seconds) and the name it gave at initialize
        self.connected_at = time.time()
        self.client_name: str | None = None
        self.server = self._build_server()

    # ------------------------------------------------------------------ server

    def _build_server(self) -> Server[Any]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # logging/setLevel is deprecated in 2026-07-28
            server: Server[Any] = Server(
                self.shared.server_name,
                version=SERVER_VERSION,
                instructions=self.shared.instructions,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_list_resources=self._list_resources,
                on_list_resource_templates=self._list_templates,
                on_read_resource=self._read_resource,
                on_subscribe_resource=self._subscribe,
                on_unsubscribe_resource=self._unsubscribe,
                on_subscriptions_listen=ListenHandler(self.bus),
                on_list_prompts=self._list_prompts,
                on_get_prompt=self._get_prompt,
                on_completion=self._complete,
                on_set_logging_level=self._set_level,
            )
        server.middleware = [self._capture_session]
        return server

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options(
            NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        )

    def capabilities(self) -> types.ServerCapabilities:
        """What this aggregate can really deliver, given the backends known right now.

        Tools, prompts and resources are always served (their lists may be empty) and
        assern itself sends their list_changed whenever the catalog changes. Resource
        subscriptions, logging and completions are offered only when a backend offers them:
        a ready one, or one not ready yet whose capabilities are remembered from an earlier
        run (see actors/router/capabilities.py).
        """
        known = [*self.shared.catalog.value.capabilities.values(), *self._remembered().values()]
        subscribe = any(c.resources is not None and c.resources.subscribe for c in known)
        return types.ServerCapabilities(
            tools=types.ToolsCapability(list_changed=True),
            prompts=types.PromptsCapability(list_changed=True),
            resources=types.ResourcesCapability(subscribe=subscribe, list_changed=True),
            logging=types.LoggingCapability() if any(c.logging is not None for c in known) else None,
            completions=(
                types.CompletionsCapability() if any(c.completions is not None for c in known) else None
            ),
        )

    def _remembered(self) -> Mapping[str, types.ServerCapabilities]:
        """Remembered capabilities of the configured backends that are not in the catalog."""
        live = self.shared.catalog.value.capabilities
        return {name: caps for name, caps in self.shared.remembered().items() if name not in live}

    def _unknown_backends(self) -> list[str]:
        known = {*self.shared.catalog.value.capabilities, *self._remembered()}
        return [
            name
            for name, handle in self.shared.directory().items()
            if name not in known and handle.state is not BackendState.FAILED
        ]

    async def _capture_session(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "initialize":
            info = (ctx.params or {}).get("clientInfo")
            if isinstance(info, Mapping) and isinstance(info.get("name"), str):
                self.client_name = info["name"]
        if ctx.method == "initialize" and self._init_options is not None:
            # Decided at the handshake from the backends known then (see `capabilities`);
            # `initialize_wait` lets it wait for backends nobody knows anything about yet.
            if self.shared.initialize_wait > 0 and self._unknown_backends():
                with trio.move_on_after(self.shared.initialize_wait):
                    await self._wait_settled(math.inf)
            self._init_options.capabilities = self.capabilities()
        elif ctx.method == "notifications/initialized":
            self._session = ctx.session
        return await call_next(ctx)

    async def serve(self, read: Any, write: Any, send_raw: SendRaw | None = None) -> None:
        """Serve this client until it disconnects; list_changed follows the catalog.

        With `send_raw` (a byte-stream client), tools/call requests on a handshake-era
        connection take the raw lane: see `intercept`.
        """
        with structlog.contextvars.bound_contextvars(client=self.client_id):
            log.info("client_connected")
            try:
                async with trio.open_nursery() as nursery:
                    self._send_raw, self._nursery = send_raw, nursery
                    nursery.start_soon(self._follow_catalog)
                    self._init_options = self.initialization_options()
                    await self.server.run(read, write, self._init_options)
                    nursery.cancel_scope.cancel()
            finally:
                self._cancel_forwarded()
                self._send_raw = self._nursery = None
                log.info("client_disconnected")

    # ----------------------------------------------------------- notifications

    async def _follow_catalog(self) -> None:
        cell = self.shared.catalog
        old = cell.value
        while True:
            self._seen_version, new = await cell.changed(self._seen_version)
            kinds = []
            if [t.tool for t in old.tools.values()] != [t.tool for t in new.tools.values()]:
                kinds.append("tools")
            if list(old.prompts) != list(new.prompts):
                kinds.append("prompts")
            if list(old.resources) != list(new.resources) or old.templates != new.templates:
                kinds.append("resources")
            old = new
            for kind in kinds:
                await self._send_list_changed(kind)

    async def _send_list_changed(self, kind: str) -> None:
        event = {"tools": ToolsListChanged, "prompts": PromptsListChanged}.get(kind, ResourcesListChanged)()
        await self.bus.publish(event)
        session = self._session
        if session is None:
            return
        try:
            if kind == "tools":
                await session.send_tool_list_changed()
            elif kind == "prompts":
                await session.send_prompt_list_changed()
            else:
                await session.send_resource_list_changed()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        log.debug("list_changed_sent", kind=kind)

    async def backend_notification(self, server: str, note: types.ServerNotification) -> None:
        """Forward a backend's resource update or log message to this client."""
        if isinstance(note, types.ResourceUpdatedNotification):
            uri = naming.resource_uri(server, str(note.params.uri))
            if uri not in self._subscriptions:
                return
            await self.bus.publish(ResourceUpdated(uri=uri))
            if self._session is not None:
                await self._session.send_resource_updated(uri)
        elif isinstance(note, types.LoggingMessageNotification) and self._session is not None:
            params = note.params
            logger = f"{server}.{params.logger}" if params.logger else server
            await self._session.send_log_message(params.level, params.data, logger=logger)

    # ---------------------------------------------------------------- helpers

    def _catalog_complete(self) -> bool:
        catalog = self.shared.catalog.value
        return all(
            name in catalog.servers
            for name, handle in self.shared.directory().items()
            if handle.state is BackendState.READY
        )

    async def _wait_settled(self, limit: float) -> None:
        """Wait (at most `limit` s) until every eager backend had its first start and the
        catalog lists every ready one."""
        if self.shared.settled.is_set() and self._catalog_complete():
            return
        with trio.move_on_after(limit):
            await self.shared.settled.wait()
            cell = self.shared.catalog
            version = cell.version
            while not self._catalog_complete():
                version, _ = await cell.changed(version)

    async def _settled_catalog(self) -> Catalog:
        await self._wait_settled(self.shared.list_wait)
        return self.shared.catalog.value

    def _down_owner(self, name: str) -> BackendUnavailable | None:
        """Why a name that carries a down server's prefix cannot be called, if it does."""
        owners = [
            handle
            for server, handle in self.shared.directory().items()
            if name.startswith(naming.server_prefix(server) + "_") and handle.actor.listing is None
        ]
        if not owners:
            return None
        status = max(owners, key=lambda h: len(h.name)).status
        if status.state is BackendState.FAILED:
            reason = f"it failed after {status.restarts} restarts ({status.last_error})"
        else:
            reason = f"it is {status.state.value}" + (f" ({status.last_error})" if status.last_error else "")
        return BackendUnavailable(status.server, reason)

    def _record_call(self, server: str, started: float) -> None:
        """Count one finished call (answered or failed) in the latency window."""
        self.shared.stats.record(server, (trio.current_time() - started) * 1000)

    def _handle(self, server: str) -> BackendHandle:
        handle = self.shared.directory().get(server)
        if handle is None:
            raise MCPError(code=UNAVAILABLE, message=f"server '{server}' is not configured")
        return handle

    def _origin(self, session: Any, request_id: Any) -> Origin:
        related = ServerMessageMetadata(related_request_id=request_id) if request_id is not None else None
        result_types: dict[str, type[Any]] = {
            "sampling/createMessage": types.CreateMessageResult,
            "elicitation/create": types.ElicitResult,
            "roots/list": types.ListRootsResult,
        }
        request_types: dict[str, Any] = {
            "sampling/createMessage": (
                types.CreateMessageRequest,
                types.CreateMessageRequestParams,
            ),
            "elicitation/create": (types.ElicitRequest, types.ElicitRequestParams),
            "roots/list": (types.ListRootsRequest, None),
        }

        async def ask(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            req_cls, params_cls = request_types[method]
            req = req_cls(params=params_cls.model_validate(params)) if params_cls else req_cls()
            try:
                result = await session.send_request(req, result_types[method], metadata=related)
            except MCPError:
                raise
            except Exception as exc:  # e.g. no back-channel on a 2026-07-28 connection
                raise MCPError(code=types.INVALID_REQUEST, message=str(exc)) from exc
            return result.model_dump(by_alias=True, mode="json", exclude_none=True)

        return Origin(client=self.client_id, ask=ask)

"""One client connection: an MCP server session that routes through the catalog snapshot.

Every connected client gets its own `ClientConnection` (and its own SDK `Server` whose
handlers are bound to it), so server-to-client requests of a backend go back to the
client whose call caused them. Lists are served from the router's immutable catalog;
calls go straight to the owning backend's mailbox: the router is not on the call path.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import attrs
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
from mcp_types import PROTOCOL_VERSION_META_KEY

from assern.actors.backend import messages as msgs
from assern.actors.backend.handle import BackendHandle, request
from assern.actors.backend.messages import BackendUnavailable, Origin
from assern.actors.backend.status import BackendState
from assern.actors.listener.jsonl import SendRaw
from assern.actors.listener.stats import CallStats
from assern.actors.router import naming
from assern.actors.router.catalog import Catalog, suggest_tools, unknown_tool_message
from assern.supervisor.cell import Cell

log = structlog.get_logger()

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
    #: how long `initialize` waits for starting backends, so capabilities are known
    initialize_wait: float = 5.0
    server_name: str = "assern"
    instructions: str | None = None
    #: recent call latencies per backend, recorded by every connection (for status)
    stats: CallStats = attrs.field(factory=CallStats, eq=False)


def _error(exc: BackendUnavailable | Exception) -> MCPError:
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, BackendUnavailable):
        return MCPError(code=UNAVAILABLE, message=str(exc), data={"server": exc.server})
    if type(exc).__name__ == "BackendTimeout":
        return MCPError(code=types.REQUEST_TIMEOUT, message=str(exc))
    return MCPError(code=types.INTERNAL_ERROR, message=f"backend error: {exc}")


class ClientConnection:
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
        self._forwarded: dict[str | int, trio.CancelScope] = {}
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
                version="0.1.0",
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
        subscriptions, logging and completions are offered only when a ready backend
        offers them.
        """
        known = self.shared.catalog.value.capabilities.values()
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

    async def _capture_session(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "initialize":
            info = (ctx.params or {}).get("clientInfo")
            if isinstance(info, Mapping) and isinstance(info.get("name"), str):
                self.client_name = info["name"]
        if ctx.method == "initialize" and self._init_options is not None:
            # Decided at the handshake from the backends known then (see `capabilities`);
            # a client that connects while they start waits briefly for them.
            await self._wait_settled(self.shared.initialize_wait)
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
                self._send_raw = self._nursery = None
                log.info("client_disconnected")

    # --------------------------------------------------------------- raw lane

    def intercept(self, raw: Any) -> bool:
        """Take a tools/call (or its cancellation) off the wire before the SDK sees it.

        Only on an initialized handshake-era connection, for a known tool whose backend
        offers the raw lane; anything else (errors included) goes the SDK way. The
        result is forwarded as the backend wrote it, without re-validating models.
        """
        if not isinstance(raw, dict):
            return False
        method = raw.get("method")
        if method == "notifications/cancelled":
            params = raw.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            scope = self._forwarded.get(request_id) if isinstance(request_id, str | int) else None
            if scope is None:
                return False
            scope.cancel()
            return True
        if method != "tools/call" or self._session is None or self._nursery is None:
            return False
        request_id = raw.get("id")
        params = raw.get("params")
        if (
            not isinstance(request_id, str | int)
            or isinstance(request_id, bool)
            or not isinstance(params, dict)
        ):
            return False
        name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
        if not isinstance(name, str) or not isinstance(arguments, dict | None):
            return False
        if meta is not None and (not isinstance(meta, dict) or PROTOCOL_VERSION_META_KEY in meta):
            return False
        route = self.shared.catalog.value.tools.get(name)
        handle = self.shared.directory().get(route.server) if route is not None else None
        if route is None or handle is None or not handle.actor.fast_path or request_id in self._forwarded:
            return False
        token = meta.get("progressToken") if meta else None
        scope = self._forwarded[request_id] = trio.CancelScope()
        self._nursery.start_soon(
            self._forward_call, request_id, route.original, handle, arguments, token, scope
        )
        return True

    async def _forward_call(
        self,
        request_id: str | int,
        name: str,
        handle: BackendHandle,
        arguments: dict[str, Any] | None,
        token: str | int | None,
        scope: trio.CancelScope,
    ) -> None:
        send_raw = self._send_raw
        assert send_raw is not None
        progress = None
        if token is not None and isinstance(token, str | int):

            async def progress(p: float, total: float | None, message: str | None) -> None:
                params: dict[str, Any] = {"progressToken": token, "progress": p}
                if total is not None:
                    params["total"] = total
                if message is not None:
                    params["message"] = message
                note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
                await send_raw(json.dumps(note).encode() + b"\n")

        origin = self._origin(self._session, None)
        started = trio.current_time()
        try:
            with scope:
                try:
                    result = await request(
                        handle,
                        lambda reply: msgs.ForwardCall(
                            name=name,
                            arguments=arguments,
                            request_id=request_id,
                            progress=progress,
                            origin=origin,
                            reply=reply,
                        ),
                    )
                    line = {"jsonrpc": "2.0", "id": request_id, "result": result}
                except Exception as exc:
                    error = _error(exc).error.model_dump(mode="json", exclude_none=True)
                    line = {"jsonrpc": "2.0", "id": request_id, "error": error}
                self._record_call(handle.name, started)
                await send_raw(json.dumps(line).encode() + b"\n")
        finally:
            del self._forwarded[request_id]

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
            if handle.status.state is BackendState.READY
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

    # ------------------------------------------------------------------ tools

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        catalog = await self._settled_catalog()
        return types.ListToolsResult(tools=catalog.tool_list)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        catalog = self.shared.catalog.value
        route = catalog.tools.get(params.name)
        if route is None and not self.shared.settled.is_set():
            route = (await self._settled_catalog()).tools.get(params.name)
        if route is None:
            if params.name in catalog.hidden:
                server = catalog.hidden[params.name]
                raise MCPError(
                    code=types.INVALID_PARAMS,
                    message=f"Tool '{params.name}' is not allowed: server '{server}' "
                    "exposes only the tools in its `allowed` list.",
                    data={"tool": params.name, "server": server},
                )
            down = self._down_owner(params.name)
            if down is not None:
                raise _error(down)
            suggestions = suggest_tools(catalog, params.name)
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=unknown_tool_message(params.name, suggestions),
                data={
                    "tool": params.name,
                    "suggestions": list(suggestions.close),
                    "servers": [server for server, _ in suggestions.same_base],
                },
            )
        token = (params.meta or {}).get("progress_token")
        progress = None
        if token is not None:
            session, request_id = ctx.session, ctx.request_id

            async def progress(p: float, total: float | None, message: str | None) -> None:
                await session.send_progress_notification(
                    token, p, total, message, related_request_id=request_id
                )

        handle = self._handle(route.server)
        origin = self._origin(ctx.session, ctx.request_id)
        started = trio.current_time()
        try:
            result: types.CallToolResult = await request(
                handle,
                lambda reply: msgs.CallTool(
                    name=route.original,
                    arguments=params.arguments,
                    request_id=ctx.request_id,
                    progress=progress,
                    origin=origin,
                    reply=reply,
                ),
            )
        except (BackendUnavailable, Exception) as exc:
            self._record_call(handle.name, started)
            raise _error(exc) from None
        self._record_call(handle.name, started)
        return result

    # -------------------------------------------------------------- resources

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        catalog = await self._settled_catalog()
        return types.ListResourcesResult(resources=[r.resource for r in catalog.resources.values()])

    async def _list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        catalog = await self._settled_catalog()
        return types.ListResourceTemplatesResult(resource_templates=[t.template for t in catalog.templates])

    def _resource_owner(self, uri: str) -> tuple[str, str]:
        catalog = self.shared.catalog.value
        route = catalog.resources.get(uri)
        if route is not None:
            return route.server, route.original
        found = naming.split_resource_uri(uri, set(self.shared.directory()))
        if found is None:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Unknown resource '{uri}': assern resources look like assern://SERVER/ORIGINAL-URI",
                data={"uri": uri},
            )
        return found

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        server, original = self._resource_owner(str(params.uri))
        try:
            result: types.ReadResourceResult = await request(
                self._handle(server), lambda reply: msgs.ReadResource(uri=original, reply=reply)
            )
        except Exception as exc:
            raise _error(exc) from None
        contents = [
            c.model_copy(update={"uri": naming.resource_uri(server, str(c.uri))}) for c in result.contents
        ]
        return result.model_copy(update={"contents": contents})

    async def _subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        await self._set_subscription(str(params.uri), True)
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await self._set_subscription(str(params.uri), False)
        return types.EmptyResult()

    async def _set_subscription(self, uri: str, on: bool) -> None:
        server, original = self._resource_owner(uri)
        try:
            await request(
                self._handle(server),
                lambda reply: msgs.Subscribe(uri=original, subscribe=on, reply=reply),
            )
        except Exception as exc:
            raise _error(exc) from None
        if on:
            self._subscriptions.add(uri)
        else:
            self._subscriptions.discard(uri)

    # ---------------------------------------------------------------- prompts

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        catalog = await self._settled_catalog()
        return types.ListPromptsResult(prompts=[p.prompt for p in catalog.prompts.values()])

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        catalog = await self._settled_catalog()
        route = catalog.prompts.get(params.name)
        if route is None:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Unknown prompt '{params.name}'. Known prompts: "
                + (", ".join(catalog.prompts) or "none"),
                data={"prompt": params.name},
            )
        try:
            return await request(
                self._handle(route.server),
                lambda reply: msgs.GetPrompt(name=route.original, arguments=params.arguments, reply=reply),
            )
        except Exception as exc:
            raise _error(exc) from None

    async def _complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            route = self.shared.catalog.value.prompts.get(ref.name)
            if route is None:
                raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt '{ref.name}'")
            server, backend_ref = route.server, ref.model_copy(update={"name": route.original})
        else:
            server, original = self._resource_owner(ref.uri)
            backend_ref = ref.model_copy(update={"uri": original})
        context = params.context.arguments if params.context is not None else None
        try:
            return await request(
                self._handle(server),
                lambda reply: msgs.Complete(
                    ref=backend_ref,
                    argument={"name": params.argument.name, "value": params.argument.value},
                    context_arguments=context,
                    reply=reply,
                ),
            )
        except Exception as exc:
            raise _error(exc) from None

    # ---------------------------------------------------------------- logging

    async def _set_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        for handle in self.shared.directory().values():
            caps = handle.actor.listing.capabilities if handle.actor.listing else None
            if caps is None or caps.logging is None:
                continue
            try:
                await request(handle, lambda reply: msgs.SetLevel(level=params.level, reply=reply))
            except Exception as exc:
                log.warning("set_level_failed", server=handle.name, error=str(exc))
        return types.EmptyResult()

"""2026-07-28 clients: the `mcp` SDK's own server, for a connection that opened in that era.

A connection whose first request carries the 2026-07-28 `_meta` envelope (session.py
decides, as the SDK does) is stateless: every request says who the client is and
which version it speaks, change notifications travel on `subscriptions/listen`
streams, and the server may not send requests of its own. The SDK's lowlevel `Server`
serves that era here, built with the connection's own handlers (handlers.py): each
gets the request's context with the SDK's session as its `Peer`, and its `RpcError`s
become the SDK's errors at this edge. The request that opened the connection, and
what came before it, are replayed to it first.

This module loads the SDK (about a third of the aggregator's memory): session.py
imports it only when such a client connects.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import structlog
import trio
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.session import ServerSession as SdkSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)

from assern.actors.jsonrpc.errors import RpcError
from assern.actors.jsonrpc.sdk import from_sdk, to_sdk
from assern.actors.listener.context import ASK, RequestContext, RequestId, SessionContext
from assern.actors.listener.handshake import SERVER_VERSION
from assern.actors.listener.round_trips import ROUND_TRIP_METHODS, RoundTrips
from assern.actors.listener.sdk_streams import channel_streams, message_streams

log = structlog.get_logger()

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.server.models import InitializationOptions
    from mcp_types import SubscriptionsListenRequestParams

    from assern.actors.listener.jsonl import SendRaw
    from assern.actors.listener.modern_lane import ModernLane
    from assern.actors.listener.protocol import Handler, Method
    from assern.supervisor.io.reader import LineReader

#: The SDK `Server` argument each served method's handler goes in.
_SERVER_ARGUMENTS = {
    "tools/list": "on_list_tools",
    "tools/call": "on_call_tool",
    "resources/list": "on_list_resources",
    "resources/templates/list": "on_list_resource_templates",
    "resources/read": "on_read_resource",
    "resources/subscribe": "on_subscribe_resource",
    "resources/unsubscribe": "on_unsubscribe_resource",
    "prompts/list": "on_list_prompts",
    "prompts/get": "on_get_prompt",
    "completion/complete": "on_completion",
    "logging/setLevel": "on_set_logging_level",
}

SdkHandler = Callable[[ServerRequestContext[Any, Any], Any], Awaitable[Any]]


@attrs.frozen
class SdkPeer:
    """The client of one request, through the SDK's session (see `context.Peer`)."""

    session: SdkSession
    request_id: RequestId | None

    async def progress(
        self, token: str | int, progress: float, total: float | None, message: str | None
    ) -> None:
        related: Any = self.request_id
        await self.session.send_progress_notification(
            token, progress, total, message, related_request_id=related
        )

    async def ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        request_model, result_model = ASK[method]
        body: dict[str, Any] = {"method": method}
        if params is not None:
            body["params"] = params
        request: Any = request_model.model_validate(body, by_name=False)
        related = None
        if self.request_id is not None:
            related = ServerMessageMetadata(related_request_id=self.request_id)
        try:
            result = await self.session.send_request(request, result_model, metadata=related)
        except MCPError as exc:  # refused by the client, or no back-channel (the 2026 rule)
            raise from_sdk(exc) from None
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def sdk_handler(handler: Handler) -> SdkHandler:
    """One of our handlers as the SDK calls it."""

    async def handle(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        context = RequestContext(
            request_id=ctx.request_id, peer=SdkPeer(ctx.session, ctx.request_id), input_rounds=True
        )
        try:
            return await handler(context, params)
        except RpcError as exc:
            raise to_sdk(exc) from None

    return handle


@attrs.frozen
class BusEvents:
    """A connection's changes, published to its `subscriptions/listen` streams."""

    bus: InMemorySubscriptionBus

    async def list_changed(self, kind: str) -> None:
        event: ToolsListChanged | PromptsListChanged | ResourcesListChanged
        if kind == "tools":
            event = ToolsListChanged()
        elif kind == "prompts":
            event = PromptsListChanged()
        else:
            event = ResourcesListChanged()
        await self.bus.publish(event)

    async def resource_updated(self, uri: str) -> None:
        await self.bus.publish(ResourceUpdated(uri=uri))


#: Subscribe (True) or unsubscribe (False) the connection to a resource, as the client
#: named it (handlers.Handlers.set_subscription).
Subscriber = Callable[[str, bool], Awaitable[None]]


class SubscribingListen:
    """`subscriptions/listen` that also subscribes to the resources its filter names.

    The 2026-07-28 revision has no `resources/subscribe`: a client lists the URIs it
    follows in its listen request. Each one is subscribed at its backend when the first
    open stream names it and unsubscribed when the last such stream ends; updates then
    reach the connection's bus like any other change. A URI no backend owns is honoured
    and never fires, as the SDK does for its own resources.
    """

    def __init__(self, bus: InMemorySubscriptionBus, subscribe: Subscriber) -> None:
        self._listen = ListenHandler(bus)
        self._subscribe = subscribe
        self._streams: dict[str, int] = {}

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> Any:
        uris = list(dict.fromkeys(params.notifications.resource_subscriptions or ()))
        held: list[str] = []
        try:
            for uri in uris:
                if self._streams.get(uri, 0) == 0 and not await self._set(uri, True):
                    continue
                self._streams[uri] = self._streams.get(uri, 0) + 1
                held.append(uri)
            return await self._listen(ctx, params)
        finally:
            with trio.CancelScope(shield=True):  # the stream ended or was cancelled: let go
                for uri in held:
                    self._streams[uri] -= 1
                    if self._streams[uri] == 0:
                        del self._streams[uri]
                        await self._set(uri, False)

    async def _set(self, uri: str, on: bool) -> bool:
        try:
            await self._subscribe(uri, on)
        except RpcError as exc:
            log.debug("listen_subscription_not_followed", uri=uri, subscribe=on, error=exc.message)
            return False
        return True


def build_server(
    methods: Mapping[str, Method],
    shared: SessionContext,
    bus: InMemorySubscriptionBus,
    subscribe: Subscriber,
    round_trips: RoundTrips,
    input_schema: Callable[[str], Mapping[str, Any] | None] | None = None,
) -> Server[Any]:
    """The SDK server for one connection, with that connection's handlers.

    The requests that may need the client's input (`ROUND_TRIP_METHODS`) answer a
    backend's request during them with `input_required` rounds (round_trips.py).
    `input_schema` finds a tool's schema by name for the SDK's check of `Mcp-Param`
    headers over HTTP; without it the SDK lists every tool for each call to find it.
    """
    handlers = {
        _SERVER_ARGUMENTS[name]: sdk_handler(
            round_trips.wrap(name, method.handler) if name in ROUND_TRIP_METHODS else method.handler
        )
        for name, method in methods.items()
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # logging/setLevel is deprecated in 2026-07-28
        # The handlers' keyword names come from the method table, which mypy cannot follow.
        server: Server[Any] = Server(  # type: ignore[call-overload]
            shared.server_name,
            version=SERVER_VERSION,
            instructions=shared.instructions,
            on_subscriptions_listen=SubscribingListen(bus, subscribe),
            get_tool_input_schema=input_schema,
            **handlers,
        )
    server.middleware = []  # nothing around the handlers (no tracing spans either)
    return server


class ModernServer:
    """The SDK server of one 2026-07-28 connection, and where its change events go."""

    def __init__(
        self,
        methods: Mapping[str, Method],
        shared: SessionContext,
        subscribe: Subscriber,
        nursery: trio.Nursery,
        input_schema: Callable[[str], Mapping[str, Any] | None] | None = None,
        round_trips: RoundTrips | None = None,
    ) -> None:
        """`methods`: the connection's handlers by method name; `shared`: what every
        connection shares (the catalog, the backends); `subscribe`: how the connection
        follows a resource; `nursery`: where its calls run between input rounds;
        `input_schema`: a tool's schema by name, in the connection's view;
        `round_trips`: the connection's calls in input rounds, when they are shared
        with its plain requests (modern_lines.py)."""
        bus = InMemorySubscriptionBus()
        self.events = BusEvents(bus)
        self.round_trips = round_trips if round_trips is not None else RoundTrips(nursery)
        self.server = build_server(methods, shared, bus, subscribe, self.round_trips, input_schema)
        #: the raw lane for the tool calls the HTTP front answers itself (set by the
        #: connection that hosts this server for HTTP; modern_lane.py)
        self.lane: ModernLane | None = None

    def initialization_options(self) -> InitializationOptions:
        return self.server.create_initialization_options(
            NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        )

    async def serve(self, lead: Sequence[types.JSONRPCMessage], reader: LineReader, out: SendRaw) -> None:
        """Serve the connection until the client leaves: `lead` first, then what `reader` reads."""
        async with message_streams(reader, out, lead) as (read, write):
            await self.server.run(read, write, self.initialization_options())

    async def serve_channel(
        self, messages: trio.MemoryReceiveChannel[types.JSONRPCMessage], out: SendRaw
    ) -> None:
        """Serve the messages `messages` gives until its sender closes (modern_lines.py)."""
        async with channel_streams(messages, out) as (read, write):
            await self.server.run(read, write, self.initialization_options())

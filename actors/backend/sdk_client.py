"""The backend session over the `mcp` SDK's `Client`, for the backends our own client does not serve.

HTTP (streamable-http) and SSE backends, and stdio backends on protocol "auto" or a
version pin (which may speak 2026-07-28, or probe for it), still run on the SDK. This
module adapts its `Client` to the `BackendSession` interface (session.py), and at that
edge turns the SDK's errors into ours: an `MCPError` becomes an `RpcError`, a lost
connection (`CONNECTION_CLOSED`) a `ForwardLost`.

For a stdio backend the SDK still reads and writes `SessionMessage`s on anyio streams;
`stdio_streams` bridges them to the process that transport.py runs, whose `Forwarder`
keeps serving the raw lane on the same pipes (its string ids never meet the SDK's
integers).

Importing this module loads the SDK: `open_session` imports it only when a backend
that needs it starts.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import mcp_types as types
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from assern.actors.backend.driven_rounds import drive, input_required
from assern.actors.backend.forward import ForwardLost, Requester
from assern.actors.backend.rounds import CAPABILITY_OF, refuse_foreign_state
from assern.actors.backend.transport import ProcessLink, stdio_process
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.jsonrpc.sdk import from_sdk, write_lines

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    from anyio.streams.memory import MemoryObjectSendStream
    from mcp.client._transport import TransportStreams
    from mcp.client.session import ClientRequestContext

    from assern.actors.backend.hooks import SessionHooks
    from assern.actors.backend.messages import ProgressSink, Rounds
    from assern.actors.config.spec import ServerSpec

R = TypeVar("R", bound=BaseModel)

#: What the client whose request is being sent declared (of what assern relays), for the
#: SDK-written envelope of that request; None outside such a request (assern's own).
_CALLER_DECLARED: ContextVar[dict[str, Any] | None] = ContextVar("assern_caller_declared", default=None)


@contextlib.contextmanager
def sdk_errors() -> Iterator[None]:
    """The SDK's errors as ours, at the edge: RpcError, or ForwardLost for a closed connection."""
    try:
        yield
    except MCPError as exc:
        if exc.code == types.CONNECTION_CLOSED:
            raise ForwardLost(exc.message) from exc
        raise from_sdk(exc) from exc


class SdkSession:
    """A `BackendSession` over an entered SDK `Client`."""

    #: How long a 2026-07-28 subscription waits for the re-opened stream's acknowledgement.
    RELISTEN_TIMEOUT = 10.0

    def __init__(
        self,
        client: Client,
        hooks: SessionHooks,
        forwarder: Requester | None = None,
        client_info: types.Implementation | None = None,
    ) -> None:
        """`forwarder`: the raw lane for the requests assern writes itself, on a stdio
        backend's pipes or posted to a 2026-07-28 HTTP backend (http_lane.py), else None;
        `client_info`: who assern says it is in a request it writes itself."""
        self._client = client
        self._session = client.session
        self._hooks = hooks
        self._forwarder = forwarder
        self._client_info = client_info
        #: `client_info` as the envelopes of the requests assern writes carry it
        self._client_info_sent = (
            client_info.model_dump(by_alias=True, mode="json", exclude_none=True) if client_info else {}
        )
        #: 2026-07-28: the resources our clients follow, named in our listen stream
        self._followed: set[str] = set()
        self._relisten: trio.CancelScope | None = None
        #: each change of `_followed` counts one; a stream opened for change N acknowledged
        #: makes `_acked` N, and sets (then replaces) `_acked_changed`
        self._wanted = 0
        self._acked = 0
        self._acked_changed = trio.Event()
        if self.protocol_version in MODERN_PROTOCOL_VERSIONS:
            _declare_for_caller(self._session)

    @property
    def protocol_version(self) -> str | None:
        return self._client.protocol_version

    @property
    def server_capabilities(self) -> types.ServerCapabilities:
        return self._client.server_capabilities

    @property
    def instructions(self) -> str | None:
        return self._client.instructions

    async def list_tools(self, cursor: str | None = None) -> types.ListToolsResult:
        with sdk_errors():
            return await self._session.list_tools(params=_page(cursor))

    async def list_resources(self, cursor: str | None = None) -> types.ListResourcesResult:
        with sdk_errors():
            return await self._session.list_resources(params=_page(cursor))

    async def list_resource_templates(self, cursor: str | None = None) -> types.ListResourceTemplatesResult:
        with sdk_errors():
            return await self._session.list_resource_templates(params=_page(cursor))

    async def list_prompts(self, cursor: str | None = None) -> types.ListPromptsResult:
        with sdk_errors():
            return await self._session.list_prompts(params=_page(cursor))

    def _own_rounds(self, rounds: Rounds | None) -> bool:
        """Whether the backend's input rounds pass through to the client (both speak 2026-07-28)."""
        if rounds is not None and self.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return True
        refuse_foreign_state(rounds)
        return False

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        meta: dict[str, Any] | None = None,
        progress: ProgressSink | None = None,
        rounds: Rounds | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        # `meta` is the client's own `_meta` dict, passed as it came; the SDK types it as
        # its RequestParamsMeta TypedDict.
        sent_meta = cast("types.RequestParamsMeta | None", meta)
        with sdk_errors():
            if rounds is not None and self._own_rounds(rounds):
                # The client answers the backend's `input_required` itself: its keys and
                # state go back unchanged, and the client's retry comes here with both.
                if self._forwarder is not None:
                    raw = await self._raw_round("tools/call", _named(name, arguments), meta, rounds, progress)
                    return _validated(raw, types.CallToolResult)
                with self._declaring(rounds):
                    return await self._session.call_tool(
                        name,
                        arguments,
                        progress_callback=progress,
                        input_responses=rounds.input_responses,
                        request_state=rounds.request_state,
                        meta=sent_meta,
                        allow_input_required=True,
                    )
            if self._drives_on_raw_lane():
                raw = await self._raw_driven("tools/call", _named(name, arguments), meta, progress)
                return _validated(raw, types.CallToolResult)
            # Else the client drives a 2026-07-28 backend's `input_required` rounds: each
            # input request goes to its callbacks, which ask the call's origin (`_ask`), and
            # the call is retried with the answers.
            return await self._client.call_tool(name, arguments, progress_callback=progress, meta=sent_meta)

    async def _raw_round(
        self,
        method: str,
        fields: dict[str, Any],
        meta: dict[str, Any] | None,
        rounds: Rounds,
        progress: ProgressSink | None = None,
    ) -> dict[str, Any]:
        """One request of a client's own rounds, written on the raw lane (stdio).

        The SDK's client stamps assern's own capabilities on every request; written here,
        the request's envelope declares what the calling client declared (of what assern
        can relay), so the backend asks only what that client can answer.
        """
        responses = None
        if rounds.input_responses:
            responses = {key: _dumped(value) for key, value in rounds.input_responses.items()}
        envelope = {**(meta or {}), **self._envelope(rounds)}
        return await self._raw_request(method, fields, envelope, responses, rounds.request_state, progress)

    async def _raw_request(
        self,
        method: str,
        fields: dict[str, Any],
        meta: dict[str, Any],
        responses: dict[str, Any] | None,
        state: str | None,
        progress: ProgressSink | None,
    ) -> dict[str, Any]:
        """One request written on the raw lane with its `_meta`, and the input answers and
        state of a round when it carries them."""
        assert self._forwarder is not None
        params = {**fields, "_meta": meta}
        if responses:
            params["inputResponses"] = responses
        if state is not None:
            params["requestState"] = state
        return await self._forwarder.request(method, params, progress)

    def _envelope(self, rounds: Rounds | None) -> dict[str, Any]:
        """The 2026-07-28 envelope of a request assern writes itself: for a client's own
        rounds it declares what that client declared; else what assern relays."""
        return {
            PROTOCOL_VERSION_META_KEY: self.protocol_version,
            CLIENT_INFO_META_KEY: self._client_info_sent,
            CLIENT_CAPABILITIES_META_KEY: relayed_of(rounds) if rounds is not None else RELAYED_ALL,
        }

    def _drives_on_raw_lane(self) -> bool:
        """Whether assern drives this backend's input rounds itself on the raw lane: a
        2026-07-28 backend over stdio, asked for a client that has no rounds of its own."""
        return self._forwarder is not None and self.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def _raw_driven(
        self,
        method: str,
        fields: dict[str, Any],
        meta: dict[str, Any] | None = None,
        progress: ProgressSink | None = None,
    ) -> dict[str, Any]:
        """A request of a handshake-era client to a 2026-07-28 stdio backend, written on
        the raw lane; each `input_required` round the backend answers is answered by
        asking the calling client (driven_rounds.py), as the SDK's client would."""
        envelope = {**(meta or {}), **self._envelope(None)}

        async def send(responses: dict[str, Any] | None, state: str | None) -> dict[str, Any]:
            return await self._raw_request(method, fields, envelope, responses, state, progress)

        return await drive(await send(None, None), self._hooks.ask, send)

    @contextlib.contextmanager
    def _declaring(self, rounds: Rounds) -> Iterator[None]:
        """Requests the SDK writes in this block declare the calling client's capabilities
        (of what assern relays) in their envelope, not assern's own: the backend then asks
        that client only what it can answer, as on the raw lane (`_envelope`)."""
        token = _CALLER_DECLARED.set(relayed_of(rounds))
        try:
            yield
        finally:
            _CALLER_DECLARED.reset(token)

    async def read_resource(
        self, uri: str, *, rounds: Rounds | None = None
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        with sdk_errors():
            if rounds is not None and self._own_rounds(rounds):
                if self._forwarder is not None:
                    raw = await self._raw_round("resources/read", {"uri": uri}, None, rounds)
                    return _validated(raw, types.ReadResourceResult)
                with self._declaring(rounds):
                    return await self._session.read_resource(
                        uri,
                        input_responses=rounds.input_responses,
                        request_state=rounds.request_state,
                        allow_input_required=True,
                    )
            if self._drives_on_raw_lane():
                return _validated(
                    await self._raw_driven("resources/read", {"uri": uri}), types.ReadResourceResult
                )
            return await self._client.read_resource(uri, cache_mode="bypass")

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None, *, rounds: Rounds | None = None
    ) -> types.GetPromptResult | types.InputRequiredResult:
        with sdk_errors():
            if rounds is not None and self._own_rounds(rounds):
                if self._forwarder is not None:
                    raw = await self._raw_round("prompts/get", _named(name, arguments), None, rounds)
                    return _validated(raw, types.GetPromptResult)
                with self._declaring(rounds):
                    return await self._session.get_prompt(
                        name,
                        arguments,
                        input_responses=rounds.input_responses,
                        request_state=rounds.request_state,
                        allow_input_required=True,
                    )
            if self._drives_on_raw_lane():
                raw = await self._raw_driven("prompts/get", _named(name, arguments))
                return _validated(raw, types.GetPromptResult)
            return await self._client.get_prompt(name, arguments)

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None,
    ) -> types.CompleteResult:
        with sdk_errors():
            return await self._session.complete(ref, argument, context_arguments)

    async def subscribe_resource(self, uri: str) -> None:
        if self.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await self._follow(uri, True)
            return
        with sdk_errors():
            await self._session.subscribe_resource(uri)

    async def unsubscribe_resource(self, uri: str) -> None:
        if self.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await self._follow(uri, False)
            return
        with sdk_errors():
            await self._session.unsubscribe_resource(uri)

    async def _follow(self, uri: str, on: bool) -> None:
        """2026-07-28 has no resources/subscribe: re-open our listen stream with the new set
        of URIs and return once the backend acknowledged it."""
        if (uri in self._followed) == on:
            return
        if on:
            self._followed.add(uri)
        else:
            self._followed.discard(uri)
        self._wanted += 1
        if self._relisten is None:
            return  # no stream yet: the first one names every followed URI
        wanted = self._wanted
        self._relisten.cancel()
        # Not merely the next acknowledgement: one of a stream opened before this change
        # may still be on its way to the listening task, with the old set of URIs.
        with trio.move_on_after(self.RELISTEN_TIMEOUT):
            while self._acked < wanted:
                await self._acked_changed.wait()

    async def set_logging_level(self, level: types.LoggingLevel) -> None:
        with sdk_errors():
            await self._session.set_logging_level(level)

    async def send_ping(self) -> None:
        # The session's ping: the client's own is marked deprecated (2026-07-28 has no
        # ping) and wrote a warning to assern's stderr; a refusal is an answer too.
        with sdk_errors():
            await self._session.send_ping()

    async def listen(self, *, tools: bool, prompts: bool, resources: bool) -> None:
        """Follow a 2026-07-28 backend's list changes and the resources our clients follow,
        re-opening the stream whenever that set of resources changes."""
        try:
            await self._listen(tools=tools, prompts=prompts, resources=resources)
        finally:
            self._relisten = None  # no stream: a subscription needs none re-opened

    async def _listen(self, *, tools: bool, prompts: bool, resources: bool) -> None:
        while True:
            with trio.CancelScope() as scope:
                self._relisten = scope
                wanted = self._wanted  # the set of URIs below as of this change
                with sdk_errors():
                    async with self._client.listen(
                        tools_list_changed=tools,
                        prompts_list_changed=prompts,
                        resources_list_changed=resources,
                        resource_subscriptions=sorted(self._followed),
                    ) as subscription:
                        self._acked = wanted
                        self._acked_changed.set()
                        self._acked_changed = trio.Event()
                        # Updates of followed resources reach `_Callbacks.message` as the
                        # SDK delivers every listen frame there too; only list changes here.
                        async for event in subscription:
                            if isinstance(
                                event, ToolsListChanged | PromptsListChanged | ResourcesListChanged
                            ):
                                self._hooks.list_changed()
                return  # the backend ended the stream
            self._relisten = None  # cancelled by `_follow`: open it again with the new set


def _page(cursor: str | None) -> types.PaginatedRequestParams | None:
    return types.PaginatedRequestParams(cursor=cursor) if cursor else None


class _Callbacks:
    """The SDK client's callbacks, handing everything on to the session's hooks."""

    def __init__(self, hooks: SessionHooks) -> None:
        self._hooks = hooks

    async def message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self._hooks.bad_message(str(message))
            return
        if isinstance(
            message,
            types.ToolListChangedNotification
            | types.PromptListChangedNotification
            | types.ResourceListChangedNotification,
        ):
            self._hooks.list_changed()
        elif isinstance(message, types.ResourceUpdatedNotification):
            self._hooks.notify(message)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self._hooks.notify(types.LoggingMessageNotification(params=params))

    async def _ask(self, method: str, params: BaseModel | None, result: type[R]) -> R | types.ErrorData:
        payload = None if params is None else params.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            return result.model_validate(await self._hooks.ask(method, payload))
        except RpcError as exc:
            return exc.error

    async def sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        return await self._ask("sampling/createMessage", params, types.CreateMessageResult)

    async def elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return await self._ask("elicitation/create", params, types.ElicitResult)

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        return await self._ask("roots/list", None, types.ListRootsResult)


#: the client capabilities whose requests assern relays, declared on a client's behalf
RELAYED = tuple(CAPABILITY_OF.values())
#: all of them, declared for a client that has no rounds of its own (assern asks it)
RELAYED_ALL: dict[str, Any] = {capability: {} for capability in RELAYED}


def relayed_of(rounds: Rounds) -> dict[str, Any]:
    """What a client declared of the capabilities assern relays."""
    declared = rounds.client_capabilities or {}
    return {key: declared[key] for key in RELAYED if key in declared}


def _declare_for_caller(session: Any) -> None:
    """Make a 2026-07-28 SDK session's envelope declare the calling client's capabilities
    while `_CALLER_DECLARED` holds them.

    The SDK stamps every request of a 2026-07-28 session with the capabilities its
    client was built with (assern's, which can relay everything); it offers no per-request
    choice. Its stamp is wrapped once, when the session is adopted: the wrapper runs the
    SDK's own stamp, then replaces only that one envelope key, and only in a request
    sent from inside `SdkSession._declaring` (a context variable of the sending task).
    """
    stamp = session._stamp

    def stamp_for_caller(data: dict[str, Any], opts: Any) -> None:
        stamp(data, opts)
        declared = _CALLER_DECLARED.get()
        meta = (data.get("params") or {}).get("_meta")
        if declared is not None and isinstance(meta, dict) and CLIENT_CAPABILITIES_META_KEY in meta:
            meta[CLIENT_CAPABILITIES_META_KEY] = declared

    session._stamp = stamp_for_caller


def routing_headers(session: Any) -> Callable[[str, dict[str, Any]], dict[str, str]]:
    """The HTTP headers a 2026-07-28 request of `session` carries, for its method and params.

    The SDK computes them in its stamp (`Mcp-Method`, `Mcp-Name`, and the `Mcp-Param-*`
    that the tool's schema asks for, from the listing it keeps); it is run on a scratch
    copy, so the request's own `_meta` is left as the caller wrote it.
    """
    stamp = session._stamp

    def headers_of(method: str, params: dict[str, Any]) -> dict[str, str]:
        opts: dict[str, Any] = {}
        stamp({"method": method, "params": {**params, "_meta": {}}}, opts)
        return dict(opts.get("headers") or {})

    return headers_of


def _named(name: str, arguments: Any) -> dict[str, Any]:
    """The `name` and, when given, `arguments` of a tools/call or prompts/get."""
    return {"name": name} if arguments is None else {"name": name, "arguments": arguments}


def _dumped(value: Any) -> Any:
    return (
        value.model_dump(by_alias=True, mode="json", exclude_none=True)
        if isinstance(value, BaseModel)
        else value
    )


def _validated(raw: dict[str, Any], model: type[R]) -> R | types.InputRequiredResult:
    """A raw result as its model, or as the `input_required` round it is."""
    chosen: type[BaseModel] = types.InputRequiredResult if input_required(raw) else model
    try:
        return chosen.model_validate(raw)  # type: ignore[return-value]
    except ValidationError as exc:
        raise RpcError(
            types.INTERNAL_ERROR, f"the server's answer is not a valid {chosen.__name__}: {exc}"
        ) from None


def _transport(
    spec: ServerSpec, link: ProcessLink, hooks: SessionHooks
) -> AbstractAsyncContextManager[TransportStreams] | str:
    if spec.transport == "stdio":
        return stdio_streams(spec, link, hooks)
    if spec.transport == "sse":
        from mcp.client.sse import sse_client

        from assern.actors.backend.http_clients import sse_client_factory

        factory = sse_client_factory(hooks.lost, spec.timeout)
        streams = sse_client(spec.url or "", headers=dict(spec.headers), httpx_client_factory=factory)
        return _end_is_exit(streams, hooks.lost)
    return _streamable(spec, link, hooks)


@contextlib.asynccontextmanager
async def _streamable(
    spec: ServerSpec, link: ProcessLink, hooks: SessionHooks
) -> AsyncIterator[TransportStreams]:
    """The SDK's streamable-HTTP transport, with what the raw lane needs (http_lane.py):
    `link.open_lane` makes it once the session is known. The messages of the raw lane's
    answers that are not its own go into the SDK's read stream (`inject`)."""
    from mcp.client.streamable_http import streamable_http_client

    from assern.actors.backend.http_clients import KeepAlive, streamable_client
    from assern.actors.backend.http_lane import PostLane

    keep_alive = KeepAlive()
    url = spec.url or ""
    async with (
        streamable_client(dict(spec.headers), spec.timeout, keep_alive) as client,
        streamable_http_client(url, http_client=client) as (read, write),
    ):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](16)

        async def pump() -> None:
            async with send:
                async for item in read:
                    await send.send(item)

        async def inject(raw: Any) -> None:
            item = raw if isinstance(raw, Exception) else parse_message(raw)
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await send.send(item)

        def open_lane(
            protocol_version: str, headers_of: Callable[[str, dict[str, Any]], dict[str, str]] | None = None
        ) -> PostLane:
            return PostLane(
                client,
                url,
                session_id=keep_alive.session_id,
                protocol_version=protocol_version,
                inject=inject,
                lost=hooks.lost,
                spawn=nursery.start_soon,
                headers_of=headers_of,
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump)
            link.open_lane = open_lane
            try:
                yield receive, write
            finally:
                link.open_lane = None
                nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def _end_is_exit(
    streams: AbstractAsyncContextManager[TransportStreams], lost: Callable[[str], None]
) -> AsyncIterator[TransportStreams]:
    """`streams` whose read side's end is reported to `lost`: an SSE backend speaks only
    on its event stream, so when that stream ends (the server went away, or closed it)
    the backend is gone, even if no request is waiting to notice."""
    async with streams as (read, write):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](16)

        async def pump() -> None:
            why = "closed its event stream"
            async with send:
                async for item in read:
                    if isinstance(item, Exception):
                        why = f"lost its event stream: {item}"
                    await send.send(item)
            lost(why)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump)
            yield receive, write
            nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def open_sdk_session(
    spec: ServerSpec, link: ProcessLink, hooks: SessionHooks, client_info: types.Implementation
) -> AsyncIterator[SdkSession]:
    """Connect the SDK's `Client` to the backend and yield it as a `BackendSession`."""
    callbacks = _Callbacks(hooks)
    with sdk_errors():
        async with Client(
            _transport(spec, link, hooks),
            mode="legacy" if spec.protocol == "legacy" else spec.protocol,
            cache=None,
            client_info=client_info,
            message_handler=callbacks.message,
            logging_callback=callbacks.log,
            sampling_callback=callbacks.sampling,
            elicitation_callback=callbacks.elicitation,
            list_roots_callback=callbacks.roots,
        ) as client:
            version = client.protocol_version
            raw: Requester | None = link.forwarder if spec.transport == "stdio" else None
            if link.open_lane is not None and version in HANDSHAKE_PROTOCOL_VERSIONS:
                link.poster = link.open_lane(version)  # the raw lane of tools/call (ForwardCall)
            elif link.open_lane is not None and version in MODERN_PROTOCOL_VERSIONS:
                raw = link.open_lane(version, routing_headers(client.session))  # the session's raw requests
            try:
                yield SdkSession(client, hooks, raw, client_info)
            finally:
                link.poster = None


# ------------------------------------------------------------ stdio, for the SDK


def parse_message(raw: object) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(raw, by_name=False))
    except ValueError as exc:
        return exc


class _StreamInbound:
    """Hands what the `Forwarder` did not take to the SDK's read stream (transport.Inbound)."""

    def __init__(self, send: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        self._send = send

    async def receive(self, message: Any) -> None:
        item = message if isinstance(message, Exception) else parse_message(message)
        try:
            await self._send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def closed(self) -> None:
        self._send.close()


@contextlib.asynccontextmanager
async def stdio_streams(
    spec: ServerSpec, link: ProcessLink, hooks: SessionHooks
) -> AsyncIterator[TransportStreams]:
    """Spawn the backend and yield (read, write) anyio streams of `SessionMessage` over its pipes.

    When the process's stdout ends the read stream ends, so the SDK's pending requests
    fail at once.
    """
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](16)

    async with (
        read_send,
        stdio_process(spec, link, _StreamInbound(read_send), hooks.stderr, hooks.spawned) as forwarder,
        trio.open_nursery() as pumps,
    ):
        pumps.start_soon(write_lines, write_recv, forwarder)
        try:
            yield read_recv, write_send
        finally:
            pumps.cancel_scope.cancel()

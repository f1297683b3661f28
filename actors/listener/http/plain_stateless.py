"""A 2026-07-28 request answered by the front itself instead of the SDK's HTTP entry.

A stateless request is one POST that waits for one answer. The `mcp` SDK's entry for
that era parses the body again, wraps it in Starlette's request and response objects,
validates its envelope as a model, runs the handler in a task group of its own with a
channel to catch notifications, and serializes the answer once more: on a tool call,
more of the front's time than routing the call itself. A plain request (one request
with an id, no progress asked, not `subscriptions/listen`, a JSON body and an Accept
of both JSON and SSE) takes a shorter way to the same answer, built from the SDK's own
parts so the rules stay the SDK's:

- the routing headers are checked as the SDK checks them (a repeated routing header,
  then `classify_inbound_request`'s ladder: the `_meta` envelope, `MCP-Protocol-Version`,
  `Mcp-Method` and `Mcp-Name` against the body), and a tool call's `Mcp-Param-*`
  headers against the called tool's schema (`validate_mcp_param_headers`);
- the request runs through `serve_one` with the connection's own SDK server (the same
  handlers, input rounds and result shaping the SDK path runs);
- the answer is one JSON body, with the SDK's status for a JSON-RPC error, unless the
  handler sends a notification first or stays silent for `KEEPALIVE_EVERY` seconds:
  then the answer comes on an SSE stream opened at that moment, with keep-alive
  comments while it waits, as the SDK does;
- a client that closes the request cancels it.

Anything else goes to the SDK's entry as before (stateless.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import attrs
import structlog
import trio
from mcp.server.connection import Connection
from mcp.server.runner import modern_error_data, serve_one
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    SERVER_INFO_META_KEY,
    ErrorData,
    InputRequiredResult,
    JSONRPCRequest,
    RequestId,
)
from mcp_types.methods import serialize_server_result, validate_client_request
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.types import Receive, Send

from assern.actors.jsonrpc.errors import RpcError
from assern.actors.jsonrpc.sdk import to_sdk
from assern.actors.listener.http.plain import accepts_both, is_json
from assern.actors.listener.http.responses import (
    KEEPALIVE,
    KEEPALIVE_EVERY,
    dumps,
    event,
    open_stream,
    send_body,
    send_more,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mcp.server.lowlevel.server import Server
    from mcp.shared.dispatcher import CallOptions
    from starlette.types import Scope

    from assern.actors.listener.modern_lane import ModernLane

log = structlog.get_logger()

#: Requests the SDK's entry keeps: a listen is a stream by nature; initialize is refused.
NOT_PLAIN = frozenset({"subscriptions/listen", "initialize"})
_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower()


def plain_request(headers: Mapping[str, str], message: Any) -> JSONRPCRequest | None:
    """The POST's request when the front answers it itself, else None."""
    if not is_json(headers.get("content-type", "")) or not accepts_both(headers.get("accept", "")):
        return None
    if not isinstance(message, dict) or "id" not in message:
        return None
    method = message.get("method")
    if not isinstance(method, str) or method in NOT_PLAIN:  # not a request: the SDK's entry says so
        return None
    try:  # the envelope the SDK's entry would accept
        request = JSONRPCRequest.model_validate(message)
    except ValidationError:
        return None
    meta = (request.params or {}).get("_meta")
    if isinstance(meta, dict) and meta.get("progressToken") is not None:
        return None  # progress goes on the request's own stream: the SDK's entry
    return request


async def answer(
    server: Server[Any],
    lifespan_state: Any,
    request: JSONRPCRequest,
    message: dict[str, Any],
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    lane: ModernLane | None = None,
) -> None:
    """Serve `request` (`message` as decoded) with `server` and answer its POST; a tool
    call that `lane` takes goes to its backend raw (modern_lane.py)."""
    raw = Headers(scope=scope)
    duplicated = find_duplicated_routing_header(raw.items())
    if duplicated is not None:
        repeated = InboundLadderRejection(HEADER_MISMATCH, f"{duplicated} header appears more than once")
        await _reject(send, request.id, repeated)
        return
    verdict = classify_inbound_request(message, headers=raw)
    if isinstance(verdict, InboundLadderRejection):
        await _reject(send, request.id, verdict)
        return
    rejection = _param_rejection(server, request, raw)
    if rejection is not None:
        await _reject(send, request.id, rejection)
        return
    exchange = Exchange(
        transport=TransportContext(kind="streamable-http", can_send_request=False, headers=raw),
        request_id=request.id,
        send=send,
    )
    with trio.CancelScope() as left:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(exchange.watch, receive, left)
            try:
                result = None
                if lane is not None and request.method == "tools/call":
                    result = await _raw_call(lane, server, verdict.protocol_version, request)
                if result is None:
                    connection = Connection.from_envelope(
                        verdict.protocol_version, verdict.client_info, verdict.client_capabilities
                    )
                    result = await serve_one(
                        server,
                        exchange,
                        request.method,
                        request.params,
                        connection=connection,
                        lifespan_state=lifespan_state,
                    )
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id, "result": result}
                status = 200
            except Exception as exc:
                error = modern_error_data(exc)
                reply = {"jsonrpc": "2.0", "id": request.id, "error": _dumped(error)}
                status = ERROR_CODE_HTTP_STATUS.get(error.code, 200)
            await exchange.finish(status, dumps(reply))
            nursery.cancel_scope.cancel()


async def _raw_call(
    lane: ModernLane, server: Server[Any], version: str, request: JSONRPCRequest
) -> dict[str, Any] | None:
    """A tool call through `lane`, its result shaped as the SDK's server shapes one
    (the version's result surface, `resultType`, the `serverInfo` stamp); None when
    the lane leaves the call to the SDK's server (an invalid request included: the
    server says what is wrong with it).

    Raises:
        MCPError: the call failed, as the SDK's server would report it.
    """
    try:
        validate_client_request(request.method, version, request.params)
    except (ValidationError, KeyError, ValueError):
        return None
    try:
        answer = await lane.call(request.id, request.params)
    except RpcError as exc:
        raise to_sdk(exc) from None
    if answer is None:
        return None
    if isinstance(answer, dict):
        dumped = answer
    elif isinstance(answer, InputRequiredResult):
        dumped = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    else:  # a backend's result that is not an object
        raise MCPError(code=INTERNAL_ERROR, message="Handler returned an invalid result")
    try:
        shaped = serialize_server_result(request.method, version, dumped)
    except ValidationError:
        log.warning("raw_result_invalid", tool=(request.params or {}).get("name"))
        raise MCPError(code=INTERNAL_ERROR, message="Handler returned an invalid result") from None
    meta = shaped.get("_meta")
    if meta is None:
        shaped["_meta"] = {SERVER_INFO_META_KEY: server.server_info_stamp}
    elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
        shaped["_meta"] = {**meta, SERVER_INFO_META_KEY: server.server_info_stamp}
    return shaped


@attrs.define(eq=False)
class Exchange:
    """One request's dispatch context for the SDK (`mcp.shared.dispatcher.DispatchContext`)
    and the response it writes: JSON, or an SSE stream once a notification or the
    keep-alive needs one."""

    transport: TransportContext
    request_id: RequestId
    send: Send
    message_metadata: None = None
    progress_token: None = None
    can_send_request: bool = False
    streaming: bool = False
    _lock: trio.Lock = attrs.field(factory=trio.Lock)
    _cancel_requested: anyio.Event | None = None

    @property
    def cancel_requested(self) -> anyio.Event:
        """Made when the SDK's server asks for it: a raw call never does."""
        if self._cancel_requested is None:
            self._cancel_requested = anyio.Event()
        return self._cancel_requested

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)  # the 2026-07-28 rule: no requests to the client

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = dict(params)
        async with self._lock:
            await self._stream()
            await send_more(self.send, event(dumps(body)))

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return  # a plain request asked for none

    async def watch(self, receive: Receive, left: trio.CancelScope) -> None:
        """Cancel `left` when the client leaves; after each `KEEPALIVE_EVERY` seconds
        without a word from either side, stream the answer and keep the stream alive.
        (One task for both: a request costs one task less.)"""
        while True:
            with trio.move_on_after(KEEPALIVE_EVERY):
                if (await receive())["type"] == "http.disconnect":
                    left.cancel()
                    return
                continue
            async with self._lock:
                await self._stream()
                await send_more(self.send, KEEPALIVE)

    async def finish(self, status: int, body: bytes) -> None:
        async with self._lock:
            if self.streaming:
                await send_more(self.send, event(body), last=True)
            else:
                await send_body(self.send, status, body)

    async def _stream(self) -> None:
        if not self.streaming:
            self.streaming = True
            await open_stream(self.send)


def _param_rejection(
    server: Server[Any], request: JSONRPCRequest, headers: Headers
) -> InboundLadderRejection | None:
    """A tool call's `Mcp-Param-*` headers against the called tool's schema (the SDK's rule)."""
    lookup = server.get_tool_input_schema
    if request.method != "tools/call" or lookup is None:
        return None
    params = request.params or {}
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str) or (arguments is not None and not isinstance(arguments, dict)):
        return None
    if not arguments and not any(key.startswith(_PARAM_PREFIX) for key in headers):
        return None
    try:
        schema = lookup(name)
    except Exception:  # like the SDK: the check never breaks a working call
        log.exception("mcp_param_check_skipped", tool=name)
        return None
    if schema is None:
        return None
    return validate_mcp_param_headers(schema, arguments or {}, headers)


async def _reject(send: Send, request_id: RequestId, rejection: InboundLadderRejection) -> None:
    error = ErrorData(code=rejection.code, message=rejection.message, data=rejection.data)
    body = dumps({"jsonrpc": "2.0", "id": request_id, "error": _dumped(error)})
    await send_body(send, ERROR_CODE_HTTP_STATUS.get(rejection.code, 200), body)


def _dumped(error: ErrorData) -> dict[str, Any]:
    return error.model_dump(by_alias=True, mode="json", exclude_none=True)

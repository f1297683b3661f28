"""The handshake-era MCP server session of one client connection, without the `mcp` SDK.

A client that opens with `initialize` is served here. Loading the SDK's server for it
would cost the aggregator a good third of its memory, so this session speaks the
protocol itself, with the wire behaviour of the SDK's server for that era (the official
client and other clients rely on it):

- `initialize` is answered inline: nothing else is read until it is answered. An
  `initialize` the front door answered already (app/front_door.py) is only recorded.
- Every other request runs in a task of its own, so a slow one blocks nothing.
  `notifications/cancelled` cancels its task, and a cancelled request gets no answer.
- A method this session does not serve gets METHOD_NOT_FOUND, whatever the state;
  params that do not validate against their mcp_types model get INVALID_PARAMS saying
  what is wrong. Before `initialize` (or `notifications/initialized`) only `ping` is
  served: anything else gets INVALID_PARAMS "Invalid request parameters", as the SDK
  answers it. A request carrying the 2026-07-28 `_meta` envelope gets INVALID_REQUEST:
  the era of a connection is decided by its first request (session.py).
- Results are the handlers' mcp_types models dumped by alias, in JSON mode, without
  None fields, and without the fields of 2026-07-28 results (`resultType`, `ttlMs`,
  `cacheScope`) that a handshake-era client has no schema for. A handler failing with
  an `RpcError` answers with it; any other exception answers with code 0 and its text
  (the SDK's choice, kept for its clients).
- Client notifications other than `cancelled` go to `on_notification` (the connection
  asks a client that offers roots for them on `initialized` and
  `roots/list_changed`: roots.py); nothing else is done with them.
- When the client leaves (`close`), requests still running are cancelled and answered
  "Connection closed"; server-to-client requests still waiting fail the same way.

Server-to-client requests (`ask`: sampling, elicitation, roots for a backend) go out
with ids of our own through a `Forwarder` (actors/backend/forward.py), which the
client's responses are routed back to.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types
import structlog
import trio
from mcp_types import CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from pydantic import BaseModel, ValidationError

from assern.actors.backend.forward import Forwarder, ForwardLost
from assern.actors.jsonrpc import framing
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.context import RequestContext, RequestId, sdk_error
from assern.actors.listener.handshake import LATEST_HANDSHAKE_VERSION, initialize_response, negotiate

if TYPE_CHECKING:
    from assern.actors.listener.jsonl import SendRaw

log = structlog.get_logger()

#: The request handler of a method: the request's context and its validated params.
Handler = Callable[[RequestContext, Any], Awaitable[BaseModel]]

#: Fields of 2026-07-28 results that no handshake-era result schema has.
MODERN_RESULT_FIELDS = ("resultType", "ttlMs", "cacheScope")

#: How long a last answer ("Connection closed") may take to write once the client left.
CLOSE_WRITE_LIMIT = 1.0

INVALID_PARAMS_MESSAGE = "Invalid request parameters"
ENVELOPE_REFUSED = (
    "this connection serves the handshake protocol era; "
    "requests carrying the 2026-07-28 envelope are not accepted on it"
)


@attrs.frozen
class Method:
    """A request method the session serves: the model its params must fit, and its handler."""

    params: type[BaseModel]
    handler: Handler


@attrs.frozen(kw_only=True)
class Greeting:
    """What `initialize` is answered with (besides the negotiated version)."""

    capabilities: Mapping[str, Any]
    server_name: str
    server_version: str
    instructions: str | None = None


def has_envelope(params: Mapping[str, Any] | None) -> bool:
    """Whether request params carry the 2026-07-28 envelope (its protocol-version key)."""
    meta = params.get("_meta") if params else None
    return isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta


#: The notification a proxy sends before its client's bytes when its start was given a
#: profile (`assern serve --profile NAME`: app/bridge.py writes the same line).
PROFILE_NOTE = "assern/profile"


def modern_client_name(raw: Any) -> str | None:
    """The `clientInfo.name` a 2026-07-28 request carries in its `_meta`, if any."""
    params = raw.get("params") if isinstance(raw, Mapping) else None
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    info = meta.get(CLIENT_INFO_META_KEY) if isinstance(meta, Mapping) else None
    name = info.get("name") if isinstance(info, Mapping) else None
    return name if isinstance(name, str) else None


def opens_modern(message: types.JSONRPCMessage) -> bool:
    """Whether a connection's first request opens it in the 2026-07-28 era.

    An `initialize` never does (that handshake does not exist in the 2026 era, even
    when a client puts the envelope on it); any other request with the envelope does.
    """
    return (
        isinstance(message, types.JSONRPCRequest)
        and message.method != "initialize"
        and has_envelope(message.params)
    )


def request_key(request_id: RequestId) -> RequestId:
    """The id requests are matched by: "7" and 7 are one id, as clients echo them either way."""
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            pass
    return request_id


def describe(error: ValidationError) -> str:
    """What is wrong with some params, in one line (the first problem pydantic found)."""
    problems = error.errors()
    if not problems:
        return "they do not fit the method"
    first = problems[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def result_line(request_id: RequestId, result: BaseModel | Mapping[str, Any]) -> bytes:
    """The response line for a handler's result, as a handshake-era client expects it."""
    if isinstance(result, BaseModel):
        body = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    else:
        body = dict(result)
    for key in MODERN_RESULT_FIELDS:
        body.pop(key, None)
    return framing.result(request_id, body)


def failure_line(request_id: RequestId, error: RpcError) -> bytes:
    return framing.error(request_id, error.code, error.message, error.data)


async def _ping(context: RequestContext, params: types.RequestParams) -> types.EmptyResult:
    return types.EmptyResult()


@attrs.define(eq=False)
class _Running:
    """A request being handled: its task's scope, and why that was cancelled (if it was)."""

    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    #: the client cancelled it: it gets no answer
    withdrawn: bool = False
    #: the client left: it is answered "Connection closed"
    closing: bool = False
    #: what it is answered instead, when the server cut it (`ServerSession.cut`)
    reason: str | None = None


class ServerSession:
    """One handshake-era client's JSON-RPC session: requests in, answers and notifications out.

    Args:
        out: The client's line writer (shared with the raw lane, so everything stays in order).
        methods: The request methods served besides `initialize` and `ping`.
        greet: What to answer `initialize` with (may wait, see session.py).
        on_initialize: Sees every `initialize` request's raw params (answered or not).
        on_notification: Sees the method of every client notification but `cancelled`
            (after `initialized` is recorded); it must not block.
        nursery: Where request handlers run.
        answered: The id of an `initialize` the client has its answer to already.
    """

    def __init__(
        self,
        out: SendRaw,
        methods: Mapping[str, Method],
        *,
        greet: Callable[[], Awaitable[Greeting]],
        on_initialize: Callable[[Mapping[str, Any]], None] = lambda params: None,
        on_notification: Callable[[str], None] = lambda method: None,
        nursery: trio.Nursery,
        answered: RequestId | None = None,
    ) -> None:
        self._out = out
        self._methods: dict[str, Method] = {"ping": Method(types.RequestParams, _ping), **methods}
        self._greet = greet
        self._on_initialize = on_initialize
        self._on_notification = on_notification
        self._nursery = nursery
        self._answered = answered
        self._running: dict[RequestId, _Running] = {}
        self._asks = Forwarder(out)
        #: the version negotiated at `initialize` (the latest one until then)
        self.protocol_version = LATEST_HANDSHAKE_VERSION
        #: the client's `initialize` params, once it was handled
        self.client: types.InitializeRequestParams | None = None
        #: the client sent `notifications/initialized`
        self.initialized = False

    def in_flight(self) -> int:
        """The client's requests this session has not answered yet."""
        return len(self._running)

    @property
    def accepted(self) -> bool:
        """Requests besides `ping` are served: `initialize` was handled, or the client says it was."""
        return self.client is not None or self.initialized

    # --------------------------------------------------------------- incoming

    async def receive(self, raw: Any, message: types.JSONRPCMessage) -> None:
        """Take one message from the client (`raw` is it as decoded, before validation)."""
        if isinstance(message, types.JSONRPCRequest):
            if message.method == "initialize":
                await self._initialize(message.id, message.params)
            else:
                running = self._running[request_key(message.id)] = _Running()
                self._nursery.start_soon(self._serve, message.id, message.method, message.params, running)
        elif isinstance(message, types.JSONRPCNotification):
            self._notification(message.method, message.params)
        elif not self._asks.route(raw):
            log.debug("response_dropped", request_id=message.id)

    def _notification(self, method: str, params: Mapping[str, Any] | None) -> None:
        if method == "notifications/cancelled":
            request_id = (params or {}).get("requestId")
            if isinstance(request_id, str | int) and not isinstance(request_id, bool):
                running = self._running.get(request_key(request_id))
                if running is not None:
                    running.withdrawn = True
                    running.scope.cancel()
        else:
            if method == "notifications/initialized":
                self.initialized = True
            self._on_notification(method)

    async def _initialize(self, request_id: RequestId, params: Mapping[str, Any] | None) -> None:
        self._on_initialize(params or {})
        try:
            client = types.InitializeRequestParams.model_validate(params or {}, by_name=False)
        except ValidationError as exc:
            error = RpcError(types.INVALID_PARAMS, f"{INVALID_PARAMS_MESSAGE}: {describe(exc)}", "")
            await self._write(failure_line(request_id, error))
            return
        if self._answered is not None and request_id == self._answered:
            self._answered = None  # the client has its answer (the front door's): only record it
        else:
            try:
                greeting = await self._greet()
            except Exception as exc:
                log.exception("initialize_failed")
                await self._write(failure_line(request_id, RpcError(0, str(exc))))
                return
            answer = initialize_response(
                request_id,
                client.protocol_version,
                greeting.capabilities,
                server_name=greeting.server_name,
                server_version=greeting.server_version,
                instructions=greeting.instructions,
            )
            await self._write(answer)
        self.client, self.protocol_version = client, negotiate(client.protocol_version)

    async def _serve(
        self, request_id: RequestId, method: str, params: dict[str, Any] | None, running: _Running
    ) -> None:
        answering = False
        try:
            with running.scope:
                try:
                    answer = await self._answer(request_id, method, params)
                finally:
                    key = request_key(request_id)
                    if self._running.get(key) is running:
                        del self._running[key]
                if not running.withdrawn:
                    answering = True
                    await self._write(answer)
        except trio.Cancelled:
            # The whole connection is going: the client still gets an answer, if it can.
            if not answering and not running.withdrawn:
                await self._write_closed(request_id, running.reason)
            raise
        if running.closing and not answering:
            await self._write_closed(request_id, running.reason)

    async def _answer(self, request_id: RequestId, method: str, params: dict[str, Any] | None) -> bytes:
        try:
            result = await self._call(request_id, method, params)
        except RpcError as exc:
            return failure_line(request_id, exc)
        except ValidationError:  # a handler's own validation: no pydantic text on the wire
            return failure_line(request_id, RpcError(types.INVALID_PARAMS, INVALID_PARAMS_MESSAGE, ""))
        except Exception as exc:
            error = sdk_error(exc)
            if error is None:
                log.exception("request_handler_failed", method=method)
                error = RpcError(0, str(exc))
            return failure_line(request_id, error)
        return result_line(request_id, result)

    async def _call(self, request_id: RequestId, method: str, params: dict[str, Any] | None) -> BaseModel:
        if has_envelope(params):
            raise RpcError(types.INVALID_REQUEST, ENVELOPE_REFUSED)
        entry = self._methods.get(method)
        if entry is None:
            raise RpcError(types.METHOD_NOT_FOUND, "Method not found", method)
        try:
            typed = entry.params.model_validate({} if params is None else params, by_name=False)
        except ValidationError as exc:
            raise RpcError(types.INVALID_PARAMS, f"{INVALID_PARAMS_MESSAGE}: {describe(exc)}", "") from None
        if not self.accepted and method != "ping":
            raise RpcError(types.INVALID_PARAMS, INVALID_PARAMS_MESSAGE, "")
        return await entry.handler(RequestContext(request_id=request_id, peer=self), typed)

    # --------------------------------------------------------------- outgoing

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification (best effort: a client that is gone just misses it)."""
        await self._write(framing.notification(method, params))

    async def progress(
        self, token: str | int, progress: float, total: float | None, message: str | None
    ) -> None:
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)

    async def ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """Send the client a request and return its result (see `Peer.ask`)."""
        try:
            return await self._asks.request(method, params or {})
        except ForwardLost:
            raise RpcError(types.CONNECTION_CLOSED, "Connection closed") from None
        except RpcError:
            raise
        except Exception as exc:
            error = sdk_error(exc)
            if error is None:
                raise
            raise error from None

    def close(self) -> None:
        """The client left: cancel what still runs for it (each gets "Connection closed")."""
        self._asks.close("the client left")
        for running in self._running.values():
            running.closing = True
            running.scope.cancel()

    async def _write(self, line: bytes) -> None:
        try:
            await self._out.write(line)
        except trio.BrokenResourceError:
            log.debug("client_gone_before_write")

    def cut(self, reason: str) -> None:
        """The server stops serving this client: cancel what still runs for it, each
        answered with `reason`."""
        for running in self._running.values():
            running.closing = True
            running.reason = reason
            running.scope.cancel()

    async def _write_closed(self, request_id: RequestId, reason: str | None = None) -> None:
        closed = RpcError(types.CONNECTION_CLOSED, reason or "Connection closed")
        with trio.move_on_after(CLOSE_WRITE_LIMIT, shield=True):
            await self._write(failure_line(request_id, closed))

"""The raw lane: tools/call forwarded as JSON without re-validating models.

A connection (session.py) owns one `RawLane`, handed the shared `Routing`, the
connection's session (once initialized) and how to make the client a call's origin; the
connection attaches its line writer and request nursery while it serves. The lane takes
a tools/call (and its cancellation) and tools/list off the wire, in the connection's
reader task, before the session (protocol.py) validates them. A call to a ready backend is
spliced (actors/backend/splice.py): `RawReply` gets the backend's answer in the
backend's stdout reader and writes it to the client with the client's id. A call to a
backend that is not ready goes through its mailbox in a task of its own, which waits
for it. tools/list is answered from the catalog's encoded tools. Anything the lane
declines (errors included) is the session's to answer.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types
import structlog
import trio
from mcp_types import PROTOCOL_VERSION_META_KEY

from assern.actors.backend import messages as msgs
from assern.actors.backend.forward import error_of, swap_id
from assern.actors.backend.handle import BackendHandle, request
from assern.actors.backend.splice import SpliceLane
from assern.actors.gate.gate import Gate, screen_arguments, screen_result
from assern.actors.jsonrpc import framing
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.context import Peer, end_to_end_meta, to_rpc_error
from assern.actors.router.catalog import ToolRoute
from assern.actors.search.names import CALL_TOOL, META_TOOLS

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from assern.actors.backend.messages import Origin, ProgressSink
    from assern.actors.backend.splice import Describe, SplicedCall
    from assern.actors.listener.jsonl import SendRaw
    from assern.actors.listener.protocol import ServerSession
    from assern.actors.listener.routing import Routing

log = structlog.get_logger()


@attrs.frozen
class RawRoute:
    """A tools/call the raw lane takes: its backend (and the backend's splice lane), the
    backend's own tool name, the arguments to send, and the gate that checks its answer
    (None: nothing to check)."""

    handle: BackendHandle
    lane: SpliceLane
    tool: str
    arguments: dict[str, Any] | None
    gate: Gate | None
    #: the route whose "warn" gate checks the arguments once the call is on its way
    #: (a warning never stops a call, so the client does not wait for it)
    warn: ToolRoute | None = None


def raw_route(
    routing: Routing, name: str, arguments: dict[str, Any] | None
) -> RawRoute | types.CallToolResult | None:
    """Where a call of `name` goes on the raw lane: its route, or the answer that stops
    it (strict validation), or None when the call is the session's (an unknown or
    refused tool, a group action or meta-tool call to explain, a gate that asks the
    client, a backend without the raw lane now)."""
    catalog = routing.catalog
    if catalog.exposure == "search" and name in META_TOOLS:
        unwrapped = unwrap_call_tool(name, arguments)
        if unwrapped is None:
            return None  # search_tools, describe_tools, or arguments the session explains
        name, arguments = unwrapped
    group = catalog.groups.get(name)
    if group is not None:
        chosen = group.resolve(arguments)
        if isinstance(chosen, str):
            return None  # the session answers what is wrong with the call
        name, arguments = chosen[0].name, chosen[1]
    route = catalog.tools.get(name)
    handle = routing.shared.directory().get(route.server) if route is not None else None
    if route is None or handle is None:
        return None
    lane = handle.lane
    if not lane.fast_path:
        return None
    gate = route.gate
    warn = None
    if gate is not None:
        if not gate.raw:
            return None  # it waits for the client's confirmation: the session's
        if gate.validate == "strict":
            stopped = screen_arguments(
                gate, route.name, route.definition, route.server, route.original, arguments, routing.client
            )
            if stopped is not None:
                return stopped
        elif gate.inputs is not None:
            warn = route
        if gate.outputs is None:
            gate = None  # nothing to check on the way back
    return RawRoute(handle, lane, route.original, arguments, gate, warn)


class RawLane:
    """The raw lane of one connection: its calls in flight, by the client's request id.

    Args:
        routing: Lookups over the connection's view of the catalog and the backends.
        session: The connection's handshake-era session once initialized, else None (the
            lane is open on initialized sessions only).
        origin: This client as the origin of a backend call.
    """

    def __init__(
        self,
        routing: Routing,
        session: Callable[[], ServerSession | None],
        origin: Callable[[Peer], Origin],
    ) -> None:
        self.shared = routing.shared
        self._routing = routing
        self._initialized = session
        self._origin = origin
        self._nursery: trio.Nursery | None = None
        self._send_raw: SendRaw | None = None
        #: raw-lane calls in flight by the client's request id: spliced, or in a task
        self._forwarded: dict[str | int, SplicedCall | trio.CancelScope] = {}
        self._raw_origin_value: Origin | None = None

    def attach(self, send_raw: SendRaw, nursery: trio.Nursery) -> None:
        """Serve calls: answers go to `send_raw`; calls that wait run in `nursery`."""
        self._send_raw, self._nursery = send_raw, nursery

    def in_flight(self) -> int:
        """The calls of this lane not answered yet."""
        return len(self._forwarded)

    def detach(self) -> None:
        """The connection ended: nothing more is written or started."""
        self._send_raw = self._nursery = None

    def intercept(self, raw: Any) -> bool:
        """Take a tools/call (or its cancellation) off the wire before the session sees it.

        Only on an initialized handshake-era connection, for a known tool whose backend
        offers the raw lane; anything else (errors included) goes to the session. The
        result is forwarded as the backend wrote it, without re-validating models.
        """
        if not isinstance(raw, dict):
            return False
        method = raw.get("method")
        if method == "notifications/cancelled":
            params = raw.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            entry = self._forwarded.get(request_id) if isinstance(request_id, str | int) else None
            if entry is None:
                return False
            entry.cancel()
            return True
        if self._initialized() is None or self._nursery is None:
            return False
        if method == "tools/list":
            return self._list_tools_raw(raw)
        if method != "tools/call":
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
        token = meta.get("progressToken") if meta else None
        if (token is not None and not isinstance(token, str | int)) or request_id in self._forwarded:
            return False
        taken = raw_route(self._routing, name, arguments)
        if taken is None:
            return False
        if isinstance(taken, types.CallToolResult):  # stopped by strict validation
            self.write(framing.result(request_id, dump_result(taken)))
            return True
        handle, original, arguments, gate = taken.handle, taken.tool, taken.arguments, taken.gate
        backend_meta = end_to_end_meta(meta)
        reply = RawReply(self, request_id, token, handle.name, gate, original)
        spliced = taken.lane.splice(
            original,
            arguments,
            reply,
            origin=self._raw_origin(),
            request_id=request_id,
            progress=token is not None,
            meta=backend_meta,
        )
        if spliced is not None:
            self._forwarded[request_id] = spliced
            self._warn_after(taken)
            return True
        # Not ready (or its stdin is backed up): through the mailbox, which waits for it.
        scope = self._forwarded[request_id] = trio.CancelScope()
        self._nursery.start_soon(
            self._forward_call,
            request_id,
            original,
            handle,
            arguments,
            backend_meta,
            token,
            scope,
            gate,
        )
        self._warn_after(taken)
        return True

    def _warn_after(self, taken: RawRoute) -> None:
        """A "warn" gate's check of the arguments, once the call is on its way."""
        route = taken.warn
        if route is not None and route.gate is not None:
            screen_arguments(
                route.gate,
                route.name,
                route.definition,
                route.server,
                route.original,
                taken.arguments,
                self._routing.client,
            )

    def _raw_origin(self) -> Origin:
        """This connection as the origin of its raw-lane calls (made once per connection)."""
        if self._raw_origin_value is None:
            protocol = self._initialized()
            assert protocol is not None  # the lane is open on initialized sessions only
            self._raw_origin_value = self._origin(protocol)
        return self._raw_origin_value

    def cancel_all(self, *, answer: bool = True, reason: str = "Connection closed") -> None:
        """The client left: cancel its raw-lane calls still in flight at the backends.

        With `answer`, each is answered "Connection closed", as the session answers its
        own requests then, for a client that still reads after closing its side.
        """
        forwarded, self._forwarded = self._forwarded, {}
        closed = RpcError(types.CONNECTION_CLOSED, reason)
        for request_id, entry in forwarded.items():
            entry.cancel()
            if answer:
                self.write(error_reply(request_id, closed))

    def write(self, line: bytes) -> None:
        """Write one line to the client now, or in a task when too much waits already."""
        send_raw, nursery = self._send_raw, self._nursery
        if send_raw is None:
            return
        if not send_raw.write_nowait(line) and send_raw.broken is None and nursery is not None:
            nursery.start_soon(self._write_quietly, send_raw, line)  # waits for room

    def call_done(self, request_id: str | int, server: str, started: float, tool: str, outcome: str) -> None:
        """A call of the lane ended (answered or failed): forget it and count it."""
        self._forwarded.pop(request_id, None)
        self._routing.record_call(server, started, tool, outcome)

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Run `fn(*args)` in the connection's request nursery, while it serves."""
        if self._nursery is not None:
            self._nursery.start_soon(fn, *args)

    @staticmethod
    async def _write_quietly(send_raw: SendRaw, line: bytes) -> None:
        with contextlib.suppress(trio.BrokenResourceError):
            await send_raw.write(line)

    def _list_tools_raw(self, raw: dict[str, Any]) -> bool:
        """Answer tools/list with the catalog's encoded tools, once every backend is listed
        (at once when the list is the meta-tools alone)."""
        request_id = raw.get("id")
        params = raw.get("params")
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            return False
        if params is not None:  # junk is the session's to answer; so is a 2026-07-28 envelope
            meta = params.get("_meta") if isinstance(params, dict) else None
            if not isinstance(params, dict) or not isinstance(meta, dict | None):
                return False
            if meta is not None and PROTOCOL_VERSION_META_KEY in meta:
                return False
        catalog = self._routing.catalog
        if not (catalog.lists_meta_tools_only or self._routing.lists_ready()):
            return False  # the session's tools/list waits for the starting backends
        nursery, send_raw = self._nursery, self._send_raw
        if nursery is None or send_raw is None:
            return False
        self._routing.given["tools"] = catalog
        tools = b"".join((b'{"tools":', catalog.tools_json, b"}"))
        self.write(framing.encoded_result(request_id, tools))
        return True

    async def _forward_call(
        self,
        request_id: str | int,
        name: str,
        handle: BackendHandle,
        arguments: dict[str, Any] | None,
        meta: dict[str, Any] | None,
        token: str | int | None,
        scope: trio.CancelScope,
        gate: Gate | None,
    ) -> None:
        send_raw = self._send_raw
        assert send_raw is not None
        progress: ProgressSink | None = None
        if token is not None and isinstance(token, str | int):

            async def to_client(progress: float, total: float | None, message: str | None) -> None:
                params: dict[str, Any] = {"progressToken": token, "progress": progress}
                if total is not None:
                    params["total"] = total
                if message is not None:
                    params["message"] = message
                await self._write_quietly(send_raw, framing.notification("notifications/progress", params))

            progress = to_client

        origin = self._raw_origin()
        started = trio.current_time()
        try:
            with scope:
                try:
                    result: dict[str, Any] = await forward_call(
                        handle,
                        name,
                        arguments,
                        meta=meta,
                        request_id=request_id,
                        origin=origin,
                        progress=progress,
                    )
                    replaced = screen_result(gate, handle.name, name, result) if gate is not None else None
                    out = framing.result(
                        request_id, dump_result(replaced) if replaced is not None else result
                    )
                    outcome = call_outcome(result)
                except Exception as exc:
                    out, outcome = error_reply(request_id, exc), "error"
                self._routing.record_call(handle.name, started, name, outcome)
                await self._write_quietly(send_raw, out)
        finally:
            self._forwarded.pop(request_id, None)


async def forward_call(
    handle: BackendHandle,
    name: str,
    arguments: dict[str, Any] | None,
    *,
    meta: dict[str, Any] | None,
    request_id: str | int | None,
    origin: Origin,
    progress: ProgressSink | None = None,
) -> Any:
    """A tools/call through the backend's mailbox, which waits for a (re)starting
    backend: its `result` as the backend wrote it (`ForwardCall`)."""
    return await request(
        handle,
        lambda reply: msgs.ForwardCall(
            name=name,
            arguments=arguments,
            meta=meta,
            request_id=request_id,
            progress=progress,
            origin=origin,
            reply=reply,
        ),
    )


def call_outcome(result: Any) -> str:
    """How a call that got `result` is counted: "tool_error" or "ok"."""
    return "tool_error" if isinstance(result, dict) and result.get("isError") is True else "ok"


def dump_result(result: types.CallToolResult) -> dict[str, Any]:
    """A result model as the JSON of a response's `result`."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def error_reply(request_id: str | int, error: Exception) -> bytes:
    """The JSON-RPC error line that answers `request_id` with `error` (see to_rpc_error)."""
    rpc = to_rpc_error(error)
    return framing.error(request_id, rpc.code, rpc.message, rpc.data)


class RawReply:
    """A client's raw-lane tools/call as the backend's answer reaches it (splice.CallReply).

    `answered` and `progressed` run synchronously in the backend's stdout reader: the
    response is rewritten to the client's request id (and progress to the client's token)
    and put on the client's line channel. `failed` runs in the backend's deadline watcher,
    `lost` in the task that closed the backend's request table (splice.py).
    """

    __slots__ = ("_gate", "_lane", "_original", "_request_id", "_server", "_started", "_token")

    def __init__(
        self,
        lane: RawLane,
        request_id: str | int,
        token: str | int | None,
        server: str,
        gate: Gate | None = None,
        original: str = "",
    ) -> None:
        self._lane = lane
        self._gate = gate
        self._original = original
        self._request_id = request_id
        self._token = token
        self._server = server
        self._started = trio.current_time()

    def _done(self, outcome: str = "error") -> None:
        self._lane.call_done(self._request_id, self._server, self._started, self._original, outcome)

    def answered(self, message: dict[str, Any], line: bytes, backend_id: str) -> None:
        outcome = "error"
        if "result" in message:
            outcome = call_outcome(message["result"])
            # The backend's own bytes with the client's id in place of ours, if certain.
            out = swap_id(line, backend_id, self._request_id)
            if self._gate is not None and isinstance(message["result"], dict):
                replaced = screen_result(self._gate, self._server, self._original, message["result"])
                if replaced is not None:
                    out = framing.result(self._request_id, dump_result(replaced))
            if out is None:
                out = framing.result(self._request_id, message["result"])
        else:
            out = error_reply(self._request_id, error_of(message))
        self._lane.write(out)
        self._done(outcome)  # after the write: the client waits for the answer, not for this

    def progressed(self, params: dict[str, Any], line: bytes, backend_id: str) -> None:
        assert self._token is not None  # progress is asked for only with the client's token
        out = swap_id(line, backend_id, self._token)
        if out is None:
            out = framing.notification("notifications/progress", {**params, "progressToken": self._token})
        self._lane.write(out)

    def failed(self, error: Exception) -> None:
        self._done()
        self._send_error(error)

    def lost(self, describe: Describe) -> None:
        self._done()
        self._lane.start_soon(self._send_lost, describe)

    async def _send_lost(self, describe: Describe) -> None:
        self._send_error(await describe())

    def _send_error(self, error: Exception) -> None:
        self._lane.write(error_reply(self._request_id, error))


def unwrap_call_tool(name: str, arguments: dict[str, Any] | None) -> tuple[str, dict[str, Any] | None] | None:
    """The tool a `call_tool` of search exposure calls, and its arguments, when they are
    plainly valid (None otherwise, and for the other meta-tools: the session answers)."""
    if name != CALL_TOOL or not arguments or not arguments.keys() <= {"name", "arguments"}:
        return None
    inner_name, inner_arguments = arguments.get("name"), arguments.get("arguments")
    if (
        not isinstance(inner_name, str)
        or inner_name in META_TOOLS
        or not isinstance(inner_arguments, dict | None)
    ):
        return None
    return inner_name, inner_arguments

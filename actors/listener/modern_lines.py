"""2026-07-28 clients over lines: plain requests answered here, the rest by the SDK's server.

A client that opens a stdio or socket connection in the 2026-07-28 era (what the
official client does when it is told nothing) sends `server/discover`, `tools/list` and
`tools/call`, each carrying the era's `_meta` envelope. Served by the SDK's server, each
of those was validated into models and shaped back out, and the SDK (about a third of
the aggregator's memory) was loaded for the connection. A *plain* request is answered
here instead, as the SDK's server answers it, with no model in between:

- its envelope is exactly the protocol version, `clientInfo` and `clientCapabilities`,
  of shapes that the SDK accepts (anything else, a log level or a progress token
  included, is the SDK's);
- `server/discover` is answered from the connection's methods, as the SDK derives it;
- `tools/list` from the catalog's encoded tools (after the starting backends are
  listed, as the handler waits);
- `tools/call` through the raw lane for this era (modern_lane.py): spliced to a ready
  stdio backend, its answer as the backend wrote it plus the era's `resultType` and the
  `serverInfo` stamp.

Whatever else comes, or a call the raw lane leaves (an unknown name, a tool whose gate
asks the client, a retry of an input round), goes to the SDK's server (modern.py),
started for the connection when the first such request arrives and fed the messages
this module does not answer. Both share one `RoundTrips`, so a call whose backend asked
the client something here is resumed by the SDK's server when the client retries it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import mcp_types as types
import structlog
import trio
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from assern.actors.jsonrpc import framing
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.jsonl import END, SendRaw, next_value, parse_message
from assern.actors.listener.raw_lane import error_reply

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from assern.actors.listener.modern import ModernServer
    from assern.actors.listener.modern_lane import ModernLane
    from assern.actors.listener.routing import Routing
    from assern.supervisor.io.reader import LineReader

log = structlog.get_logger()

#: The methods a plain request may have.
PLAIN_METHODS = frozenset({"server/discover", "tools/list", "tools/call"})
#: The `_meta` keys of a plain request: the envelope, nothing else.
ENVELOPE = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY})
#: The params a plain request may have besides `_meta`, by method.
_PARAMS: dict[str, frozenset[str]] = {
    "server/discover": frozenset(),
    "tools/list": frozenset(),
    "tools/call": frozenset({"name", "arguments"}),
}
#: The cache hints the SDK's server puts on these results (none set by a handler).
_CACHE_HINTS = {"cacheScope": "private", "ttlMs": 0}
#: How many messages for the SDK's server may wait for it.
SDK_BACKLOG = 16


def discover_result(methods: Iterable[str], instructions: str | None) -> dict[str, Any]:
    """The `server/discover` result of a server with `methods` and `subscriptions/listen`,
    as the SDK derives it for 2026-07-28 (change notifications come on listen streams, so
    every `listChanged` holds, and so does `resources.subscribe`)."""
    served = set(methods)
    capabilities: dict[str, Any] = {}
    if "completion/complete" in served:
        capabilities["completions"] = {}
    if "logging/setLevel" in served:
        capabilities["logging"] = {}
    if "prompts/list" in served:
        capabilities["prompts"] = {"listChanged": True}
    if "resources/list" in served:
        capabilities["resources"] = {"listChanged": True, "subscribe": True}
    if "tools/list" in served:
        capabilities["tools"] = {"listChanged": True}
    result: dict[str, Any] = {
        **_CACHE_HINTS,
        "capabilities": capabilities,
        "resultType": "complete",
        "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
    }
    if instructions is not None:
        result["instructions"] = instructions
    return result


class Envelopes:
    """Which `clientInfo`/`clientCapabilities` pairs the SDK would accept, remembered:
    a client sends the same envelope on every request, so it is checked once."""

    def __init__(self) -> None:
        self._accepted: list[tuple[Any, Any]] = []

    def plain(self, meta: Any) -> bool:
        """Whether `meta` is exactly an envelope of a known version whose client parts
        validate as the SDK's models do."""
        if not isinstance(meta, dict) or meta.keys() != ENVELOPE:
            return False
        if meta[PROTOCOL_VERSION_META_KEY] not in MODERN_PROTOCOL_VERSIONS:
            return False
        pair = (meta[CLIENT_INFO_META_KEY], meta[CLIENT_CAPABILITIES_META_KEY])
        if pair in self._accepted:
            return True
        try:
            types.Implementation.model_validate(pair[0], by_name=False)
            types.ClientCapabilities.model_validate(pair[1], by_name=False)
        except ValueError:  # pydantic's ValidationError
            return False
        if not isinstance(pair[0], dict) or not isinstance(pair[1], dict):
            return False
        self._accepted = [pair, *self._accepted[:3]]
        return True


def plain_request(raw: Any, envelopes: Envelopes) -> tuple[str | int, str, dict[str, Any]] | None:
    """(id, method, params) of a plain request (see the module), else None."""
    if not isinstance(raw, dict) or raw.keys() != {"jsonrpc", "id", "method", "params"}:
        return None
    request_id, method, params = raw["id"], raw["method"], raw["params"]
    if raw["jsonrpc"] != "2.0" or not isinstance(request_id, str | int) or isinstance(request_id, bool):
        return None
    if method not in PLAIN_METHODS or not isinstance(params, dict):
        return None
    if not envelopes.plain(params.get("_meta")) or not params.keys() - {"_meta"} <= _PARAMS[method]:
        return None
    if method == "tools/call" and (
        not isinstance(params.get("name"), str) or not isinstance(params.get("arguments", {}), dict | None)
    ):
        return None
    return request_id, method, params


class ModernLines:
    """One 2026-07-28 line connection (see the module).

    Args:
        routing: The connection's lookups over its view of the catalog.
        lane: The raw lane of its tool calls.
        methods: The methods the connection serves (what `server/discover` announces).
        instructions: The aggregate's instructions, if any.
        server_name: The name assern gives itself.
        server_version: Its version.
        sdk: Starts the SDK's server for the connection (called once, when needed).
        nursery: Where the connection's requests run.
    """

    def __init__(
        self,
        *,
        routing: Routing,
        lane: ModernLane,
        methods: Iterable[str],
        instructions: str | None,
        server_name: str,
        server_version: str,
        sdk: Callable[[], ModernServer],
        nursery: trio.Nursery,
    ) -> None:
        self._routing = routing
        self._lane = lane
        self._sdk_factory = sdk
        self._nursery = nursery
        self._envelopes = Envelopes()
        self._info = {"name": server_name, "version": server_version}
        stamp = json.dumps({SERVER_INFO_META_KEY: self._info}, separators=(",", ":")).encode()
        discovered = discover_result(methods, instructions)
        discovered["_meta"] = {SERVER_INFO_META_KEY: self._info}
        self._discovered = json.dumps(discovered, separators=(",", ":")).encode()
        self._listed = (b',"cacheScope":"private","resultType":"complete","ttlMs":0,"_meta":', stamp, b"}")
        #: plain requests in flight, by id
        self._running: dict[str | int, trio.CancelScope] = {}
        self._to_sdk: trio.MemorySendChannel[types.JSONRPCMessage] | None = None
        self._sdk_nursery: trio.Nursery | None = None
        self._out: SendRaw | None = None

    def cancel_all(self) -> None:
        """Cancel the plain requests still running."""
        for scope in self._running.values():
            scope.cancel()

    def in_flight(self) -> int:
        """The plain requests not answered yet (those the SDK's server took are its own)."""
        return len(self._running)

    async def serve(
        self, lead: Sequence[tuple[Any, types.JSONRPCMessage]], reader: LineReader, out: SendRaw
    ) -> None:
        """Serve the connection until the client leaves: `lead` (the messages read before
        and with its first request) first, then what `reader` reads."""
        self._out = out
        try:
            async with trio.open_nursery() as sdk_nursery:
                self._sdk_nursery = sdk_nursery
                for raw, message in lead:
                    await self._take(raw, message, out)
                while (raw := await next_value(reader, out)) is not END:
                    await self._take(raw, None, out)
                if self._to_sdk is not None:
                    self._to_sdk.close()  # its server ends once it has read the rest
        finally:
            self._sdk_nursery = None
            for scope in self._running.values():
                scope.cancel()

    async def _take(self, raw: Any, message: types.JSONRPCMessage | None, out: SendRaw) -> None:
        cancelling = isinstance(raw, dict) and raw.get("method") == "notifications/cancelled"
        # ours, or the SDK's server's; with no such server, a request already answered
        if cancelling and (self._cancel(raw) or self._to_sdk is None):
            return
        plain = plain_request(raw, self._envelopes)
        if plain is not None and plain[0] not in self._running:
            scope = self._running[plain[0]] = trio.CancelScope()
            self._nursery.start_soon(self._answer, plain, raw, scope, out)
            return
        if message is None:
            parsed = parse_message(raw)
            if isinstance(parsed, bytes):  # not JSON-RPC: answered as everywhere else
                await out.write(parsed)
                return
            message = parsed
        await self._sdk(message)

    def _cancel(self, raw: dict[str, Any]) -> bool:
        """Cancel the plain request a `notifications/cancelled` names, if it is one."""
        params = raw.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        scope = self._running.get(request_id) if isinstance(request_id, str | int) else None
        if scope is None:
            return False
        scope.cancel()
        return True

    async def _sdk(self, message: types.JSONRPCMessage) -> None:
        """Hand `message` to the SDK's server, started now if it is not running."""
        if self._to_sdk is None:
            if self._sdk_nursery is None:
                return  # the connection is closing
            send, receive = trio.open_memory_channel[types.JSONRPCMessage](SDK_BACKLOG)
            self._to_sdk = send
            self._sdk_nursery.start_soon(self._run_sdk, receive)
            log.debug("modern_sdk_server_started", method=getattr(message, "method", None))
        try:
            await self._to_sdk.send(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # its server has ended: the connection is closing

    async def _run_sdk(self, receive: trio.MemoryReceiveChannel[types.JSONRPCMessage]) -> None:
        assert self._out is not None  # set before any message is taken
        await self._sdk_factory().serve_channel(receive, self._out)

    async def _answer(
        self,
        plain: tuple[str | int, str, dict[str, Any]],
        raw: dict[str, Any],
        scope: trio.CancelScope,
        out: SendRaw,
    ) -> None:
        request_id, method, params = plain
        try:
            with scope:
                line = await self._reply(request_id, method, params)
                if line is None:  # the raw lane leaves it: the SDK's server answers it
                    del self._running[request_id]  # a cancellation is the SDK's from now on
                    parsed = parse_message(raw)
                    if not isinstance(parsed, bytes):
                        await self._sdk(parsed)
                    return
                await out.write(line)
        finally:
            if self._running.get(request_id) is scope:
                del self._running[request_id]

    async def _reply(self, request_id: str | int, method: str, params: dict[str, Any]) -> bytes | None:
        """The line that answers a plain request, or None when the SDK's server must."""
        if method == "server/discover":
            return framing.encoded_result(request_id, self._discovered)
        if method == "tools/list":
            catalog = self._routing.catalog
            if not catalog.lists_meta_tools_only:
                catalog = await self._routing.settled_catalog()
            self._routing.given["tools"] = catalog
            return framing.encoded_result(
                request_id, b"".join((b'{"tools":', catalog.tools_json, *self._listed))
            )
        try:
            # Any: a backend may answer with a result that is not an object at all
            answer: Any = await self._lane.call(request_id, params)
        except RpcError as exc:
            return error_reply(request_id, exc)
        if answer is None:
            return None
        if isinstance(answer, types.InputRequiredResult):
            result = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        elif isinstance(answer, dict):
            result = dict(answer)
        else:  # a backend's result that is not an object: as the SDK's server says it
            return framing.error(request_id, types.INTERNAL_ERROR, "Handler returned an invalid result")
        return framing.result(request_id, stamped(result, self._info))


def stamped(result: dict[str, Any], info: Mapping[str, str]) -> dict[str, Any]:
    """`result` with the `serverInfo` stamp `info` in its `_meta`, unless it carries one
    (as the SDK's server stamps a 2026-07-28 result)."""
    meta = result.get("_meta")
    if meta is None:
        result["_meta"] = {SERVER_INFO_META_KEY: dict(info)}
    elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
        result["_meta"] = {**meta, SERVER_INFO_META_KEY: dict(info)}
    return result

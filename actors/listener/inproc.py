"""In-process clients of the aggregate: a real `ClientConnection` over a socket pair.

Both drive the connection as an external client would, over the same kind of byte
stream a socket client has, so what they see is what any client gets (the raw lane
included):

- `call_tool`: a minimal line client (the handshake, then one tools/call) that needs
  no `mcp` SDK, for the control socket's call command inside the long-lived aggregator
  and for `assernctl call` when no instance runs;
- `inproc_client`: the official SDK client, for `assern demo` and tests; it loads the
  SDK when entered.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

import mcp_types as types
import trio

from assern.actors.jsonrpc import framing
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.handshake import LATEST_HANDSHAKE_VERSION, SERVER_VERSION
from assern.actors.listener.session import ClientConnection, SessionContext
from assern.supervisor.io.writer import DirectWriter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp import Client

#: How the line client answers the requests a backend has assern send it (as the SDK
#: client does without callbacks): it offers none of these.
_REFUSED = {
    "sampling/createMessage": "Sampling not supported",
    "elicitation/create": "Elicitation not supported",
    "roots/list": "List roots not supported",
}


@contextlib.asynccontextmanager
async def _served(shared: SessionContext, name: str) -> AsyncIterator[trio.SocketStream]:
    """Our end of a socket pair whose other end a fresh `ClientConnection` serves."""
    ours, theirs = trio.socket.socketpair()
    stream = trio.SocketStream(ours)
    connection = ClientConnection(name, shared)

    async def serve(server_side: trio.SocketStream) -> None:
        async with server_side:
            await connection.serve(server_side, server_side)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve, trio.SocketStream(theirs))
        try:
            async with stream:
                yield stream
        finally:
            nursery.cancel_scope.cancel()


class LineClient:
    """A handshake-era client of one connection that asks one thing at a time."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self._reader = framing.line_reader(stream)
        self._last_id = 0

    async def _send(self, message: dict[str, Any]) -> None:
        await self._stream.send_all(framing.encode(message))

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._stream.send_all(framing.notification(method, params))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and wait for its result; notifications meanwhile are ignored.

        Raises:
            RpcError: the answer is an error, or the connection ended first.
        """
        self._last_id += 1
        request_id = self._last_id
        await self._stream.send_all(framing.request(request_id, method, params))
        while (line := await self._reader.receive()) is not None:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if message.get("id") == request_id and ("result" in message or "error" in message):
                if "error" in message:
                    raise RpcError.from_dict(message["error"])
                result = message.get("result")
                return result if isinstance(result, dict) else {}
            if isinstance(message.get("method"), str) and "id" in message:
                await self._refuse(message)
        raise RpcError(types.CONNECTION_CLOSED, "Connection closed")

    async def _refuse(self, request: dict[str, Any]) -> None:
        request_id, method = request["id"], request["method"]
        if method == "ping":
            reply = framing.result(request_id, {})
        elif method in _REFUSED:
            reply = framing.error(request_id, framing.INVALID_REQUEST, _REFUSED[method])
        else:
            reply = framing.error(request_id, framing.METHOD_NOT_FOUND, "Method not found")
        await self._stream.send_all(reply)

    async def initialize(self, name: str) -> dict[str, Any]:
        params = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": name, "version": SERVER_VERSION},
        }
        result = await self.request("initialize", params)
        await self.notify("notifications/initialized")
        return result


async def call_tool(
    shared: SessionContext, tool: str, arguments: dict[str, Any] | None, client_name: str = "control"
) -> dict[str, Any]:
    """Call one tool as a fresh client would; the result as the SDK client would give it.

    Raises:
        RpcError: the call was answered with an error.
    """
    params: dict[str, Any] = {"name": tool}
    if arguments is not None:
        params["arguments"] = arguments
    failed: RpcError | None = None
    async with _served(shared, client_name) as stream:
        client = LineClient(stream)
        try:
            await client.initialize(client_name)
            result = await client.request("tools/call", params)
        except RpcError as exc:
            failed = exc  # raised below: inside the connection's nursery it would come wrapped
    if failed is not None:
        raise failed
    return types.CallToolResult.model_validate(result, by_name=False).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )


@contextlib.asynccontextmanager
async def inproc_client(shared: SessionContext, name: str = "cli") -> AsyncIterator[Client]:
    """The official SDK client (handshake era) of a fresh in-process connection."""
    from mcp import Client

    from assern.actors.listener.sdk_streams import message_streams

    @contextlib.asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        async with _served(shared, name) as stream, trio.open_nursery() as nursery:
            out = DirectWriter(stream)
            nursery.start_soon(out.pump)
            async with message_streams(framing.line_reader(stream), out) as streams:
                yield streams
            nursery.cancel_scope.cancel()

    async with Client(transport(), mode="legacy", cache=None) as client:
        yield client

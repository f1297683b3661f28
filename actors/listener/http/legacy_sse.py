"""The 2024-11-05 HTTP+SSE transport, for older clients (`[listen] legacy_sse = true`).

A client opens `GET /sse`, is told where to post (`/messages/?session_id=…`) and gets
every answer on that stream. The `mcp` SDK's SSE transport serves the HTTP side; each
stream is one client connection of the listener (kind "http-sse"), joined by the same
`SessionWire` as a streamable-HTTP session. A session belongs to the token that opened
it: the transport compares the principal of every post with the opener's, and the
principal here is the token's name (never its value).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
import trio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.sse import SseServerTransport

from assern.actors.listener.http.wire import SessionWire

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from assern.actors.listener.http.sessions import ServeConnection

log = structlog.get_logger()

SSE_PATH = "/sse"
MESSAGES_PATH = "/messages"


def with_owner(scope: Scope, owner: str | None) -> Scope:
    """`scope` carrying the token's name as its user, for the transport's session binding."""
    if owner is None:
        return scope
    user = AuthenticatedUser(AccessToken(token=f"name:{owner}", client_id=owner, scopes=[]))
    return {**scope, "user": user}


class LegacySse:
    """The open HTTP+SSE streams of one HTTP front."""

    def __init__(self, serve: ServeConnection) -> None:
        self._serve = serve
        self._transport = SseServerTransport(MESSAGES_PATH + "/")
        self.open = 0

    async def stream(self, scope: Scope, receive: Receive, send: Send, owner: str | None) -> None:
        """`GET /sse`: serve one client connection for as long as its stream is open."""
        async with self._transport.connect_sse(with_owner(scope, owner), receive, send) as (read, write):
            wire = SessionWire(read, write)
            self.open += 1
            log.info("http_sse_opened", token=owner)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(wire.pump_in)
                    await self._serve("http-sse", wire.receive_stream, wire.send_stream)
                    nursery.cancel_scope.cancel()
            finally:
                self.open -= 1

    async def post(self, scope: Scope, receive: Receive, send: Send, owner: str | None) -> None:
        """`POST /messages/?session_id=…`: one message of a stream's client."""
        await self._transport.handle_post_message(with_owner(scope, owner), receive, send)

"""The HTTP front's ASGI application: `/mcp`, `/healthz`, `/readyz` and `/metrics`
(and, with `[listen] legacy_sse`, `/sse` and `/messages/` of the 2024-11-05 transport).

Every request to `/mcp` passes the checks (checks.py: Host, Origin, token) and the body
limit first; a refusal is answered with its status and a JSON-RPC error body, and
logged as one `http_refused` event (the reason and the token's name, never its value).
Then the request's era decides where it goes, as the `mcp` SDK decides it: an
`MCP-Protocol-Version` header of the 2026-07-28 revision (or any version the handshake
does not know) is a stateless request (stateless.py); anything else belongs to a
handshake-era session (sessions.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import structlog
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import Receive

from assern.actors.listener.http import plain
from assern.actors.listener.http.checks import authenticate, check_header_size, check_host_origin
from assern.actors.listener.http.legacy_sse import MESSAGES_PATH, SSE_PATH
from assern.actors.listener.http.plain_stateless import plain_request
from assern.actors.listener.http.refusal import Refusal
from assern.actors.listener.http.responses import encoded, lifespan, request_headers, send_body, send_json
from assern.actors.listener.http.wire import usable_id
from assern.actors.listener.protocol import modern_client_name

if TYPE_CHECKING:
    from starlette.types import Message, Scope, Send

    from assern.actors.config.listen import Bind, ListenSpec
    from assern.actors.listener.http.legacy_sse import LegacySse
    from assern.actors.listener.http.metrics import Metrics
    from assern.actors.listener.http.sessions import HandshakeSessions
    from assern.actors.listener.http.stateless import StatelessClients
    from assern.actors.listener.http.tokens import TokenStore

log = structlog.get_logger()

MCP_PATH = "/mcp"
#: Readiness: whether the front is ready, and each backend's state by name.
Readiness = Callable[[], tuple[bool, Mapping[str, str]]]


class HttpApp:
    """The ASGI application hypercorn serves."""

    def __init__(
        self,
        *,
        bind: Bind,
        spec: Callable[[], ListenSpec],
        tokens: TokenStore,
        sessions: HandshakeSessions,
        stateless: StatelessClients,
        readiness: Readiness,
        metrics: Metrics,
        legacy: LegacySse | None = None,
    ) -> None:
        self.bind = bind
        self.legacy = legacy
        self._spec = spec
        self.tokens = tokens
        self.sessions = sessions
        self.stateless = stateless
        self._readiness = readiness
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await lifespan(receive, send)
            return
        if kind != "http":
            return  # websockets are not served
        oversized = check_header_size(scope["headers"], self._spec().max_header_bytes)
        if oversized is not None:
            await self.refuse(scope, send, oversized, None)
            return
        path = scope["path"].rstrip("/") or "/"
        if path == MCP_PATH:
            await self._mcp(scope, receive, send)
        elif path in (SSE_PATH, MESSAGES_PATH) and self.legacy is not None and self._spec().legacy_sse:
            await self._legacy(path, scope, receive, send)
        elif path == "/healthz":
            await send_json(send, 200, {"status": "alive"})
        elif path == "/readyz":
            await self._ready(scope, send)
        elif path == "/metrics":
            await self._metrics(scope, send)
        else:
            await send_json(send, 404, {"error": f"nothing at {scope['path']}; MCP is served at {MCP_PATH}"})

    # ----------------------------------------------------------------------- MCP

    def _check(self, headers: Mapping[str, str]) -> tuple[str | None, Refusal | None]:
        """The request's token name, or why it is refused (Host, Origin, token)."""
        spec = self._spec()
        refusal = check_host_origin(headers, self.bind, spec)
        if refusal is not None:
            return None, refusal
        checked = authenticate(headers, self.tokens, spec)
        if isinstance(checked, Refusal):
            return None, checked
        return checked, None

    async def _admit(
        self, scope: Scope, receive: Receive, send: Send, methods: tuple[str, ...]
    ) -> Admitted | None:
        """The checks (Host, Origin, token), the method and the body limit; None once a
        refusal was answered."""
        headers = request_headers(scope)
        owner, refusal = self._check(headers)
        if refusal is None and scope["method"] not in methods:
            refusal = Refusal(
                405,
                f"{scope['method']} is not served at {scope['path']}",
                "bad_method",
                (("allow", ", ".join(methods)),),
            )
        body = b""
        if refusal is None and scope["method"] == "POST":
            read = await _read_body(headers, receive, self._spec().max_body_bytes)
            if isinstance(read, Refusal):
                refusal = read
            else:
                body, receive = read, _replaying(read, receive)
        if refusal is not None:
            await self.refuse(scope, send, refusal, owner)
            return None
        return Admitted(owner=owner, headers=headers, body=body, receive=receive)

    async def _legacy(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.legacy is not None
        stream = path == SSE_PATH
        admitted = await self._admit(scope, receive, send, ("GET",) if stream else ("POST",))
        if admitted is None:
            return
        with self.metrics.request(modern=False):
            if stream:
                await self.legacy.stream(scope, admitted.receive, send, admitted.owner)
            else:
                await self.legacy.post(scope, admitted.receive, send, admitted.owner)

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        admitted = await self._admit(scope, receive, send, ("GET", "POST", "DELETE"))
        if admitted is None:
            return
        owner, headers = admitted.owner, admitted.headers
        decoded = _decode(admitted.body)
        version = headers.get("mcp-protocol-version")
        modern = version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
        with self.metrics.request(modern):
            if modern:
                name = modern_client_name(decoded)
                request = plain_request(headers, decoded) if scope["method"] == "POST" else None
                simple = None if request is None else (request, decoded)
                await self.stateless.handle(scope, admitted.receive, send, owner, name, simple)
                return
            session_id = headers.get(MCP_SESSION_ID_HEADER.lower())
            post = scope["method"] == "POST"
            refusal = await self.sessions.handle(
                scope,
                admitted.receive,
                send,
                owner,
                session_id=session_id,
                posted=_request_ids(decoded),
                last_event_id=headers.get("last-event-id") if scope["method"] == "GET" else None,
                simple=plain.plain(headers, decoded, admitted.body) if post and session_id else None,
                version=version,
            )
            if refusal is not None:
                await self.refuse(scope, send, refusal, owner)

    async def refuse(self, scope: Scope, send: Send, refusal: Refusal, owner: str | None) -> None:
        client = scope.get("client")
        log.warning(
            "http_refused",
            reason=refusal.reason,
            status=refusal.status,
            method=scope.get("method"),
            path=scope.get("path"),
            peer=f"{client[0]}:{client[1]}" if client else None,
            token=owner,
        )
        self.metrics.refused(refusal.reason)
        code = -32001 if refusal.status in (401, 403, 421) else -32600
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": refusal.message}}
        # The refused request's body may be unread: the connection cannot carry another
        # request, and a client told so opens a new one instead of failing on this one.
        await send_json(send, refusal.status, body, encoded((*refusal.headers, ("connection", "close"))))

    # ---------------------------------------------------------------- operators

    async def _ready(self, scope: Scope, send: Send) -> None:
        ready, backends = self._readiness()
        body: dict[str, Any] = {"ready": ready, "config": "loaded"}
        if isinstance(authenticate(request_headers(scope), self.tokens, self._spec()), Refusal):
            counts: dict[str, int] = {}
            for state in backends.values():
                counts[state] = counts.get(state, 0) + 1
            body["backends"] = counts  # names only to those who may use them
        else:
            body["backends"] = dict(backends)
        await send_json(send, 200 if ready else 503, body)

    async def _metrics(self, scope: Scope, send: Send) -> None:
        checked = authenticate(request_headers(scope), self.tokens, self._spec())
        if isinstance(checked, Refusal):
            await self.refuse(scope, send, checked, None)
            return
        content, media = self.metrics.render()
        await send_body(send, 200, content, content_type=media.encode())


# ------------------------------------------------------------------- helpers


@attrs.frozen(kw_only=True, eq=False)
class Admitted:
    """A request that passed the checks: its token's name, headers and body (a POST's
    body read already; `receive` hands it out again)."""

    owner: str | None
    headers: Mapping[str, str]
    body: bytes
    receive: Receive


async def _read_body(headers: Mapping[str, str], receive: Receive, limit: int) -> bytes | Refusal:
    too_big = Refusal(413, f"Request body too large (the limit is {limit} bytes)", "body_too_large")
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return too_big
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return Refusal(400, "The client left before its body arrived", "body_incomplete")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return too_big
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """`receive` with the body read already handed out again first."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay


def _decode(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None  # the transport answers the parse error


def _request_ids(decoded: Any) -> tuple[Any, ...]:
    messages = decoded if isinstance(decoded, list) else [decoded]
    return tuple(
        m["id"] for m in messages if isinstance(m, dict) and "method" in m and usable_id(m.get("id"))
    )

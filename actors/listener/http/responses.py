"""How the front writes an answer itself: one body with its length, or an SSE stream.

Every answer the front writes without the `mcp` SDK's transport (operators'
endpoints, refusals, plain requests of both eras) goes out through these, so the
headers and the event framing are the same wherever they come from.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from starlette.types import Receive, Scope, Send

JSON = b"application/json"
#: An SSE comment, which clients skip and proxies see as traffic.
KEEPALIVE = b": ping\r\n\r\n"
#: Seconds of silence on a stream before a keep-alive comment (the SDK's own interval).
KEEPALIVE_EVERY = 15.0
#: What an SSE answer carries besides its own headers: never cached, never buffered.
SSE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
)


def request_headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (a repeated one: its last value)."""
    return {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", ())}


async def lifespan(receive: Receive, send: Send) -> None:
    """Answer the server's lifespan messages (nothing to set up or tear down)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def dumps(value: Any) -> bytes:
    """`value` as compact JSON."""
    return json.dumps(value, separators=(",", ":")).encode()


def encoded(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """Headers given as text, as the server wants them."""
    return [(name.encode(), value.encode()) for name, value in headers]


async def send_body(
    send: Send,
    status: int,
    body: bytes,
    *,
    content_type: bytes | None = JSON,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """A whole answer: `status`, `headers`, the content type (None for an empty
    answer), the length and `body`."""
    raw = list(headers)
    if content_type is not None:
        raw.append((b"content-type", content_type))
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, status: int, value: Any, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """`value` as a whole JSON answer."""
    await send_body(send, status, dumps(value), headers=headers)


async def open_stream(send: Send, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """Start a 200 SSE answer; its events follow with `send_more`."""
    await send({"type": "http.response.start", "status": 200, "headers": [*headers, *SSE_HEADERS]})


async def send_more(send: Send, chunk: bytes, *, last: bool = False) -> None:
    """Part of a streamed answer (an event, a comment); `last` ends the answer."""
    await send({"type": "http.response.body", "body": chunk, "more_body": not last})


def event(data: bytes, event_id: str | None = None) -> bytes:
    """One SSE event of a JSON-RPC message (`data`), or a priming event (empty data,
    an id to resume from)."""
    head = (b"id: " + event_id.encode() + b"\r\n") if event_id is not None else b""
    kind = b"event: message\r\n" if data else b""
    return kind + head + b"data: " + data + b"\r\n\r\n"

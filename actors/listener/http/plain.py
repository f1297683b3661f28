"""A session's plain messages, answered by the front itself instead of the SDK transport.

Most of what a handshake-era client posts is one request whose answer it waits for
with no progress asked (a tool call, a list, a ping), or one notification. The `mcp`
SDK's transport answers every request with an SSE stream of its own making: parsing
and validating the body, a task group and several channels per request, and the
answer serialized once more, which is most of what an HTTP call costs the front. A
plain message skips all that: its line goes straight to the session's connection, and
the POST is answered from the line the connection writes back.

- A notification or a client's response is handed on and accepted (202).
- A request is answered with one JSON body when its answer comes within
  `STREAM_AFTER` seconds. A slower one gets an SSE stream from then on, opened with a
  priming event (kept in the session's replay buffer, for clients of 2025-11-25 and
  later) so that a client that loses the stream resumes it with `Last-Event-ID` as it
  would any other; the answer is kept there too before it is sent, and comments keep
  a quiet stream alive through proxies.

Anything else (`initialize`, a request that asks for progress, which needs its own
stream, batches, bodies the transport would refuse, GET and DELETE) goes through the
transport as before.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types
import trio

from assern.actors.listener.http.responses import (
    KEEPALIVE,
    KEEPALIVE_EVERY,
    dumps,
    event,
    open_stream,
    send_body,
    send_more,
)
from assern.actors.listener.http.wire import SessionWire, request_key, usable_id

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mcp.server.streamable_http import EventStore
    from starlette.types import Receive, Send

#: Seconds a request's answer may take before its POST is answered as an SSE stream.
STREAM_AFTER = 0.5
#: What a POST waiting for its answer gets when its session ends first.
SESSION_ENDED = dumps(
    {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": types.INTERNAL_ERROR, "message": "Session terminated before the request completed"},
    }
)
#: The first revision whose clients read a priming event (an id with empty data).
PRIMING_SINCE = "2025-11-25"
#: What a request without `MCP-Protocol-Version` speaks, as the specification says.
DEFAULT_VERSION = "2025-03-26"


@attrs.frozen
class Plain:
    """A POST the front answers itself: its message as one JSON line, and the request's
    id (None for a notification or a client's response)."""

    line: bytes
    request_id: types.RequestId | None


class Outcome(Enum):
    ANSWERED = "answered"
    #: the client left before a stream with a place to resume from was opened
    LEFT = "left"
    #: the client left a stream it can resume
    LEFT_STREAM = "left_stream"


def plain(headers: Mapping[str, str], message: Any, body: bytes) -> Plain | None:
    """The POST as a plain message, or None when the transport must serve it."""
    if not is_json(headers.get("content-type", "")) or not accepts_both(headers.get("accept", "")):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return None
    method = message.get("method")
    request_id = message.get("id")
    if method is None:  # a response to one of our requests
        if not usable_id(request_id) or ("result" in message) == ("error" in message):
            return None
        return Plain(_line(message, body), None)
    if not isinstance(method, str):
        return None
    if "id" not in message:
        return Plain(_line(message, body), None)
    if not usable_id(request_id) or method == "initialize" or _asks_progress(params):
        return None
    return Plain(_line(message, body), request_id)


async def answer(
    wire: SessionWire,
    request: Plain,
    receive: Receive,
    send: Send,
    *,
    session_id: str,
    version: str | None,
    replay: EventStore | None,
) -> Outcome:
    """Hand `request` to the connection and answer its POST with what comes back."""
    assert request.request_id is not None, "a notification is accepted, not answered"
    key = request_key(request.request_id)
    claim = await wire.post_line(request.line, request.request_id)
    assert claim is not None
    streaming = sent = kept = False
    left = trio.CancelScope()
    try:
        with left:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(until_disconnect, receive, left)
                with trio.move_on_after(STREAM_AFTER):
                    await claim.answered.wait()
                if claim.line is not None:
                    await send_body(send, 200, claim.line, headers=_session(session_id))
                    sent = True
                elif claim.answered.is_set():  # the session ended first
                    await send_body(send, 500, SESSION_ENDED, headers=_session(session_id))
                    sent = True
                else:
                    streaming = True
                    primed = replay is not None and (version or DEFAULT_VERSION) >= PRIMING_SINCE
                    await open_stream(send, _session(session_id))
                    if primed:
                        assert replay is not None
                        await send_more(send, event(b"", await replay.store_event(key, None)))
                    while not claim.answered.is_set():
                        with trio.move_on_after(KEEPALIVE_EVERY):
                            await claim.answered.wait()
                        if not claim.answered.is_set():
                            await send_more(send, KEEPALIVE)
                    line = claim.answer()
                    if line is None:  # the session ended first: so does the stream
                        await send_more(send, b"", last=True)
                    else:
                        event_id = None
                        if replay is not None:
                            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                            event_id = await replay.store_event(key, message)
                            kept = True  # a resuming client finds it there
                        await send_more(send, event(line, event_id), last=True)
                    sent = True
                nursery.cancel_scope.cancel()
    finally:
        unsent = wire.release(claim)
        if unsent is not None and not sent and streaming and not kept:
            # answered as the client left its stream: keep it for the resume
            with trio.CancelScope(shield=True):
                await wire.to_transport(unsent)
    if sent:
        return Outcome.ANSWERED
    return Outcome.LEFT_STREAM if streaming and replay is not None else Outcome.LEFT


async def accept(wire: SessionWire, message: Plain, send: Send, *, session_id: str) -> None:
    """Hand a notification or a client's response on, and answer 202."""
    await wire.post_line(message.line)
    await send_body(send, 202, b"", content_type=None, headers=_session(session_id))


# ------------------------------------------------------------------- helpers


def is_json(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() == "application/json"


def accepts_both(accept: str) -> bool:
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    if "*/*" in kinds:
        return True
    json_ok = bool(kinds & {"application/json", "application/*"})
    return json_ok and bool(kinds & {"text/event-stream", "text/*"})


def _asks_progress(params: dict[str, Any] | None) -> bool:
    meta = (params or {}).get("_meta")
    return isinstance(meta, dict) and meta.get("progressToken") is not None


def _line(message: dict[str, Any], body: bytes) -> bytes:
    """The message as one line: the body itself unless it spans several."""
    body = body.strip()
    if b"\n" in body or b"\r" in body:
        return dumps(message)
    return body


async def until_disconnect(receive: Receive, left: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    left.cancel()


def _session(session_id: str) -> list[tuple[bytes, bytes]]:
    return [(b"mcp-session-id", session_id.encode())]

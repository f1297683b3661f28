"""Handshake-era sessions: one session's end or failure leaves the others alone."""

from __future__ import annotations

import json
import math
from typing import Any

import trio
import trio.testing

from assern.actors.listener.http.sessions import HandshakeSessions, SessionLimits

LIMITS = SessionLimits(total=8, per_token=8, idle_timeout=math.inf)
HEADERS = [(b"accept", b"application/json, text/event-stream"), (b"content-type", b"application/json")]


async def serve(kind: str, receive: trio.abc.ReceiveStream, send: trio.abc.SendStream) -> None:
    """A connection that answers each request with its method; `explode` fails it."""
    buffer = b""
    while data := await receive.receive_some():
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            message = json.loads(line)
            if message.get("method") == "explode":
                raise RuntimeError("this connection failed")
            if "id" in message:
                result: dict[str, Any] = {"method": message["method"]}
                if message["method"] == "initialize":
                    result = {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "serverInfo": {"name": "t", "version": "1"},
                    }
                answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
                await send.send_all(json.dumps(answer).encode() + b"\n")


async def post(
    sessions: HandshakeSessions, message: dict[str, Any] | None, session: str | None
) -> tuple[int, bytes, str]:
    """POST one message (None: DELETE the session); the status, body and session id."""
    headers = list(HEADERS)
    if session is not None:
        headers.append((b"mcp-session-id", session.encode()))
    if message is None or message.get("method") != "initialize":
        headers.append((b"mcp-protocol-version", b"2025-06-18"))
    method = "DELETE" if message is None else "POST"
    scope = {"type": "http", "method": method, "path": "/mcp", "headers": headers, "query_string": b""}
    body = b"" if message is None else json.dumps(message).encode()
    sent: list[dict[str, Any]] = []
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await trio.sleep_forever()
        raise AssertionError

    async def send(event: dict[str, Any]) -> None:
        sent.append(event)

    refusal = await sessions.handle(scope, receive, send, None, session_id=session, posted=())  # type: ignore[arg-type]
    assert refusal is None
    start = sent[0]
    opened = dict(start["headers"]).get(b"mcp-session-id", b"").decode()
    return start["status"], b"".join(e.get("body", b"") for e in sent[1:]), opened or (session or "")


async def test_a_failing_or_deleted_session_leaves_the_others_serving() -> None:
    sessions = HandshakeSessions(serve, lambda: LIMITS)
    async with trio.open_nursery() as nursery:
        await nursery.start(sessions.run)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        ids = [(await post(sessions, init, None))[2] for _ in range(3)]
        assert len(set(ids)) == 3
        assert set(sessions.sessions) == set(ids)

        await post(sessions, {"jsonrpc": "2.0", "method": "explode"}, ids[0])
        with trio.fail_after(5):
            while ids[0] in sessions.sessions:  # noqa: ASYNC110 - the session's task ends on its own
                await trio.sleep(0.01)
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        status, body, _ = await post(sessions, ping, ids[1])
        assert status == 200
        assert b'"result":{"method":"ping"}' in body
        assert set(sessions.sessions) == set(ids[1:])

        status, _, _ = await post(sessions, None, ids[2])
        assert status == 200
        with trio.fail_after(5):
            while ids[2] in sessions.sessions:  # noqa: ASYNC110 - the session's task ends on its own
                await trio.sleep(0.01)
        for _ in range(20):  # the deleted session's end must not reach its neighbour
            await trio.testing.wait_all_tasks_blocked()
            status, body, _ = await post(sessions, ping, ids[1])
            assert status == 200
        assert set(sessions.sessions) == {ids[1]}
        nursery.cancel_scope.cancel()

"""Handshake-era sessions: one session's end or failure leaves the others alone."""

from __future__ import annotations

import json
import math
from typing import Any

import trio
import trio.testing

from assern.actors.listener.http import plain
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

    simple = None  # what the front answers itself, as the app decides it
    if method == "POST" and session is not None:
        simple = plain.plain({k.decode(): v.decode() for k, v in headers}, message, body)
    refusal = await sessions.handle(
        scope,
        receive,
        send,  # type: ignore[arg-type]
        None,
        session_id=session,
        posted=(),
        simple=simple,
    )
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
        assert json.loads(body)["result"] == {"method": "ping"}  # answered as one JSON body
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


# ---------------------------------------------------------------- broken streams

RESUMABLE = SessionLimits(total=8, per_token=8, idle_timeout=math.inf, replay_events=32, resume_grace=10)


class Hanging:
    """A connection that never answers `hang` and records the calls it is told to cancel."""

    def __init__(self) -> None:
        self.cancelled: list[Any] = []

    async def serve(self, kind: str, receive: trio.abc.ReceiveStream, send: trio.abc.SendStream) -> None:
        buffer = b""
        while data := await receive.receive_some():
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                message = json.loads(line)
                if message.get("method") == "notifications/cancelled":
                    self.cancelled.append(message["params"]["requestId"])
                elif message.get("method") == "initialize":
                    result = {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "serverInfo": {"name": "t", "version": "1"},
                    }
                    answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
                    await send.send_all(json.dumps(answer).encode() + b"\n")


async def hang_up(
    sessions: HandshakeSessions, session: str, request_id: int, *, resume: str | None = None
) -> str:
    """POST `hang` (or, with `resume`, GET that event's stream) and hang up once the first
    event arrived; the id of the last event received."""
    if resume is None:
        headers = [*HEADERS, (b"mcp-session-id", session.encode()), (b"mcp-protocol-version", b"2025-11-25")]
        method, body = "POST", json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "hang"}).encode()
    else:
        headers = [
            (b"accept", b"text/event-stream"),
            (b"mcp-session-id", session.encode()),
            (b"mcp-protocol-version", b"2025-11-25"),
            (b"last-event-id", resume.encode()),
        ]
        method, body = "GET", b""
    scope = {"type": "http", "method": method, "path": "/mcp", "headers": headers, "query_string": b""}
    streamed = trio.Event()
    events: list[bytes] = []
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await streamed.wait()
        return {"type": "http.disconnect"}

    async def send(event: dict[str, Any]) -> None:
        if event.get("body"):
            events.append(event["body"])
            streamed.set()

    posted = (request_id,) if resume is None else ()
    simple = None
    if resume is None:
        simple = plain.plain({k.decode(): v.decode() for k, v in headers}, json.loads(body), body)
    refusal = await sessions.handle(
        scope,
        receive,
        send,  # type: ignore[arg-type]
        None,
        session_id=session,
        posted=posted,
        last_event_id=resume,
        simple=simple,
        version="2025-11-25",
    )
    assert refusal is None
    ids = [line[3:].strip() for chunk in events for line in chunk.split(b"\n") if line.startswith(b"id:")]
    return ids[-1].decode()


async def test_a_call_whose_stream_broke_is_cancelled_only_past_the_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection = Hanging()
    sessions = HandshakeSessions(connection.serve, lambda: RESUMABLE)
    async with trio.open_nursery() as nursery:
        await nursery.start(sessions.run)
        _, _, session = await post(
            sessions, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, None
        )
        await hang_up(sessions, session, 5)
        await trio.sleep(9)
        assert connection.cancelled == []  # the client may still come back for the answer
        await trio.sleep(2)
        assert connection.cancelled == [5]
        nursery.cancel_scope.cancel()


async def test_a_resumed_stream_keeps_its_call_and_breaking_again_restarts_the_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection = Hanging()
    sessions = HandshakeSessions(connection.serve, lambda: RESUMABLE)
    async with trio.open_nursery() as nursery:
        await nursery.start(sessions.run)
        _, _, session = await post(
            sessions, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, None
        )
        primed = await hang_up(sessions, session, 6)
        await trio.sleep(5)
        # the client resumes the call's stream, then loses that one too
        assert await hang_up(sessions, session, 6, resume=primed) != primed
        await trio.sleep(7)
        assert connection.cancelled == []  # the first grace passed, but the client had resumed
        await trio.sleep(4)
        assert connection.cancelled == [6]  # nobody resumed the second break
        nursery.cancel_scope.cancel()

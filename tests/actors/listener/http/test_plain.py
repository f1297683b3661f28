"""Plain messages of a handshake-era session: the front answers them itself, as JSON when
the answer is quick and as a resumable SSE stream when it is not."""

from __future__ import annotations

import json
import math
from collections.abc import MutableMapping
from typing import Any

import pytest
import trio
import trio.testing

from assern.actors.listener.http import plain
from assern.actors.listener.http.sessions import HandshakeSessions, SessionLimits

BOTH = "application/json, text/event-stream"
JSON_POST = {"content-type": "application/json", "accept": BOTH}


def request(request_id: Any, method: str = "tools/call", **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


# ---------------------------------------------------------------- which POSTs


def classify(
    message: Any, headers: dict[str, str] = JSON_POST, body: bytes | None = None
) -> plain.Plain | None:
    raw = json.dumps(message).encode() if body is None else body
    return plain.plain(headers, message, raw)


def test_a_single_request_without_progress_is_plain_and_keeps_its_body_as_the_line() -> None:
    body = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}\n'
    found = classify(json.loads(body), body=body)
    assert found == plain.Plain(body.strip(), 7)
    assert classify(request("a", "ping")) == plain.Plain(json.dumps(request("a", "ping")).encode(), "a")


def test_a_body_over_several_lines_becomes_one_line() -> None:
    message = request(1, name="x")
    found = classify(message, body=json.dumps(message, indent=2).encode())
    assert found is not None
    assert b"\n" not in found.line
    assert json.loads(found.line) == message


def test_notifications_and_client_responses_are_plain_without_an_id_to_answer() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
    assert classify(note) == plain.Plain(json.dumps(note).encode(), None)
    answer = {"jsonrpc": "2.0", "id": "s1", "result": {}}
    assert classify(answer) == plain.Plain(json.dumps(answer).encode(), None)


@pytest.mark.parametrize(
    ("message", "headers"),
    [
        (request(1, "initialize"), JSON_POST),  # opens a session: the transport's
        (request(1, _meta={"progressToken": "p"}), JSON_POST),  # progress needs a stream
        ([request(1), request(2)], JSON_POST),  # a batch
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, JSON_POST),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, JSON_POST),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, JSON_POST),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, JSON_POST),
        ({"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1]}, JSON_POST),
        ({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}, JSON_POST),
        ({"jsonrpc": "2.0", "id": 1}, JSON_POST),
        (None, JSON_POST),  # a body that is not JSON
        (request(1), {"content-type": "text/plain", "accept": BOTH}),
        (request(1), {"content-type": "application/json", "accept": "application/json"}),
        (request(1), {"content-type": "application/json"}),
    ],
)
def test_everything_else_is_left_to_the_transport(message: Any, headers: dict[str, str]) -> None:
    assert classify(message, headers) is None


def test_wildcards_accept_both_kinds_of_answer() -> None:
    anything = {"content-type": "application/json; charset=utf-8", "accept": "*/*"}
    assert classify(request(1), anything) is not None
    both = {"content-type": "application/json", "accept": "application/*, text/*;q=0.5"}
    assert classify(request(1), both) is not None


# ---------------------------------------------------------------- answering


class Connection:
    """Answers `ping` at once and `slow` after `params.seconds`; never `hang`. Records
    every line it is handed."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    async def serve(self, kind: str, receive: trio.abc.ReceiveStream, send: trio.abc.SendStream) -> None:
        buffer = b""
        async with trio.open_nursery() as nursery:
            while data := await receive.receive_some():
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    message = json.loads(line)
                    self.lines.append(message)
                    method = message.get("method")
                    if method == "initialize":
                        result = {
                            "protocolVersion": "2025-11-25",
                            "capabilities": {},
                            "serverInfo": {"name": "t", "version": "1"},
                        }
                        await reply(send, message["id"], result)
                    elif method == "ping":
                        await reply(send, message["id"], {})
                    elif method == "slow":
                        nursery.start_soon(later, send, message["id"], message["params"]["seconds"])


async def reply(send: trio.abc.SendStream, request_id: Any, result: dict[str, Any]) -> None:
    await send.send_all(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n")


async def later(send: trio.abc.SendStream, request_id: Any, seconds: float) -> None:
    await trio.sleep(seconds)
    await reply(send, request_id, {"slept": seconds})


class Exchange:
    """One HTTP request to the sessions, as the front makes it; what was sent back."""

    def __init__(
        self, method: str, message: dict[str, Any] | None, session: str | None, **extra: str
    ) -> None:
        headers = {**JSON_POST, **extra} if method == "POST" else {"accept": "text/event-stream", **extra}
        if session is not None:
            headers["mcp-session-id"] = session
            headers.setdefault("mcp-protocol-version", "2025-11-25")
        self.headers = headers
        self.method = method
        self.body = b"" if message is None else json.dumps(message).encode()
        self.message = message
        self.session = session
        self.sent: list[dict[str, Any]] = []
        self.hang_up = trio.Event()
        self.first_body = trio.Event()

    async def run(self, sessions: HandshakeSessions) -> None:
        raw = [(k.encode(), v.encode()) for k, v in self.headers.items()]
        scope = {"type": "http", "method": self.method, "path": "/mcp", "headers": raw, "query_string": b""}
        pending = [{"type": "http.request", "body": self.body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            if pending:
                return pending.pop()
            await self.hang_up.wait()
            return {"type": "http.disconnect"}

        async def send(event: MutableMapping[str, Any]) -> None:
            self.sent.append(dict(event))
            if event.get("body"):
                self.first_body.set()

        simple = None
        if self.method == "POST" and self.session is not None:
            simple = plain.plain(self.headers, self.message, self.body)
        refusal = await sessions.handle(
            scope,
            receive,
            send,
            None,
            session_id=self.session,
            posted=(),
            last_event_id=self.headers.get("last-event-id"),
            simple=simple,
            version=self.headers.get("mcp-protocol-version"),
        )
        assert refusal is None

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def head(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"])

    @property
    def body_sent(self) -> bytes:
        return b"".join(e.get("body", b"") for e in self.sent[1:])

    def events(self) -> list[dict[str, str]]:
        found = []
        for block in self.body_sent.split(b"\r\n\r\n"):
            fields = dict(line.decode().split(": ", 1) for line in block.split(b"\r\n") if b": " in line)
            if fields:
                found.append(fields)
        return found


LIMITS = SessionLimits(total=8, per_token=8, idle_timeout=math.inf, replay_events=32, resume_grace=10)


async def open_session(sessions: HandshakeSessions) -> str:
    opening = Exchange("POST", request(1, "initialize", protocolVersion="2025-11-25"), None)
    await opening.run(sessions)
    return opening.head[b"mcp-session-id"].decode()


async def test_a_quick_answer_is_one_json_body(autojump_clock: trio.testing.MockClock) -> None:
    connection = Connection()
    sessions = HandshakeSessions(connection.serve, lambda: LIMITS)
    async with trio.open_nursery() as nursery:
        await nursery.start(sessions.run)
        session = await open_session(sessions)
        ping = Exchange("POST", request(9, "ping"), session)
        await ping.run(sessions)
        assert ping.status == 200
        assert ping.head[b"content-type"] == b"application/json"
        assert ping.head[b"mcp-session-id"] == session.encode()
        assert json.loads(ping.body_sent) == {"jsonrpc": "2.0", "id": 9, "result": {}}
        assert connection.lines[-1] == request(9, "ping")
        assert sessions.sessions[session].wire.unanswered == {}  # type: ignore[union-attr]
        nursery.cancel_scope.cancel()


async def test_a_notification_is_handed_on_and_accepted(autojump_clock: trio.testing.MockClock) -> None:
    connection = Connection()
    sessions = HandshakeSessions(connection.serve, lambda: LIMITS)
    async with trio.open_nursery() as nursery:
        await nursery.start(sessions.run)
        session = await open_session(sessions)
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        exchange = Exchange("POST", note, session)
        await exchange.run(sessions)
        assert exchange.status == 202
        assert exchange.body_sent == b""
        await trio.testing.wait_all_tasks_blocked()
        assert connection.lines[-1] == note
        nursery.cancel_scope.cancel()


async def test_a_slow_answer_comes_on_a_stream_that_can_be_resumed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection = Connection()
    sessions = HandshakeSessions(connection.serve, lambda: LIMITS)
    async with trio.open_nursery() as nursery:
        await nursery.start(sessions.run)
        session = await open_session(sessions)
        slow = Exchange("POST", request(4, "slow", seconds=40), session)
        started = trio.current_time()
        await slow.run(sessions)
        assert trio.current_time() - started == pytest.approx(40)
        assert slow.head[b"content-type"] == b"text/event-stream"
        primed, *pings, answered = slow.events()
        assert primed["data"] == ""  # the priming event: a place to resume from
        assert primed["id"]
        assert len(pings) == 2  # kept alive every 15 s while waiting
        assert answered["event"] == "message"
        assert json.loads(answered["data"]) == {"jsonrpc": "2.0", "id": 4, "result": {"slept": 40}}
        # the answer was kept: a client that lost the stream gets it by resuming
        resumed = Exchange("GET", None, session, **{"last-event-id": primed["id"]})
        nursery.start_soon(resumed.run, sessions)
        await resumed.first_body.wait()
        assert json.loads(resumed.events()[0]["data"])["id"] == 4
        resumed.hang_up.set()
        nursery.cancel_scope.cancel()


async def test_a_client_gone_before_any_stream_gets_its_call_cancelled_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection = Connection()
    sessions = HandshakeSessions(connection.serve, lambda: LIMITS)
    async with trio.open_nursery() as nursery:
        await nursery.start(sessions.run)
        session = await open_session(sessions)
        hung = Exchange("POST", request(5, "hang"), session)
        nursery.start_soon(hung.run, sessions)
        await trio.sleep(0.1)
        hung.hang_up.set()  # no answer, no event id: nothing it could resume
        await trio.sleep(0.01)
        assert connection.lines[-1]["method"] == "notifications/cancelled"
        assert connection.lines[-1]["params"]["requestId"] == 5
        assert hung.sent == []
        nursery.cancel_scope.cancel()


async def test_an_answer_to_a_left_stream_waits_for_the_client_to_resume(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection = Connection()
    sessions = HandshakeSessions(connection.serve, lambda: LIMITS)
    async with trio.open_nursery() as nursery:
        await nursery.start(sessions.run)
        session = await open_session(sessions)
        slow = Exchange("POST", request(6, "slow", seconds=3), session)
        nursery.start_soon(slow.run, sessions)
        await slow.first_body.wait()
        [primed] = slow.events()
        slow.hang_up.set()  # the stream breaks after its priming event
        await trio.sleep(5)  # the answer comes while nobody listens, within the grace
        assert not any(line.get("method") == "notifications/cancelled" for line in connection.lines)
        resumed = Exchange("GET", None, session, **{"last-event-id": primed["id"]})
        nursery.start_soon(resumed.run, sessions)
        await resumed.first_body.wait()
        assert json.loads(resumed.events()[0]["data"]) == {"jsonrpc": "2.0", "id": 6, "result": {"slept": 3}}
        resumed.hang_up.set()
        nursery.cancel_scope.cancel()


async def test_a_request_in_flight_holds_the_session_past_its_idle_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection = Connection()
    limits = SessionLimits(total=8, per_token=8, idle_timeout=30, replay_events=32, resume_grace=10)
    sessions = HandshakeSessions(connection.serve, lambda: limits)
    async with trio.open_nursery() as nursery:
        await nursery.start(sessions.run)
        session = await open_session(sessions)
        slow = Exchange("POST", request(2, "slow", seconds=100), session)
        await slow.run(sessions)
        assert json.loads(slow.events()[-1]["data"])["result"] == {"slept": 100}
        await trio.sleep(29)
        assert session in sessions.sessions  # idle only since the answer
        await trio.sleep(2)
        assert session not in sessions.sessions
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("after", [0.1, 2.0], ids=["waiting-for-json", "streaming"])
async def test_a_post_waiting_when_its_session_ends_is_told_at_once(
    autojump_clock: trio.testing.MockClock, after: float
) -> None:
    connection = Connection()
    sessions = HandshakeSessions(connection.serve, lambda: LIMITS)
    async with trio.open_nursery() as nursery:
        await nursery.start(sessions.run)
        session = await open_session(sessions)
        hung = Exchange("POST", request(7, "hang"), session)
        done = trio.Event()

        async def post() -> None:
            await hung.run(sessions)
            done.set()

        nursery.start_soon(post)
        await trio.sleep(after)
        await Exchange("DELETE", None, session).run(sessions)
        with trio.fail_after(1):
            await done.wait()
        if after < plain.STREAM_AFTER:
            assert hung.status == 500
            assert json.loads(hung.body_sent)["error"]["message"].startswith("Session terminated")
        else:
            assert hung.head[b"content-type"] == b"text/event-stream"
            assert hung.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
        nursery.cancel_scope.cancel()

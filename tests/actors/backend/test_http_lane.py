"""The raw lane to a streamable-HTTP backend (http_lane.py), against a mock server: what
it posts, and each way an answer can come back or fail."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
import structlog.testing
import trio
import trio.testing

from assern.actors.backend.forward import ForwardLost
from assern.actors.backend.http_lane import DRAIN_LIMIT, PostLane
from assern.actors.jsonrpc.errors import RpcError

URL = "http://backend.test/mcp"
Handler = Callable[[httpx2.Request], Awaitable[httpx2.Response]]


class Backend:
    """A mock server: answers each POST with `answer(message)`, and keeps what came."""

    def __init__(self, answer: Callable[[dict[str, Any]], httpx2.Response | Awaitable[httpx2.Response]]):
        self.answer = answer
        self.posted: list[tuple[dict[str, Any], httpx2.Headers]] = []
        self.injected: list[Any] = []
        self.lost: list[str] = []
        self.resumed: list[httpx2.Headers] = []
        self.resume: Callable[[httpx2.Request], httpx2.Response] = lambda _request: httpx2.Response(405)

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":  # a resumption
            self.resumed.append(request.headers)
            return self.resume(request)
        message = json.loads(request.content)
        self.posted.append((message, request.headers))
        answer = self.answer(message)
        return answer if isinstance(answer, httpx2.Response) else await answer

    @asynccontextmanager
    async def lane(self, *, modern: bool = False) -> AsyncIterator[PostLane]:
        """A lane to this server, its client and its tasks open while in use: in a
        handshake-era session, or (`modern`) a 2026-07-28 one."""

        def headers_of(method: str, params: dict[str, Any]) -> dict[str, str]:
            return {"mcp-method": method, "mcp-name": params.get("name", "")}

        async def inject(message: Any) -> None:
            self.injected.append(message)

        async with (
            httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)) as client,
            trio.open_nursery() as nursery,
        ):
            yield PostLane(
                client,
                URL,
                session_id=None if modern else "s-1",
                protocol_version="2026-07-28" if modern else "2025-11-25",
                inject=inject,
                lost=self.lost.append,
                spawn=nursery.start_soon,
                headers_of=headers_of if modern else None,
            )


def sse(*messages: Any, priming: bool = True) -> httpx2.Response:
    """An SSE answer carrying `messages` (a priming event first, as the SDK's server sends)."""
    events = [b"id: 0\ndata: \n\n"] if priming else []
    events += [b"event: message\ndata: " + json.dumps(m).encode() + b"\n\n" for m in messages]
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=b"".join(events))


def reply(message: dict[str, Any], result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


async def test_a_call_is_posted_in_the_session_and_its_json_answer_returned_as_written() -> None:
    backend = Backend(lambda m: httpx2.Response(200, json=reply(m, {"content": [], "extra": 1})))
    async with backend.lane() as lane:
        result = await lane.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        await lane.request("tools/call", {"name": "echo"})
    assert result == {"content": [], "extra": 1}
    (first, headers), (second, _) = backend.posted
    assert first == {
        "jsonrpc": "2.0",
        "id": "h1",
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}},
    }
    assert second["id"] == "h2"  # never one of the SDK session's integer ids
    assert headers["mcp-session-id"] == "s-1"
    assert headers["mcp-protocol-version"] == "2025-11-25"
    assert headers["accept"] == "application/json, text/event-stream"


async def test_an_sse_answer_hands_on_progress_and_every_other_message() -> None:
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
    ask = {"jsonrpc": "2.0", "id": 7, "method": "roots/list"}

    def answer(m: dict[str, Any]) -> httpx2.Response:
        token = m["params"]["_meta"]["progressToken"]
        progress = {"progressToken": token, "progress": 1, "total": 2, "message": "half"}
        other = {"progressToken": "someone-else", "progress": 1}
        return sse(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": progress},
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": other},
            log,
            ask,
            reply(m, {"content": []}),
        )

    backend = Backend(answer)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with backend.lane() as lane:
        result = await lane.request("tools/call", {"name": "slow"}, on_progress)
    assert result == {"content": []}
    assert seen == [(1, 2, "half")]
    assert backend.posted[0][0]["params"]["_meta"] == {"progressToken": "h1"}
    other = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "someone-else", "progress": 1},
    }
    assert backend.injected == [other, log, ask]  # the SDK session routes and answers them


async def test_an_sse_event_that_is_not_json_is_handed_on_as_its_error() -> None:
    def answer(m: dict[str, Any]) -> httpx2.Response:
        body = b"data: {not json\n\n" + sse(reply(m, {}), priming=False).content
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    backend = Backend(answer)
    async with backend.lane() as lane:
        assert await lane.request("tools/call", {"name": "x"}) == {}
    [error] = backend.injected
    assert isinstance(error, ValueError)


@pytest.mark.parametrize("status", [200, 400, 500])
async def test_an_error_answer_is_raised_with_its_code_message_and_data(status: int) -> None:
    error = {"code": -32602, "message": "bad arguments", "data": {"field": "text"}}
    backend = Backend(
        lambda m: httpx2.Response(status, json={"jsonrpc": "2.0", "id": m["id"], "error": error})
    )
    async with backend.lane() as lane:
        with pytest.raises(RpcError) as raised:
            await lane.request("tools/call", {"name": "x"})
    assert (raised.value.code, raised.value.message, raised.value.data) == (
        -32602,
        "bad arguments",
        {"field": "text"},
    )
    assert backend.lost == []


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (httpx2.Response(202), "202 Accepted"),
        (httpx2.Response(500, text="boom"), "HTTP 500"),
        (httpx2.Response(200, json={"jsonrpc": "2.0", "method": "x"}), "not a JSON-RPC response"),
        (httpx2.Response(200, text="hello", headers={"content-type": "text/plain"}), "'text/plain'"),
        (sse(priming=False), "ended without an answer"),
    ],
)
async def test_an_answer_that_is_none_is_a_clear_error_and_the_backend_stays(
    response: httpx2.Response, expected: str
) -> None:
    backend = Backend(lambda m: response)
    async with backend.lane() as lane:
        with pytest.raises(RpcError) as raised:
            await lane.request("tools/call", {"name": "x"})
    assert expected in raised.value.message
    assert backend.lost == []


async def test_a_result_that_is_not_an_object_is_an_error() -> None:
    backend = Backend(lambda m: httpx2.Response(200, json=reply(m, [1, 2])))
    async with backend.lane() as lane:
        with pytest.raises(RpcError, match="result is not a JSON object"):
            await lane.request("tools/call", {"name": "x"})


async def test_a_session_the_server_forgot_is_a_lost_connection() -> None:
    backend = Backend(lambda m: httpx2.Response(404, text="no such session"))
    async with backend.lane() as lane:
        with pytest.raises(ForwardLost, match="HTTP 404"):
            await lane.request("tools/call", {"name": "x"})
    assert backend.lost == ["the server no longer knows assern's session (HTTP 404)"]


async def test_a_server_that_cannot_be_reached_is_a_lost_connection() -> None:
    def refuse(message: dict[str, Any]) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused")

    backend = Backend(refuse)
    async with backend.lane() as lane:
        with pytest.raises(ForwardLost, match="could not post to it: ConnectError: connection refused"):
            await lane.request("tools/call", {"name": "x"})
    assert backend.lost == ["could not post to it: ConnectError: connection refused"]


async def test_a_cancelled_call_is_cancelled_at_the_backend() -> None:
    notices: list[dict[str, Any]] = []

    async def answer(message: dict[str, Any]) -> httpx2.Response:
        if "id" not in message:
            notices.append(message)
            return httpx2.Response(202)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    backend = Backend(answer)
    async with backend.lane() as lane, trio.open_nursery() as nursery:
        nursery.start_soon(lane.request, "tools/call", {"name": "wait"})
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert notices == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "h1", "reason": "cancelled by the client"},
        }
    ]
    [(_, headers)] = [(m, h) for m, h in backend.posted if "id" not in m]
    assert headers["mcp-session-id"] == "s-1"
    assert backend.lost == []


class Trickle(httpx2.AsyncByteStream):
    """An SSE body that sends `first`, then `later` after `pause` seconds, then ends."""

    def __init__(self, first: bytes, later: bytes, pause: float) -> None:
        self.parts = (first, later)
        self.pause = pause
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.parts[0]
        await trio.sleep(self.pause)
        yield self.parts[1]

    async def aclose(self) -> None:
        self.closed = True


def event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


async def test_the_answer_returns_at_once_and_the_rest_of_its_stream_is_read_off_the_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A server may keep the stream open after the response: the call does not wait for
    its end; a message that comes later still goes on, and the stream is closed."""
    late = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    bodies: list[Trickle] = []

    def answer(m: dict[str, Any]) -> httpx2.Response:
        bodies.append(Trickle(event(reply(m, {"content": []})), event(late), pause=0.5))
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=bodies[-1])

    backend = Backend(answer)
    async with backend.lane() as lane:
        started = trio.current_time()
        assert await lane.request("tools/call", {"name": "x"}) == {"content": []}
        assert trio.current_time() == started  # not a moment of the stream's rest
        assert backend.injected == []
    assert backend.injected == [late]
    assert bodies[0].closed


async def test_a_stream_left_open_is_given_up_after_the_drain_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bodies: list[Trickle] = []

    def answer(m: dict[str, Any]) -> httpx2.Response:
        bodies.append(Trickle(event(reply(m, {})), b"", pause=3600))
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=bodies[-1])

    backend = Backend(answer)
    async with backend.lane() as lane:
        started = trio.current_time()
        await lane.request("tools/call", {"name": "x"})
    assert trio.current_time() - started == pytest.approx(DRAIN_LIMIT)
    assert bodies[0].closed


def stream_of(*events: bytes) -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=b"".join(events))


async def test_a_stream_that_breaks_off_before_the_response_is_resumed_where_it_stopped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The server closes the POST's stream after a priming event (its polling streams of
    2025-11-25): after the retry it named, a GET with `Last-Event-ID` resumes it."""
    progressed = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "h1", "progress": 1},
    }
    backend = Backend(lambda m: stream_of(b"id: e1\nretry: 250\ndata: \n\n"))
    resumes = iter(
        [
            stream_of(b"id: e2\nevent: message\ndata: " + json.dumps(progressed).encode() + b"\n\n"),
            stream_of(
                b"event: ping\ndata: {}\n\n", event({"jsonrpc": "2.0", "id": "h1", "result": {"ok": 1}})
            ),
        ]
    )
    backend.resume = lambda _request: next(resumes)
    steps: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    async with backend.lane() as lane:
        started = trio.current_time()
        with structlog.testing.capture_logs() as logs:
            assert await lane.request("tools/call", {"name": "x"}, on_progress) == {"ok": 1}
        assert trio.current_time() - started == pytest.approx(0.5)  # the server's retry, twice
    assert [(e["event"], e["after_event"], e["attempt"]) for e in logs] == [
        ("backend_stream_resumed", "e1", 1),
        ("backend_stream_resumed", "e2", 1),  # it went on: a fresh count
    ]
    assert [h["last-event-id"] for h in backend.resumed] == ["e1", "e2"]
    assert all(h["mcp-session-id"] == "s-1" for h in backend.resumed)
    assert steps == [1]
    assert backend.injected == []  # an event that is not a message is no message


async def test_a_stream_that_keeps_breaking_off_without_progress_is_given_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend = Backend(lambda m: stream_of(b"id: e1\ndata: \n\n"))
    backend.resume = lambda _request: stream_of(b": nothing new\n\n")
    async with backend.lane() as lane:
        with pytest.raises(RpcError, match="ended without an answer 3 times"):
            await lane.request("tools/call", {"name": "x"})
    assert len(backend.resumed) == 2


@pytest.mark.parametrize(("status", "error"), [(404, ForwardLost), (405, RpcError)])
async def test_a_stream_the_server_cannot_resume_fails_the_call(
    autojump_clock: trio.testing.MockClock, status: int, error: type[Exception]
) -> None:
    backend = Backend(lambda m: stream_of(b"id: e1\ndata: \n\n"))
    backend.resume = lambda _request: httpx2.Response(status)
    async with backend.lane() as lane:
        with pytest.raises(error):
            await lane.request("tools/call", {"name": "x"})
    assert len(backend.lost) == (status == 404)


async def test_a_2026_request_carries_its_revision_s_headers_and_no_session() -> None:
    backend = Backend(lambda m: httpx2.Response(200, json=reply(m, {"resultType": "complete"})))
    async with backend.lane(modern=True) as lane:
        result = await lane.request("tools/call", {"name": "echo", "_meta": {"k": "v"}})
    assert result == {"resultType": "complete"}
    [(message, headers)] = backend.posted
    assert message["params"] == {"name": "echo", "_meta": {"k": "v"}}  # the envelope as written
    assert (headers["mcp-method"], headers["mcp-name"]) == ("tools/call", "echo")
    assert headers["mcp-protocol-version"] == "2026-07-28"
    assert "mcp-session-id" not in headers


async def test_a_cancelled_2026_request_is_its_dropped_post_alone() -> None:
    async def answer(message: dict[str, Any]) -> httpx2.Response:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    backend = Backend(answer)
    async with backend.lane(modern=True) as lane, trio.open_nursery() as nursery:
        nursery.start_soon(lane.request, "tools/call", {"name": "wait"})
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert [m["method"] for m, _ in backend.posted] == ["tools/call"]  # no notification


async def test_a_404_without_a_session_is_an_error_of_the_call_only() -> None:
    backend = Backend(lambda m: httpx2.Response(404, text="not here"))
    async with backend.lane(modern=True) as lane:
        with pytest.raises(RpcError, match="HTTP 404"):
            await lane.request("tools/call", {"name": "x"})
    assert backend.lost == []


@pytest.mark.parametrize(
    ("location", "answered"),
    [("/mcp/", True), ("http://elsewhere.test/mcp/", False)],
)
async def test_a_redirect_is_followed_within_the_endpoint_s_origin_only(
    location: str, answered: bool
) -> None:
    """A 307 to the same origin (a trailing-slash normalisation) is followed with the
    same method and body, as the SDK's client follows it; one to another origin is not."""
    urls: list[str] = []

    async def handle(request: httpx2.Request) -> httpx2.Response:
        urls.append(str(request.url))
        if request.url.path == "/mcp":
            return httpx2.Response(307, headers={"location": location})
        message = json.loads(request.content)
        return httpx2.Response(200, json=reply(message, {"at": str(request.url)}))

    backend = Backend(lambda m: httpx2.Response(500))
    backend.handle = handle  # type: ignore[method-assign]  # answers by URL
    async with backend.lane() as lane:
        if answered:
            assert await lane.request("tools/call", {"name": "x"}) == {"at": "http://backend.test/mcp/"}
        else:
            with pytest.raises(
                RpcError, match=r"HTTP 307 \(redirected to http://elsewhere.test/mcp/; not followed\)"
            ):
                await lane.request("tools/call", {"name": "x"})
    assert urls == (["http://backend.test/mcp", "http://backend.test/mcp/"] if answered else [URL])
    assert backend.lost == []

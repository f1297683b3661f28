"""The HTTP clients of remote backends (http_clients.py): their timeouts, and a POST's
SSE answer closed early that still leaves its connection to the next request."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from functools import partial
from typing import cast

import httpx2
import pytest
import trio

from assern.actors.backend.http_clients import (
    READ_TIMEOUT,
    Drained,
    KeepAlive,
    PostsReachIt,
    streamable_client,
    timeouts,
)

EVENT = b'event: message\ndata: {"jsonrpc": "2.0", "id": 1, "result": {}}\n\n'


def test_a_read_waits_longer_than_a_call_may_take() -> None:
    assert timeouts(60.0).read == READ_TIMEOUT  # the SDK's five minutes for a quiet stream
    assert (timeouts(900.0).read or 0) > 900.0
    assert timeouts(60.0).connect == 30.0


class Seen(httpx2.AsyncBaseTransport):
    """A transport that answers 200 and keeps the timeouts each request was sent with."""

    def __init__(self) -> None:
        self.reads: dict[str, float | None] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.reads[request.method] = request.extensions["timeout"]["read"]
        return httpx2.Response(200, stream=httpx2.ByteStream(b""))


async def test_an_event_stream_may_stay_quiet_while_a_post_is_held_to_the_read_timeout() -> None:
    for wrapping in (KeepAlive, partial(PostsReachIt, lambda why: None)):
        seen = Seen()
        transport = wrapping(inner=seen)
        async with httpx2.AsyncClient(transport=transport, timeout=timeouts(60.0)) as client:
            await client.get("http://server.test/mcp")
            await client.post("http://server.test/mcp", content=b"{}")
        assert seen.reads == {"GET": None, "POST": READ_TIMEOUT}


async def _serve(stream: trio.SocketStream, connections: list[int], end_after: float) -> None:
    """Answer each POST as the SDK's server does: an SSE stream whose end comes
    `end_after` seconds after the response event."""
    connections.append(1)
    buffer = b""
    async with stream:
        while True:
            while b"\r\n\r\n" not in buffer:
                chunk = await stream.receive_some()
                if not chunk:
                    return
                buffer += chunk
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            while len(buffer) < length:
                buffer += await stream.receive_some()
            buffer = buffer[length:]
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                + f"{len(EVENT):x}\r\n".encode()
                + EVENT
                + b"\r\n"
            )
            await trio.sleep(end_after)
            await stream.send_all(b"0\r\n\r\n")


@asynccontextmanager
async def sse_server(end_after: float = 0.01) -> AsyncIterator[tuple[str, list[int]]]:
    connections: list[int] = []
    async with trio.open_nursery() as nursery:
        handler = partial(_serve, connections=connections, end_after=end_after)
        listeners = await nursery.start(partial(trio.serve_tcp, host="127.0.0.1"), handler, 0)
        port = listeners[0].socket.getsockname()[1]
        yield f"http://127.0.0.1:{port}/mcp", connections
        nursery.cancel_scope.cancel()


async def _post_and_close_early(client: httpx2.AsyncClient, url: str) -> None:
    """What the SDK's streamable-HTTP client does: read up to the response event, close."""
    async with (
        client.stream("POST", url, content=b"{}") as response,
        aclosing(response.aiter_bytes()) as chunks,
    ):
        assert b'"result"' in await anext(chunks)


async def test_posts_whose_answers_are_closed_early_share_one_connection() -> None:
    async with sse_server() as (url, connections):
        async with streamable_client({}, 60.0) as client:
            for _ in range(3):
                await _post_and_close_early(client, url)
        assert len(connections) == 1


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # httpx's stream, unread
async def test_without_it_each_such_post_opens_a_connection() -> None:
    """Why the transport drains: httpx's own gives up the connection of a body closed unread
    (the stream's end comes long after the client closed it: on a busy machine a quick end
    could be read with the event, and the connection kept)."""
    async with sse_server(end_after=30.0) as (url, connections):
        async with httpx2.AsyncClient() as client:
            for _ in range(3):
                await _post_and_close_early(client, url)
        assert len(connections) == 3


class Endless(httpx2.AsyncByteStream):
    """A body that sends one chunk and then nothing, ever."""

    def __init__(self) -> None:
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"data: {}\n\n"
        await trio.sleep_forever()

    async def aclose(self) -> None:
        self.closed = True


async def test_a_drain_cut_short_by_a_cancelled_call_still_closes_the_body() -> None:
    """A cancelled call closes its answer in a cancelled scope: the drain stops at once,
    and the body under it is still closed (else its connection stays busy in the pool)."""
    inner = Endless()
    body = Drained(inner)
    chunks = cast("AsyncGenerator[bytes, None]", body.__aiter__())
    await anext(chunks)
    with trio.CancelScope() as scope:
        scope.cancel()
        await body.aclose()
    assert scope.cancelled_caught
    assert inner.closed
    await chunks.aclose()

"""The front's own answers: whole bodies with their length, and SSE framing."""

from __future__ import annotations

from typing import Any

import trio

from assern.actors.listener.http import responses


class Sent:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: Any) -> None:
        self.messages.append(message)

    def headers(self) -> dict[bytes, bytes]:
        return dict(self.messages[0]["headers"])


def test_a_json_answer_has_its_type_and_length() -> None:
    sent = Sent()
    trio.run(responses.send_json, sent, 503, {"ready": False}, [(b"mcp-session-id", b"s1")])
    start, body = sent.messages
    assert start["status"] == 503
    assert body["body"] == b'{"ready":false}'
    assert sent.headers() == {
        b"mcp-session-id": b"s1",
        b"content-type": b"application/json",
        b"content-length": b"15",
    }


def test_an_empty_answer_has_no_content_type() -> None:
    sent = Sent()

    async def main() -> None:
        await responses.send_body(sent, 202, b"", content_type=None)

    trio.run(main)
    assert sent.headers() == {b"content-length": b"0"}


def test_a_stream_is_never_cached_nor_buffered_and_ends_on_its_last_part() -> None:
    sent = Sent()

    async def main() -> None:
        await responses.open_stream(sent, [(b"mcp-session-id", b"s1")])
        await responses.send_more(sent, responses.KEEPALIVE)
        await responses.send_more(sent, responses.event(b"{}"), last=True)

    trio.run(main)
    headers = sent.headers()
    assert headers[b"content-type"] == b"text/event-stream"
    assert headers[b"cache-control"] == b"no-cache, no-transform"
    assert headers[b"x-accel-buffering"] == b"no"
    assert headers[b"mcp-session-id"] == b"s1"
    assert [m.get("more_body") for m in sent.messages[1:]] == [True, False]


def test_events_are_framed_as_the_specification_reads_them() -> None:
    assert responses.event(b'{"a":1}') == b'event: message\r\ndata: {"a":1}\r\n\r\n'
    assert responses.event(b"{}", "7") == b"event: message\r\nid: 7\r\ndata: {}\r\n\r\n"
    # a priming event: an id to resume from and no message
    assert responses.event(b"", "s1:0") == b"id: s1:0\r\ndata: \r\n\r\n"


def test_text_headers_are_encoded() -> None:
    assert responses.encoded([("connection", "close")]) == [(b"connection", b"close")]

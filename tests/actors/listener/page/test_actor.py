"""The page actor: nothing is bound before the first `OpenPage`, one server after it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import trio

from assern.actors.listener.page.actor import OpenPage, PageActor, PageAddress
from assern.supervisor.mailbox import call, open_mailbox


async def status() -> Mapping[str, Any]:
    return {"backends": []}


async def logs(level: str | None, count: int) -> Sequence[Mapping[str, Any]]:
    return []


async def first_line(url: str) -> bytes:
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    async with await trio.open_tcp_stream(parts.hostname, parts.port) as stream:
        target = f"{parts.path}?{parts.query}"
        await stream.send_all(
            f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n" not in head and (chunk := await stream.receive_some()):
            head += chunk
        return head.split(b"\r\n", 1)[0]


async def test_the_page_is_served_from_the_first_open_on() -> None:
    send, inbox = open_mailbox[OpenPage](4)
    actor = PageActor(inbox, status=status, logs=logs)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            assert actor._sock is None  # no port, no server, no timer before anyone asks
            first: PageAddress = await call(send, lambda reply: OpenPage(reply=reply))
            second: PageAddress = await call(send, lambda reply: OpenPage(reply=reply))
            assert first.url == second.url  # one server
            assert first.url.startswith("http://127.0.0.1:")
            assert first.login != second.login  # a code each
            assert first.login.startswith(f"{first.url}login?code=")
            assert await first_line(first.login) == b"HTTP/1.1 303 "
            assert await first_line(first.login) == b"HTTP/1.1 403 "  # used
            assert await first_line(second.login) == b"HTTP/1.1 303 "
            nursery.cancel_scope.cancel()
    actor.close()

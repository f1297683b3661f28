"""Spliced calls: their bookkeeping, and deadlines that expire on virtual time."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import trio
import trio.testing

from assern.actors.backend.forward import Forwarder
from assern.actors.backend.splice import Describe, SplicedCall, watch_deadlines


class Books:
    def __init__(self) -> None:
        self.calls: dict[str, SplicedCall] = {}
        self.ends: list[tuple[str, bool, bool]] = []

    def spliced_finished(self, call: SplicedCall, *, ok: bool, cancelled: bool = False) -> None:
        if self.calls.pop(call.backend_id, None) is not None:
            self.ends.append((call.backend_id, ok, cancelled))

    def describe_loss(self, reason: str) -> Describe:
        async def describe() -> Exception:
            return RuntimeError(reason)

        return describe

    def deadline_after(self, timeout: float) -> float:
        return trio.current_time() + timeout


class Reply:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def answered(self, message: dict[str, Any], line: bytes, backend_id: str) -> None:
        self.events.append(("answered", message))

    def progressed(self, params: dict[str, Any], line: bytes, backend_id: str) -> None:
        self.events.append(("progressed", params))

    def failed(self, error: Exception) -> None:
        self.events.append(("failed", str(error)))

    def lost(self, describe: Describe) -> None:
        self.events.append(("lost", describe))


def start(books: Books, forwarder: Forwarder, timeout: float = 10.0) -> tuple[SplicedCall, Reply]:
    reply = Reply()
    call = SplicedCall(
        books, forwarder, reply, name="echo", client="c1", request_id=7, call_id=1, timeout=timeout
    )
    backend_id = forwarder.send_nowait("tools/call", {"name": "echo"}, call, progress=True)
    assert backend_id is not None
    call.backend_id = backend_id
    books.calls[backend_id] = call
    return call, reply


async def test_an_answer_is_counted_once_and_handed_on(outbox: Callable[..., Any]) -> None:
    out = outbox()
    books, forwarder = Books(), Forwarder(out)
    call, reply = start(books, forwarder)
    answer = {"jsonrpc": "2.0", "id": call.backend_id, "result": {"content": []}}
    assert forwarder.route(answer)
    call.cancel()  # too late: nothing happens
    assert reply.events == [("answered", answer)]
    assert books.ends == [(call.backend_id, True, False)]


async def test_an_error_answer_counts_as_not_ok(outbox: Callable[..., Any]) -> None:
    out = outbox()
    books, forwarder = Books(), Forwarder(out)
    call, _reply = start(books, forwarder)
    forwarder.route({"jsonrpc": "2.0", "id": call.backend_id, "error": {"code": 1, "message": "x"}})
    assert books.ends == [(call.backend_id, False, False)]


async def test_the_answer_is_handed_on_before_the_books_and_their_log_line(
    outbox: Callable[..., Any],
) -> None:
    out = outbox()
    order: list[str] = []

    class LoggingBooks(Books):
        def spliced_finished(self, call: SplicedCall, *, ok: bool, cancelled: bool = False) -> None:
            order.append("books")
            super().spliced_finished(call, ok=ok, cancelled=cancelled)

    class FirstReply(Reply):
        def answered(self, message: dict[str, Any], line: bytes, backend_id: str) -> None:
            order.append("answered")

    books, forwarder = LoggingBooks(), Forwarder(out)
    reply = FirstReply()
    call = SplicedCall(books, forwarder, reply, name="echo", client=None, request_id=1, call_id=1, timeout=5)
    call.backend_id = forwarder.send_nowait("tools/call", {"name": "echo"}, call, progress=False) or ""
    books.calls[call.backend_id] = call
    forwarder.route({"jsonrpc": "2.0", "id": call.backend_id, "result": {"content": []}})
    assert order == ["answered", "books"]
    assert books.ends == [(call.backend_id, True, False)]


async def test_a_cancelled_call_tells_the_backend_and_gets_no_answer(outbox: Callable[..., Any]) -> None:
    out = outbox()
    books, forwarder = Books(), Forwarder(out)
    call, reply = start(books, forwarder)
    call.cancel()
    _request, note = out.take()
    assert note["method"] == "notifications/cancelled"
    assert note["params"]["requestId"] == call.backend_id
    assert reply.events == []
    assert books.ends == [(call.backend_id, False, True)]


async def test_a_lost_backend_hands_on_a_description(outbox: Callable[..., Any]) -> None:
    out = outbox()
    books, forwarder = Books(), Forwarder(out)
    call, reply = start(books, forwarder)
    forwarder.close("the backend closed its stdout")
    [(kind, describe)] = reply.events
    assert kind == "lost"
    assert str(await describe()) == "the backend closed its stdout"
    assert books.ends == [(call.backend_id, False, False)]


async def test_a_call_past_its_deadline_expires_and_progress_extends_it(
    autojump_clock: trio.testing.MockClock, outbox: Callable[..., Any]
) -> None:
    out = outbox()
    books, forwarder = Books(), Forwarder(out)
    expired: list[tuple[str, float]] = []

    def on_expired(call: SplicedCall) -> None:
        expired.append((call.backend_id, trio.current_time()))
        call.expire(TimeoutError(f"{call.name} timed out"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_deadlines, books.calls, 10.0, on_expired)
        await trio.sleep(3)
        first, first_reply = start(books, forwarder)  # deadline 13
        await trio.sleep(4)
        second, second_reply = start(books, forwarder)  # deadline 17, extended below to 25
        await trio.sleep(8)  # t=15: progress for the second call
        progress = {"progressToken": second.backend_id, "progress": 1}
        forwarder.route({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
        await trio.sleep(20)
        nursery.cancel_scope.cancel()
    assert expired == [(first.backend_id, 13.0), (second.backend_id, 25.0)]
    assert first_reply.events == [("failed", "echo timed out")]
    assert second_reply.events == [("progressed", progress), ("failed", "echo timed out")]
    assert books.ends == [(first.backend_id, False, False), (second.backend_id, False, False)]
    cancelled = [line for line in out.take() if line.get("method") == "notifications/cancelled"]
    assert [n["params"]["requestId"] for n in cancelled] == [first.backend_id, second.backend_id]


async def test_an_answered_call_never_expires(
    autojump_clock: trio.testing.MockClock, outbox: Callable[..., Any]
) -> None:
    out = outbox()
    books, forwarder = Books(), Forwarder(out)
    expired: list[SplicedCall] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_deadlines, books.calls, 10.0, expired.append)
        call, _reply = start(books, forwarder)
        await trio.sleep(5)
        forwarder.route({"jsonrpc": "2.0", "id": call.backend_id, "result": {}})
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    assert expired == []


async def test_no_timeout_means_no_expiry(
    autojump_clock: trio.testing.MockClock, outbox: Callable[..., Any]
) -> None:
    out = outbox()
    books, forwarder = Books(), Forwarder(out)
    expired: list[SplicedCall] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_deadlines, books.calls, math.inf, expired.append)
        start(books, forwarder, timeout=math.inf)
        await trio.sleep(10**6)
        nursery.cancel_scope.cancel()
    assert expired == []

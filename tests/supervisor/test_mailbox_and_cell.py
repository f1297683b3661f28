"""Request/reply over mailboxes, and the latest-value cell."""

from collections.abc import Awaitable, Callable

import outcome
import pytest
import trio
import trio.testing

from assern.supervisor.cell import Cell
from assern.supervisor.mailbox import ActorGone, Reply, call, open_mailbox, reply_to


async def test_call_gets_the_answer() -> None:
    send, receive = open_mailbox[tuple[int, Reply[int]]](4)

    async def actor() -> None:
        async for value, reply in receive:
            with reply:
                reply_to(reply, outcome.Value(value * 2))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(actor)
            assert await call(send, lambda reply: (21, reply)) == 42
            nursery.cancel_scope.cancel()


async def test_actor_dropping_a_request_raises_actor_gone() -> None:
    send, receive = open_mailbox[Reply[int]](4)

    async def actor() -> None:
        reply = await receive.receive()
        with reply:
            raise RuntimeError("crash while handling")

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: _swallow(actor))
            with pytest.raises(ActorGone):
                await call(send, lambda reply: reply)


async def _swallow(fn: Callable[[], Awaitable[object]]) -> None:
    try:
        await fn()
    except RuntimeError:
        pass


async def test_error_answers_are_raised_to_the_caller() -> None:
    send, receive = open_mailbox[Reply[int]](4)

    async def actor() -> None:
        reply = await receive.receive()
        with reply:
            reply_to(reply, outcome.Error(KeyError("nope")))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(actor)
            with pytest.raises(KeyError):
                await call(send, lambda reply: reply)


async def test_reply_to_a_caller_that_left_is_not_an_error() -> None:
    send, receive = trio.open_memory_channel[outcome.Outcome[int]](1)
    receive.close()
    reply_to(send, outcome.Value(1))  # must not raise


async def test_mailbox_is_bounded() -> None:
    send, _receive = open_mailbox[int](1)
    send.send_nowait(1)
    with pytest.raises(trio.WouldBlock):
        send.send_nowait(2)
    with pytest.raises(ValueError, match="at least one"):
        open_mailbox[int](0)


async def test_cell_readers_see_the_newest_value(autojump_clock: trio.testing.MockClock) -> None:
    cell = Cell("a")
    seen: list[str] = []

    async def reader() -> None:
        version = 0
        while True:
            version, value = await cell.changed(version)
            seen.append(value)
            if value == "c":
                return

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            cell.set("b")
            await trio.testing.wait_all_tasks_blocked()
            cell.set("x")
            cell.set("c")  # the reader was not waiting: it skips straight to the newest
    assert seen == ["b", "c"]
    assert cell.value == "c"
    assert cell.version == 3

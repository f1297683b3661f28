"""Bounded mailboxes and the request/reply pattern between actors.

A request carries a size-1 reply channel. The actor answers with `reply_to(msg.reply, ...)`
inside `with msg.reply:`, so a crash or cancellation on its side closes the channel and
the caller gets `ActorGone` at once instead of waiting forever (memory channels are not
closed by garbage collection).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

import outcome
import trio

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")
M = TypeVar("M")

#: The send end of a reply: one value (or one error), then closed.
Reply = trio.MemorySendChannel[outcome.Outcome[T]]


class ActorGone(Exception):
    """The actor closed the reply channel without answering (it crashed or was stopped)."""


class open_mailbox(tuple[trio.MemorySendChannel[M], trio.MemoryReceiveChannel[M]]):
    """A bounded mailbox, `(send, receive)`: `send` blocks when it is full (backpressure).

    Spelled like trio's `open_memory_channel[T](size)`: `open_mailbox[Msg](64)`.
    """

    # A `__new__` that returns a plain tuple, not an instance: trio's own spelling for
    # `open_memory_channel[T](size)`, which mypy flags as misc.
    def __new__(cls, size: int) -> tuple[trio.MemorySendChannel[M], trio.MemoryReceiveChannel[M]]:  # type: ignore[misc]
        if size < 1:
            raise ValueError("a mailbox holds at least one message")
        return trio.open_memory_channel[M](size)


class Pending(Generic[T]):
    """The caller's side of one request: await `result()` for the answer."""

    __slots__ = ("_receive",)

    def __init__(self, receive: trio.MemoryReceiveChannel[outcome.Outcome[T]]) -> None:
        self._receive = receive

    async def result(self) -> T:
        """Wait for the answer; raises `ActorGone` if the actor dropped the request.

        On cancellation the reply channel is closed and nothing is left behind.
        """
        with self._receive:
            try:
                answer: outcome.Outcome[T] = await self._receive.receive()
            except trio.EndOfChannel:
                raise ActorGone from None
        value: T = answer.unwrap()
        return value


def new_reply() -> tuple[Reply[T], Pending[T]]:
    send, receive = trio.open_memory_channel[outcome.Outcome[T]](1)
    return send, Pending(receive)


async def call(mailbox: trio.MemorySendChannel[M], make: Callable[[Reply[T]], M]) -> T:
    """Send a request built by `make(reply)` and wait for its answer.

    Blocks while the mailbox is full. Raises `ActorGone` when the actor drops the request
    and re-raises the actor's error when it answered with one. The caller picks the
    deadline with its own cancel scope.
    """
    reply: Reply[T]
    pending: Pending[T]
    reply, pending = new_reply()
    try:
        await mailbox.send(make(reply))
    except BaseException:
        reply.close()
        pending._receive.close()
        raise
    return await pending.result()


def reply_to(reply: Reply[T], answer: outcome.Outcome[T]) -> None:
    """Deliver an answer without blocking; a caller that went away is not our error."""
    try:
        reply.send_nowait(answer)
    except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock):
        pass

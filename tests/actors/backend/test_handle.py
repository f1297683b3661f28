"""`request`: how long a call waits in a backend's queue, whatever the state looked like."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import outcome
import pytest
import trio
import trio.testing

from assern.actors.backend import messages as msgs
from assern.actors.backend.actor import BackendActor
from assern.actors.backend.backends import BackendsActor
from assern.actors.backend.handle import BackendHandle, request
from assern.actors.backend.messages import BackendUnavailable
from assern.actors.backend.status import BackendState, BackendStatus
from assern.actors.config.spec import ServerSpec
from assern.supervisor.cell import Cell
from assern.supervisor.mailbox import new_reply
from assern.supervisor.status import ChildState, ChildStatus


def ready_handle(size: int = 4) -> tuple[BackendHandle, trio.MemoryReceiveChannel[msgs.BackendRequest]]:
    """A backend that looks ready (startup_timeout 5 s, timeout 30 s) and its mailbox."""
    send, receive = trio.open_memory_channel[msgs.BackendRequest](size)
    view: Any = SimpleNamespace(
        status=BackendStatus(server="a", transport="stdio", state=BackendState.READY),
        state=BackendState.READY,
        spec=SimpleNamespace(startup_timeout=5.0, timeout=30.0),
    )
    return BackendHandle(name="a", mailbox=send, view=view), receive


def ping(reply: Any) -> msgs.BackendRequest:
    return msgs.SetLevel(level="info", reply=reply)


async def test_a_call_sent_as_its_ready_backend_ends_is_not_left_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The backend looked ready when the call was sent, and no incarnation ever takes it
    # (it ended in that instant and does not come back): the wait has the same bound as
    # one for a starting backend.
    handle, _mailbox = ready_handle()
    started = trio.current_time()
    with trio.fail_after(3600), pytest.raises(BackendUnavailable, match="did not become ready within 35 s"):
        await request(handle, ping)  # unbounded, it waited until `fail_after` (virtual) time
    assert trio.current_time() - started == pytest.approx(35)


async def test_a_call_that_finds_the_mailbox_full_is_not_left_waiting_either(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Calls that found the backend ready piled up as its incarnation ended, until its
    # mailbox was full: the next call waits even to be queued, and with the same bound.
    handle, _mailbox = ready_handle(size=1)
    piled, _ = new_reply()
    handle.mailbox.send_nowait(ping(piled))
    started = trio.current_time()
    with trio.fail_after(3600), pytest.raises(BackendUnavailable, match="did not become ready within 35 s"):
        await request(handle, ping)
    assert trio.current_time() - started == pytest.approx(35)


async def test_the_backend_actor_acknowledges_the_calls_it_takes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The real actor's mailbox loop lifts the bound as it takes a call: one taken 20 s
    # after it was sent (by the incarnation that followed the one that ended) may run
    # its whole timeout after that, past startup_timeout + timeout from its sending.
    spec = ServerSpec(name="a", transport="stdio", command="true", startup_timeout=5.0, timeout=30.0)
    send, inbox = trio.open_memory_channel[msgs.BackendRequest](4)
    actor = BackendActor(spec, inbox, on_change=lambda _: None, on_notification=lambda *_: None)
    actor.mark(BackendState.READY)
    handle = BackendHandle(name="a", mailbox=send, view=actor)

    class Session:
        async def set_logging_level(self, level: str) -> None:
            await trio.sleep(29)  # within its own 30 s

    async with trio.open_nursery() as nursery:

        async def next_incarnation() -> None:
            await trio.sleep(20)
            await actor._serve_mailbox(cast("Any", Session()), nursery)

        nursery.start_soon(next_incarnation)
        started = trio.current_time()
        with trio.fail_after(3600):
            assert await request(handle, ping) is None
        assert trio.current_time() - started == pytest.approx(49)
        nursery.cancel_scope.cancel()


async def test_once_taken_a_call_is_bounded_by_the_incarnation_not_the_queue(
    autojump_clock: trio.testing.MockClock,
) -> None:
    handle, mailbox = ready_handle()

    async def slow_incarnation() -> None:
        await trio.sleep(20)  # restarting: it takes the call 20 s after it was sent
        msg = msgs.take(await mailbox.receive())
        assert isinstance(msg, msgs.SetLevel)
        await trio.sleep(600)  # a long call (its progress keeps it alive at the backend)
        msg.reply.send_nowait(outcome.Value(None))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(slow_incarnation)
        started = trio.current_time()
        assert await request(handle, ping) is None
        assert trio.current_time() - started == pytest.approx(620)


async def test_a_call_taken_at_once_keeps_no_queue_deadline(autojump_clock: trio.testing.MockClock) -> None:
    handle, mailbox = ready_handle()
    seen: list[float] = []

    async def incarnation() -> None:
        msg = msgs.take(await mailbox.receive())
        assert isinstance(msg, msgs.SetLevel)
        seen.append(msg.queued.deadline)
        msg.reply.send_nowait(outcome.Value(None))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(incarnation)
        await request(handle, ping)
    assert seen == [float("inf")]


async def test_calls_queued_for_a_backend_that_ended_for_good_are_answered_at_once() -> None:
    # A transient or temporary backend that ends is not restarted: whatever was queued
    # in the instant before is refused with the reason, not left to its deadline.
    _, inbox = trio.open_memory_channel[Any](1)
    router, _ = trio.open_memory_channel[Any](1)
    backends = BackendsActor(
        inbox, router=router, on_notification=lambda *_: None, directory=Cell({}), settled=trio.Event()
    )
    handle = backends._new_handle(ServerSpec(name="a", transport="stdio", command="true"))
    backends.directory.set({"a": handle})
    backends._actors["a"].mark(BackendState.READY)
    async with trio.open_nursery() as nursery:
        failed: list[BaseException] = []

        async def call() -> None:
            try:
                await request(handle, ping)
            except BackendUnavailable as exc:
                failed.append(exc)

        nursery.start_soon(call)
        await trio.testing.wait_all_tasks_blocked()
        backends._child_changed(ChildStatus(id="a", state=ChildState.STOPPED, last_exit="exited with code 0"))
    [error] = failed
    assert "it ended and is not restarted (exited with code 0)" in str(error)
    assert handle.state is BackendState.STOPPED


def test_a_status_says_since_when_its_state_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ServerSpec(name="a", transport="stdio", command="true")
    _send, inbox = trio.open_memory_channel[msgs.BackendRequest](1)
    clock = iter([1000.0, 2000.0, 3000.0])
    monkeypatch.setattr("assern.actors.backend.actor.time.time", lambda: next(clock))
    actor = BackendActor(spec, inbox, on_change=lambda _: None, on_notification=lambda *_: None)
    actor.mark(BackendState.READY)
    assert actor.status.state_since == 1000.0
    actor.mark(BackendState.READY, restarts=1)  # no new state: the same since
    assert actor.status.state_since == 1000.0
    actor.mark(BackendState.FAILED)
    assert actor.status.state_since == 2000.0

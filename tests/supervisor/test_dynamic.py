"""Dynamic children: start_child, terminate_child, restart_child, status, mailboxes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from assern.supervisor.spec import ChildSpec, ChildStart, RestartPolicy, Strategy, SupervisorSpec
from assern.supervisor.supervisor import ChildState, open_supervisor

if TYPE_CHECKING:
    from supervised_children import Recorder

BACKENDS = SupervisorSpec(strategy=Strategy.ONE_FOR_ONE, intensity=None)
POLICY = RestartPolicy(max_restarts=2, restart_window=60.0, backoff_initial=1.0, backoff_max=8.0, jitter=0.0)


async def test_start_child_returns_once_started(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    async def slow(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await trio.sleep(3)
        task_status.started()
        await trio.sleep_forever()

    with trio.fail_after(100):
        async with open_supervisor(BACKENDS, [ChildSpec(id="a", start=rec.forever("a"))]) as sup:
            await sup.start_child(ChildSpec(id="slow", start=slow))
            assert trio.current_time() == 3.0
            assert sup.status()["slow"].state is ChildState.RUNNING
            assert sup.status()["slow"].started_at == 0.0
            await sup.start_child(ChildSpec(id="b", start=rec.forever("b")))
            assert sup.child_ids() == ("a", "slow", "b")
            assert list(sup.status()) == ["a", "slow", "b"]


async def test_start_child_with_crashing_child_neither_hangs_nor_raises(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    with trio.fail_after(100):
        async with open_supervisor(BACKENDS) as sup:
            await sup.start_child(
                ChildSpec(id="x", start=rec.crashing("x", before_started=True), policy=POLICY)
            )
            assert trio.current_time() == 0.0
            status = sup.status()["x"]
            assert status.state is ChildState.RESTARTING
            assert status.next_restart_at == 0.0  # the first restart is immediate
            assert status.last_exit == "crashed: RuntimeError('boom')"
            await trio.sleep(10)
            assert sup.status()["x"].state is ChildState.FAILED
    assert rec.times("x") == [0.0, 0.0, 1.0]


async def test_start_child_rejects_duplicate_id(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    with trio.fail_after(100):
        async with open_supervisor(BACKENDS, [ChildSpec(id="a", start=rec.forever("a"))]) as sup:
            with pytest.raises(ValueError, match=r"^a child with id 'a' already exists$"):
                await sup.start_child(ChildSpec(id="a", start=rec.forever("a")))
    assert rec.times("a") == [0.0]


async def test_duplicate_static_ids_are_rejected() -> None:
    async def never(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        raise AssertionError("must not start")

    specs = [ChildSpec(id="a", start=never), ChildSpec(id="a", start=never)]
    with pytest.raises(ValueError, match=r"^child ids must be unique"):
        await run_briefly(specs)


async def run_briefly(specs: list[ChildSpec]) -> None:
    async with open_supervisor(BACKENDS, specs):
        pass


async def test_terminate_child_is_graceful_and_removes_it(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    specs = [
        ChildSpec(id="a", start=rec.forever("a")),
        ChildSpec(id="b", start=rec.forever("b", cleanup=2.0), shutdown_timeout=5.0),
    ]
    with trio.fail_after(100):
        async with open_supervisor(BACKENDS, specs, on_change=rec.on_change) as sup:
            await trio.sleep(1)
            await sup.terminate_child("b")
            assert trio.current_time() == 3.0  # b's cleanup ran to completion
            assert rec.times("b", "stop") == [3.0]
            assert sup.child_ids() == ("a",)
            assert "b" not in sup.status()
            last = rec.changes[-1]
            assert (last.id, last.state, last.last_exit) == ("b", ChildState.STOPPED, "terminated")
            with pytest.raises(KeyError):
                await sup.terminate_child("b")
            await trio.sleep(10)
    assert rec.times("b") == [0.0]  # never restarted


async def test_terminate_child_wait_is_bounded(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    spec = ChildSpec(id="slow", start=rec.forever("slow", cleanup=10.0), shutdown_timeout=2.0)
    with trio.fail_after(100):
        async with open_supervisor(BACKENDS, [spec], on_change=rec.on_change) as sup:
            await sup.terminate_child("slow")
            assert trio.current_time() == 2.0
            assert rec.changes[-1].last_exit == "did not stop within 2s"
        # the nursery still waits for the child: no task outlives the supervisor
        assert rec.times("slow", "stop") == [10.0]


async def test_terminate_child_drops_a_pending_restart(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    with trio.fail_after(100):
        async with open_supervisor(BACKENDS) as sup:
            await sup.start_child(
                ChildSpec(id="x", start=rec.crashing("x", before_started=True), policy=POLICY)
            )
            assert sup.status()["x"].state is ChildState.RESTARTING
            await sup.terminate_child("x")
            await trio.sleep(10)
            assert sup.child_ids() == ()
    assert rec.times("x") == [0.0]


async def test_restart_child_from_failed_resets_its_ledger(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    with trio.fail_after(100):
        async with open_supervisor(BACKENDS, on_change=rec.on_change) as sup:
            await sup.start_child(ChildSpec(id="x", start=rec.crashing("x", after=0.5), policy=POLICY))
            await trio.sleep(20)
            assert sup.status()["x"].state is ChildState.FAILED
            assert rec.times("x") == [0.0, 0.5, 2.0]  # crashes at .5, 1, 2.5
            await sup.restart_child("x")
            assert sup.status()["x"].state is ChildState.RUNNING
            assert sup.status()["x"].restarts == 3
            await trio.sleep(20)
            assert sup.status()["x"].state is ChildState.FAILED
    # the full max_restarts=2 again, backoff from the start: 20, then 20.5 at once, then 21 + 1
    assert rec.times("x") == [0.0, 0.5, 2.0, 20.0, 20.5, 22.0]


async def test_restart_child_of_running_child(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    with trio.fail_after(100):
        async with open_supervisor(BACKENDS, [ChildSpec(id="a", start=rec.forever("a", cleanup=1.0))]) as sup:
            await trio.sleep(5)
            await sup.restart_child("a")
            status = sup.status()["a"]
            assert (status.state, status.restarts, status.started_at) == (ChildState.RUNNING, 1, 6.0)
            assert status.last_exit == "terminated"
            with pytest.raises(KeyError):
                await sup.restart_child("nope")
    assert rec.times("a") == [0.0, 6.0]
    assert rec.times("a", "stop") == [6.0, 7.0]


async def test_restart_child_replaces_a_pending_restart(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    slow = RestartPolicy(backoff_initial=30.0, backoff_max=30.0, jitter=0.0)
    with trio.fail_after(100):
        async with open_supervisor(BACKENDS) as sup:
            # Crashes twice: the first restart is immediate, the second one waits 30s.
            await sup.start_child(
                ChildSpec(id="x", start=rec.crashing("x", before_started=True, times=2), policy=slow)
            )
            await trio.sleep(2)
            status = sup.status()["x"]
            assert (status.state, status.next_restart_at) == (ChildState.RESTARTING, 30.0)
            await sup.restart_child("x")
            await trio.sleep(60)
            assert sup.status()["x"].state is ChildState.RUNNING
    assert rec.times("x") == [0.0, 0.0, 2.0]


async def test_mailbox_made_outside_the_child_survives_restarts(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    send, receive = trio.open_memory_channel[str](4)
    seen: list[tuple[float, int, str]] = []
    incarnation = 0

    async def actor(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        nonlocal incarnation
        incarnation += 1
        task_status.started()
        async for msg in receive:
            seen.append((trio.current_time(), incarnation, msg))
            if msg == "crash":
                raise RuntimeError("asked to")

    with trio.fail_after(100):
        async with open_supervisor(BACKENDS, [ChildSpec(id="m", start=actor, policy=POLICY)]) as sup:
            await send.send("hello")
            # Two crashes: the first restart is immediate, the second waits 1s.
            await send.send("crash")
            await send.send("crash")
            await send.send("after")  # queued while the actor is down
            await trio.sleep(5)
            await send.send("later")
            await trio.sleep(1)
            assert sup.status()["m"].restarts == 2
    assert seen == [
        (0.0, 1, "hello"),
        (0.0, 1, "crash"),
        (0.0, 2, "crash"),
        (1.0, 3, "after"),
        (5.0, 3, "later"),
    ]


async def test_methods_refuse_after_shutdown(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    with trio.fail_after(100):
        async with open_supervisor(BACKENDS, [ChildSpec(id="a", start=rec.forever("a"))]) as sup:
            pass
        assert sup.status()["a"].state is ChildState.STOPPED
        with pytest.raises(trio.ClosedResourceError):
            await sup.start_child(ChildSpec(id="b", start=rec.forever("b")))
        with pytest.raises(trio.ClosedResourceError):
            await sup.restart_child("a")
        with pytest.raises(trio.ClosedResourceError):
            await sup.terminate_child("a")
    assert rec.times("b") == []


async def test_cancelled_start_child_leaves_the_child_stopped(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    ready_after = [5.0, 0.0]

    async def slow_then_fast(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        rec.note("s", "start")
        try:
            await trio.sleep(ready_after.pop(0))
            task_status.started()
            await trio.sleep_forever()
        finally:
            rec.note("s", "stop")

    with trio.fail_after(100):
        async with open_supervisor(BACKENDS) as sup:
            with trio.move_on_after(2) as caller:
                await sup.start_child(ChildSpec(id="s", start=slow_then_fast, policy=POLICY))
            assert caller.cancelled_caught
            status = sup.status()["s"]
            assert (status.state, status.last_exit) == (ChildState.STOPPED, "cancelled while starting")
            await trio.sleep(10)
            assert sup.status()["s"].state is ChildState.STOPPED  # not restarted
            await sup.restart_child("s")
            assert sup.status()["s"].state is ChildState.RUNNING
    assert rec.events == [(0.0, "s", "start"), (2.0, "s", "stop"), (12.0, "s", "start"), (12.0, "s", "stop")]


def slow_starter(rec: Recorder, child_id: str, delay: float) -> ChildStart:
    async def start(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        rec.note(child_id, "start")
        try:
            await trio.sleep(delay)
            rec.note(child_id, "ready")
            task_status.started()
            await trio.sleep_forever()
        finally:
            rec.note(child_id, "stop")

    return start


async def test_one_for_one_children_start_concurrently(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    """A slow backend neither delays its siblings' starts nor their restarts."""
    crashy = RestartPolicy(max_restarts=5, backoff_initial=1.0, backoff_max=1.0, jitter=0.0)
    with trio.fail_after(100):
        async with open_supervisor(BACKENDS) as sup, trio.open_nursery() as nursery:
            await sup.start_child(
                ChildSpec(id="crashy", start=rec.crashing("crashy", after=1.0, times=2), policy=crashy)
            )
            nursery.start_soon(sup.start_child, ChildSpec(id="slow", start=slow_starter(rec, "slow", 30.0)))
            nursery.start_soon(sup.start_child, ChildSpec(id="quick", start=slow_starter(rec, "quick", 3.0)))
            await trio.sleep(5)
            assert sup.status()["quick"].state is ChildState.RUNNING
            assert sup.status()["slow"].state is ChildState.STARTING
            await sup.terminate_child("slow")  # while it is still starting
            assert trio.current_time() == 5.0
            assert sup.child_ids() == ("crashy", "quick")
    assert rec.times("quick", "ready") == [3.0]
    # crashes at 1 (restarted at once) and 2 (restarted after 1s): not held up by "slow"
    assert rec.times("crashy") == [0.0, 1.0, 3.0]
    assert rec.times("slow", "ready") == []
    assert rec.times("slow", "stop") == [5.0]


async def test_terminate_children_stops_them_concurrently(autojump_clock: trio.testing.MockClock) -> None:
    stopped: dict[str, float] = {}

    def slow_to_stop(name: str) -> ChildStart:
        async def child(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    await trio.sleep(5)  # a backend's stop ladder takes a while
                stopped[name] = trio.current_time()

        return child

    with trio.fail_after(100):
        async with open_supervisor(BACKENDS) as sup:
            for name in ("a", "b", "c"):
                await sup.start_child(ChildSpec(id=name, start=slow_to_stop(name), shutdown_timeout=10))
            await sup.terminate_children(["a", "b", "c", "not-a-child"])
            assert trio.current_time() == 5.0
            assert sup.child_ids() == ()
    assert stopped == {"a": 5.0, "b": 5.0, "c": 5.0}

"""Shutdown: reverse order, bounded waits, cancellation, errors from the block, callbacks."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from assern.supervisor.spec import ChildSpec, RestartPolicy, Strategy, SupervisorSpec
from assern.supervisor.supervisor import ChildState, ChildStatus, open_supervisor

if TYPE_CHECKING:
    from supervised_children import Recorder

SPEC = SupervisorSpec(strategy=Strategy.REST_FOR_ONE, intensity=None)


async def test_reverse_order_shutdown(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    specs = [ChildSpec(id=cid, start=rec.forever(cid)) for cid in "abcd"]
    with trio.fail_after(100):
        async with open_supervisor(SPEC, specs, on_change=rec.on_change) as sup:
            assert rec.order("start") == ["a", "b", "c", "d"]
            await trio.sleep(3)
        assert {s.state for s in sup.status().values()} == {ChildState.STOPPED}
    assert rec.order("stop") == ["d", "c", "b", "a"]
    assert rec.times("a", "stop") == [3.0]
    stopped = [(c.id, c.last_exit) for c in rec.changes if c.state is ChildState.STOPPED]
    assert stopped == [("d", "terminated"), ("c", "terminated"), ("b", "terminated"), ("a", "terminated")]


async def test_shutdown_waits_are_bounded_per_child(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    specs = [
        ChildSpec(id="a", start=rec.forever("a")),
        ChildSpec(id="b", start=rec.forever("b", cleanup=10.0), shutdown_timeout=2.0),
        ChildSpec(id="c", start=rec.forever("c", cleanup=1.0), shutdown_timeout=5.0),
    ]
    with trio.fail_after(100):
        async with open_supervisor(SPEC, specs, on_change=rec.on_change):
            pass
    # c's cleanup fits in its timeout; b's does not: a is stopped 2s after b was asked
    assert [(t, cid) for t, cid, what in rec.events if what == "stop"] == [
        (1.0, "c"),
        (3.0, "a"),
        (11.0, "b"),
    ]
    # ...and the block only exits once b really ended: no task outlives the supervisor
    assert trio.current_time() == 11.0
    b_stopped = [c for c in rec.changes if c.id == "b" and c.state is ChildState.STOPPED]
    assert [c.last_exit for c in b_stopped] == ["did not stop within 2s"]


@pytest.mark.parametrize(
    ("grace", "expected"), [(None, [(4.0, "b"), (4.0, "a")]), (0.0, [(0.0, "a"), (4.0, "b")])]
)
async def test_no_limit_and_zero_shutdown_timeout(
    autojump_clock: trio.testing.MockClock,
    rec: Recorder,
    grace: float | None,
    expected: list[tuple[float, str]],
) -> None:
    """None waits as long as the child takes (OTP infinity); 0 does not wait at all."""
    specs = [
        ChildSpec(id="a", start=rec.forever("a")),
        ChildSpec(id="b", start=rec.forever("b", cleanup=4.0), shutdown_timeout=grace),
    ]
    with trio.fail_after(100):
        async with open_supervisor(SPEC, specs):
            pass
    assert [(t, cid) for t, cid, what in rec.events if what == "stop"] == expected
    assert trio.current_time() == 4.0


async def test_outer_cancellation_stops_children_in_order(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    specs = [ChildSpec(id=cid, start=rec.forever(cid, cleanup=1.0)) for cid in "abc"]
    with trio.fail_after(100):
        with trio.move_on_after(5) as outer:
            async with open_supervisor(SPEC, specs):
                await trio.sleep_forever()
        assert outer.cancelled_caught
    assert [(t, cid) for t, cid, what in rec.events if what == "stop"] == [
        (6.0, "c"),
        (7.0, "b"),
        (8.0, "a"),
    ]


async def test_error_in_the_block_comes_out_unwrapped(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    specs = [ChildSpec(id=cid, start=rec.forever(cid)) for cid in "ab"]

    async def supervise() -> None:
        async with open_supervisor(SPEC, specs):
            await trio.sleep(1)
            raise KeyError("oops") from ValueError("why")

    with trio.fail_after(100), pytest.raises(KeyError, match="oops") as info:
        await supervise()
    assert type(info.value) is KeyError  # not an exception group
    assert repr(info.value.__cause__) == "ValueError('why')"
    assert info.value.__context__ is None
    assert rec.order("stop") == ["b", "a"]


async def test_child_raising_before_started_does_not_break_the_caller(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    policy = RestartPolicy(max_restarts=1, backoff_initial=1.0, jitter=0.0)
    specs = [
        ChildSpec(id="a", start=rec.forever("a")),
        ChildSpec(id="early", start=rec.crashing("early", before_started=True), policy=policy),
    ]
    with trio.fail_after(100):
        async with open_supervisor(SupervisorSpec(intensity=None), specs) as sup:
            assert sup.status()["early"].state is ChildState.RESTARTING
            await trio.sleep(5)
            assert sup.status()["early"].state is ChildState.FAILED
            assert sup.status()["a"].state is ChildState.RUNNING
    assert rec.times("early") == [0.0, 0.0]  # the one restart is immediate


async def test_a_raising_on_change_does_not_kill_the_supervisor(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    seen: list[ChildStatus] = []

    def bad_callback(status: ChildStatus) -> None:
        seen.append(status)
        raise RuntimeError("callback bug")

    policy = RestartPolicy(backoff_initial=1.0, jitter=0.0)
    specs = [ChildSpec(id="x", start=rec.crashing("x", times=1), policy=policy)]
    with trio.fail_after(100):
        async with open_supervisor(SupervisorSpec(intensity=None), specs, on_change=bad_callback) as sup:
            await trio.sleep(5)
            assert sup.status()["x"].state is ChildState.RUNNING
    assert [s.state for s in seen] == [
        ChildState.STARTING,
        ChildState.RUNNING,
        ChildState.RESTARTING,
        ChildState.STARTING,
        ChildState.RUNNING,
        ChildState.STOPPED,
    ]


async def test_shutdown_interrupts_a_pending_restart(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    policy = RestartPolicy(backoff_initial=30.0, backoff_max=30.0, jitter=0.0)
    # Crashes twice at 0: the first restart is immediate, the second one is due at 30.
    specs = [ChildSpec(id="x", start=rec.crashing("x", times=2), policy=policy)]
    with trio.fail_after(100):
        async with open_supervisor(SupervisorSpec(intensity=None), specs) as sup:
            await trio.sleep(1)
            status = sup.status()["x"]
            assert (status.state, status.next_restart_at) == (ChildState.RESTARTING, 30.0)
        assert trio.current_time() == 1.0
        assert sup.status()["x"].state is ChildState.STOPPED
        assert sup.status()["x"].next_restart_at is None
    assert rec.times("x") == [0.0, 0.0]


async def test_shutdown_interrupts_a_child_still_starting(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    """A start_child stuck in a slow startup is abandoned when the supervisor stops."""
    started_stopping = trio.Event()

    async def never_ready(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await trio.sleep_forever()
        finally:
            rec.note("slow", "stop")

    with trio.fail_after(100):
        async with trio.open_nursery() as outside:
            async with open_supervisor(SupervisorSpec(intensity=None)) as sup:

                async def add() -> None:
                    await sup.start_child(ChildSpec(id="slow", start=never_ready))
                    started_stopping.set()

                outside.start_soon(add)
                await trio.sleep(2)
                assert sup.status()["slow"].state is ChildState.STARTING
            await started_stopping.wait()
            assert trio.current_time() == 2.0
            assert sup.status()["slow"].state is ChildState.STOPPED
    assert rec.events == [(2.0, "slow", "stop")]


async def test_base_exceptions_propagate_and_are_not_restarted(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    async def interrupted(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        rec.note("k", "start")
        task_status.started()
        await trio.sleep(1)
        raise KeyboardInterrupt

    specs = [ChildSpec(id="a", start=rec.forever("a")), ChildSpec(id="k", start=interrupted)]

    async def supervise() -> None:
        async with open_supervisor(SupervisorSpec(intensity=None), specs):
            await trio.sleep_forever()

    with trio.fail_after(100), pytest.raises(BaseExceptionGroup) as info:
        await supervise()
    assert info.value.subgroup(KeyboardInterrupt) is not None
    assert rec.times("k") == [0.0]
    assert rec.times("a", "stop") == [1.0]

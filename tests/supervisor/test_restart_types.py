"""Restart types and intensity: permanent, transient, temporary, failed, escalation."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import attrs
import pytest
import trio
import trio.testing

from assern.supervisor.exits import Shutdown
from assern.supervisor.spec import ChildSpec, Restart, RestartPolicy, Strategy, SupervisorSpec
from assern.supervisor.supervisor import (
    ChildExhausted,
    ChildState,
    ChildStatus,
    SupervisorExhausted,
    open_supervisor,
)

if TYPE_CHECKING:
    from supervised_children import Recorder

#: no supervisor-wide limit: these tests are about each child's own policy
PER_CHILD = SupervisorSpec(strategy=Strategy.ONE_FOR_ONE, intensity=None)


def policy(
    restart: Restart = Restart.PERMANENT,
    *,
    max_restarts: int = 3,
    restart_window: float = 60.0,
    jitter: float = 0.0,
) -> RestartPolicy:
    """The worked example's policy: the first restart is immediate, then backoff 1, 2, 4, 8, 8, ... s."""
    return RestartPolicy(
        restart=restart,
        max_restarts=max_restarts,
        restart_window=restart_window,
        backoff_initial=1.0,
        backoff_max=8.0,
        jitter=jitter,
    )


async def test_worked_example(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    """max_restarts=3, window 60, backoff 1..8: starts at 0, 0, 1, 3; failed at 3."""
    spec = ChildSpec(id="w", start=rec.crashing("w"), policy=policy())
    with trio.fail_after(100):
        async with open_supervisor(PER_CHILD, [spec], on_change=rec.on_change) as sup:
            await trio.sleep(50)
            status = sup.status()["w"]
    assert rec.times("w") == [0.0, 0.0, 1.0, 3.0]
    assert status.state is ChildState.FAILED
    assert status.restarts == 3
    assert status.next_restart_at is None
    assert status.started_at is None
    assert status.last_exit == "crashed: RuntimeError('boom')"
    assert isinstance(status.last_error, RuntimeError)
    failed_at = [rec.changes.index(c) for c in rec.changes if c.state is ChildState.FAILED]
    assert len(failed_at) == 1
    # The FAILED snapshot is published at the fourth crash, at t = 3 (no time passes).
    assert rec.events[-2:] == [(3.0, "w", "crash"), (3.0, "w", "stop")]


async def test_on_change_sequence(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    # Crashes 0.5s after each start; two restarts, so the second one waits a real backoff:
    # crash at 0.5, restart at once; crash at 1, restart at 2; crash at 2.5, failed.
    spec = ChildSpec(id="w", start=rec.crashing("w", after=0.5), policy=policy(max_restarts=2))
    with trio.fail_after(100):
        async with open_supervisor(PER_CHILD, [spec], on_change=rec.on_change):
            await trio.sleep(50)
    crash = "crashed: RuntimeError('boom')"
    error_free = [attrs_without_error(c) for c in rec.changes]
    assert error_free == [
        ChildStatus(id="w", state=ChildState.STARTING, started_at=0.0),
        ChildStatus(id="w", state=ChildState.RUNNING, started_at=0.0),
        ChildStatus(id="w", state=ChildState.RESTARTING, next_restart_at=0.5, last_exit=crash),
        ChildStatus(id="w", state=ChildState.STARTING, restarts=1, started_at=0.5, last_exit=crash),
        ChildStatus(id="w", state=ChildState.RUNNING, restarts=1, started_at=0.5, last_exit=crash),
        ChildStatus(id="w", state=ChildState.RESTARTING, restarts=1, next_restart_at=2.0, last_exit=crash),
        ChildStatus(id="w", state=ChildState.STARTING, restarts=2, started_at=2.0, last_exit=crash),
        ChildStatus(id="w", state=ChildState.RUNNING, restarts=2, started_at=2.0, last_exit=crash),
        ChildStatus(id="w", state=ChildState.FAILED, restarts=2, last_exit=crash),
    ]
    assert all(isinstance(c.last_error, RuntimeError) for c in rec.changes[2:])


def attrs_without_error(status: ChildStatus) -> ChildStatus:
    return attrs.evolve(status, last_error=None)


@pytest.mark.parametrize("max_restarts", [0, 1, 3])
async def test_always_crashing_child_starts_max_restarts_plus_one_times(
    autojump_clock: trio.testing.MockClock, rec: Recorder, max_restarts: int
) -> None:
    spec = ChildSpec(id="w", start=rec.crashing("w"), policy=policy(max_restarts=max_restarts))
    with trio.fail_after(100):
        async with open_supervisor(PER_CHILD, [spec]) as sup:
            await trio.sleep(60)
            assert sup.status()["w"].state is ChildState.FAILED
    assert len(rec.times("w")) == max_restarts + 1


async def test_window_slides_so_slow_crashes_never_fail(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    # Crashes 10s after each start, window 5s: the ledger never holds more than one entry.
    spec = ChildSpec(
        id="w", start=rec.crashing("w", after=10.0), policy=policy(max_restarts=1, restart_window=5.0)
    )
    with trio.fail_after(200):
        async with open_supervisor(PER_CHILD, [spec]) as sup:
            # mid-incarnation, not at a crash (t = 100 would tie with the tenth crash)
            await trio.sleep(95)
            assert sup.status()["w"].state is ChildState.RUNNING
    # every restart is the first in its window, so immediate: starts every 10s (with a
    # window that did not slide, the second crash would find max_restarts=1 used up)
    assert rec.times("w") == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0]


async def test_permanent_restarts_after_normal_exit(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    spec = ChildSpec(id="p", start=rec.returning("p", after=2.0), policy=policy(max_restarts=2))
    with trio.fail_after(100):
        async with open_supervisor(PER_CHILD, [spec]) as sup:
            await trio.sleep(50)
            status = sup.status()["p"]
    # runs 2s, restarted at once, then after a 1s backoff: starts at 0, 2, 5; third exit at 7 exhausts
    assert rec.times("p") == [0.0, 2.0, 5.0]
    assert status.state is ChildState.FAILED
    assert status.last_exit == "exited normally"


@pytest.mark.parametrize("error", [None, Shutdown])
async def test_transient_stays_down_after_normal_exit(
    autojump_clock: trio.testing.MockClock, rec: Recorder, error: type[Exception] | None
) -> None:
    spec = ChildSpec(
        id="t", start=rec.returning("t", after=2.0, error=error), policy=policy(Restart.TRANSIENT)
    )
    with trio.fail_after(100):
        async with open_supervisor(PER_CHILD, [spec]) as sup:
            await trio.sleep(50)
            status = sup.status()["t"]
    assert rec.times("t") == [0.0]
    assert status.state is ChildState.STOPPED
    assert status.last_exit == "exited normally"
    assert status.restarts == 0


async def test_transient_restarts_after_crash(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    spec = ChildSpec(id="t", start=rec.crashing("t", times=2), policy=policy(Restart.TRANSIENT))
    with trio.fail_after(100):
        async with open_supervisor(PER_CHILD, [spec]) as sup:
            await trio.sleep(50)
            status = sup.status()["t"]
    # crashes at 0 (restarted at once) and at 0 again (restarted after 1s)
    assert rec.times("t") == [0.0, 0.0, 1.0]
    assert status.state is ChildState.RUNNING
    assert status.restarts == 2


async def test_temporary_is_never_restarted(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    spec = ChildSpec(id="tmp", start=rec.crashing("tmp", after=1.0), policy=policy(Restart.TEMPORARY))
    with trio.fail_after(100):
        async with open_supervisor(PER_CHILD, [spec]) as sup:
            await trio.sleep(50)
            status = sup.status()["tmp"]
    assert rec.times("tmp") == [0.0]
    assert status.state is ChildState.STOPPED
    assert status.last_exit == "crashed: RuntimeError('boom')"


@pytest.mark.parametrize("strategy", list(Strategy))
async def test_failed_child_without_escalation_leaves_siblings_running(
    autojump_clock: trio.testing.MockClock, rec: Recorder, strategy: Strategy
) -> None:
    specs = [
        ChildSpec(id="a", start=rec.forever("a")),
        ChildSpec(id="bad", start=rec.crashing("bad", after=0.5), policy=policy(max_restarts=1)),
        ChildSpec(id="c", start=rec.forever("c")),
    ]
    with trio.fail_after(1000):
        async with open_supervisor(SupervisorSpec(strategy=strategy, intensity=None), specs) as sup:
            await trio.sleep(500)
            states = {cid: s.state for cid, s in sup.status().items()}
    assert states == {"a": ChildState.RUNNING, "bad": ChildState.FAILED, "c": ChildState.RUNNING}
    # bad crashes at 0.5 and restarts at once, taking its strategy's siblings along;
    # it crashes again at 1.0 and fails, which takes nobody down.
    assert rec.times("bad") == [0.0, 0.5]
    assert rec.times("a") == ([0.0, 0.5] if strategy is Strategy.ONE_FOR_ALL else [0.0])
    assert rec.times("c") == ([0.0] if strategy is Strategy.ONE_FOR_ONE else [0.0, 0.5])
    expected_stops = {
        Strategy.ONE_FOR_ONE: ["bad", "bad", "c", "a"],
        Strategy.ONE_FOR_ALL: ["bad", "c", "a", "bad", "c", "a"],
        Strategy.REST_FOR_ONE: ["bad", "c", "bad", "c", "a"],
    }
    assert rec.order("stop") == expected_stops[strategy]
    # the last three stops are the shutdown at t = 500
    assert [t for t, _, what in rec.events if what == "stop"][-2:] == [500.0, 500.0]


async def test_escalation_stops_everything_and_names_the_child(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    specs = [
        ChildSpec(id="a", start=rec.forever("a")),
        ChildSpec(
            id="core", start=rec.crashing("core", after=1.0), policy=policy(max_restarts=2), escalate=True
        ),
        ChildSpec(id="c", start=rec.forever("c")),
    ]
    body_cancelled = False

    async def supervise() -> None:
        nonlocal body_cancelled
        async with open_supervisor(PER_CHILD, specs):
            try:
                await trio.sleep_forever()
            finally:
                body_cancelled = True

    message = r"^child 'core' exceeded 2 restarts within 60s and escalates"
    with trio.fail_after(100), pytest.raises(ChildExhausted, match=message) as info:
        await supervise()
    # crashes at 1, restart at once; crash at 2, restart at 3; crash at 4: exhausted at t = 4
    assert rec.times("core") == [0.0, 1.0, 3.0]
    assert trio.current_time() == 4.0
    assert body_cancelled
    assert info.value.child_id == "core"
    assert isinstance(info.value.__cause__, RuntimeError)
    assert rec.order("stop") == ["core", "core", "core", "c", "a"]


async def test_supervisor_wide_intensity(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    sup_spec = SupervisorSpec(strategy=Strategy.ONE_FOR_ONE, intensity=2, period=10.0)
    specs = [
        ChildSpec(id="a", start=rec.forever("a")),
        ChildSpec(id="x", start=rec.crashing("x"), policy=policy(max_restarts=100)),
        ChildSpec(id="y", start=rec.forever("y")),
    ]
    with trio.fail_after(100):
        with pytest.raises(SupervisorExhausted, match=r"^more than 2 restarts within 10s") as info:
            async with open_supervisor(sup_spec, specs):
                await trio.sleep_forever()
    # x crashes at 0 (restart at once), at 0 (restart at 1), at 1: third restart in 10s
    assert rec.times("x") == [0.0, 0.0, 1.0]
    assert trio.current_time() == 1.0
    assert info.value.child_id == "x"
    assert rec.order("stop")[-2:] == ["y", "a"]


async def test_supervisor_wide_intensity_allows_spread_out_restarts(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    sup_spec = SupervisorSpec(intensity=1, period=5.0)
    spec = ChildSpec(
        id="x", start=rec.crashing("x", after=10.0), policy=policy(max_restarts=100, restart_window=1.0)
    )
    with trio.fail_after(100):
        async with open_supervisor(sup_spec, [spec]) as sup:
            # mid-incarnation, not at a crash (t = 50 would tie with the fifth crash)
            await trio.sleep(45)
            assert sup.status()["x"].state is ChildState.RUNNING
    # crashes every 10s, each restart immediate: never two restarts within 5s
    assert rec.times("x") == [0.0, 10.0, 20.0, 30.0, 40.0]


async def test_jitter_comes_from_the_injected_random(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    spec = ChildSpec(id="j", start=rec.crashing("j", times=3), policy=policy(jitter=0.5))
    with trio.fail_after(100):
        async with open_supervisor(PER_CHILD, [spec], rng=random.Random(0)):
            await trio.sleep(50)
    draws = random.Random(0)
    draws.random()  # drawn for the first restart too, which is immediate (no jitter)
    first = 1.0 * (1 + 0.5 * draws.random())
    second = first + 2.0 * (1 + 0.5 * draws.random())
    assert rec.times("j") == [0.0, 0.0, first, second]
    assert rec.times("j") == [0.0, 0.0, 1.3789772014701511, 3.799548782300996]


async def test_escalation_while_starting_up(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    """A core child that cannot even start: open_supervisor raises, later children never start."""
    specs = [
        ChildSpec(id="a", start=rec.forever("a")),
        ChildSpec(
            id="core",
            start=rec.crashing("core", before_started=True),
            policy=policy(max_restarts=0),
            escalate=True,
        ),
        ChildSpec(id="late", start=rec.forever("late")),
    ]
    reached_body = False

    async def supervise() -> None:
        nonlocal reached_body
        async with open_supervisor(PER_CHILD, specs):
            reached_body = True

    with trio.fail_after(100), pytest.raises(ChildExhausted, match=r"^child 'core' exceeded 0 restarts"):
        await supervise()
    assert not reached_body
    assert rec.events == [
        (0.0, "a", "start"),
        (0.0, "core", "start"),
        (0.0, "core", "crash"),
        (0.0, "core", "stop"),
        (0.0, "a", "stop"),
    ]

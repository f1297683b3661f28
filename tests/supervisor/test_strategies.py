"""Strategies: who is terminated (reverse order) and restarted (start order) with whom."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
import trio.testing

from assern.supervisor.spec import ChildSpec, Restart, RestartPolicy, Strategy, SupervisorSpec
from assern.supervisor.supervisor import ChildState, open_supervisor

if TYPE_CHECKING:
    from supervised_children import Recorder

#: the first restart is immediate, every further one within the window waits 1s
ONE_SECOND = RestartPolicy(backoff_initial=1.0, backoff_max=1.0, jitter=0.0)


def four(rec: Recorder, *, crashes: int = 1) -> list[ChildSpec]:
    """a, b, c, d; b crashes `crashes` times, 5s into each incarnation (once: at t=5)."""
    return [
        ChildSpec(id="a", start=rec.forever("a")),
        ChildSpec(id="b", start=rec.crashing("b", after=5.0, times=crashes), policy=ONE_SECOND),
        ChildSpec(id="c", start=rec.forever("c")),
        ChildSpec(id="d", start=rec.forever("d")),
    ]


async def run(rec: Recorder, strategy: Strategy) -> dict[str, ChildState]:
    with trio.fail_after(100):
        async with open_supervisor(SupervisorSpec(strategy=strategy, intensity=None), four(rec)) as sup:
            await trio.sleep(10)
            states = {cid: s.state for cid, s in sup.status().items()}
            assert sup.status()["b"].restarts == 1
    return states


def during_restart(rec: Recorder) -> list[tuple[float, str, str]]:
    """What happened between b's crash (t=5, restarted at once) and the shutdown (t=10)."""
    return [e for e in rec.events if 5.0 <= e[0] < 10.0]


async def test_one_for_one(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    states = await run(rec, Strategy.ONE_FOR_ONE)
    assert set(states.values()) == {ChildState.RUNNING}
    assert during_restart(rec) == [(5.0, "b", "crash"), (5.0, "b", "stop"), (5.0, "b", "start")]


async def test_one_for_all(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    states = await run(rec, Strategy.ONE_FOR_ALL)
    assert set(states.values()) == {ChildState.RUNNING}
    assert during_restart(rec) == [
        (5.0, "b", "crash"),
        (5.0, "b", "stop"),
        (5.0, "d", "stop"),
        (5.0, "c", "stop"),
        (5.0, "a", "stop"),
        (5.0, "a", "start"),
        (5.0, "b", "start"),
        (5.0, "c", "start"),
        (5.0, "d", "start"),
    ]


async def test_rest_for_one(autojump_clock: trio.testing.MockClock, rec: Recorder) -> None:
    states = await run(rec, Strategy.REST_FOR_ONE)
    assert set(states.values()) == {ChildState.RUNNING}
    assert during_restart(rec) == [
        (5.0, "b", "crash"),
        (5.0, "b", "stop"),
        (5.0, "d", "stop"),
        (5.0, "c", "stop"),
        (5.0, "b", "start"),
        (5.0, "c", "start"),
        (5.0, "d", "start"),
    ]
    assert rec.times("a") == [0.0]


async def test_siblings_wait_in_restarting_state(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    with trio.fail_after(100):
        spec = SupervisorSpec(strategy=Strategy.REST_FOR_ONE, intensity=None)
        # b crashes at 5 (restarted at once, with c and d) and again at 10: that second
        # restart waits 1s, and c and d wait with it.
        async with open_supervisor(spec, four(rec, crashes=2)) as sup:
            await trio.sleep(10.5)
            status = sup.status()
            assert {cid: s.state for cid, s in status.items()} == {
                "a": ChildState.RUNNING,
                "b": ChildState.RESTARTING,
                "c": ChildState.RESTARTING,
                "d": ChildState.RESTARTING,
            }
            assert [status[cid].next_restart_at for cid in "bcd"] == [11.0, 11.0, 11.0]
            assert status["c"].last_exit == "terminated"
            assert status["b"].last_exit == "crashed: RuntimeError('boom')"


async def test_temporary_sibling_is_not_restarted(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    specs = four(rec)
    specs[2] = ChildSpec(id="c", start=rec.forever("c"), policy=RestartPolicy(restart=Restart.TEMPORARY))
    with trio.fail_after(100):
        async with open_supervisor(
            SupervisorSpec(strategy=Strategy.ONE_FOR_ALL, intensity=None), specs
        ) as sup:
            await trio.sleep(10)
            status = sup.status()
    assert rec.times("c") == [0.0]
    assert status["c"].state is ChildState.STOPPED
    assert status["c"].last_exit == "terminated"
    assert rec.times("d") == [0.0, 5.0]


async def test_transient_sibling_is_restarted_with_the_group(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    specs = four(rec)
    specs[3] = ChildSpec(id="d", start=rec.forever("d"), policy=RestartPolicy(restart=Restart.TRANSIENT))
    with trio.fail_after(100):
        async with open_supervisor(SupervisorSpec(strategy=Strategy.REST_FOR_ONE, intensity=None), specs):
            await trio.sleep(10)
    assert rec.times("d") == [0.0, 5.0]


async def test_early_failure_during_startup_queues_later_children(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    """rest_for_one: children after one whose first start failed start after it, in order."""
    # config fails its first two starts: the first restart is immediate, the second waits
    # 1s (due at t=1), and router and listener queue behind it.
    specs = [
        ChildSpec(id="config", start=rec.crashing("config", before_started=True, times=2), policy=ONE_SECOND),
        ChildSpec(id="router", start=rec.forever("router")),
        ChildSpec(id="listener", start=rec.forever("listener")),
    ]
    with trio.fail_after(100):
        spec = SupervisorSpec(strategy=Strategy.REST_FOR_ONE, intensity=None)
        async with open_supervisor(spec, specs) as sup:
            queued = [ChildState.RESTARTING, ChildState.STARTING, ChildState.STARTING]
            status = sup.status()
            assert [status[c].state for c in ("config", "router", "listener")] == queued
            await trio.sleep(0.5)  # config's second start has failed by now
            status = sup.status()
            assert [status[c].state for c in ("config", "router", "listener")] == queued
            assert [status[c].next_restart_at for c in ("config", "router", "listener")] == [1.0, 1.0, 1.0]
            assert status["router"].started_at is None
            await trio.sleep(10)
            assert {s.state for s in sup.status().values()} == {ChildState.RUNNING}
            assert sup.status()["router"].restarts == 0
    assert [(t, cid) for t, cid, what in rec.events if what == "start"] == [
        (0.0, "config"),
        (0.0, "config"),
        (1.0, "config"),
        (1.0, "router"),
        (1.0, "listener"),
    ]


async def test_one_for_one_early_failure_does_not_hold_back_others(
    autojump_clock: trio.testing.MockClock, rec: Recorder
) -> None:
    # x fails its first two starts, so its second restart is due only at 1; y does not wait.
    specs = [
        ChildSpec(id="x", start=rec.crashing("x", before_started=True, times=2), policy=ONE_SECOND),
        ChildSpec(id="y", start=rec.forever("y")),
    ]
    with trio.fail_after(100):
        async with open_supervisor(SupervisorSpec(intensity=None), specs):
            await trio.sleep(10)
    assert rec.times("x") == [0.0, 0.0, 1.0]
    assert rec.times("y") == [0.0]

"""Exit classification: Normal, Terminated, Crashed, and what must propagate instead."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

from assern.supervisor.exits import (
    Crashed,
    Exit,
    Normal,
    Shutdown,
    Terminated,
    classify_error,
    run_child,
    wants_restart,
)
from assern.supervisor.spec import Restart


def test_classify_error() -> None:
    boom = RuntimeError("boom")
    assert classify_error(Shutdown()) == Normal()
    assert classify_error(boom) == Crashed(boom)
    assert classify_error(ExceptionGroup("g", [Shutdown(), Shutdown()])) == Normal()
    mixed = ExceptionGroup("g", [Shutdown(), ValueError("v")])
    assert classify_error(mixed) == Crashed(mixed)


def test_describe() -> None:
    assert Normal().describe() == "exited normally"
    assert Terminated().describe() == "terminated"
    assert Crashed(RuntimeError("boom")).describe() == "crashed: RuntimeError('boom')"
    long = Crashed(ValueError("x" * 500)).describe()
    assert len(long) == len("crashed: ") + 200
    assert long.endswith("…")


@pytest.mark.parametrize(
    ("restart", "ended", "expected"),
    [
        (Restart.PERMANENT, Normal(), True),
        (Restart.PERMANENT, Crashed(RuntimeError()), True),
        (Restart.PERMANENT, Terminated(), False),
        (Restart.TRANSIENT, Normal(), False),
        (Restart.TRANSIENT, Crashed(RuntimeError()), True),
        (Restart.TRANSIENT, Terminated(), False),
        (Restart.TEMPORARY, Normal(), False),
        (Restart.TEMPORARY, Crashed(RuntimeError()), False),
        (Restart.TEMPORARY, Terminated(), False),
    ],
)
def test_wants_restart(restart: Restart, ended: Exit, expected: bool) -> None:
    assert wants_restart(restart, ended) is expected


async def _run(body: Callable[[], Awaitable[object]], scope: trio.CancelScope | None = None) -> Exit:
    async def start(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await body()

    return await run_child(start, scope or trio.CancelScope(), trio.TASK_STATUS_IGNORED)


async def test_run_child_normal_and_crash_and_shutdown() -> None:
    async def ok() -> None:
        await trio.lowlevel.checkpoint()

    async def boom() -> None:
        raise RuntimeError("boom")

    async def stop() -> None:
        raise Shutdown

    async def group() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(boom)

    assert await _run(ok) == Normal()
    crashed = await _run(boom)
    assert isinstance(crashed, Crashed)
    assert repr(crashed.error) == "RuntimeError('boom')"
    assert await _run(stop) == Normal()
    grouped = await _run(group)
    assert isinstance(grouped, Crashed)
    assert isinstance(grouped.error, ExceptionGroup)


async def test_run_child_terminated_by_own_scope(autojump_clock: trio.testing.MockClock) -> None:
    scope = trio.CancelScope()
    scope.cancel()
    with trio.fail_after(5):
        assert await _run(trio.sleep_forever, scope) == Terminated()


async def test_run_child_never_swallows_outer_cancellation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    reached_end = False
    with trio.fail_after(5), trio.move_on_after(1) as outer:
        await _run(trio.sleep_forever)
        reached_end = True
    assert outer.cancelled_caught
    assert not reached_end
    assert trio.current_time() == 1.0


async def test_run_child_lets_base_exceptions_through() -> None:
    async def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await _run(interrupted)

"""Runs `async def` tests under trio (trio's own plugin pattern, no extra dependency).

A test that asks for `autojump_clock` runs on `MockClock(autojump_threshold=0)`: virtual
time that jumps whenever every task is blocked, for restarts, backoff and timeouts.
Never use it with real processes or sockets.
"""

from __future__ import annotations

import inspect

import pytest
import trio
import trio.testing


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


@pytest.fixture
def mock_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> None:
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        pyfuncitem.obj = trio.testing.trio_test(pyfuncitem.obj)

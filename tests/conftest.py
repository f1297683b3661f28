"""Runs `async def` tests under trio (trio's own plugin pattern, no extra dependency).

A test that asks for `autojump_clock` runs on `MockClock(autojump_threshold=0)`: virtual
time that jumps whenever every task is blocked, for restarts, backoff and timeouts.
Never use it with real processes or sockets.

A test marked `needs_tool` (tests/support/needed_tools.py: under CI, a test whose program
is missing) fails before it runs.
"""

from __future__ import annotations

import inspect

import pytest
import trio
import trio.testing
from needed_tools import fail_when_missing


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


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs_tool"):
        fail_when_missing(mark.kwargs["missing"])

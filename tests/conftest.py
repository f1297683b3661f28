"""Runs `async def` tests under trio (trio's own plugin pattern, no extra dependency).

A test that asks for `autojump_clock` runs on `MockClock(autojump_threshold=0)`: virtual
time that jumps whenever every task is blocked, for restarts, backoff and timeouts.
Never use it with real processes or sockets.

`--numprocesses=auto` (pyproject.toml) runs one worker more than the machine has cores:
the end-to-end tests spend part of their time waiting on the processes they start, and
the extra worker fills those gaps (on 2 cores: 9:52 against 10:46-10:56 with two).
"""

from __future__ import annotations

import inspect
import os

import pytest
import trio
import trio.testing


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores + 1


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

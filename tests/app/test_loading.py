"""Loading modules without the collector's full passes (app/loading.py)."""

from __future__ import annotations

import gc
import importlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from assern.app.loading import DEFERRED, FullCollectionsDeferred

FOUND = (700, 10, 10)


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    """Each test starts from CPython's default thresholds; the process's own come back."""
    before = gc.get_threshold()
    gc.set_threshold(*FOUND)
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_full_passes_wait_for_the_end_of_the_block_and_what_it_loaded_is_frozen() -> None:
    gc.unfreeze()
    with FullCollectionsDeferred():
        assert gc.get_threshold() == (700, 10, DEFERRED)
        loaded = [[n] for n in range(1000)]  # objects the collector tracks
    assert gc.get_threshold() == FOUND
    assert gc.get_freeze_count() >= len(loaded)


def test_overlapping_blocks_leave_the_thresholds_found_before_the_first() -> None:
    first, second = FullCollectionsDeferred(), FullCollectionsDeferred()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first ends before the second
    second.__exit__(None, None, None)
    assert gc.get_threshold() == FOUND
    first.__enter__()
    second.__enter__()
    second.__exit__(None, None, None)  # nested: inner first
    assert gc.get_threshold()[2] == DEFERRED
    first.__exit__(None, None, None)
    assert gc.get_threshold() == FOUND


def test_a_failed_import_restores_the_thresholds() -> None:
    with pytest.raises(ModuleNotFoundError), FullCollectionsDeferred():
        importlib.import_module("assern.no_such_module")
    assert gc.get_threshold() == FOUND


def printed_by(code: str) -> list[str]:
    """The words a fresh interpreter prints running `code`."""
    argv = [sys.executable, "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout.split()


def test_structlog_is_imported_without_greenlet_which_still_imports_afterwards() -> None:
    code = (
        "import sys\n"
        "from assern.app.loading import import_structlog_lean\n"
        "import_structlog_lean()\n"
        "import structlog\n"
        "print('structlog' in sys.modules, 'greenlet' in sys.modules)\n"
        "structlog.contextvars.bind_contextvars(fine=1)\n"
        "import greenlet\n"
        "print(greenlet.getcurrent() is not None)\n"
    )
    assert printed_by(code) == ["True", "False", "True"]


def test_structlog_leaves_asyncio_unloaded_until_a_name_of_it_is_used() -> None:
    code = (
        "import sys\n"
        "from assern.app.loading import import_structlog_lean\n"
        "import_structlog_lean()\n"
        "import structlog.stdlib\n"
        "print('asyncio' in sys.modules, 'concurrent.futures' in sys.modules)\n"
        "loop = structlog.stdlib.asyncio.new_event_loop()\n"  # structlog's own name for it
        "import asyncio\n"
        "print(isinstance(loop, asyncio.AbstractEventLoop), sys.modules['asyncio'] is asyncio)\n"
        "print(asyncio.run(asyncio.sleep(0, 'ran')))\n"
    )
    assert printed_by(code) == ["False", "False", "True", "True", "ran"]


def test_an_asyncio_imported_first_is_left_alone() -> None:
    code = (
        "import sys, asyncio\n"
        "from assern.app.loading import import_structlog_lean\n"
        "import_structlog_lean()\n"
        "import structlog.stdlib\n"
        "print(structlog.stdlib.asyncio is asyncio, sys.modules['asyncio'] is asyncio)\n"
    )
    assert printed_by(code) == ["True", "True"]


def test_logging_asks_asyncio_for_task_names_again_afterwards() -> None:
    code = (
        "import logging\n"
        "before = getattr(logging, 'logAsyncioTasks', None)\n"
        "from assern.app.loading import import_structlog_lean\n"
        "import_structlog_lean()\n"
        "print(getattr(logging, 'logAsyncioTasks', None) == before)\n"
    )
    assert printed_by(code) == ["True"]

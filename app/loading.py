"""Loading assern's modules without the garbage collector's full passes.

A start imports the protocol's models: hundreds of pydantic classes, a million objects
that live as long as the process. While the heap grows, CPython's collector makes a
full pass each time it grew by a quarter, walking every object made so far: several
walks of the whole heap for nothing, as none of them is garbage. That is about a ninth
of the CPU of a start (the imports of `assern serve --http`: 1.96 s to 1.74 s).

`FullCollectionsDeferred()` keeps the young passes (the import's own short-lived
cycles are still freed: the peak RSS stays within 0.3 MB of a start with the collector
untouched, where turning it off altogether, 1.61 s, cost 2 MB) and defers the full
ones until the block ends; then it freezes what exists (`gc.freeze`: moved to a
permanent generation that later passes skip, so a full collection in a process that
runs for days walks only what it made since, not the models again). Standard library
only: the quick path of app/quick.py uses it.
"""

from __future__ import annotations

import gc
import importlib
import sys
import types
from typing import Any

#: logging's switch (Python 3.12+) for asking asyncio a record's task name.
LOG_ASYNCIO_TASKS = "logAsyncioTasks"
#: A full-collection threshold never reached while a block runs.
DEFERRED = 1 << 30


class FullCollectionsDeferred:
    """`with FullCollectionsDeferred(): import …` — no full collection during the block,
    and what it loaded is frozen after it. Blocks may overlap (an import in a worker
    thread): the thresholds found before the first are the ones left after the last."""

    __slots__ = ("_found",)

    def __init__(self) -> None:
        self._found: tuple[int, int, int] = (0, 0, 0)

    def __enter__(self) -> None:
        self._found = gc.get_threshold()
        young, middle, _ = self._found
        gc.set_threshold(young, middle, DEFERRED)

    def __exit__(self, *exc_info: object) -> None:
        if self._found[2] != DEFERRED:  # else another block, still open, restores them
            gc.set_threshold(*self._found)
        gc.freeze()


def import_structlog_lean() -> None:
    """Import structlog with `greenlet` hidden and `asyncio` left for later, unless
    structlog is loaded already.

    structlog imports its deprecated `threadlocal` module on import, which imports
    greenlet when it is installed (trio-asyncio, used only by asyncio middlewares, installs
    it): 1.4 MB resident in every instance, for a thread-local replacement assern never
    uses. Hidden, structlog takes `threading.local` instead; greenlet imports normally
    afterwards, for trio-asyncio when an asyncio middleware is configured.

    structlog's standard-library and native loggers import `asyncio` at the top of their
    modules for their asynchronous methods only, which assern never calls: 1.4 MB more
    (asyncio and `concurrent.futures`) in a trio process. While structlog loads, they are
    given a stand-in that imports asyncio the first time one of its names is used;
    afterwards `import asyncio` is the real one as usual (trio-asyncio's, for one).
    """
    if "structlog" in sys.modules:
        return
    stand_in = None if "asyncio" in sys.modules else LoadedOnUse("asyncio")
    if stand_in is not None:
        sys.modules["asyncio"] = stand_in
    hide_greenlet = "greenlet" not in sys.modules
    if hide_greenlet:
        sys.modules["greenlet"] = None  # type: ignore[assignment]  # an import of it raises ImportError
    # structlog makes a LogRecord on import; from Python 3.12 one asks any asyncio found in
    # sys.modules for its current task, which would load it through the stand-in.
    import logging

    task_names = getattr(logging, LOG_ASYNCIO_TASKS, None)
    setattr(logging, LOG_ASYNCIO_TASKS, False)
    try:
        import structlog  # noqa: F401
    finally:
        if task_names is not None:
            setattr(logging, LOG_ASYNCIO_TASKS, task_names)
        else:
            delattr(logging, LOG_ASYNCIO_TASKS)
        if hide_greenlet:
            del sys.modules["greenlet"]
        if stand_in is not None and sys.modules.get("asyncio") is stand_in:
            del sys.modules["asyncio"]


class LoadedOnUse(types.ModuleType):
    """Stands in for a module not imported yet: the first name looked up on it imports
    the module (which then replaces it in `sys.modules`) and answers from it."""

    def __getattr__(self, attr: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)

"""Loading assern's modules without the cyclic garbage collector.

A start imports the protocol's models: hundreds of pydantic classes, a million objects
that live as long as the process. CPython's collector makes a young-generation pass
every 700 allocations and walks these objects again and again while they are being
created, for nothing: none of them is garbage. That is about a sixth of the CPU of a
start (`assern serve` with the HTTP front: 1.84 s to 1.57 s of imports).

`Uncollected()` turns the collector off around an import and, after it, freezes what
exists (`gc.freeze`: moved to a permanent generation that later collections skip, so a
full collection in a process that runs for days walks only what it made since, not the
models again). Standard library only: the quick path of app/quick.py uses it.
"""

from __future__ import annotations

import gc


class Uncollected:
    """`with Uncollected(): import …` — no collector passes during the block, and what it
    loaded is frozen after it. A collector someone else turned off stays off."""

    __slots__ = ("_was_enabled",)

    def __init__(self) -> None:
        self._was_enabled = False

    def __enter__(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        if self._was_enabled:
            gc.enable()
        gc.freeze()

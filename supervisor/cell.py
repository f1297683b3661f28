"""A latest-value cell: one writer replaces an immutable value whole; readers never lock.

Readers take `cell.value` for the current snapshot, or `await cell.changed(seen)` to
wait for a newer one. Nothing queues: a slow reader simply sees the newest value.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import trio

T = TypeVar("T")


class Cell(Generic[T]):
    __slots__ = ("_changed", "_value", "_version")

    def __init__(self, value: T) -> None:
        self._value = value
        self._version = 0
        self._changed = trio.Event()

    @property
    def value(self) -> T:
        return self._value

    @property
    def version(self) -> int:
        return self._version

    def set(self, value: T) -> None:
        """Publish a new value and wake every waiting reader (never blocks)."""
        self._value = value
        self._version += 1
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    async def changed(self, seen: int) -> tuple[int, T]:
        """Wait until the version is newer than `seen`; returns (version, value)."""
        while self._version <= seen:
            await self._changed.wait()
        return self._version, self._value

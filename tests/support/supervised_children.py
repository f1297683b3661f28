"""Fake children for supervisor tests: small async functions that record what they do.

Every record is `(trio time, child id, what)`, so tests assert exact virtual timestamps
and orders. Each incarnation raises a fresh exception (never a shared instance).
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from assern.supervisor.spec import ChildStart
from assern.supervisor.supervisor import ChildStatus

Event = tuple[float, str, str]


class Recorder:
    """Builds child bodies and records their starts, stops and the status changes."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.changes: list[ChildStatus] = []

    def note(self, child_id: str, what: str) -> None:
        self.events.append((trio.current_time(), child_id, what))

    def on_change(self, status: ChildStatus) -> None:
        self.changes.append(status)

    def times(self, child_id: str, what: str = "start") -> list[float]:
        return [t for t, cid, w in self.events if cid == child_id and w == what]

    def order(self, what: str) -> list[str]:
        return [cid for _, cid, w in self.events if w == what]

    def forever(self, child_id: str, *, cleanup: float = 0.0) -> ChildStart:
        """Starts, runs until cancelled; its cleanup takes `cleanup` seconds (shielded)."""

        async def start(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            self.note(child_id, "start")
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                if cleanup:
                    with trio.CancelScope(shield=True):
                        await trio.sleep(cleanup)
                self.note(child_id, "stop")

        return start

    def crashing(
        self,
        child_id: str,
        *,
        after: float = 0.0,
        before_started: bool = False,
        times: int | None = None,
        make_error: Callable[[], Exception] = lambda: RuntimeError("boom"),
    ) -> ChildStart:
        """Crashes `after` seconds into each of its first `times` incarnations (all if None).

        Later incarnations run forever. With `before_started`, it crashes before calling
        `task_status.started()`.
        """
        count = 0

        async def start(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            nonlocal count
            count += 1
            self.note(child_id, "start")
            crash = times is None or count <= times
            try:
                if not (crash and before_started):
                    task_status.started()
                if crash:
                    await trio.sleep(after)
                    self.note(child_id, "crash")
                    raise make_error()
                await trio.sleep_forever()
            finally:
                self.note(child_id, "stop")

        return start

    def returning(
        self, child_id: str, *, after: float = 0.0, error: type[Exception] | None = None
    ) -> ChildStart:
        """Starts, then after `after` seconds returns (or raises `error()`)."""

        async def start(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            self.note(child_id, "start")
            task_status.started()
            await trio.sleep(after)
            self.note(child_id, "exit")
            if error is not None:
                raise error()

        return start

"""A supervisor's own records of its children: incarnations, restart plans, readiness.

Private to supervisor.py; nothing here is part of the public surface.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import trio

from assern.supervisor.exits import Exit
from assern.supervisor.intensity import RestartLedger
from assern.supervisor.spec import ChildSpec
from assern.supervisor.status import ChildState, ChildStatus

if TYPE_CHECKING:
    from collections.abc import Callable


@attrs.define(eq=False)
class Incarnation:
    """One run of a child: its cancel scope and how it ended."""

    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    done: trio.Event = attrs.Factory(trio.Event)
    exit: Exit | None = None


@attrs.define(eq=False)
class Plan:
    """Children waiting, in start order, for one backoff to end before they start."""

    due: float
    members: list[Child] = attrs.Factory(list)
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    executing: bool = False


@attrs.define(eq=False)
class Child:
    spec: ChildSpec
    ledger: RestartLedger
    status: ChildStatus
    current: Incarnation | None = None
    plan: Plan | None = None
    incarnations: int = 0


class Readiness:
    """The `task_status` a child sees: forwards `started()` and reports readiness.

    The value a child passes to `started()` is ignored.
    """

    def __init__(self, task_status: trio.TaskStatus[Exit | None], on_started: Callable[[], None]) -> None:
        self._task_status = task_status
        self._on_started = on_started
        self.called = False

    def started(self, value: object = None) -> None:
        if self.called:
            raise RuntimeError("called 'started' twice on the same task status")
        self.called = True
        self._task_status.started(None)
        self._on_started()


def waiting_state(child: Child) -> ChildState:
    """RESTARTING for a child that ran before, STARTING for one still to start."""
    return ChildState.RESTARTING if child.incarnations else ChildState.STARTING


def stopped_changes(text: str | None) -> dict[str, Any]:
    """Status changes for a child that is down for good; `text` is how it ended."""
    changes: dict[str, Any] = {
        "state": ChildState.STOPPED,
        "next_restart_at": None,
        "started_at": None,
    }
    if text is not None:
        changes["last_exit"] = text
    return changes

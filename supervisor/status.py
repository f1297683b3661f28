"""What a supervisor shows of its children, and the errors it gives up with."""

from __future__ import annotations

import enum

import attrs


class ChildState(enum.Enum):
    STARTING = "starting"  #: launched, `task_status.started()` not called yet (or queued)
    RUNNING = "running"  #: called `task_status.started()`
    RESTARTING = "restarting"  #: down, waiting for its backoff to restart
    FAILED = "failed"  #: exhausted its restart policy; stays down until restarted by hand
    STOPPED = "stopped"  #: down for good: not restarted by its restart type, or shut down


@attrs.frozen(kw_only=True)
class ChildStatus:
    """A snapshot of one child, replaced whole on every change (times are trio times)."""

    id: str
    state: ChildState
    #: incarnations after the first one (automatic and manual restarts)
    restarts: int = 0
    #: when the pending restart is due, while RESTARTING (or STARTING behind a backoff)
    next_restart_at: float | None = None
    #: when the current incarnation was launched, while STARTING or RUNNING
    started_at: float | None = None
    #: how the last incarnation ended, e.g. "crashed: RuntimeError('boom')"
    last_exit: str | None = None
    last_error: Exception | None = attrs.field(default=None, repr=False)


class SupervisorError(Exception):
    """The supervisor gave up: it shut its children down and exits with this error."""


class SupervisorExhausted(SupervisorError):
    """More than `intensity` restarts happened within `period` seconds."""

    def __init__(self, intensity: int, period: float, child_id: str) -> None:
        super().__init__(
            f"more than {intensity} restarts within {period:g}s (the last one for child "
            f"{child_id!r}); the supervisor shut its children down"
        )
        self.intensity = intensity
        self.period = period
        self.child_id = child_id


class ChildExhausted(SupervisorError):
    """A child with `escalate=True` exceeded its own restart policy."""

    def __init__(self, child_id: str, max_restarts: int, restart_window: float) -> None:
        super().__init__(
            f"child {child_id!r} exceeded {max_restarts} restarts within "
            f"{restart_window:g}s and escalates; the supervisor shut its children down"
        )
        self.child_id = child_id

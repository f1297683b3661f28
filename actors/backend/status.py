"""What one backend is doing, as an immutable snapshot its actor replaces whole."""

from __future__ import annotations

import enum
import time

import attrs


class BackendState(enum.Enum):
    LAZY = "lazy"  #: configured, not started yet
    DORMANT = "dormant"  #: stopped after idle_timeout, still listed; the next call starts it
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"  #: waiting for its next attempt (see next_restart_at)
    FAILED = "failed"  #: out of restarts; stays down until restarted by hand
    STOPPED = "stopped"


def dormant_since(status: BackendStatus) -> float | None:
    """When a dormant backend went dormant (epoch seconds); None when it is not dormant."""
    return status.state_since if status.state is BackendState.DORMANT else None


@attrs.frozen(kw_only=True)
class BackendStatus:
    server: str
    transport: str
    state: BackendState = BackendState.STARTING
    pid: int | None = None
    #: wall-clock time (epoch seconds) it entered its current state
    state_since: float = attrs.field(factory=time.time)
    #: wall-clock time (epoch seconds) the current incarnation became ready
    ready_since: float | None = None
    restarts: int = 0
    next_restart_at: float | None = None
    last_exit: str | None = None
    last_error: str | None = None
    tools: int = 0
    resources: int = 0
    prompts: int = 0
    in_flight: int = 0
    calls_total: int = 0
    #: wall-clock time (epoch seconds) its last call ended, or it became ready when no
    #: call came since; None while a call is in flight, and before it was ever ready
    idle_since: float | None = None
    stderr_tail: tuple[str, ...] = ()


#: Restarts after which a backend that is not up again counts as crash-looping: its
#: intensity may never run out when it dies more slowly than `restart_window` allows.
CRASH_LOOP_RESTARTS = 3


def doctor_id(state: str, *, restarts: int, tools: int) -> str | None:
    """The `assernctl doctor` check id for a backend in this state, or None when it is fine.

    `backend.failed`: out of restarts. `backend.crash_loop`: not up, and restarted
    `CRASH_LOOP_RESTARTS` times or more. `backend.no_tools`: ready with no tool to serve.
    The same id goes into the log events and `assernctl status` lines of that problem.

    Args:
        state: A `BackendState` value ("ready", "failed", ...), as status documents carry it.
        restarts: The backend's restarts so far.
        tools: The tools it lists.
    """
    if state == BackendState.FAILED.value:
        return "backend.failed"
    down = state in (BackendState.RESTARTING.value, BackendState.STARTING.value)
    if down and restarts >= CRASH_LOOP_RESTARTS:
        return "backend.crash_loop"
    if state == BackendState.READY.value and tools == 0:
        return "backend.no_tools"
    return None


def doctor_field(status: BackendStatus) -> dict[str, str]:
    """`{"doctor": ID}` for a log event of a backend with a problem `doctor_id` names, else {}."""
    found = doctor_id(status.state.value, restarts=status.restarts, tools=status.tools)
    return {"doctor": found} if found is not None else {}

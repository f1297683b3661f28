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
    stderr_tail: tuple[str, ...] = ()

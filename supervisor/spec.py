"""Supervision vocabulary, in Erlang/OTP's words (values are the words users type in TOML).

`RestartPolicy` is per child (`max_restarts` within `restart_window`, plus our backoff
extension); `SupervisorSpec` is the supervisor's own strategy and intensity.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable

import attrs


class Strategy(enum.Enum):
    ONE_FOR_ONE = "one_for_one"  #: restart only the child that exited
    ONE_FOR_ALL = "one_for_all"  #: restart every child when one exits
    REST_FOR_ONE = "rest_for_one"  #: restart the exited child and those started after it


class Restart(enum.Enum):
    PERMANENT = "permanent"  #: always restarted
    TRANSIENT = "transient"  #: restarted only after a crash
    TEMPORARY = "temporary"  #: never restarted


class ChildKind(enum.Enum):
    WORKER = "worker"
    SUPERVISOR = "supervisor"


@attrs.frozen(kw_only=True)
class RestartPolicy:
    """How one child is restarted: OTP's intensity per child, plus exponential backoff.

    The first restart within `restart_window` is immediate; each further one waits
    `backoff_initial`, doubled per restart up to `backoff_max` (supervisor/intensity.py).
    """

    restart: Restart = Restart.PERMANENT
    max_restarts: int = attrs.field(default=5, validator=attrs.validators.ge(0))
    restart_window: float = attrs.field(default=60.0, validator=attrs.validators.gt(0))
    backoff_initial: float = attrs.field(default=0.1, validator=attrs.validators.ge(0))
    backoff_max: float = attrs.field(default=30.0, validator=attrs.validators.ge(0))
    jitter: float = attrs.field(default=0.1, validator=[attrs.validators.ge(0), attrs.validators.le(1)])


#: A child's body: started with `nursery.start`, it calls `task_status.started()` once ready.
ChildStart = Callable[..., Awaitable[None]]


@attrs.frozen(kw_only=True, eq=False)
class ChildSpec:
    """One supervised child.

    `start` is called as `await start(task_status=...)` for every incarnation. Whatever
    the child needs across restarts (its mailbox) is created once by the spec's owner and
    captured by `start`, so addresses stay valid when the child is restarted.
    `escalate=True` (core actors) makes an exhausted child take its supervisor down;
    `False` (backends) marks it `failed` and leaves it down.
    """

    id: str
    start: ChildStart
    policy: RestartPolicy = RestartPolicy()
    shutdown_timeout: float | None = 5.0
    kind: ChildKind = ChildKind.WORKER
    escalate: bool = False


@attrs.frozen(kw_only=True)
class SupervisorSpec:
    strategy: Strategy = Strategy.ONE_FOR_ONE
    #: supervisor-wide intensity (OTP): more than `intensity` restarts in `period` seconds
    #: makes the supervisor itself exit. `None` turns the supervisor-wide limit off, as the
    #: backends supervisor does (each backend has its own policy).
    intensity: int | None = 1
    period: float = 5.0

"""How one incarnation of a child ended, in OTP's terms.

- `Normal`: the child returned, or raised `Shutdown` (OTP's `normal` and `shutdown`).
- `Terminated`: the supervisor cancelled it through the incarnation's own cancel scope.
  Never a failure, never restarted by itself.
- `Crashed`: any other `Exception`, including an `ExceptionGroup` from the child's nursery.

Anything else (`KeyboardInterrupt`, `SystemExit`, `trio.Cancelled` from an outer scope)
is not an exit: it propagates out of `run_child` untouched and nothing restarts it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import attrs

from assern.supervisor.spec import ChildStart, Restart

if TYPE_CHECKING:
    import trio

#: How much of an error's repr a status line keeps.
_MAX_TEXT = 200


class Shutdown(Exception):
    """Raised by a child to stop normally (OTP's `shutdown` exit reason).

    A transient child that raises it is not restarted; a permanent one is.
    """


@attrs.frozen
class Normal:
    """The child returned, or raised `Shutdown`."""

    def describe(self) -> str:
        return "exited normally"


@attrs.frozen
class Terminated:
    """The supervisor cancelled the child (its own scope caught the cancellation)."""

    def describe(self) -> str:
        return "terminated"


@attrs.frozen
class Crashed:
    """The child raised an exception other than `Shutdown`."""

    error: Exception

    def describe(self) -> str:
        text = repr(self.error)
        if len(text) > _MAX_TEXT:
            text = text[: _MAX_TEXT - 1] + "…"
        return f"crashed: {text}"


Exit: TypeAlias = Normal | Terminated | Crashed


def classify_error(error: Exception) -> Normal | Crashed:
    """`Normal` for `Shutdown` (or a group holding only `Shutdown`), else `Crashed`."""
    if isinstance(error, Shutdown):
        return Normal()
    if isinstance(error, ExceptionGroup):
        _, rest = error.split(Shutdown)
        if rest is None:
            return Normal()
    return Crashed(error)


def wants_restart(restart: Restart, ended: Exit) -> bool:
    """Whether a child with restart type `restart` is restarted after `ended`.

    permanent: after `Normal` or `Crashed`; transient: after `Crashed` only; temporary:
    never. `Terminated` is the supervisor's own doing and never asks for a restart.
    """
    if isinstance(ended, Terminated) or restart is Restart.TEMPORARY:
        return False
    if restart is Restart.TRANSIENT:
        return isinstance(ended, Crashed)
    return True


def error_of(ended: Exit) -> Exception | None:
    """The exception behind a crash, or None."""
    return ended.error if isinstance(ended, Crashed) else None


async def run_child(start: ChildStart, scope: trio.CancelScope, task_status: trio.TaskStatus[None]) -> Exit:
    """Run one incarnation of a child inside `scope` and say how it ended.

    The child is called as `await start(task_status=task_status)`. Cancelling `scope`
    terminates it: that is reported as `Terminated` (unless the child then raised an
    error of its own, which is reported as `Crashed`).

    Cancellation from any outer scope, and every `BaseException` that is not an
    `Exception`, propagates unchanged: this function never swallows `trio.Cancelled`.
    """
    try:
        with scope:
            await start(task_status=task_status)
    except Exception as exc:
        return classify_error(exc)
    if scope.cancel_called:
        return Terminated()
    return Normal()

"""Small generic trio helpers (nothing about supervision in here)."""

from __future__ import annotations

from typing import NoReturn

import trio


async def run_shielded_nursery(
    *, task_status: trio.TaskStatus[trio.Nursery] = trio.TASK_STATUS_IGNORED
) -> None:
    """Run a nursery that outside cancellation cannot reach, and hand it to the starter.

    Start it with `inner = await nursery.start(run_shielded_nursery)`. Tasks spawned in
    `inner` keep running when the enclosing scopes are cancelled, so their owner can stop
    them in an order of its choosing. The owner must always end it with
    `inner.cancel_scope.cancel()` (in a `finally`), or the enclosing nursery never exits.
    """
    async with trio.open_nursery() as nursery:
        nursery.cancel_scope.shield = True
        task_status.started(nursery)
        await trio.sleep_forever()


def sole_member(
    group: BaseExceptionGroup[BaseException], expected: BaseException | None
) -> BaseException | None:
    """`expected` if it is the only exception in `group`, else None.

    A nursery wraps the error of its own body in an exception group; a context manager
    built on a nursery uses this to give its caller the body's error back unwrapped.
    """
    if expected is not None and len(group.exceptions) == 1 and group.exceptions[0] is expected:
        return expected
    return None


def raise_unwrapped(exc: BaseException) -> NoReturn:
    """Raise `exc`, taken out of a group, with its own `__cause__` and `__context__`.

    Raising inside `except* / except BaseExceptionGroup` would otherwise make the group
    its context.
    """
    context = exc.__context__
    try:
        raise exc
    finally:
        exc.__context__ = context


def leaf_errors(exc: BaseException) -> list[BaseException]:
    """Every non-group exception inside `exc` (itself when it is not a group), in order."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for member in exc.exceptions for leaf in leaf_errors(member)]
    return [exc]


def main_error(exc: Exception) -> Exception:
    """The one error that explains `exc`: the first leaf that is not a cancellation.

    Nested task groups (the SDK's, ours) wrap a single failure in layers of groups; a
    status line or log event wants the failure itself.
    """
    for leaf in leaf_errors(exc):
        if isinstance(leaf, Exception):  # trio.Cancelled is a BaseException: never one
            return leaf
    return exc

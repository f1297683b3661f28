"""The asyncio host: the one actor that runs asyncio code, through trio-asyncio.

Middlewares declared `asyncio = true` are asyncio coroutine functions (many useful
client libraries are asyncio-only). They run on one asyncio loop for the whole process,
which this actor opens inside its own task (`trio_asyncio.open_loop()`) only once a
chain holds such a middleware (`want()`), and keeps open until the tree stops. Everyone
else reaches it through its mailbox: `wrap(middleware)` gives a trio function that
sends the call over and waits for the answer, and the middleware's `next` is the rest of
the chain run back on the trio side. Cancelling the trio caller cancels the asyncio
task (an `asyncio.CancelledError` in the middleware) and with it the backend call.
"""

from __future__ import annotations

import warnings
from typing import Any

import attrs
import mcp_types as types
import outcome
import structlog
import trio

from assern.actors.gate.middleware import Call, Middleware, Next
from assern.supervisor.mailbox import ActorGone, Reply, call, open_mailbox, reply_to

log = structlog.get_logger()


@attrs.frozen(eq=False)
class AsyncioCall:
    """One middleware call for the asyncio loop; `scope` is cancelled when the caller leaves."""

    middleware: Middleware
    call: Call
    next: Next
    scope: trio.CancelScope
    reply: Reply[types.CallToolResult]


def _import_trio_asyncio() -> Any:
    """trio-asyncio, imported only when a middleware needs it (it sets a loop policy).

    Its module defines `TrioChildWatcher(asyncio.AbstractChildWatcher)`, and Python 3.12
    and 3.13 warn at that subclassing that `AbstractChildWatcher` is deprecated (removed
    in 3.14). trio-asyncio 0.16.0, its latest release, still does it; the warning is
    about trio-asyncio's code, not ours, and changes nothing until Python 3.14, so that
    one warning is ignored here, for this import only.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="'AbstractChildWatcher' is deprecated", category=DeprecationWarning
        )
        import trio_asyncio

    return trio_asyncio


class AsyncioStopped(Exception):
    """The asyncio loop stopped before the middleware answered."""


class AsyncioHost:
    """The actor that owns the process's asyncio loop (opened on first `want()`)."""

    def __init__(self, size: int = 64) -> None:
        self._send, self._inbox = open_mailbox[AsyncioCall](size)
        self._wanted = trio.Event()
        self.running = False

    def want(self) -> None:
        """An asyncio middleware is configured: open the loop (once; never blocks)."""
        self._wanted.set()

    def wrap(self, middleware: Middleware) -> Middleware:
        """`middleware` (an asyncio coroutine function) as a trio middleware."""

        async def on_asyncio(passed: Call, next_: Next) -> types.CallToolResult:
            self.want()
            scope = trio.CancelScope()
            try:
                return await call(
                    self._send, lambda reply: AsyncioCall(middleware, passed, next_, scope, reply)
                )
            except ActorGone:
                raise AsyncioStopped("the asyncio loop stopped before it answered") from None
            finally:
                scope.cancel()  # the caller left (cancelled or answered): nothing runs on

        return on_asyncio

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with structlog.contextvars.bound_contextvars(actor="asyncio"):
            task_status.started()
            await self._wanted.wait()
            trio_asyncio = _import_trio_asyncio()
            async with trio_asyncio.open_loop() as loop:
                self.running = True
                log.info("asyncio_loop_started")
                try:
                    async with trio.open_nursery() as nursery:
                        async for work in self._inbox:
                            nursery.start_soon(self._serve, trio_asyncio, loop, work)
                finally:
                    self.running = False

    @staticmethod
    async def _serve(trio_asyncio: Any, loop: Any, work: AsyncioCall) -> None:
        with work.reply, work.scope:
            next_on_asyncio = trio_asyncio.trio_as_aio(work.next, loop=loop)
            try:
                result = await trio_asyncio.aio_as_trio(work.middleware, loop=loop)(
                    work.call, next_on_asyncio
                )
            except Exception as exc:  # the caller's chain reports it (naming the middleware)
                reply_to(work.reply, outcome.Error(exc))
            else:
                reply_to(work.reply, outcome.Value(result))

"""Spliced tools/calls: a client's request written straight to the backend's stdin.

A call on the raw lane of a ready stdio backend does not go through the backend's
mailbox, nor get a task of its own. The client connection's reader hands it to
`BackendActor.splice` (synchronously); the backend's stdout reader hands the answer to
the connection's `CallReply` (synchronously too), which writes it to the client. The
actor's bookkeeping rides along in `SplicedCall`: calls in flight and in all, the
call's origin for server-to-client requests, its deadline (progress resets it) and the
`tool_call_finished` log line. One task per incarnation, `watch_deadlines`, fails the
calls that run past their timeout (and the backend is then restarted as hung).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog
import trio

from assern.actors.backend.forward import Forwarder

log = structlog.get_logger()

#: Describes why the backend went away mid-call (may wait briefly for its exit status).
Describe = Callable[[], Awaitable[Exception]]


class CallReply(Protocol):
    """The calling connection's side of a spliced call (all called synchronously)."""

    def answered(self, message: dict[str, Any], line: bytes, backend_id: str) -> None:
        """The backend's response (a dict with `result` or `error`) and its line, in
        which the id is still ours, `backend_id`."""

    def progressed(self, params: dict[str, Any], line: bytes, backend_id: str) -> None:
        """A progress notification's params and line (the token is still `backend_id`)."""

    def failed(self, error: Exception) -> None:
        """No answer will come: the call timed out (the backend is being restarted)."""

    def lost(self, describe: Describe) -> None:
        """The backend went away mid-call; `describe` says why, once its exit is known."""


class SplicedCall:
    """One tools/call in flight on the spliced lane, with the actor's bookkeeping."""

    __slots__ = (
        "_books",
        "_forwarder",
        "backend_id",
        "call_id",
        "client",
        "deadline",
        "name",
        "reply",
        "request_id",
        "started",
        "timeout",
    )

    def __init__(
        self,
        books: Books,
        forwarder: Forwarder,
        reply: CallReply,
        *,
        name: str,
        client: str | None,
        request_id: str | int | None,
        call_id: int,
        timeout: float,
    ) -> None:
        self._books = books
        self._forwarder = forwarder
        self.reply = reply
        self.name = name
        self.client = client
        self.request_id = request_id
        self.call_id = call_id
        self.timeout = timeout
        self.started = trio.current_time()
        self.deadline = self.started + timeout
        self.backend_id = ""

    # what the backend's stdout reader hands us (forward.Sink)

    def answered(self, message: dict[str, Any], line: bytes) -> None:
        # The answer goes out before the books and the log line: the client waits for it.
        try:
            self.reply.answered(message, line, self.backend_id)
        finally:
            self._books.spliced_finished(self, ok="result" in message)

    def progressed(self, params: dict[str, Any], line: bytes) -> None:
        self.deadline = trio.current_time() + self.timeout
        self.reply.progressed(params, line, self.backend_id)

    def lost(self, reason: str) -> None:
        self._books.spliced_finished(self, ok=False)
        self.reply.lost(self._books.describe_loss(reason))

    # what the caller and the deadline watcher do

    def cancel(self) -> None:
        """The client cancelled its request: tell the backend; the client gets no answer."""
        if self._forwarder.cancel(self.backend_id):
            self._books.spliced_finished(self, ok=False, cancelled=True)

    def expire(self, error: Exception) -> None:
        """Past its deadline: the client gets `error` (the backend is then restarted as hung)."""
        pending = self._forwarder.cancel(self.backend_id, "timed out")
        self._books.spliced_finished(self, ok=False)
        if pending:
            self.reply.failed(error)


class Books(Protocol):
    """What the backend actor keeps about spliced calls (see calls.py)."""

    def spliced_finished(self, call: SplicedCall, *, ok: bool, cancelled: bool = False) -> None:
        """Count the call out (idempotent: only its first end counts) and log it."""

    def describe_loss(self, reason: str) -> Describe: ...


async def watch_deadlines(
    calls: dict[str, SplicedCall], call_timeout: float, on_expired: Callable[[SplicedCall], None]
) -> None:
    """Expire the spliced calls that run past their deadline, for as long as it runs.

    Every deadline is set `call_timeout` after its call started or last made progress, so a
    call added later never has an earlier deadline than the ones already known: sleeping
    until the earliest known one (or one `call_timeout` from now) misses nothing, and costs
    no wake-up per call.
    """
    while True:
        now = trio.current_time()
        earliest = min((call.deadline for call in calls.values()), default=now + call_timeout)
        if earliest > now:
            await trio.sleep_until(earliest)
            continue
        for call in [call for call in calls.values() if call.deadline <= now]:
            on_expired(call)

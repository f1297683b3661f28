"""The spliced-call contract: a client's tools/call written straight to the backend's stdin.

This module is the seam between the listener and the backend actor on the hot path;
both sides import it and nothing else of each other. A call on the raw lane of a ready
stdio backend does not go through the backend's mailbox, nor get a task of its own:

1. The client connection's reader task hands the call to the backend's `SpliceLane`
   (`BackendHandle.lane.splice`), synchronously; the lane writes the request line to
   the backend's stdin and returns a `SplicedCall`, or None when the call must take
   the mailbox instead (not ready, ending, stdin backed up).
2. The backend's stdout reader task hands the answer and each progress notification
   to the connection's `CallReply`, synchronously; the reply writes the client's line
   (the backend's own bytes with the client's id swapped in).
3. The backend's deadline watcher task (`watch_deadlines`, one per incarnation)
   expires calls that run past their timeout: `CallReply.failed`, from that task.
4. When the backend goes away, the task that closes its request table (its stdout
   reader, or the incarnation's task as it stops the process) calls `CallReply.lost`.
5. A client's cancellation runs in the connection's reader task: `SplicedCall.cancel`.

The actor's bookkeeping rides along in `SplicedCall` (through `Books`): calls in flight
and in all, the call's origin for server-to-client requests, its deadline (progress
resets it; none while the backend waits on a client's answer) and the `tool_call_finished`
log line. No callback here may block or await: each runs inside another task's loop.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog
import trio

if TYPE_CHECKING:
    from assern.actors.backend.forward import Forwarder
    from assern.actors.backend.messages import Origin

log = structlog.get_logger()

#: Describes why the backend went away mid-call (may wait briefly for its exit status).
Describe = Callable[[], Awaitable[Exception]]


class CallReply(Protocol):
    """The calling connection's side of a spliced call (all called synchronously)."""

    def answered(self, message: dict[str, Any], line: bytes, backend_id: str) -> None:
        """The backend's response (a dict with `result` or `error`) and its line, in
        which the id is still ours, `backend_id`. Runs in the backend's stdout reader."""

    def progressed(self, params: dict[str, Any], line: bytes, backend_id: str) -> None:
        """A progress notification's params and line (the token is still `backend_id`).
        Runs in the backend's stdout reader."""

    def failed(self, error: Exception) -> None:
        """No answer will come: the call timed out (the backend is being restarted).
        Runs in the backend's deadline watcher."""

    def lost(self, describe: Describe) -> None:
        """The backend went away mid-call; `describe` says why, once its exit is known.
        Runs in the task that closed the backend's request table; `describe` may be
        awaited later, in a task of the connection's own."""


class SpliceLane(Protocol):
    """The backend's side of the raw lane, as a client connection sees it."""

    @property
    def fast_path(self) -> bool:
        """Whether tools/call may take the raw lane now: a ready backend on a handshake
        version, over stdio (spliced) or streamable HTTP (`splice` declines; the call
        takes the mailbox as a `ForwardCall`, posted as it came: http_lane.py)."""
        ...

    def splice(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        reply: CallReply,
        *,
        origin: Origin | None,
        request_id: str | int | None,
        progress: bool,
        meta: dict[str, Any] | None = None,
    ) -> SplicedCall | None:
        """Write a tools/call for the backend's tool `name` to its stdin, synchronously.

        Runs in the client connection's reader task. None when the call cannot take
        this way now: the caller then goes through the mailbox, which also waits for a
        (re)starting backend. `meta` is the client's `_meta` for the backend (with
        `progress`, our own token is added to it); `origin` receives the backend's
        server-to-client requests made during the call.
        """
        ...


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
        self.deadline = books.deadline_after(timeout)
        self.backend_id = ""

    # what the backend's stdout reader hands us (forward.Sink)

    def answered(self, message: dict[str, Any], line: bytes) -> None:
        # The answer goes out before the books and the log line: the client waits for it.
        try:
            self.reply.answered(message, line, self.backend_id)
        finally:
            self._books.spliced_finished(self, ok="result" in message)

    def progressed(self, params: dict[str, Any], line: bytes) -> None:
        self.deadline = self._books.deadline_after(self.timeout)
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

    def deadline_after(self, timeout: float) -> float:
        """A call's deadline `timeout` from now (none while the backend waits on a client)."""


async def watch_deadlines(
    calls: dict[str, SplicedCall], call_timeout: float, on_expired: Callable[[SplicedCall], None]
) -> None:
    """Expire the spliced calls that run past their deadline, for as long as it runs.

    Every deadline is set `call_timeout` after its call started or last made progress, or
    lifted (infinite) while the backend waits on a client: a call added later never has a
    deadline earlier than `call_timeout` from now, so sleeping until the earliest known
    one, or that long at most, misses nothing and costs no wake-up per call.
    """
    while True:
        now = trio.current_time()
        earliest = min((call.deadline for call in calls.values()), default=math.inf)
        earliest = min(earliest, now + call_timeout)
        if earliest > now:
            await trio.sleep_until(earliest)
            continue
        for call in [call for call in calls.values() if call.deadline <= now]:
            on_expired(call)

"""How other actors reach a backend: its mailbox address, a read-only view, its splice lane.

A `BackendHandle` is all a client connection (or the control plane) holds of a backend:
the mailbox for typed requests, `BackendView` for what it may read (status, spec,
listing), and the `SpliceLane` of the raw call path (splice.py). The backend actor
satisfies both protocols; only the backends supervisor, its owner, holds the actor
itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

import attrs
import trio

from assern.actors.backend.messages import BackendRequest, BackendUnavailable
from assern.actors.backend.splice import SpliceLane
from assern.actors.backend.status import BackendState, BackendStatus
from assern.supervisor.mailbox import ActorGone, Pending, Reply, new_reply

if TYPE_CHECKING:
    from assern.actors.config.spec import ServerSpec
    from assern.actors.router.catalog import BackendListing

T = TypeVar("T")


class BackendView(SpliceLane, Protocol):
    """What others may read of a backend (owned and updated by its actor), and its lane."""

    @property
    def status(self) -> BackendStatus:
        """A snapshot of its state and counters."""
        ...

    @property
    def state(self) -> BackendState:
        """Its state alone (cheaper than `status`)."""
        ...

    @property
    def spec(self) -> ServerSpec:
        """How it is configured."""
        ...

    @property
    def listing(self) -> BackendListing | None:
        """What it offers, as last listed; None before its first listing or once it failed."""
        ...


@attrs.frozen(kw_only=True, eq=False)
class BackendHandle:
    name: str
    mailbox: trio.MemorySendChannel[BackendRequest] = attrs.field(repr=False)
    view: BackendView = attrs.field(repr=False)
    #: asks the backends supervisor to start a lazy backend (no-op when it runs)
    wake: Callable[[], None] = attrs.field(default=lambda: None, repr=False)

    @property
    def status(self) -> BackendStatus:
        return self.view.status

    @property
    def state(self) -> BackendState:
        return self.view.state

    @property
    def spec(self) -> ServerSpec:
        return self.view.spec

    @property
    def listing(self) -> BackendListing | None:
        return self.view.listing

    @property
    def lane(self) -> SpliceLane:
        """The raw call path into the backend (splice.py)."""
        return self.view


async def request(handle: BackendHandle, make: Callable[[Reply[T]], BackendRequest]) -> T:
    """Send one request to a backend and wait for its answer.

    A failed or stopped backend is refused at once with the reason. A backend that is
    starting or restarting keeps the request queued until it is ready. When the caller
    is cancelled (its client cancelled the request), the backend call is cancelled too.

    Raises:
        BackendUnavailable: the backend failed, is stopped, or went away mid-call.
        RpcError: the backend answered with a JSON-RPC error (or a result that is not valid).
    """
    state = handle.state  # not `status`: a snapshot built on every call
    if state is BackendState.FAILED:
        status = handle.status
        raise BackendUnavailable(
            handle.name, f"it failed after {status.restarts} restarts ({status.last_error})"
        )
    if state is BackendState.STOPPED:
        raise BackendUnavailable(handle.name, "it is stopped")
    if state in (BackendState.LAZY, BackendState.DORMANT):
        handle.wake()
    reply: Reply[T]
    pending: Pending[T]
    reply, pending = new_reply()
    msg = make(reply)
    # A request waits in the queue for a ready incarnation to take it, but not forever:
    # the (re)start gets `startup_timeout`, the call its own `timeout`. A backend that
    # looked ready may end in the very instant the request is sent, so the bound holds
    # until an incarnation takes the request (`take`, which lifts it), whatever the state
    # was; from then on the incarnation keeps the call's own timeout (which progress may
    # extend). The bound covers the send too: calls that piled up while no incarnation
    # took them may have filled the mailbox.
    spec = handle.spec
    limit = spec.startup_timeout + spec.timeout
    msg.queued.deadline = trio.current_time() + limit  # set before an incarnation can take it
    try:
        with msg.queued:
            try:
                await handle.mailbox.send(msg)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                reply.close()
                raise BackendUnavailable(handle.name, "it was removed from the configuration") from None
            return await pending.result()
    except ActorGone:
        raise BackendUnavailable(handle.name, handle.status.last_exit or "it restarted") from None
    except trio.Cancelled:
        msg.scope.cancel()
        raise
    msg.scope.cancel()
    raise BackendUnavailable(handle.name, f"it did not become ready within {limit:g} s")

"""The backend actor's mailbox vocabulary: one frozen class per request, one union."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs
import mcp_types as types
import trio

from assern.supervisor.mailbox import Reply


#: Called for each progress notification the backend sends about a call.
class ProgressSink(Protocol):
    """Where a call's progress goes (the shape of the SDK's `ProgressFnT`)."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...


@attrs.frozen(kw_only=True, eq=False)
class Origin:
    """The client connection a request came from (server-to-client requests go back there)."""

    client: str
    #: asks that client for sampling/elicitation/roots on the backend's behalf
    ask: Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]] | None = attrs.field(
        default=None, repr=False
    )


@attrs.frozen(kw_only=True)
class Rounds:
    """A 2026-07-28 client's own input rounds (SEP-2322), passed through to the backend.

    A client that takes `input_required` results itself sends a request with these and
    gets the backend's `InputRequiredResult` back unchanged (its keys and its
    `requestState`), when the backend speaks 2026-07-28. A backend of the handshake era
    has no rounds of its own: its requests during the call are relayed as assern's rounds
    (actors/listener/round_trips.py), and a `requestState` assern never issued is refused.
    """

    #: the client's answers, by the keys of the backend's `inputRequests`
    input_responses: dict[str, Any] | None = None
    #: the backend's opaque state, echoed by the client
    request_state: str | None = None
    #: what the client declared it can do (`_meta`'s clientCapabilities), None if unsaid
    client_capabilities: dict[str, Any] | None = None


@attrs.frozen(kw_only=True, eq=False)
class CallTool:
    name: str
    arguments: dict[str, Any] | None
    #: the client's JSON-RPC id of the request, for the call's log line
    request_id: str | int | None = None
    meta: dict[str, Any] | None = None
    progress: ProgressSink | None = attrs.field(default=None, repr=False)
    #: cancelled by the caller when its client cancels the request
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    #: the caller's wait while the request is queued, bounded until an incarnation
    #: takes the request (which lifts the bound: the call's own timeout rules then)
    queued: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    origin: Origin | None = None
    #: the client's input rounds, when it takes `input_required` results itself
    rounds: Rounds | None = None
    reply: Reply[types.CallToolResult | types.InputRequiredResult] = attrs.field(repr=False)


@attrs.frozen(kw_only=True, eq=False)
class ForwardCall:
    """A tools/call forwarded as raw JSON-RPC: the result dict comes back as the backend wrote it."""

    name: str
    arguments: dict[str, Any] | None
    request_id: str | int | None = None
    #: the client's `_meta` for the backend, without its progress token
    meta: dict[str, Any] | None = None
    progress: ProgressSink | None = attrs.field(default=None, repr=False)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    queued: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    origin: Origin | None = None
    reply: Reply[dict[str, Any]] = attrs.field(repr=False)


@attrs.frozen(kw_only=True, eq=False)
class ReadResource:
    uri: str
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    queued: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    rounds: Rounds | None = None
    reply: Reply[types.ReadResourceResult | types.InputRequiredResult] = attrs.field(repr=False)


@attrs.frozen(kw_only=True, eq=False)
class GetPrompt:
    name: str
    arguments: dict[str, str] | None
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    queued: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    rounds: Rounds | None = None
    reply: Reply[types.GetPromptResult | types.InputRequiredResult] = attrs.field(repr=False)


@attrs.frozen(kw_only=True, eq=False)
class Complete:
    ref: types.PromptReference | types.ResourceTemplateReference
    argument: dict[str, str]
    context_arguments: dict[str, str] | None = None
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    queued: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    reply: Reply[types.CompleteResult] = attrs.field(repr=False)


@attrs.frozen(kw_only=True, eq=False)
class Subscribe:
    uri: str
    subscribe: bool
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    queued: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    reply: Reply[None] = attrs.field(repr=False)


@attrs.frozen(kw_only=True, eq=False)
class SetLevel:
    level: types.LoggingLevel
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    queued: trio.CancelScope = attrs.field(factory=trio.CancelScope, repr=False)
    reply: Reply[None] = attrs.field(repr=False)


BackendRequest = CallTool | ForwardCall | ReadResource | GetPrompt | Complete | Subscribe | SetLevel


def take(msg: BackendRequest) -> BackendRequest:
    """An incarnation takes `msg` from the mailbox: its caller stops bounding the wait."""
    msg.queued.deadline = math.inf
    return msg


class BackendUnavailable(Exception):
    """The backend cannot answer: it exited, failed, or is stopped. The text says why."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"server '{server}' is unavailable: {reason}")
        self.server = server
        self.reason = reason

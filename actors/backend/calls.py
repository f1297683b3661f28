"""The request half of a backend actor: its calls, on both lanes, and their books.

`CallDesk` is handed what it needs by its `BackendActor` (actor.py holds the lifecycle
half): the spec, the incarnation's `ProcessLink`, and how to end the incarnation. It
serves the mailbox (one task per request, in the incarnation's nursery), splices raw
calls (splice.py: it is the actor's `SpliceLane`), counts calls in flight and in all,
expires spliced calls past their deadline, and routes server-to-client requests back to
the client whose call caused them. Requests go to the backend through its
`BackendSession` (session.py), whichever client speaks it; a tools/call forwarded as
raw JSON-RPC goes through the process's `Forwarder` instead.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types
import outcome
import structlog
import trio
from pydantic import BaseModel, ValidationError

from assern.actors.backend.errors import BackendHung, BackendTimeout, describe_exit, describe_invalid
from assern.actors.backend.forward import STOPPING, ForwardLost
from assern.actors.backend.messages import (
    BackendRequest,
    BackendUnavailable,
    CallTool,
    Complete,
    ForwardCall,
    GetPrompt,
    Origin,
    ReadResource,
    SetLevel,
    Subscribe,
)
from assern.actors.backend.splice import CallReply, Describe, SplicedCall
from assern.actors.backend.transport import ProcessLink
from assern.actors.jsonrpc.errors import RpcError
from assern.supervisor.mailbox import reply_to

if TYPE_CHECKING:
    from collections.abc import Callable

    from assern.actors.backend.session import BackendSession
    from assern.actors.config.spec import ServerSpec

log = structlog.get_logger()

#: How long a client may take to answer a backend's request (a person may be answering
#: it; the calls of the backend wait meanwhile, see `CallDesk.ask_origin`), as long as a
#: 2026-07-28 client's parked round (listener/round_trips.py's PARKED_LIMIT).
ASK_LIMIT = 300.0

#: The backend's requests that go back to a client, and what a valid answer looks like.
ORIGIN_RESULTS: dict[str, type[BaseModel]] = {
    "sampling/createMessage": types.CreateMessageResult,
    "elicitation/create": types.ElicitResult,
    "roots/list": types.ListRootsResult,
}


@attrs.define(eq=False)
class CallOrigins:
    """In-flight calls of one incarnation, for routing server-to-client requests."""

    origins: dict[int, Origin] = attrs.field(factory=dict)
    next_id: int = 0

    def add(self, origin: Origin | None) -> int:
        self.next_id += 1
        if origin is not None:
            self.origins[self.next_id] = origin
        return self.next_id

    def latest(self) -> Origin | None:
        return self.origins[max(self.origins)] if self.origins else None


class CallDesk:
    """The calls of one backend: its mailbox's requests and its spliced calls.

    Args:
        spec: The backend's configuration.
        finish: Ends the current incarnation with an error (the first reason wins).
        ended: Whether the current incarnation is ending.
        last_exit: How the last incarnation ended, for calls cut by a restart.
    """

    def __init__(
        self,
        spec: ServerSpec,
        *,
        finish: Callable[[Exception], None],
        ended: Callable[[], bool],
        last_exit: Callable[[], str | None],
    ) -> None:
        self.spec = spec
        self._finish = finish
        self._ended = ended
        self._last_exit = last_exit
        #: calls in flight and in all, kept as plain counters (the call path is hot)
        self.in_flight = 0
        self.calls_total = 0
        #: when a call last started or ended (trio time): the ping and idle watchers read it
        self.last_activity = 0.0
        #: when the backend last had no call left in flight (epoch seconds, for status)
        self.idle_since: float | None = None
        #: whether tools/call may be spliced (a ready stdio backend on a handshake version)
        self.fast_path = False
        #: the backend's requests waiting on a client's answer (sampling, elicitation,
        #: roots): while there are any, no call of the backend runs against its timeout
        self.asking = 0
        #: the timeout scopes of the mailbox's calls in flight
        self._deadlines: set[trio.CancelScope] = set()
        self.begin(ProcessLink())

    def begin(self, link: ProcessLink) -> None:
        """A new incarnation, on `link`: no call of the last one is known any more."""
        self._link = link
        self._calls = CallOrigins()
        #: this incarnation's spliced calls in flight, by our request id (see splice.py)
        self.spliced: dict[str, SplicedCall] = {}
        #: why the incarnation ended, once it did (calls cut by the end are told)
        self.exit_reason: str | None = None
        self.in_flight = 0

    # ------------------------------------------------------------ spliced calls

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
        """Write a tools/call straight to the backend's stdin (see splice.py), synchronously.

        None when the call cannot take that way now (not a ready stdio backend on a
        handshake version, ending, or its stdin backed up): the caller then goes
        through the mailbox, which also waits for a (re)starting backend. `meta` is the
        client's `_meta` for the backend (with `progress`, our token is added to it).
        """
        forwarder = self._link.forwarder
        if not self.fast_path or forwarder is None or self._ended():
            return None
        call = SplicedCall(
            self,
            forwarder,
            reply,
            name=name,
            client=origin.client if origin is not None else None,
            request_id=request_id,
            call_id=self._calls.add(origin),
            timeout=self.spec.timeout,
        )
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        if meta:
            params["_meta"] = meta
        backend_id = forwarder.send_nowait("tools/call", params, call, progress=progress)
        if backend_id is None:
            self._calls.origins.pop(call.call_id, None)
            return None
        call.backend_id = backend_id
        self.spliced[backend_id] = call
        self.in_flight += 1
        self.calls_total += 1
        self.last_activity = call.started
        return call

    def spliced_finished(self, call: SplicedCall, *, ok: bool, cancelled: bool = False) -> None:
        if self.spliced.pop(call.backend_id, None) is None:
            return
        self._calls.origins.pop(call.call_id, None)
        self.in_flight = max(0, self.in_flight - 1)
        if not self.in_flight:
            self.idle_since = time.time()
        now = self.last_activity = trio.current_time()
        log.info(
            "tool_call_finished",
            server=self.spec.name,
            lane="spliced",
            tool=call.name,
            client=call.client,
            request_id=call.request_id,
            ok=ok,
            cancelled=cancelled,
            duration_ms=round((now - call.started) * 1000, 2),
        )

    def describe_loss(self, reason: str) -> Describe:
        link, name = self._link, self.spec.name

        async def describe() -> Exception:
            if self.exit_reason is not None:
                return BackendUnavailable(name, self.exit_reason)
            if reason == STOPPING:  # stopped from outside: a restart, a reload, a stop
                return BackendUnavailable(name, self._last_exit() or "it restarted")
            with trio.move_on_after(1.0):
                await link.exited.wait()
            if link.exited.is_set() or link.exit_code is not None:
                return BackendUnavailable(name, describe_exit(link.exit_code, list(link.stderr_tail)))
            return BackendUnavailable(name, reason)

        return describe

    def expire(self, call: SplicedCall) -> None:
        """A spliced call ran past its deadline: its client is told, the backend restarted as hung."""
        text = f"did not answer within {call.timeout:g} s"
        call.expire(BackendTimeout(f"server '{self.spec.name}' {text}"))
        # A backend that lets a call run past its timeout is treated as hung: restarted.
        self._finish(BackendHung(self.spec.name, f"{text}; restarting it"))

    # ------------------------------------------- server-to-client, back to origin

    async def ask_origin(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """Ask the client whose call is the latest in flight, for the backend; its result dict.

        While the client answers, no call of the backend runs against its timeout; the
        client has `ASK_LIMIT` seconds.

        Raises RpcError when there is no such call, when the client refuses or takes
        longer than that, and when its answer is not a valid result for `method`: the
        backend is answered with it.
        """
        origin = self._calls.latest()
        if origin is None or origin.ask is None:
            raise RpcError(
                types.INVALID_REQUEST, f"no client call of server '{self.spec.name}' to route {method} to"
            )
        self._hold_deadlines()
        try:
            with trio.move_on_after(ASK_LIMIT) as limit:
                answer = await origin.ask(method, params)
            if limit.cancelled_caught:
                raise RpcError(
                    types.REQUEST_TIMEOUT, f"the client did not answer {method} within {ASK_LIMIT:g} s"
                )
        except RpcError:
            raise
        except Exception as exc:
            # A client connection that still runs on the SDK raises the SDK's error type,
            # which carries the same JSON-RPC error object.
            error = getattr(exc, "error", None)
            if isinstance(error, types.ErrorData):
                raise RpcError(error.code, error.message, error.data) from exc
            raise RpcError(types.INTERNAL_ERROR, f"the client could not answer {method}: {exc}") from exc
        finally:
            self._release_deadlines()
        model = ORIGIN_RESULTS.get(method)
        if model is None:
            return answer
        try:
            return model.model_validate(answer).model_dump(by_alias=True, mode="json", exclude_none=True)
        except ValidationError as exc:
            raise RpcError(
                types.INTERNAL_ERROR, f"the client's answer to {method} is not valid: {describe_invalid(exc)}"
            ) from None

    def deadline_after(self, timeout: float) -> float:
        """A call's deadline `timeout` from now; none while the backend waits on a client."""
        return math.inf if self.asking else trio.current_time() + timeout

    def _hold_deadlines(self) -> None:
        """The backend waits on a client (a person may be answering): its calls' clocks stop.

        Which call a server-to-client request belongs to is not on the wire, so every
        call of the backend waits; each gets its whole timeout again once the answer is in.
        """
        self.asking += 1
        for scope in self._deadlines:
            scope.deadline = math.inf
        for call in self.spliced.values():
            call.deadline = math.inf

    def _release_deadlines(self) -> None:
        self.asking -= 1
        if self.asking:
            return
        now = trio.current_time()
        for scope in self._deadlines:
            scope.deadline = now + self.spec.timeout
        for call in self.spliced.values():
            call.deadline = now + call.timeout

    # -------------------------------------------------------------------- calls

    async def handle(self, session: BackendSession, msg: BackendRequest) -> None:
        """Answer one request of the mailbox (in a task of the incarnation's nursery)."""
        call_id = self._calls.add(msg.origin if isinstance(msg, CallTool | ForwardCall) else None)
        self.last_activity = trio.current_time()
        self.in_flight += 1
        self.calls_total += 1
        started = trio.current_time()
        answer: outcome.Outcome[Any] | None = None
        with msg.reply:
            try:
                answer = await self._answer(session, msg)
            except trio.Cancelled:
                # The incarnation is going away: tell the caller why, not just "gone".
                if self.exit_reason is not None:
                    reply_to(msg.reply, outcome.Error(BackendUnavailable(self.spec.name, self.exit_reason)))
                raise
            finally:
                self._calls.origins.pop(call_id, None)
                self.last_activity = trio.current_time()
                self.in_flight = max(0, self.in_flight - 1)
                if not self.in_flight:
                    self.idle_since = time.time()
            if answer is not None:
                reply_to(msg.reply, answer)
            if isinstance(msg, CallTool | ForwardCall):
                log.info(
                    "tool_call_finished",
                    lane="mailbox",
                    tool=msg.name,
                    client=msg.origin.client if msg.origin is not None else None,
                    request_id=msg.request_id,
                    ok=isinstance(answer, outcome.Value),
                    cancelled=answer is None,
                    duration_ms=round((trio.current_time() - started) * 1000, 2),
                )

    async def _answer(self, session: BackendSession, msg: BackendRequest) -> outcome.Outcome[Any] | None:
        """Run one request; None when its caller cancelled it (nobody is waiting)."""
        try:
            with msg.scope, trio.CancelScope(deadline=self.deadline_after(self.spec.timeout)) as deadline:
                self._deadlines.add(deadline)
                try:
                    return outcome.Value(await self._dispatch(session, msg, deadline))
                finally:
                    self._deadlines.discard(deadline)
            if msg.scope.cancelled_caught:
                return None
            text = f"did not answer within {self.spec.timeout:g} s"
            # A backend that lets a call run past its timeout is treated as hung: restarted.
            self._finish(BackendHung(self.spec.name, f"{text}; restarting it"))
            return outcome.Error(BackendTimeout(f"server '{self.spec.name}' {text}"))
        except RpcError as exc:
            return outcome.Error(exc)
        except ForwardLost:
            return outcome.Error(await self._unavailable())
        except Exception as exc:  # a broken backend answer must not kill the actor
            return outcome.Error(exc)

    async def _unavailable(self) -> BackendUnavailable:
        with trio.move_on_after(1.0):
            await self._link.exited.wait()
        return BackendUnavailable(
            self.spec.name, describe_exit(self._link.exit_code, list(self._link.stderr_tail))
        )

    async def _dispatch(
        self, session: BackendSession, msg: BackendRequest, deadline: trio.CancelScope
    ) -> Any:
        match msg:
            case CallTool():
                sink = msg.progress

                async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                    deadline.deadline = self.deadline_after(self.spec.timeout)
                    if sink is not None:
                        await sink(progress, total, message)

                return await session.call_tool(
                    msg.name, msg.arguments, meta=msg.meta, progress=on_progress, rounds=msg.rounds
                )
            case ForwardCall():
                # Over stdio, on its pipes; to a streamable-HTTP backend, posted (http_lane.py).
                requester = self._link.forwarder or self._link.poster
                sink = msg.progress

                async def forward_progress(progress: float, total: float | None, message: str | None) -> None:
                    deadline.deadline = self.deadline_after(self.spec.timeout)
                    if sink is not None:
                        await sink(progress, total, message)

                if requester is None:  # a backend that came back without a raw lane
                    result = await session.call_tool(
                        msg.name, msg.arguments, meta=msg.meta, progress=forward_progress
                    )
                    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
                    if dumped.get("resultType") == "complete":
                        del dumped["resultType"]  # the model's default; a handshake-era result has none
                    return dumped
                params: dict[str, Any] = {"name": msg.name}
                if msg.arguments is not None:
                    params["arguments"] = msg.arguments
                if msg.meta:
                    params["_meta"] = msg.meta
                return await requester.request(
                    "tools/call", params, forward_progress if sink is not None else None
                )
            case ReadResource():
                return await session.read_resource(msg.uri, rounds=msg.rounds)
            case GetPrompt():
                return await session.get_prompt(msg.name, msg.arguments, rounds=msg.rounds)
            case Complete():
                try:
                    return await session.complete(msg.ref, msg.argument, msg.context_arguments)
                except RpcError as exc:
                    if exc.code != types.METHOD_NOT_FOUND:
                        raise
                    # Completions advertised loosely: nothing to suggest, not an error.
                    return types.CompleteResult(completion=types.Completion(values=[]))
            case Subscribe():
                if msg.subscribe:
                    await session.subscribe_resource(msg.uri)
                else:
                    await session.unsubscribe_resource(msg.uri)
                return None
            case SetLevel():
                await session.set_logging_level(msg.level)
                return None

"""The raw lane for a 2026-07-28 tool call: the call's JSON forwarded to its backend.

A handshake-era call takes the raw lane (raw_lane.py): the backend gets the call as
it came and its answer goes back as it was written, with no models in between. A
2026-07-28 call answered by the HTTP front (plain_stateless.py) went through the SDK's
server instead: its params validated into a model, assern's handler, the backend
client's result model, then the SDK's shaping of that model, several validations of
the same JSON on one call. `ModernLane.call` takes such a call the raw way when
`raw_route` says it may (a known tool of a backend that offers the raw lane, a gate
that needs no question to the client) and the request is a first one (no
`inputResponses`, no `requestState`):

- a backend that asks the client something during the call (sampling, elicitation,
  roots) is answered through `input_required` rounds as on the SDK path: its first
  ask puts the call in a `RoundTrips` flight (`LateRounds`; most calls never ask, and
  run without one), and the client's retry resumes that flight there;
- the call is written to the backend's stdin as the handshake era's raw lane writes
  one (splice.py; through its mailbox, `ForwardCall`, while it is not ready), and its
  answer comes back as the JSON it wrote (with the `resultType` of its era), checked
  against the tool's outputSchema when a gate asks for it.

Anything else is declined (None) and served by the SDK's server as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types
import trio

from assern.actors.backend.forward import error_of
from assern.actors.gate.gate import screen_result
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.context import RequestContext, end_to_end_meta, to_rpc_error
from assern.actors.listener.raw_lane import RawRoute, call_outcome, dump_result, forward_call, raw_route
from assern.actors.listener.round_trips import Flight, FlightPeer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from assern.actors.backend.messages import Origin
    from assern.actors.backend.splice import Describe, SplicedCall
    from assern.actors.listener.context import Peer, RequestId
    from assern.actors.listener.round_trips import RoundTrips
    from assern.actors.listener.routing import Routing

#: The fields of a retry: a request with either belongs to a flight of the SDK path.
ROUND_FIELDS = ("inputResponses", "requestState")


def complete(result: dict[str, Any]) -> dict[str, Any]:
    """A backend's result as a 2026-07-28 one: `resultType` "complete" unless it says
    otherwise. The SDK's server requires it of what a handler returns, which the
    result of a flight resumed through it is (round_trips.py)."""
    return result if "resultType" in result else {**result, "resultType": "complete"}


@attrs.frozen
class RawParams:
    """A raw call's params as a flight keeps them: validated into the request's model
    only if the flight is parked (what its retry must repeat, round_trips.py)."""

    raw: Mapping[str, Any]

    def model_dump(self, **options: Any) -> dict[str, Any]:
        model = types.CallToolRequestParams.model_validate(self.raw, by_name=False)
        return model.model_dump(**options)


@attrs.frozen
class NoClient:
    """The client outside a call's rounds: nothing to send it progress on (a plain
    request asked for none), and asks go through the flight's rounds."""

    async def progress(
        self, token: str | int, progress: float, total: float | None, message: str | None
    ) -> None:
        return

    async def ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        raise RpcError(types.INVALID_REQUEST, f"{method}: a 2026-07-28 client is asked through rounds")


class LateRounds:
    """The client of a raw call as its backend reaches it (the call's `Peer`).

    Most calls end without a question to the client, so none runs in a flight until
    its backend asks one: the first ask makes the call's `Flight` (queued there, as
    any ask of a flight is) and wakes the call, which then carries on in that flight
    (`RoundTrips.carry`) and answers with its first round. Progress: a plain request
    asked for none.
    """

    __slots__ = ("closed", "flight", "params", "wake")

    def __init__(self, params: RawParams, wake: trio.Event) -> None:
        self.params = params
        self.wake = wake
        self.flight: Flight | None = None
        #: set once the call answered without a flight: a later ask has no one to go to
        self.closed = False

    async def progress(
        self, token: str | int, progress: float, total: float | None, message: str | None
    ) -> None:
        return

    async def ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        if self.flight is None:
            if self.closed:
                raise RpcError(types.INTERNAL_ERROR, "the client's request is over")
            self.flight = Flight("tools/call", self.params)
            self.wake.set()
        return await FlightPeer(self.flight).ask(method, params)


class Answer:
    """A spliced call's answer as its call waits for it (splice.CallReply): every
    callback runs synchronously in a backend task and only records and wakes (`done`,
    and `wake` when given)."""

    __slots__ = ("_describe", "_error", "_result", "_wake", "done")

    def __init__(self, wake: trio.Event | None = None) -> None:
        self.done = trio.Event()
        self._wake = wake
        self._result: Any = None
        self._error: Exception | None = None
        self._describe: Describe | None = None

    def answered(self, message: dict[str, Any], line: bytes, backend_id: str) -> None:
        if "result" in message:
            self._result = message["result"]
        else:
            self._error = error_of(message)
        self._settle()

    def progressed(self, params: dict[str, Any], line: bytes, backend_id: str) -> None:
        return  # none was asked for

    def failed(self, error: Exception) -> None:
        self._error = error
        self._settle()

    def lost(self, describe: Describe) -> None:
        self._describe = describe
        self._settle()

    def _settle(self) -> None:
        self.done.set()
        if self._wake is not None:
            self._wake.set()

    async def result(self) -> Any:
        """The result, once `done`; raises the call's error (why a lost backend went)."""
        if self._describe is not None:
            raise await self._describe()
        if self._error is not None:
            raise self._error
        return self._result


class ModernLane:
    """The raw lane of one 2026-07-28 connection.

    Args:
        routing: Lookups over the connection's view of the catalog and the backends.
        origin: The client as the origin of a backend call (its asks, as `peer` makes them).
        round_trips: The connection's calls that may need input rounds.
    """

    def __init__(self, routing: Routing, origin: Callable[[Peer], Origin], round_trips: RoundTrips) -> None:
        self._routing = routing
        self._origin = origin
        self._round_trips = round_trips

    async def call(
        self, request_id: RequestId, params: Mapping[str, Any] | None
    ) -> dict[str, Any] | types.InputRequiredResult | None:
        """Serve a first `tools/call` request raw: the backend's result as JSON, or the
        first `input_required` round; None when the call is the SDK path's.

        Raises:
            RpcError: the call failed (its backend is unavailable, or answered an error).
        """
        if not isinstance(params, Mapping) or any(field in params for field in ROUND_FIELDS):
            return None
        name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
        if not isinstance(name, str) or not isinstance(arguments, dict | None):
            return None
        if meta is not None and (not isinstance(meta, dict) or meta.get("progressToken") is not None):
            return None
        taken = raw_route(self._routing, name, arguments)
        if taken is None:
            return None
        if isinstance(taken, types.CallToolResult):  # stopped by strict validation
            return complete(dump_result(taken))
        meta = end_to_end_meta(meta)
        raw = RawParams(params)
        context = RequestContext(request_id=request_id, peer=NoClient(), input_rounds=True)
        wake = trio.Event()
        late = LateRounds(raw, wake)
        answer = Answer(wake)
        handle = taken.handle
        started = trio.current_time()
        spliced = handle.lane.splice(
            taken.tool,
            taken.arguments,
            answer,
            origin=self._origin(late),
            request_id=request_id,
            progress=False,
            meta=meta,
        )
        if spliced is None:  # not ready, or its stdin is backed up: the mailbox waits for it
            forward = partial(self._through_mailbox, taken, meta)
            through: dict[str, Any] | types.InputRequiredResult = await self._round_trips.start(
                "tools/call", forward, context, raw, None
            )
            return through
        await _until(wake, spliced)
        if late.flight is None:  # answered without a question to the client
            late.closed = True
            done: dict[str, Any] = await self._finish(taken, started, answer.result())
            return done
        carried = partial(self._carried, taken, started, answer, spliced)
        asked: dict[str, Any] | types.InputRequiredResult = await self._round_trips.carry(
            late.flight, carried, context, None
        )
        return asked

    async def _carried(
        self,
        call: RawRoute,
        started: float,
        answer: Answer,
        spliced: SplicedCall,
        ctx: RequestContext,
        params: RawParams,
    ) -> Any:
        """A spliced call whose backend asked the client something, in its flight from
        then on (`ctx.peer` turns the asks into rounds)."""
        await _until(answer.done, spliced)
        return await self._finish(call, started, answer.result())

    async def _through_mailbox(
        self, call: RawRoute, meta: dict[str, Any] | None, ctx: RequestContext, params: RawParams
    ) -> Any:
        """The call through its backend's mailbox, which waits for a (re)starting
        backend, in a flight from the start (`ctx.peer` turns asks into rounds)."""
        started = trio.current_time()
        outcome = forward_call(
            call.handle,
            call.tool,
            call.arguments,
            meta=meta,
            request_id=ctx.request_id,
            origin=self._origin(ctx.peer),
        )
        return await self._finish(call, started, outcome)

    async def _finish(self, call: RawRoute, started: float, outcome: Awaitable[Any]) -> Any:
        """The backend's `result` as it wrote it (`resultType` added), the call counted
        and its result screened by the tool's gate."""
        handle = call.handle
        try:
            result = await outcome
        except Exception as exc:
            self._routing.record_call(handle.name, started, call.tool, "error")
            raise to_rpc_error(exc) from None
        self._routing.record_call(handle.name, started, call.tool, call_outcome(result))
        if call.gate is not None and isinstance(result, dict):
            replaced = screen_result(call.gate, handle.name, call.tool, result)
            if replaced is not None:
                return complete(dump_result(replaced))
        return complete(result) if isinstance(result, dict) else result


async def _until(event: trio.Event, spliced: SplicedCall) -> None:
    """Wait for `event`; a call cancelled meanwhile is cancelled at its backend too."""
    try:
        await event.wait()
    except trio.Cancelled:
        spliced.cancel()
        raise

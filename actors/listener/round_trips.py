"""Multi-round-trip requests (MRTR) for 2026-07-28 clients.

A backend may ask its client something during a call (sampling, elicitation, roots).
A handshake-era client is sent that request; a 2026-07-28 client cannot be (that
revision has no server-to-client requests). Instead the call answers with an
`input_required` result that carries the backend's requests and an opaque
`requestState`, and the client retries the same request with `inputResponses`. The
backend's call stays in flight all along: its request waits for the answer the retry
brings, then the call goes on, and the retry gets either its final result or the next
`input_required` round.

`RoundTrips` keeps one connection's calls in flight between rounds (a `Flight` each),
keyed by a random `requestState` minted afresh for every round: the state carries no
data of its own, so there is nothing to forge, and an old round's state is refused.
Those states start with `STATE_PREFIX`; a request with any other state starts a call
like a first request, which carries the client's rounds to a 2026-07-28 backend that
asked for them itself (client_rounds.py), and is refused by any other backend. A
flight whose client does not come back within `PARKED_LIMIT` is cancelled, which
cancels the backend's call and answers its open requests with an error.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import mcp_types as types
import structlog
import trio

from assern.actors.backend.rounds import unknown_state
from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.context import ASK, Peer, RequestContext

log = structlog.get_logger()

#: how long a call waits, parked, for its client's retry with the answers
PARKED_LIMIT = 300.0

#: what every `requestState` assern mints starts with; any other state is a backend's
#: own, passed through to it (client_rounds.py)
STATE_PREFIX = "assern."

#: the methods whose results may be `input_required` (the 2026-07-28 rule)
ROUND_TRIP_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})

#: the fields of a retry that are not part of the request itself
_ROUND_FIELDS = {"input_responses", "request_state", "meta"}

Handler = Callable[[RequestContext, Any], Awaitable[Any]]


@attrs.frozen
class Ask:
    """A backend's request to the client, waiting for its answer."""

    key: str
    method: str
    params: dict[str, Any] | None
    answer: trio.MemorySendChannel[dict[str, Any]]


@attrs.frozen
class Done:
    """The call's end: its result, or the error it failed with."""

    result: Any = None
    error: RpcError | None = None


Event = Ask | Done


def request_identity(params: Any) -> dict[str, Any]:
    """What a retry must repeat of the original request: its params without the round's fields."""
    dumped: dict[str, Any] = params.model_dump(by_alias=False, mode="json", exclude_none=True)
    return {key: value for key, value in dumped.items() if key not in _ROUND_FIELDS}


def input_request(ask: Ask) -> dict[str, Any]:
    """An `inputRequests` entry for `ask`, checked as the method's request model."""
    body: dict[str, Any] = {"method": ask.method}
    if ask.params is not None:
        body["params"] = ask.params
    request_model, _result = ASK[ask.method]
    return request_model.model_validate(body, by_name=False).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )


def answer_of(method: str, response: Any) -> dict[str, Any]:
    """The client's `inputResponses` entry as the result the backend gets for `method`.

    Raises:
        RpcError: the response is not a valid result for `method`.
    """
    dumped = response
    if hasattr(response, "model_dump"):
        dumped = response.model_dump(by_alias=True, mode="json", exclude_none=True)
    _request, result_model = ASK[method]
    try:
        return result_model.model_validate(dumped).model_dump(by_alias=True, mode="json", exclude_none=True)
    except Exception as exc:  # pydantic's ValidationError, named without importing pydantic
        raise RpcError(types.INVALID_PARAMS, f"inputResponses: not a {method} result: {exc}") from None


class Flight:
    """One call between its rounds: the backend's open requests and how the call ends."""

    def __init__(self, method: str, params: Any) -> None:
        self.method = method
        self.params = params
        #: what a retry must repeat (`request_identity`), taken when the call is first
        #: parked: most calls end without a round and never need it
        self.identity: dict[str, Any] | None = None
        self.scope = trio.CancelScope()
        self.events_in, self.events = trio.open_memory_channel[Event](16)
        #: the backend's requests sent to the client and not answered yet, by key
        self.open: dict[str, Ask] = {}
        #: set once a round took the call's end (the flight may then finish)
        self.taken = trio.Event()
        self.progress_token: str | int | None = None
        self.peer: Peer | None = None
        #: the `requestState` it is parked under, while it waits for a retry
        self.state: str | None = None
        self._keys = 0

    def next_key(self) -> str:
        self._keys += 1
        return f"r{self._keys}"

    def finish(self) -> None:
        """The call is over: requests still open are answered with an error by their waiters."""
        for ask in self.open.values():
            ask.answer.close()
        self.open.clear()
        self.events_in.close()
        while True:
            try:
                event = self.events.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            if isinstance(event, Ask):
                event.answer.close()


@attrs.frozen
class FlightPeer:
    """The client as the call's handler reaches it: asks become `input_required` rounds.

    Progress goes to the request of the current round, under its own progress token.
    """

    flight: Flight

    async def progress(
        self, token: str | int, progress: float, total: float | None, message: str | None
    ) -> None:
        peer, current = self.flight.peer, self.flight.progress_token
        if peer is not None and current is not None:
            await peer.progress(current, progress, total, message)

    async def ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        if method not in ASK:
            raise RpcError(types.METHOD_NOT_FOUND, f"{method} cannot be relayed to the client")
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        ask = Ask(self.flight.next_key(), method, params, send)
        try:
            await self.flight.events_in.send(ask)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise RpcError(types.INTERNAL_ERROR, "the client's request is over") from None
        try:
            return await receive.receive()
        except trio.EndOfChannel:
            raise RpcError(
                types.INTERNAL_ERROR, f"the client did not answer {method} (its request ended)"
            ) from None


class RoundTrips:
    """The calls of one 2026-07-28 connection that may need input rounds."""

    def __init__(self, nursery: trio.Nursery, *, parked_limit: float = PARKED_LIMIT) -> None:
        self._nursery = nursery
        self._parked: dict[str, Flight] = {}
        self._parked_limit = parked_limit

    @property
    def parked(self) -> int:
        return len(self._parked)

    def wrap(self, method: str, handler: Handler) -> Handler:
        """`handler` for `method`, its asks answered through rounds."""

        async def handle(ctx: RequestContext, params: Any) -> Any:
            token = _progress_token(params)
            state = getattr(params, "request_state", None)
            if isinstance(state, str) and state.startswith(STATE_PREFIX):
                return await self.resume(method, ctx, params, token)
            return await self.start(method, handler, ctx, params, token)

        return handle

    async def start(
        self, method: str, handler: Handler, ctx: RequestContext, params: Any, token: str | int | None
    ) -> Any:
        return await self.carry(Flight(method, params), handler, ctx, token)

    async def carry(
        self, flight: Flight, handler: Handler, ctx: RequestContext, token: str | int | None
    ) -> Any:
        """Run `handler` as `flight`'s call and answer this round. The flight may be
        older than its task: a call that ran outside one until its backend asked
        something (modern_lane.py) carries on here, its first asks already queued."""
        flight.peer, flight.progress_token = ctx.peer, token
        inner = RequestContext(
            request_id=ctx.request_id, peer=FlightPeer(flight), input_rounds=ctx.input_rounds
        )
        self._nursery.start_soon(self._fly, flight, handler, inner, flight.params)
        return await self._round(flight, [])

    async def resume(self, method: str, ctx: RequestContext, params: Any, token: str | int | None) -> Any:
        state = params.request_state
        flight = self._parked.pop(state, None)
        if flight is None:
            raise unknown_state(state)
        if flight.method != method or flight.identity != request_identity(params):
            self._parked[state] = flight  # not this request's: the rightful retry may still come
            raise RpcError(
                types.INVALID_PARAMS, "requestState belongs to another request", {"requestState": state}
            )
        flight.scope.deadline = math.inf
        flight.peer, flight.progress_token = ctx.peer, token
        responses: Mapping[str, Any] = params.input_responses or {}
        for key in [key for key in flight.open if key in responses]:
            ask = flight.open[key]
            try:
                answer = answer_of(ask.method, responses[key])
            except RpcError:
                self._park(state, flight)  # the call waits for a valid answer
                raise
            del flight.open[key]
            ask.answer.send_nowait(answer)
            ask.answer.close()
        still_open = list(flight.open.values())
        return await self._round(flight, still_open)

    async def _fly(self, flight: Flight, handler: Handler, ctx: RequestContext, params: Any) -> None:
        """Run the call; its end waits for a round to take it (or the parked limit)."""
        try:
            with flight.scope:
                try:
                    done = Done(result=await handler(ctx, params))
                except RpcError as exc:
                    done = Done(error=exc)
                except Exception as exc:  # a defect: the client hears of it, the connection lives on
                    log.exception("round_trip_call_failed", method=flight.method)
                    done = Done(error=RpcError(types.INTERNAL_ERROR, f"internal error: {exc}"))
                await flight.events_in.send(done)
                await flight.taken.wait()
        finally:
            if flight.scope.cancelled_caught and not flight.taken.is_set():
                log.info("round_trip_abandoned", method=flight.method)
            if flight.state is not None and self._parked.get(flight.state) is flight:
                del self._parked[flight.state]
            flight.finish()

    async def _round(self, flight: Flight, still_open: list[Ask]) -> Any:
        """Wait for the call's end or its next requests; answer the client with either."""
        asks = list(still_open)
        try:
            if not asks:
                event = await flight.events.receive()
                if isinstance(event, Done):
                    return _end(flight, event)
                asks.append(event)
            while True:  # what else the backend asked meanwhile goes in the same round
                try:
                    event = flight.events.receive_nowait()
                except trio.WouldBlock:
                    break
                if isinstance(event, Done):
                    return _end(flight, event)
                asks.append(event)
        except trio.EndOfChannel:
            raise RpcError(types.INTERNAL_ERROR, "the call ended without an answer") from None
        except BaseException:
            flight.scope.cancel()  # the client gave up on this round: the call is cancelled
            raise
        requests: dict[str, Any] = {}
        for ask in asks:
            flight.open[ask.key] = ask
            try:
                requests[ask.key] = input_request(ask)
            except Exception as exc:
                del flight.open[ask.key]
                ask.answer.close()
                log.info("round_trip_request_invalid", method=ask.method, error=str(exc))
        if not requests:
            return await self._round(flight, [])
        state = STATE_PREFIX + secrets.token_urlsafe(24)
        self._park(state, flight)
        return types.InputRequiredResult(input_requests=requests, request_state=state)

    def _park(self, state: str, flight: Flight) -> None:
        if flight.identity is None:
            flight.identity = request_identity(flight.params)
        flight.peer = flight.progress_token = None
        flight.state = state
        self._parked[state] = flight
        flight.scope.deadline = trio.current_time() + self._parked_limit


def _end(flight: Flight, done: Done) -> Any:
    flight.taken.set()
    if done.error is not None:
        raise done.error
    return done.result


def _progress_token(params: Any) -> str | int | None:
    meta = getattr(params, "meta", None)
    if meta is None:
        return None
    token = meta.get("progress_token") if isinstance(meta, Mapping) else getattr(meta, "progress_token", None)
    return token if isinstance(token, (str, int)) else None

"""Input rounds (MRTR) of one connection, on a mock clock: the call keeps running between
rounds, a parked call expires, a given-up round cancels its call, progress follows the round."""

from __future__ import annotations

from typing import Any

import attrs
import mcp_types as types
import pytest
import trio
import trio.testing

from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.context import RequestContext
from assern.actors.listener.round_trips import PARKED_LIMIT, STATE_PREFIX, RoundTrips, request_identity

SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}
ANSWER = types.CreateMessageResult(role="assistant", content=types.TextContent(text="yes"), model="m")


@attrs.define
class RecordingPeer:
    progressed: list[tuple[str | int, float]] = attrs.field(factory=list)

    async def progress(
        self, token: str | int, progress: float, total: float | None, message: str | None
    ) -> None:
        self.progressed.append((token, progress))

    async def ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        raise AssertionError("a round-trip call never asks the connection's peer")


def call(
    name: str = "t",
    *,
    state: str | None = None,
    answers: dict[str, Any] | None = None,
    token: int | None = None,
) -> types.CallToolRequestParams:
    meta = {"progressToken": token} if token is not None else None
    return types.CallToolRequestParams.model_validate(
        {
            "name": name,
            "arguments": {"a": 1},
            "_meta": meta,
            "requestState": state,
            "inputResponses": answers,
        },
        by_name=False,
    )


def context(peer: RecordingPeer | None = None) -> RequestContext:
    return RequestContext(request_id=1, peer=peer or RecordingPeer())


async def asks_twice(ctx: RequestContext, params: Any) -> types.CallToolResult:
    """A call whose backend asks two things at once, then one more, then answers."""
    answers: list[str] = []

    async def one() -> None:
        answer = await ctx.peer.ask("sampling/createMessage", SAMPLE)
        answers.append(answer["content"]["text"])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one)
        nursery.start_soon(one)
    await ctx.peer.ask("roots/list", None)
    return types.CallToolResult(content=[types.TextContent(text=",".join(answers))])


def test_the_identity_of_a_request_leaves_out_the_rounds_fields() -> None:
    assert request_identity(call(state="s", answers={}, token=3)) == request_identity(call())
    assert request_identity(call("t")) != request_identity(call("u"))


async def test_asks_made_together_go_in_one_round_and_the_call_goes_on() -> None:
    async with trio.open_nursery() as nursery:
        trips = RoundTrips(nursery)
        handle = trips.wrap("tools/call", asks_twice)
        first = await handle(context(), call())
        assert isinstance(first, types.InputRequiredResult)
        assert first.input_requests is not None
        assert sorted(first.input_requests) == ["r1", "r2"]
        answers = dict.fromkeys(first.input_requests, ANSWER)
        second = await handle(context(), call(state=first.request_state, answers=answers))
        assert isinstance(second, types.InputRequiredResult)
        assert second.input_requests is not None
        [(key, asked)] = second.input_requests.items()
        assert isinstance(asked, types.ListRootsRequest)
        roots = types.ListRootsResult(roots=[])
        done = await handle(context(), call(state=second.request_state, answers={key: roots}))
        assert isinstance(done, types.CallToolResult)
        assert done.content[0].text == "yes,yes"  # type: ignore[union-attr]
        assert trips.parked == 0


async def test_a_state_assern_did_not_mint_reaches_the_handler_with_the_request() -> None:
    """A backend's own state (a 2026-07-28 backend's round, passed through) is not
    looked up among the parked calls: the request goes to its handler as it came, and
    the handler's `input_required` answer goes back unchanged."""
    seen: list[tuple[str | None, bool]] = []

    async def backend_rounds(ctx: RequestContext, params: Any) -> Any:
        seen.append((params.request_state, ctx.input_rounds))
        if params.request_state is None:
            return types.InputRequiredResult.model_validate(
                {
                    "resultType": "input_required",
                    "inputRequests": {"mine": {"method": "roots/list"}},
                    "requestState": "theirs",
                }
            )
        return types.CallToolResult(content=[types.TextContent(text="done")])

    async with trio.open_nursery() as nursery:
        trips = RoundTrips(nursery)
        handle = trips.wrap("tools/call", backend_rounds)
        modern = RequestContext(request_id=1, peer=RecordingPeer(), input_rounds=True)
        first = await handle(modern, call())
        assert isinstance(first, types.InputRequiredResult)
        assert first.request_state == "theirs"
        assert first.input_requests is not None
        assert list(first.input_requests) == ["mine"]
        done = await handle(modern, call(state="theirs", answers={"mine": types.ListRootsResult(roots=[])}))
        assert isinstance(done, types.CallToolResult)
        assert seen == [(None, True), ("theirs", True)]
        assert trips.parked == 0
        with pytest.raises(RpcError, match="unknown or expired"):  # one of assern's, but not parked
            await handle(modern, call(state=STATE_PREFIX + "gone", answers={}))


async def test_an_answer_of_the_wrong_kind_is_refused_and_the_call_still_waits() -> None:
    async with trio.open_nursery() as nursery:
        trips = RoundTrips(nursery)

        async def once(ctx: RequestContext, params: Any) -> types.CallToolResult:
            answer = await ctx.peer.ask("sampling/createMessage", SAMPLE)
            return types.CallToolResult(content=[types.TextContent(text=answer["model"])])

        handle = trips.wrap("tools/call", once)
        first = await handle(context(), call())
        assert isinstance(first, types.InputRequiredResult)
        wrong = {"r1": types.ListRootsResult(roots=[])}
        with pytest.raises(RpcError, match="not a sampling/createMessage result"):
            await handle(context(), call(state=first.request_state, answers=wrong))
        done = await handle(context(), call(state=first.request_state, answers={"r1": ANSWER}))
        assert done.content[0].text == "m"


async def test_a_parked_call_expires_and_its_backend_request_is_answered_with_an_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The backend's request waits in the backend's own task (as a backend actor's does):
    when the parked call expires, the call is cancelled and that request gets an error."""
    backend_heard: list[str] = []
    call_cancelled = trio.Event()
    async with trio.open_nursery() as backend, trio.open_nursery() as connection:
        trips = RoundTrips(connection)

        async def backend_asks(ctx: RequestContext) -> None:
            try:
                await ctx.peer.ask("sampling/createMessage", SAMPLE)
            except RpcError as exc:
                backend_heard.append(exc.message)

        async def forgotten(ctx: RequestContext, params: Any) -> types.CallToolResult:
            backend.start_soon(backend_asks, ctx)
            try:
                await trio.sleep_forever()
            finally:
                call_cancelled.set()
            raise AssertionError

        handle = trips.wrap("tools/call", forgotten)
        first = await handle(context(), call())
        assert trips.parked == 1
        await trio.sleep(PARKED_LIMIT - 1)
        assert trips.parked == 1
        await trio.sleep(2)
        assert trips.parked == 0
        assert call_cancelled.is_set()
        with pytest.raises(RpcError, match="unknown or expired"):
            await handle(context(), call(state=first.request_state, answers={"r1": ANSWER}))
    assert backend_heard == ["the client did not answer sampling/createMessage (its request ended)"]


async def test_a_round_the_client_gives_up_cancels_the_call(autojump_clock: trio.testing.MockClock) -> None:
    cancelled = trio.Event()
    async with trio.open_nursery() as nursery:
        trips = RoundTrips(nursery)

        async def slow(ctx: RequestContext, params: Any) -> types.CallToolResult:
            try:
                await trio.sleep_forever()
            finally:
                cancelled.set()
            raise AssertionError

        handle = trips.wrap("tools/call", slow)
        with trio.move_on_after(5):  # the client's cancellation of its request
            await handle(context(), call())
        with trio.fail_after(1):
            await cancelled.wait()


async def test_progress_goes_to_the_current_rounds_token() -> None:
    first_peer, second_peer = RecordingPeer(), RecordingPeer()
    async with trio.open_nursery() as nursery:
        trips = RoundTrips(nursery)

        async def reports(ctx: RequestContext, params: Any) -> types.CallToolResult:
            await ctx.peer.progress(99, 0.1, None, None)
            await ctx.peer.ask("roots/list", None)
            await ctx.peer.progress(99, 0.9, None, None)
            return types.CallToolResult(content=[])

        handle = trips.wrap("tools/call", reports)
        first = await handle(context(first_peer), call(token=7))
        roots = types.ListRootsResult(roots=[])
        await handle(context(second_peer), call(state=first.request_state, answers={"r1": roots}, token=8))
    assert first_peer.progressed == [(7, 0.1)]
    assert second_peer.progressed == [(8, 0.9)]


async def test_a_call_that_fails_answers_its_round_with_the_error() -> None:
    async with trio.open_nursery() as nursery:
        trips = RoundTrips(nursery)

        async def refused(ctx: RequestContext, params: Any) -> types.CallToolResult:
            raise RpcError(types.INVALID_PARAMS, "no such tool")

        with pytest.raises(RpcError, match="no such tool"):
            await trips.wrap("tools/call", refused)(context(), call())
        assert trips.parked == 0

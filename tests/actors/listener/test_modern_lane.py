"""The raw lane of a 2026-07-28 connection (modern_lane.py): which tool calls it takes,
what it answers, and a backend's question during a call as input rounds."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import mcp_types as types
import pytest
import trio
import trio.testing
from fake_backend import Setup, setup

from assern.actors.jsonrpc.errors import RpcError
from assern.actors.listener.context import RequestContext
from assern.actors.listener.modern import ModernServer
from assern.actors.listener.modern_lane import ModernLane, NoClient
from assern.actors.listener.round_trips import PARKED_LIMIT
from assern.actors.listener.session import ClientConnection


@attrs.frozen
class Hosted:
    parts: Setup
    modern: ModernServer

    @property
    def lane(self) -> ModernLane:
        assert self.modern.lane is not None
        return self.modern.lane


@contextlib.asynccontextmanager
async def hosted(*, raw_lane: bool = True) -> AsyncIterator[Hosted]:
    """A 2026-07-28 connection hosted as the HTTP front hosts one, on a fake backend."""
    parts = setup("echo", "block", "sample", "fail", raw_lane=raw_lane)
    connection = ClientConnection("http-1", parts.shared)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(parts.backend.run)
        modern: ModernServer = await nursery.start(connection.host_modern, "agent")
        yield Hosted(parts, modern)
        nursery.cancel_scope.cancel()


def call(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "arguments": {"text": "here"}, **fields}


async def test_a_call_goes_raw_and_its_answer_is_the_backends_json() -> None:
    async with hosted() as h:
        answer = await h.lane.call(1, call("a_echo"))
        assert isinstance(answer, dict)  # as the backend wrote it
        assert answer["content"] == [{"type": "text", "text": "here"}]


@pytest.mark.parametrize(
    "params",
    [
        call("a_echo", requestState="assern.abc"),  # a retry: its flight is the SDK path's
        call("a_echo", inputResponses={}),
        call("a_echo", _meta={"progressToken": 1}),  # progress goes on its own stream
        call("a_nope"),  # unknown: the SDK path says so
        {"name": "a_echo", "arguments": ["not", "an", "object"]},
        {"name": 3},
        None,
    ],
)
async def test_what_the_lane_leaves_to_the_sdk_path(params: Any) -> None:
    async with hosted() as h:
        assert await h.lane.call(1, params) is None


async def test_a_backend_without_the_raw_lane_is_left_to_the_sdk_path() -> None:
    async with hosted(raw_lane=False) as h:
        assert await h.lane.call(1, call("a_echo")) is None


async def test_a_backends_error_is_the_calls_error() -> None:
    async with hosted() as h:
        with pytest.raises(RpcError, match="it broke"):
            await h.lane.call(1, call("a_fail"))


async def test_a_backends_question_is_an_input_round_and_the_retry_resumes_the_call() -> None:
    async with hosted() as h:
        params = {"name": "a_sample", "arguments": {"prompt": "haiku"}}
        first = await h.lane.call(1, params)
        assert isinstance(first, types.InputRequiredResult)
        assert first.request_state is not None
        [(key, asked)] = (first.input_requests or {}).items()
        assert asked.method == "sampling/createMessage"
        assert h.modern.round_trips.parked == 1
        # The client's retry comes through the SDK's server, with the request's model.
        sampled = {"role": "assistant", "content": {"type": "text", "text": "sampled!"}, "model": "m"}
        retry = types.CallToolRequestParams.model_validate(
            {**params, "inputResponses": {key: sampled}, "requestState": first.request_state}
        )
        context = RequestContext(request_id=2, peer=NoClient(), input_rounds=True)
        final = await h.modern.round_trips.resume("tools/call", context, retry, None)
        assert final["content"] == [{"type": "text", "text": "sampled!"}]
        assert h.modern.round_trips.parked == 0


async def test_a_retry_of_another_request_is_refused() -> None:
    async with hosted() as h:
        first = await h.lane.call(1, {"name": "a_sample", "arguments": {"prompt": "haiku"}})
        assert isinstance(first, types.InputRequiredResult)
        other = types.CallToolRequestParams.model_validate(
            {"name": "a_sample", "arguments": {"prompt": "other"}, "requestState": first.request_state}
        )
        context = RequestContext(request_id=2, peer=NoClient(), input_rounds=True)
        with pytest.raises(RpcError, match="requestState belongs to another request"):
            await h.modern.round_trips.resume("tools/call", context, other, None)


async def test_a_cancelled_call_is_cancelled_at_the_backend() -> None:
    async with hosted() as h:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.lane.call, 1, call("a_block"))
            await h.parts.backend.started.wait()
            nursery.cancel_scope.cancel()
        with trio.fail_after(5):
            await h.parts.backend.cancelled.wait()


# ---------------------------------------------------------------- spliced


class Spliced:
    """A call written to the fake backend's stdin: the test answers it through `reply`."""

    def __init__(self, reply: Any, origin: Any) -> None:
        self.reply = reply
        self.origin = origin
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Stdin:
    """The fake backend's splice lane (`SpliceLane.splice`): every call is taken."""

    def __init__(self) -> None:
        self.calls: list[Spliced] = []
        self.wrote = trio.Event()

    def __call__(self, name: str, arguments: Any, reply: Any, **options: Any) -> Spliced:
        spliced = Spliced(reply, options["origin"])
        self.calls.append(spliced)
        self.wrote.set()
        return spliced


@contextlib.asynccontextmanager
async def spliced() -> AsyncIterator[tuple[Hosted, Stdin]]:
    async with hosted() as h:
        stdin = Stdin()
        view: Any = h.parts.shared.directory()["a"].view  # the fake's SimpleNamespace
        view.splice = stdin
        yield h, stdin


async def test_a_spliced_call_is_answered_with_the_backends_result() -> None:
    async with spliced() as (h, stdin), trio.open_nursery() as nursery:
        answers: list[Any] = []

        async def calling() -> None:
            answers.append(await h.lane.call(1, call("a_echo")))

        nursery.start_soon(calling)
        await stdin.wrote.wait()
        result = {"content": [{"type": "text", "text": "raw"}]}
        stdin.calls[0].reply.answered({"jsonrpc": "2.0", "id": "b1", "result": result}, b"", "b1")
    assert answers == [{**result, "resultType": "complete"}]  # in its era's words


async def gone() -> Exception:
    return RuntimeError("the backend exited (code 3)")


@pytest.mark.parametrize(
    ("end", "expected"),
    [
        pytest.param(
            lambda reply: reply.answered({"error": {"code": -32000, "message": "it broke"}}, b"", "b1"),
            "it broke",
            id="an error answer",
        ),
        pytest.param(lambda reply: reply.lost(gone), "exited", id="the backend went away"),
        pytest.param(
            lambda reply: reply.failed(RpcError(-32001, "did not answer within 1 s")),
            "did not answer",
            id="past its timeout",
        ),
    ],
)
async def test_a_spliced_calls_error_lost_backend_and_timeout_are_its_errors(
    end: Callable[[Any], None], expected: str
) -> None:
    async with spliced() as (h, stdin), trio.open_nursery() as nursery:
        failures: list[str] = []

        async def calling() -> None:
            with pytest.raises(RpcError) as caught:
                await h.lane.call(1, call("a_echo"))
            failures.append(caught.value.message)

        nursery.start_soon(calling)
        await stdin.wrote.wait()
        end(stdin.calls[0].reply)
    assert expected in failures[0]


async def test_a_cancelled_spliced_call_is_cancelled_at_the_backend() -> None:
    async with spliced() as (h, stdin):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.lane.call, 1, call("a_echo"))
            await stdin.wrote.wait()
            nursery.cancel_scope.cancel()
        await trio.testing.wait_all_tasks_blocked()  # the flight hears of it in its own task
        assert stdin.calls[0].cancelled


async def test_a_spliced_backends_question_is_an_input_round() -> None:
    async with spliced() as (h, stdin), trio.open_nursery() as nursery:
        params = {"name": "a_echo", "arguments": {"text": "x"}}
        rounds: list[Any] = []
        answered = trio.Event()

        async def calling() -> None:
            rounds.append(await h.lane.call(1, params))
            answered.set()

        nursery.start_soon(calling)
        await stdin.wrote.wait()
        backend = stdin.calls[0]
        asked: list[dict[str, Any]] = []

        async def backend_asks() -> None:
            asked.append(await backend.origin.ask("roots/list", None))
            backend.reply.answered({"result": {"content": [{"type": "text", "text": "rooted"}]}}, b"", "b1")

        nursery.start_soon(backend_asks)
        with trio.fail_after(5):
            await answered.wait()
        [first] = rounds
        assert isinstance(first, types.InputRequiredResult)
        [(key, request)] = (first.input_requests or {}).items()
        assert request.method == "roots/list"
        retry = types.CallToolRequestParams.model_validate(
            {**params, "inputResponses": {key: {"roots": []}}, "requestState": first.request_state}
        )
        context = RequestContext(request_id=2, peer=NoClient(), input_rounds=True)
        final = await h.modern.round_trips.resume("tools/call", context, retry, None)
        assert final == {"content": [{"type": "text", "text": "rooted"}], "resultType": "complete"}
        assert asked == [{"roots": []}]


async def test_a_call_its_backend_answers_without_a_question_runs_in_no_flight() -> None:
    async with spliced() as (h, stdin), trio.open_nursery() as nursery:
        trips: Any = h.modern.round_trips

        async def no_flight(*args: Any) -> Any:
            raise AssertionError("a call without a question ran in a flight")

        trips.start = trips.carry = no_flight
        answers: list[Any] = []

        async def calling() -> None:
            answers.append(await h.lane.call(1, call("a_echo")))

        nursery.start_soon(calling)
        await stdin.wrote.wait()
        result = {"content": [{"type": "text", "text": "raw"}]}
        stdin.calls[0].reply.answered({"result": result}, b"", "b1")
    assert answers == [{**result, "resultType": "complete"}]
    with pytest.raises(RpcError, match="request is over"):  # a late question has no one to go to
        await stdin.calls[0].origin.ask("roots/list", None)


async def test_a_parked_call_its_client_never_retries_is_cancelled_at_the_backend(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with spliced() as (h, stdin), trio.open_nursery() as nursery:
        rounds: list[Any] = []
        answered = trio.Event()

        async def calling() -> None:
            rounds.append(await h.lane.call(1, call("a_echo")))
            answered.set()

        nursery.start_soon(calling)
        await stdin.wrote.wait()
        backend = stdin.calls[0]
        unanswered: list[str] = []

        async def backend_asks() -> None:  # its question waits for a retry that never comes
            with pytest.raises(RpcError) as caught:
                await backend.origin.ask("roots/list", None)
            unanswered.append(caught.value.message)

        nursery.start_soon(backend_asks)
        await answered.wait()
        assert isinstance(rounds[0], types.InputRequiredResult)
        parked = backend.cancelled
        await trio.sleep(PARKED_LIMIT + 1)
        assert (parked, backend.cancelled) == (False, True)
        assert h.modern.round_trips.parked == 0
        assert len(unanswered) == 1
        assert "did not answer" in unanswered[0]

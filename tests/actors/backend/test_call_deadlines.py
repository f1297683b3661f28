"""A call's timeout measures the backend, not the client: while the backend waits on a
client's answer (sampling, elicitation, roots, which a person may take minutes over), no
call of that backend runs against its timeout; each gets its whole timeout again once
the answer is in (virtual time)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import mcp_types as types
import pytest
import trio
import trio.testing

from assern.actors.backend.calls import ASK_LIMIT, CallDesk
from assern.actors.backend.errors import BackendHung, BackendTimeout
from assern.actors.backend.forward import Forwarder
from assern.actors.backend.messages import ForwardCall, Origin, ProgressSink
from assern.actors.backend.splice import Describe, SplicedCall, watch_deadlines
from assern.actors.backend.transport import ProcessLink
from assern.actors.config.spec import ServerSpec
from assern.actors.jsonrpc.errors import RpcError
from assern.supervisor.mailbox import Pending, Reply, new_reply

TIMEOUT = 10.0
THINKING = 100.0  # how long the person behind the client takes to answer
SPEC = ServerSpec(name="slow", transport="streamable-http", url="http://backend.test/mcp", timeout=TIMEOUT)
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}


class Desk:
    """A `CallDesk` and the incarnation ends it asked for."""

    def __init__(self) -> None:
        self.ended: list[Exception] = []
        self.calls = CallDesk(SPEC, finish=self.ended.append, ended=lambda: False, last_exit=lambda: None)

    def origin(self, thinking: float = THINKING) -> Origin:
        """A client that answers each request after `thinking` seconds."""

        async def ask(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            await trio.sleep(thinking)
            return SAMPLED

        return Origin(client="person", ask=ask)


class AskingBackend:
    """A streamable-HTTP backend's raw lane whose call asks the client for a sample, then
    works `work` seconds (forever when None) before it answers."""

    def __init__(self, desk: Desk, work: float | None) -> None:
        self.desk, self.work = desk, work

    async def request(
        self, method: str, params: dict[str, Any] | None = None, progress: ProgressSink | None = None
    ) -> dict[str, Any]:
        sample = await self.desk.calls.ask_origin("sampling/createMessage", {"messages": []})
        if self.work is None:
            await trio.sleep_forever()
        await trio.sleep(self.work)
        return {"content": [{"type": "text", "text": sample["content"]["text"]}]}


async def forward(desk: Desk, origin: Origin) -> Any:
    reply: Reply[dict[str, Any]]
    pending: Pending[dict[str, Any]]
    reply, pending = new_reply()
    msg = ForwardCall(name="sample", arguments={}, origin=origin, reply=reply)
    await desk.calls.handle(None, msg)  # type: ignore[arg-type]  # the lane needs no session
    return await pending.result()


async def test_a_call_waiting_on_its_client_does_not_time_out(autojump_clock: trio.testing.MockClock) -> None:
    desk = Desk()
    desk.calls.begin(ProcessLink(poster=AskingBackend(desk, work=8.0)))
    result = await forward(desk, desk.origin())
    assert result == {"content": [{"type": "text", "text": "ok"}]}
    assert trio.current_time() == THINKING + 8.0
    assert desk.ended == []
    assert desk.calls.asking == 0


async def test_once_answered_the_call_has_its_whole_timeout_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    desk = Desk()
    desk.calls.begin(ProcessLink(poster=AskingBackend(desk, work=None)))
    with pytest.raises(BackendTimeout, match="did not answer within 10 s"):
        await forward(desk, desk.origin())
    assert trio.current_time() == THINKING + TIMEOUT
    assert [type(error) for error in desk.ended] == [BackendHung]


async def test_a_call_that_starts_while_the_backend_waits_is_held_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The backend may serve nothing else until it has its answer (a server that
    # handles one request at a time): a call sent meanwhile is not its fault either.
    desk = Desk()
    desk.calls.begin(ProcessLink(poster=AskingBackend(desk, work=8.0)))
    results: list[Any] = []

    async def later() -> None:
        await trio.sleep(50)
        results.append(await forward(desk, desk.origin()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(later)
        results.append(await forward(desk, desk.origin()))
    assert len(results) == 2
    assert desk.ended == []


async def test_a_spliced_call_is_held_while_the_backend_waits_then_expires_on_its_timeout(
    autojump_clock: trio.testing.MockClock, outbox: Callable[..., Any]
) -> None:
    forwarder = Forwarder(outbox())
    desk = Desk()
    desk.calls.begin(ProcessLink(forwarder=forwarder))
    desk.calls.fast_path = True
    failed: list[tuple[float, str]] = []

    class Unanswered:
        def answered(self, message: dict[str, Any], line: bytes, backend_id: str) -> None:
            raise AssertionError("the backend never answers here")

        def progressed(self, params: dict[str, Any], line: bytes, backend_id: str) -> None:
            pass

        def failed(self, error: Exception) -> None:
            failed.append((trio.current_time(), str(error)))

        def lost(self, describe: Describe) -> None:
            pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_deadlines, desk.calls.spliced, TIMEOUT, desk.calls.expire)
        origin = desk.origin()
        call = desk.calls.splice("sample", {}, Unanswered(), origin=origin, request_id=1, progress=False)
        assert isinstance(call, SplicedCall)
        await trio.sleep(5)  # the backend asks 5 s into the call
        await desk.calls.ask_origin("sampling/createMessage", {"messages": []})
        assert failed == []  # 105 s in: held while the person thought
        await trio.sleep(TIMEOUT + 1)
        nursery.cancel_scope.cancel()
    assert failed == [(5 + THINKING + TIMEOUT, "server 'slow' did not answer within 10 s")]
    assert [type(error) for error in desk.ended] == [BackendHung]


async def test_a_client_that_never_answers_is_given_up_on_after_the_ask_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Else one ignored sampling request would leave every call of the backend without
    # a timeout for as long as the client stays connected. The backend is told; here
    # it fails its call with that error (no restart: it did answer).
    desk = Desk()
    desk.calls.begin(ProcessLink(poster=AskingBackend(desk, work=None)))
    with pytest.raises(RpcError, match="did not answer sampling/createMessage within 300 s") as caught:
        await forward(desk, desk.origin(thinking=math.inf))
    assert caught.value.code == types.REQUEST_TIMEOUT
    assert trio.current_time() == ASK_LIMIT
    assert desk.calls.asking == 0
    assert desk.ended == []

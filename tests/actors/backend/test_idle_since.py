"""Since when a backend is idle: set when its last call in flight ends, on both lanes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import trio
import trio.testing

from assern.actors.backend.calls import CallDesk
from assern.actors.backend.forward import Forwarder
from assern.actors.backend.messages import ForwardCall, ProgressSink
from assern.actors.backend.splice import Describe
from assern.actors.backend.status import BackendState, BackendStatus, dormant_since
from assern.actors.backend.transport import ProcessLink
from assern.actors.config.spec import ServerSpec
from assern.supervisor.mailbox import Pending, Reply, new_reply

SPEC = ServerSpec(name="b", transport="stdio", command="b", timeout=30.0)


def desk() -> CallDesk:
    return CallDesk(SPEC, finish=lambda _error: None, ended=lambda: False, last_exit=lambda: None)


class Answered:
    """A spliced call's reply that only records that it was answered."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []

    def answered(self, message: dict[str, Any], line: bytes, backend_id: str) -> None:
        self.answers.append(message)

    def progressed(self, params: dict[str, Any], line: bytes, backend_id: str) -> None:
        pass

    def failed(self, error: Exception) -> None:
        raise AssertionError(error)

    def lost(self, describe: Describe) -> None:
        raise AssertionError("lost")


async def test_a_spliced_call_makes_the_backend_busy_then_idle_from_its_end(
    outbox: Callable[..., Any],
) -> None:
    calls = desk()
    forwarder = Forwarder(outbox())
    calls.begin(ProcessLink(forwarder=forwarder))
    calls.fast_path = True
    calls.idle_since = 1.0
    first, second = Answered(), Answered()
    one = calls.splice("echo", {}, first, origin=None, request_id=1, progress=False)
    two = calls.splice("echo", {}, second, origin=None, request_id=2, progress=False)
    assert one is not None
    assert two is not None
    forwarder.route({"jsonrpc": "2.0", "id": one.backend_id, "result": {}})
    assert calls.in_flight == 1
    assert calls.idle_since == 1.0  # one call is still running
    before = time.time()
    forwarder.route({"jsonrpc": "2.0", "id": two.backend_id, "result": {}})
    assert calls.in_flight == 0
    assert calls.idle_since is not None
    assert before <= calls.idle_since <= time.time()
    assert len(first.answers) == len(second.answers) == 1


class Poster:
    """A raw lane that answers each call once `release` is set."""

    def __init__(self) -> None:
        self.release = trio.Event()

    async def request(
        self, method: str, params: dict[str, Any] | None = None, progress: ProgressSink | None = None
    ) -> dict[str, Any]:
        await self.release.wait()
        return {"content": []}


async def test_a_mailbox_call_makes_the_backend_busy_then_idle_from_its_end() -> None:
    calls = desk()
    poster = Poster()
    calls.begin(ProcessLink(poster=poster))
    reply: Reply[dict[str, Any]]
    pending: Pending[dict[str, Any]]
    reply, pending = new_reply()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            msg = ForwardCall(name="echo", arguments={}, origin=None, reply=reply)
            nursery.start_soon(calls.handle, None, msg)  # type: ignore[arg-type]  # the lane needs no session
            await trio.testing.wait_all_tasks_blocked()
            busy = (calls.in_flight, calls.idle_since)
            before = time.time()
            poster.release.set()
        assert await pending.result() == {"content": []}
    assert busy == (1, None)  # never idle yet: no call ever ended
    idle = calls.idle_since
    assert calls.in_flight == 0
    assert idle is not None
    assert before <= idle <= time.time()


def test_only_a_dormant_backend_has_a_dormant_since() -> None:
    for state in BackendState:
        status = BackendStatus(server="b", transport="stdio", state=state, state_since=1000.0)
        assert dormant_since(status) == (1000.0 if state is BackendState.DORMANT else None)

"""The raw lane's request table: ids of our own, answers and progress routed to sinks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from assern.actors.backend.forward import Forwarder, ForwardLost, swap_id
from assern.actors.jsonrpc.errors import RpcError


class RecordingSink:
    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []
        self.progress: list[dict[str, Any]] = []
        self.losses: list[str] = []

    def answered(self, message: dict[str, Any], line: bytes) -> None:
        self.answers.append(message)

    def progressed(self, params: dict[str, Any], line: bytes) -> None:
        self.progress.append(params)

    def lost(self, reason: str) -> None:
        self.losses.append(reason)


async def test_a_sent_request_gets_its_answer_and_progress(outbox: Callable[..., Any]) -> None:
    out = outbox()
    forwarder, sink = Forwarder(out), RecordingSink()
    request_id = forwarder.send_nowait("tools/call", {"name": "echo"}, sink, progress=True)
    [line] = out.take()
    assert line == {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "echo", "_meta": {"progressToken": request_id}},
    }
    assert isinstance(request_id, str)  # never an integer: the SDK's ids are
    progress = {"progressToken": request_id, "progress": 1, "total": 2}
    assert forwarder.route({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    assert forwarder.route({"jsonrpc": "2.0", "id": request_id, "result": {"content": []}})
    assert sink.progress == [progress]
    assert sink.answers == [{"jsonrpc": "2.0", "id": request_id, "result": {"content": []}}]
    # Answered means forgotten: a second answer with that id is not ours any more.
    assert not forwarder.route({"jsonrpc": "2.0", "id": request_id, "result": {}})


async def test_messages_that_are_not_ours_go_on_to_the_sdk(outbox: Callable[..., Any]) -> None:
    out = outbox()
    forwarder = Forwarder(out)
    forwarder.send_nowait("tools/call", {"name": "echo"}, RecordingSink(), progress=False)
    assert not forwarder.route({"jsonrpc": "2.0", "id": 1, "result": {}})  # an SDK request's
    assert not forwarder.route({"jsonrpc": "2.0", "id": "a1", "method": "roots/list"})  # a request
    assert not forwarder.route({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
    assert not forwarder.route(["not", "a", "dict"])


async def test_cancel_tells_the_backend_and_forgets_the_request(outbox: Callable[..., Any]) -> None:
    out = outbox()
    forwarder, sink = Forwarder(out), RecordingSink()
    request_id = forwarder.send_nowait("tools/call", {"name": "sleep"}, sink, progress=False)
    assert request_id is not None
    assert forwarder.cancel(request_id)
    assert not forwarder.cancel(request_id)
    _request, note = out.take()
    assert note["method"] == "notifications/cancelled"
    assert note["params"]["requestId"] == request_id
    assert not forwarder.route({"jsonrpc": "2.0", "id": request_id, "result": {}})
    assert sink.answers == []
    assert sink.losses == []


async def test_close_fails_every_pending_request_and_refuses_new_ones(outbox: Callable[..., Any]) -> None:
    out = outbox()
    forwarder = Forwarder(out)
    sinks = [RecordingSink(), RecordingSink()]
    for sink in sinks:
        forwarder.send_nowait("tools/call", {"name": "sleep"}, sink, progress=False)
    forwarder.close("the backend closed its stdout")
    assert [s.losses for s in sinks] == [["the backend closed its stdout"]] * 2
    assert forwarder.closed
    assert forwarder.send_nowait("tools/call", {"name": "echo"}, RecordingSink(), progress=False) is None
    with pytest.raises(ForwardLost, match="closed its stdout"):
        await forwarder.request("tools/call", {"name": "echo"})


async def test_a_backed_up_stdin_sends_nothing_and_keeps_nothing(outbox: Callable[..., Any]) -> None:
    out = outbox(1)
    forwarder, sink = Forwarder(out), RecordingSink()
    assert forwarder.send_nowait("tools/call", {"name": "a"}, sink, progress=False) == "a1"
    assert forwarder.send_nowait("tools/call", {"name": "b"}, sink, progress=False) is None
    forwarder.close("gone")
    assert sink.losses == ["gone"]  # only the request that went out
    assert len(out.take()) == 1


async def test_request_waits_for_the_result_or_raises_the_backend_error(outbox: Callable[..., Any]) -> None:
    out = outbox()
    forwarder = Forwarder(out)
    results: list[Any] = []

    async def call(name: str) -> None:
        try:
            results.append(await forwarder.request("tools/call", {"name": name}))
        except RpcError as exc:
            results.append((exc.code, exc.message, exc.data))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, "good")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(call, "bad")
        await trio.testing.wait_all_tasks_blocked()
        good, bad = out.take()
        forwarder.route({"jsonrpc": "2.0", "id": bad["id"], "error": {"code": -32602, "message": "no"}})
        forwarder.route({"jsonrpc": "2.0", "id": good["id"], "result": {"content": [], "isError": False}})
    assert len(results) == 2
    assert (-32602, "no", None) in results
    assert {"content": [], "isError": False} in results


async def test_a_cancelled_request_cancels_at_the_backend(
    autojump_clock: trio.testing.MockClock, outbox: Callable[..., Any]
) -> None:
    out = outbox()
    forwarder = Forwarder(out)
    with trio.move_on_after(5):
        await forwarder.request("tools/call", {"name": "sleep"})
    request, note = out.take()
    assert note["params"]["requestId"] == request["id"]
    assert not forwarder.route({"jsonrpc": "2.0", "id": request["id"], "result": {}})


def test_swap_id_puts_the_callers_id_in_place_of_ours_only_when_certain() -> None:
    line = b'{"jsonrpc":"2.0","id":"a12","result":{"content":[{"type":"text","text":"hi"}]}}'
    assert swap_id(line, "a12", 7) == line.replace(b'"a12"', b"7") + b"\n"
    assert swap_id(line, "a12", "req-1") == line.replace(b'"a12"', b'"req-1"') + b"\n"
    assert swap_id(line, "a1", 7) is None  # "a1" is not "a12"
    mentioned = b'{"jsonrpc":"2.0","id":"a12","result":{"content":[{"type":"text","text":"see a12"}]}}'
    assert swap_id(mentioned, "a12", 7) == mentioned.replace(b'"a12"', b"7") + b"\n"
    echoed = b'{"jsonrpc":"2.0","id":"a12","result":{"content":[{"type":"text","text":"a12"}]}}'
    assert swap_id(echoed, "a12", 7) is None  # twice: the caller re-encodes
    escaped = b'{"jsonrpc":"2.0","id":"\\u0061\\u0031\\u0032","result":{}}'
    assert swap_id(escaped, "a12", 7) is None

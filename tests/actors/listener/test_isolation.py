"""A connection is its own failure domain: a fault while serving one client ends that
client's connection only, never the listener or another client's session."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import structlog
import trio
import trio.testing
from fake_backend import Wire, setup

from assern.actors.listener.actor import BackendNote, ListenerActor, contained
from assern.actors.listener.raw_lane import RawLane

LIMIT = 30  # a guard against a hung test, never an assertion about speed


class Boom(RuntimeError):
    """What the faulty code path raises: nothing anticipated it."""


@contextlib.asynccontextmanager
async def two_clients() -> AsyncIterator[tuple[ListenerActor, Wire, Wire, Any]]:
    parts = setup("echo", "gate")
    _, notes = trio.open_memory_channel[BackendNote](1)
    listener = ListenerActor(parts.shared, notes, stdio=False)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parts.backend.run)
            await nursery.start(listener.run)
            wires = []

            async def serve(stream: trio.SocketStream) -> None:
                async with stream:  # as the listener's own socket clients are served
                    await listener.serve_connection("socket", stream, stream)

            for _ in range(2):
                ours, theirs = trio.socket.socketpair()
                nursery.start_soon(serve, trio.SocketStream(theirs))
                client = trio.SocketStream(ours)
                wires.append(Wire(client, client))
            try:
                yield listener, wires[0], wires[1], parts.backend
            finally:
                for wire in wires:
                    await wire.send_stream.aclose()
                nursery.cancel_scope.cancel()


async def test_a_fault_in_one_connection_leaves_the_other_session_and_its_call_untouched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = RawLane.intercept

    def intercept(self: RawLane, raw: Any) -> bool:
        if isinstance(raw, dict) and raw.get("method") == "tools/call" and raw.get("id") == "explode":
            raise Boom("an unexpected fault while serving one client")
        return original(self, raw)

    monkeypatch.setattr(RawLane, "intercept", intercept)
    with structlog.testing.capture_logs() as logs:
        async with two_clients() as (listener, faulty, healthy, backend):
            await faulty.handshake()
            await healthy.handshake()
            assert len(listener.connections) == 2
            # The healthy client has a call in flight at the backend ...
            await healthy.request(7, "tools/call", {"name": "a_gate", "arguments": {}})
            await backend.started.wait()
            # ... when the other client's connection hits a fault nobody anticipated.
            await faulty.request("explode", "tools/call", {"name": "a_echo", "arguments": {}})
            assert await faulty.receive_stream.receive_some(65536) == b""  # only it is closed
            await trio.testing.wait_all_tasks_blocked()
            assert len(listener.connections) == 1
            backend.release.set()
            answer = await healthy.next()
            assert answer["id"] == 7
            assert answer["result"]["content"][0]["text"] == "opened"
            # Its session is the same one: served without a new handshake.
            echoed = await healthy.ask(8, "tools/call", {"name": "a_echo", "arguments": {"text": "on"}})
            assert echoed["result"]["content"][0]["text"] == "on"
    [failed] = [entry for entry in logs if entry["event"] == "client_connection_failed"]
    assert failed["log_level"] == "error"
    assert failed["client"].startswith("socket-")
    assert "Boom: an unexpected fault while serving one client" in failed["error"]


async def test_contained_logs_a_fault_and_returns() -> None:
    async def broken() -> None:
        raise Boom("the control plane broke")

    with structlog.testing.capture_logs() as logs:
        await contained("control", broken())
    assert [(entry["event"], entry["client"]) for entry in logs] == [("client_connection_failed", "control")]


async def test_cancellation_is_never_contained() -> None:
    async def serving() -> None:
        await trio.sleep_forever()

    with trio.CancelScope() as scope:
        scope.cancel()
        await contained("socket-1", serving())
        raise AssertionError("the cancellation was swallowed")
    assert scope.cancelled_caught

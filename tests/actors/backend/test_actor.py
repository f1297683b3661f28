"""A backend actor on our own client: hand-written backends that misbehave, and pings.

Each backend process here is a few lines of Python on stdin/stdout, so the test controls
every byte the actor sees. The ping tests use a stand-in session on virtual time.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import mcp_types as types
import pytest
import structlog.testing
import trio
import trio.testing

from assern.actors.backend.actor import PING_INTERVAL, PING_TIMEOUT, BackendActor
from assern.actors.backend.errors import BackendExited, BackendHung
from assern.actors.backend.messages import BackendRequest
from assern.actors.backend.status import BackendState
from assern.actors.config.spec import ServerSpec
from assern.actors.jsonrpc.errors import RpcError

#: Answers initialize with `VERSION`, tools/list with one tool; writes `NOISE` first.
BACKEND = """
import json, sys
VERSION, NOISE = sys.argv[1], sys.argv[2]
if NOISE:
    print(NOISE, flush=True)
for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if method == "initialize":
        info = {"name": "x", "version": "0"}
        result = {"protocolVersion": VERSION, "capabilities": {"tools": {}}, "serverInfo": info}
    elif method == "tools/list":
        result = {"tools": [{"name": "only", "inputSchema": {"type": "object"}}]}
    elif "id" in msg:
        result = {}
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


def spec(version: str, noise: str = "") -> ServerSpec:
    return ServerSpec(
        name="hand",
        transport="stdio",
        command=sys.executable,
        args=("-c", BACKEND, version, noise),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        startup_timeout=20,
    )


def actor(server: ServerSpec) -> BackendActor:
    _send, inbox = trio.open_memory_channel[BackendRequest](1)
    return BackendActor(server, inbox, on_change=lambda _name: None, on_notification=lambda _s, _n: None)


async def test_a_backend_choosing_an_unknown_version_fails_to_start_and_says_why() -> None:
    backend = actor(spec("1999-01-01"))
    with trio.fail_after(30), pytest.raises(BackendExited) as exited:
        await backend.run()
    assert str(exited.value) == (
        "server 'hand' chose protocol version '1999-01-01', which the initialize handshake does not "
        "offer (assern speaks 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25)"
    )


async def test_a_line_that_is_not_json_rpc_is_logged_and_skipped() -> None:
    backend = actor(spec("2025-03-26", noise="this is not JSON"))
    seen: dict[str, Any] = {}
    with trio.fail_after(30), structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            await nursery.start(backend.run)
            seen["state"] = backend.state
            seen["fast_path"] = backend.fast_path
            seen["listing"] = backend.listing
            nursery.cancel_scope.cancel()
    assert seen["state"] is BackendState.READY
    assert seen["fast_path"]  # a ready stdio backend on our client takes the raw lane
    assert [tool.name for tool in seen["listing"].tools] == ["only"]
    assert seen["listing"].capabilities == types.ServerCapabilities(tools=types.ToolsCapability())
    [bad] = [entry for entry in logs if entry["event"] == "backend_bad_message"]
    assert bad["error"].startswith("not JSON")


class Pinged:
    """Just enough of a session for `_ping`: counts pings, answers as told."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.pings = 0

    async def send_ping(self) -> None:
        self.pings += 1
        if self.answer == "error":
            raise RpcError(types.METHOD_NOT_FOUND, "Method not found")
        if self.answer == "never":
            await trio.sleep_forever()


async def test_a_quiet_backend_that_does_not_answer_its_ping_is_hung(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backend, session = actor(spec("2025-11-25")), Pinged("never")
    await backend._ping(session)  # type: ignore[arg-type]  # a stand-in with send_ping only
    assert session.pings == 1
    assert isinstance(backend._end, BackendHung)
    assert trio.current_time() == PING_INTERVAL + PING_TIMEOUT


@pytest.mark.parametrize("answer", ["ok", "error"])
async def test_a_backend_that_answers_its_ping_somehow_is_alive(
    autojump_clock: trio.testing.MockClock, answer: str
) -> None:
    backend, session = actor(spec("2025-11-25")), Pinged(answer)
    with trio.move_on_after(3 * PING_INTERVAL + 1):
        await backend._ping(session)  # type: ignore[arg-type]
    assert session.pings == 3
    assert backend._end is None


async def test_a_busy_backend_is_not_pinged(autojump_clock: trio.testing.MockClock) -> None:
    backend, session = actor(spec("2025-11-25")), Pinged("never")
    backend.calls.in_flight = 1
    with trio.move_on_after(5 * PING_INTERVAL):
        await backend._ping(session)  # type: ignore[arg-type]
    assert session.pings == 0


async def test_an_idle_backend_asks_to_sleep_and_says_how_long_it_was_quiet(
    autojump_clock: trio.testing.MockClock,
) -> None:
    asked: list[str] = []
    _send, inbox = trio.open_memory_channel[BackendRequest](1)
    backend = BackendActor(
        spec("2025-11-25"),
        inbox,
        on_change=lambda _name: None,
        on_notification=lambda _s, _n: None,
        on_idle=asked.append,
    )
    backend.calls.last_activity = trio.current_time()
    backend.calls.idle_since = 1767323045.0
    backend.calls.calls_total = 7
    with trio.fail_after(600), structlog.testing.capture_logs() as logs:
        await backend._watch_idle(60.0)
    assert asked == ["hand"]
    assert trio.current_time() == 60.0
    [idle] = [entry for entry in logs if entry["event"] == "backend_idle"]
    assert idle == {
        "event": "backend_idle",
        "log_level": "info",
        "idle_s": 60.0,
        "idle_timeout_s": 60.0,
        "idle_since": 1767323045.0,
        "calls_total": 7,
    }


def test_status_says_since_when_a_backend_is_idle_and_none_while_a_call_runs() -> None:
    backend = actor(spec("2025-11-25"))
    seen = [backend.status.idle_since]  # never ready yet
    backend.calls.idle_since = 1767323045.0
    seen.append(backend.status.idle_since)
    backend.calls.in_flight = 1
    seen.append(backend.status.idle_since)
    assert seen == [None, 1767323045.0, None]
    assert backend.status.in_flight == 1


async def test_a_ready_backend_is_idle_from_its_start_on() -> None:
    backend = actor(spec("2025-11-25"))
    seen: dict[str, Any] = {}
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(backend.run)
            seen["status"] = backend.status
            nursery.cancel_scope.cancel()
    status = seen["status"]
    assert status.ready_since is not None
    assert status.idle_since == status.ready_since

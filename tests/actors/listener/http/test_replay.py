"""A session's replay buffer: what a client that resumes a stream gets again."""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp.server.streamable_http import EventMessage

from assern.actors.listener.http.replay import ReplayBuffer


def note(n: int) -> types.JSONRPCNotification:
    return types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={"n": n})


async def replayed(buffer: ReplayBuffer, last: str) -> tuple[str | None, list[tuple[str | None, int]]]:
    got: list[EventMessage] = []

    async def collect(event: EventMessage) -> None:
        got.append(event)

    stream = await buffer.replay_events_after(last, collect)
    return stream, [(e.event_id, (e.message.params or {})["n"]) for e in got]  # type: ignore[union-attr]


async def test_a_stream_resumes_after_its_last_event_with_its_own_events_only() -> None:
    buffer = ReplayBuffer(16)
    primed = await buffer.store_event("7", None)
    first = await buffer.store_event("7", note(1))
    await buffer.store_event("_GET_stream", note(100))
    await buffer.store_event("7", note(2))
    await buffer.store_event("8", note(200))
    await buffer.store_event("7", note(3))
    assert len({primed, first}) == 2  # ids are unique across the session's streams

    assert await replayed(buffer, primed) == ("7", [("2", 1), ("4", 2), ("6", 3)])
    assert await replayed(buffer, first) == ("7", [("4", 2), ("6", 3)])
    assert await replayed(buffer, "6") == ("7", [])
    assert buffer.resumed["7"] == 3
    assert buffer.stream_of("3") == "_GET_stream"


@pytest.mark.parametrize("last", ["99", "0", "", "abc", "-1", "1" * 40])
async def test_an_id_the_buffer_does_not_hold_replays_nothing(last: str) -> None:
    buffer = ReplayBuffer(4)
    await buffer.store_event("7", note(1))
    assert await replayed(buffer, last) == (None, [])
    assert not buffer.resumed


async def test_the_buffer_keeps_only_the_latest_events() -> None:
    buffer = ReplayBuffer(2)
    for n in range(1, 5):
        await buffer.store_event("7", note(n))
    assert buffer.stream_of("2") is None  # pushed out: the client cannot resume from it
    assert await replayed(buffer, "2") == (None, [])
    assert await replayed(buffer, "3") == ("7", [("4", 4)])


def test_a_buffer_holds_at_least_one_event() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ReplayBuffer(0)

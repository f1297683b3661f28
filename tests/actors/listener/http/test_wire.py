"""The session wire: posted messages become lines; written lines go to the right stream."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
import trio
import trio.testing
from mcp.shared.message import ServerMessageMetadata, SessionMessage

from assern.actors.listener.http.wire import SessionWire


def request(request_id: int, method: str, params: dict[str, object] | None = None) -> types.JSONRPCRequest:
    return types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)


async def lines(wire: SessionWire, count: int) -> list[dict[str, Any]]:
    data = b""
    while data.count(b"\n") < count:
        data += await wire.receive_stream.receive_some()
    return [json.loads(line) for line in data.splitlines()]


def related(message: SessionMessage) -> object:
    metadata = message.metadata
    return metadata.related_request_id if isinstance(metadata, ServerMessageMetadata) else None


async def test_messages_are_routed_to_the_stream_they_belong_to() -> None:
    read_send, read = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    write, written = anyio.create_memory_object_stream[SessionMessage](8)
    wire = SessionWire(read, write)
    async with read_send, read, write, written, trio.open_nursery() as nursery:
        nursery.start_soon(wire.pump_in)
        call = request(7, "tools/call", {"name": "x", "_meta": {"progressToken": "p1"}})
        await read_send.send(SessionMessage(call))
        [line] = await lines(wire, 1)
        assert line["id"] == 7
        assert line["params"]["_meta"] == {"progressToken": "p1"}
        assert wire.unanswered == {"7": 7}

        out = wire.send_stream
        progress = {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "p1", "progress": 1},
        }
        log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
        ask = {
            "jsonrpc": "2.0",
            "id": "s1",
            "method": "sampling/createMessage",
            "params": {"messages": [], "maxTokens": 1},
        }
        answer = {"jsonrpc": "2.0", "id": 7, "result": {"content": []}}
        # lines may arrive split anywhere, several at once
        data = b"".join(json.dumps(m).encode() + b"\n" for m in (progress, log, ask, answer))
        await out.send_all(data[:10])
        await out.send_all(data[10:])
        got = [written.receive_nowait() for _ in range(4)]
        assert [related(m) for m in got] == [
            7,
            None,
            None,
            None,
        ]  # progress to its call; the rest by id or GET
        assert isinstance(got[3].message, types.JSONRPCResponse)
        assert wire.unanswered == {}
        nursery.cancel_scope.cancel()


async def test_a_call_whose_client_hung_up_is_cancelled_once() -> None:
    read_send, read = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    write, written = anyio.create_memory_object_stream[SessionMessage](8)
    wire = SessionWire(read, write)
    async with read_send, read, write, written, trio.open_nursery() as nursery:
        nursery.start_soon(wire.pump_in)
        await read_send.send(SessionMessage(request(3, "tools/call", {"name": "slow"})))
        await lines(wire, 1)
        assert await wire.abandon(3, "gone")
        [cancel] = await lines(wire, 1)
        assert cancel == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 3, "reason": "gone"},
        }
        await wire.send_stream.send_all(
            b'{"jsonrpc":"2.0","id":3,"error":{"code":-32800,"message":"cancelled"}}\n'
        )
        written.receive_nowait()
        assert not await wire.abandon(3, "gone")  # answered: nothing to cancel
        nursery.cancel_scope.cancel()


async def test_the_session_s_end_is_the_connection_s_end_of_input() -> None:
    read_send, read = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    write, written = anyio.create_memory_object_stream[SessionMessage](8)
    wire = SessionWire(read, write)
    async with read, write, written, trio.open_nursery() as nursery:
        nursery.start_soon(wire.pump_in)
        await read_send.send(ValueError("a refused message is skipped"))
        await read_send.aclose()
        assert await wire.receive_stream.receive_some() == b""


async def test_a_transport_that_closes_our_end_while_we_wait_ends_input_quietly() -> None:
    # what the transport's terminate() does on DELETE: it closes the stream pump_in reads
    # (an anyio error, not trio's); the pump must end, not fail the front's other sessions
    read_send, read = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    write, written = anyio.create_memory_object_stream[SessionMessage](8)
    wire = SessionWire(read, write)
    async with read_send, write, written, trio.open_nursery() as nursery:
        nursery.start_soon(wire.pump_in)
        await trio.testing.wait_all_tasks_blocked()
        await read.aclose()
        assert await wire.receive_stream.receive_some() == b""
        # writing after the session ended is dropped too
        await write.aclose()
        log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": 1}}
        await wire.deliver(json.dumps(log).encode())

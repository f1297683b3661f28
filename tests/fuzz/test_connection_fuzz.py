"""Hostile lines at a client connection in-process: each is answered as it is owed, and the
connection goes on serving."""

from __future__ import annotations

import json
from typing import Any

import trio
from fake_backend import Wire, setup
from hostile import LINES, check_answers, lane_requests, owed_count
from hypothesis import given
from hypothesis import strategies as st

from assern.actors.listener.session import ClientConnection

PROBE = "__fuzz_probe_0001__"


async def _exchange(lines: list[bytes]) -> list[dict[str, Any]]:
    parts = setup("echo", "gate")
    ours, theirs = trio.socket.socketpair()
    client = trio.SocketStream(ours)
    wire = Wire(client, client)
    connection = ClientConnection("fuzz-1", parts.shared)
    answers: list[dict[str, Any]] = []

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            await connection.serve(stream, stream)

    with trio.fail_after(30):
        async with client, trio.open_nursery() as nursery:
            nursery.start_soon(parts.backend.run)
            nursery.start_soon(serve, trio.SocketStream(theirs))
            await wire.handshake()
            for line in lines:
                await wire.send_line(line)
            await wire.request(PROBE, "ping")
            owed = owed_count(lines) + 1
            while len(answers) < owed:
                message = await wire.next()
                if "id" in message:
                    answers.append(message)
            nursery.cancel_scope.cancel()
    return answers


@given(lines=st.lists(LINES, min_size=1, max_size=8))
def test_every_hostile_line_is_answered_as_owed_and_the_connection_goes_on(lines: list[bytes]) -> None:
    answers = trio.run(_exchange, lines)
    probe = [answer for answer in answers if answer.get("id") == PROBE]
    assert probe == [{"jsonrpc": "2.0", "id": PROBE, "result": {}}]
    check_answers(lines, [answer for answer in answers if answer.get("id") != PROBE])


@given(lines=st.lists(lane_requests(), min_size=1, max_size=8))
def test_junk_where_the_raw_lane_looks_is_answered_and_the_connection_goes_on(lines: list[bytes]) -> None:
    # `tools/list` with `"_meta": true` once ended the connection (a membership test on
    # a bool in the raw lane): a stdio client's whole session, with its calls in flight.
    answers = trio.run(_exchange, lines)
    probe = [answer for answer in answers if answer.get("id") == PROBE]
    assert probe == [{"jsonrpc": "2.0", "id": PROBE, "result": {}}]
    check_answers(lines, [answer for answer in answers if answer.get("id") != PROBE])


def test_a_list_whose_meta_is_not_an_object_is_refused_and_the_connection_goes_on() -> None:
    metas = [True, 7, 1.5, "x", [1]]
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list", "params": {"_meta": meta}}).encode()
        for n, meta in enumerate(metas)
    ]
    answers = {answer["id"]: answer for answer in trio.run(_exchange, lines)}
    for n in range(len(metas)):
        assert answers[n]["error"]["code"] == -32602
        assert "_meta" in answers[n]["error"]["message"]
    assert answers[PROBE] == {"jsonrpc": "2.0", "id": PROBE, "result": {}}


def test_a_ten_megabyte_line_is_answered_and_the_connection_goes_on() -> None:
    big = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": "y" * 10_000_000}})
    answers = trio.run(_exchange, [big.encode(), b'{"jsonrpc":"2.0","id":8,"method":"nope"}'])
    by_id = {answer["id"]: answer for answer in answers}
    assert by_id[7] == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert by_id[8]["error"]["code"] == -32601


async def test_a_last_line_without_newline_before_a_half_close_is_answered() -> None:
    parts = setup("echo")
    ours, theirs = trio.socket.socketpair()
    client = trio.SocketStream(ours)
    wire = Wire(client, client)
    connection = ClientConnection("fuzz-2", parts.shared)

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            await connection.serve(stream, stream)

    with trio.fail_after(30):
        async with client, trio.open_nursery() as nursery:
            nursery.start_soon(parts.backend.run)
            nursery.start_soon(serve, trio.SocketStream(theirs))
            await wire.handshake()
            await client.send_all(b'{"jsonrpc":"2.0","id":5,"method":"ping"}')  # no newline ...
            await client.send_eof()  # ... and the client closes its side
            answer = await wire.next()
            assert answer == {"jsonrpc": "2.0", "id": 5, "result": {}}
            assert await client.receive_some(65536) == b""  # then the connection ends
            nursery.cancel_scope.cancel()

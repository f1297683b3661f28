"""The JSON-RPC framing: lines read whole and bounded, messages encoded one way."""

from __future__ import annotations

import json

import mcp_types as types
import pytest
import trio
import trio.testing

from assern.actors.jsonrpc import framing
from assern.actors.listener.jsonl import parse_message
from assern.supervisor.io.reader import LineReader, LineTooLong


async def lines_of(*chunks: bytes, max_line: int = framing.MAX_LINE) -> list[bytes]:
    send, receive = trio.testing.memory_stream_one_way_pair()
    for chunk in chunks:
        await send.send_all(chunk)
    await send.aclose()
    reader = LineReader(receive, max_line) if max_line != framing.MAX_LINE else framing.line_reader(receive)
    got = []
    while (line := await reader.receive()) is not None:
        got.append(line)
    return got


async def test_lines_split_across_chunks_come_whole() -> None:
    assert await lines_of(b'{"a"', b': 1}\n{"b": 2}\n{', b'"c": 3}') == [
        b'{"a": 1}',
        b'{"b": 2}',
        b'{"c": 3}',
    ]


async def test_blank_lines_are_lines_and_a_blank_tail_is_none() -> None:
    assert await lines_of(b"\n\nx\n  ") == [b"", b"", b"x"]


async def test_a_line_too_long_is_refused() -> None:
    with pytest.raises(LineTooLong, match="exceeded 10 bytes"):
        await lines_of(b"x" * 20, max_line=10)
    assert await lines_of(b"x" * 10 + b"\n", max_line=10) == [b"x" * 10]


def test_every_peer_shares_one_limit() -> None:
    _send, receive = trio.testing.memory_stream_one_way_pair()
    assert framing.line_reader(receive).max_line == framing.MAX_LINE == 64 * 1024 * 1024


def test_bad_lines_get_their_error_lines() -> None:
    parse_error = framing.decode(b"{nope")
    assert isinstance(parse_error, bytes)
    assert json.loads(parse_error)["error"]["code"] == types.PARSE_ERROR
    assert framing.decode(b'{"a": 1}') == {"a": 1}
    invalid = parse_message({"jsonrpc": "2.0", "id": 4, "params": {}})
    assert isinstance(invalid, bytes)
    assert json.loads(invalid)["id"] == 4
    assert json.loads(invalid)["error"]["code"] == types.INVALID_REQUEST
    assert isinstance(parse_message({"jsonrpc": "2.0", "id": 4, "method": "ping"}), types.JSONRPCRequest)


def test_encoding_is_compact_utf8_and_survives_lone_surrogates() -> None:
    assert framing.encode({"a": "é", "b": [1, 2]}) == '{"a":"é","b":[1,2]}\n'.encode()
    assert framing.encode({"a": "\ud800"}) == b'{"a":"\\ud800"}\n'


def test_each_kind_of_message_has_one_encoding() -> None:
    assert framing.request(1, "ping") == b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    assert framing.request("a1", "tools/call", {"name": "x"}) == (
        b'{"jsonrpc":"2.0","id":"a1","method":"tools/call","params":{"name":"x"}}\n'
    )
    assert framing.notification("notifications/initialized") == (
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    )
    assert framing.result(7, {}) == b'{"jsonrpc":"2.0","id":7,"result":{}}\n'
    assert framing.error(None, framing.PARSE_ERROR, "bad") == (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}\n'
    )
    assert json.loads(framing.error(3, -1, "m", {"k": 1}))["error"] == {
        "code": -1,
        "message": "m",
        "data": {"k": 1},
    }


def test_the_standard_codes_are_the_sdks() -> None:
    assert (framing.PARSE_ERROR, framing.INVALID_REQUEST, framing.METHOD_NOT_FOUND) == (
        types.PARSE_ERROR,
        types.INVALID_REQUEST,
        types.METHOD_NOT_FOUND,
    )
    assert (framing.INVALID_PARAMS, framing.INTERNAL_ERROR) == (types.INVALID_PARAMS, types.INTERNAL_ERROR)

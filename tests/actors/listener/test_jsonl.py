"""Reading a client's lines, whatever chunks they come in."""

from __future__ import annotations

import json

import mcp_types as types
import pytest
import trio
import trio.testing

from assern.actors.listener import jsonl
from assern.actors.listener.jsonl import LineReader, LineTooLong, decode_line, encode, parse_message


async def lines_of(*chunks: bytes) -> list[bytes]:
    send, receive = trio.testing.memory_stream_one_way_pair()
    for chunk in chunks:
        await send.send_all(chunk)
    await send.aclose()
    reader = LineReader(receive)
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


async def test_a_line_too_long_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl, "MAX_LINE", 10)
    with pytest.raises(LineTooLong):
        await lines_of(b"x" * 20)


def test_bad_lines_get_their_error_lines() -> None:
    parse_error = decode_line(b"{nope")
    assert isinstance(parse_error, bytes)
    assert json.loads(parse_error)["error"]["code"] == types.PARSE_ERROR
    invalid = parse_message({"jsonrpc": "2.0", "id": 4, "params": {}})
    assert isinstance(invalid, bytes)
    assert json.loads(invalid)["id"] == 4
    assert json.loads(invalid)["error"]["code"] == types.INVALID_REQUEST
    assert isinstance(parse_message({"jsonrpc": "2.0", "id": 4, "method": "ping"}), types.JSONRPCRequest)


def test_encoding_is_compact_utf8_and_survives_lone_surrogates() -> None:
    assert encode({"a": "é", "b": [1, 2]}) == '{"a":"é","b":[1,2]}\n'.encode()
    assert encode({"a": "\ud800"}) == b'{"a":"\\ud800"}\n'

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


async def test_after_a_line_too_long_the_reader_goes_on_with_the_next() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    await send.send_all(b'{"id": 9, "x": "' + b"y" * 100 + b'"}\nafter\n' + b"z" * 50)
    await send.aclose()
    reader = LineReader(receive, 40, chunk=16)
    with pytest.raises(LineTooLong) as refused:
        await reader.receive()
    assert refused.value.head.startswith(b'{"id": 9')
    assert framing.recover_id(refused.value.head) == 9
    assert await reader.receive() == b"after"
    with pytest.raises(LineTooLong):  # the last line, without a newline, is too long too
        await reader.receive()
    assert await reader.receive() is None


def test_json_nested_deeper_than_the_limit_is_refused_whatever_the_depth() -> None:
    ok = b"[" * framing.MAX_DEPTH + b"]" * framing.MAX_DEPTH
    assert framing.loads(ok) is not None
    for depth in (framing.MAX_DEPTH + 1, 3_000, 100_000):
        line = b"[" * depth + b"]" * depth
        with pytest.raises(framing.TooDeep):
            framing.loads(line)
        answer = json.loads(framing.decode(line))
        assert answer["id"] is None
        assert answer["error"]["code"] == framing.INVALID_REQUEST
        assert f"nested deeper than {framing.MAX_DEPTH} levels" in answer["error"]["message"]
    # unchecked (a backend's output): the parser's own guard, still a TooDeep
    with pytest.raises(framing.TooDeep):
        framing.loads(b"[" * 100_000 + b"]" * 100_000, checked=False)


def test_brackets_in_strings_and_wide_arrays_are_not_depth() -> None:
    assert not framing.nesting_exceeds(b'["' + b"[" * 5000 + b'"]')
    assert not framing.nesting_exceeds(b'["\\"' + b"[[[" * 300 + b'"]')
    assert not framing.nesting_exceeds(b"[" + b"[]," * 10_000 + b"[]]")
    assert framing.nesting_exceeds(b'{"a":' * 600 + b"1" + b"}" * 600)


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (b'{"jsonrpc":"2.0","id":7,"params":[[[', 7),
        (b'{"jsonrpc":"2.0","params":{"id":3,"a":[[]]},"id":"abc"}', "abc"),
        (b'{"method":"id","x":1}', None),
        (b'{"id":true}', None),
        (b'{"id":1.5}', None),
        (b'[{"id":1}]', None),
        (b"not json at all", None),
    ],
)
def test_the_id_of_an_unreadable_line_is_recovered_when_it_can_be(line: bytes, found: object) -> None:
    assert framing.recover_id(line) == found


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

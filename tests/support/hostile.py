"""Hostile lines for the fronts, and what each one must get back.

A line is whatever a buggy or hostile client may write: random bytes, JSON that is not
JSON-RPC, requests with ids of every kind, unknown methods, params of the wrong shape,
JSON nested far too deep. `owed` says which answers a line is owed: a request with a
usable id gets exactly one answer with that id (a result or an error); a notification
or a response (valid JSON-RPC) gets none; anything else (not JSON, nested too deep, not
JSON-RPC) gets an error whose id is the one readable at its top level, else null.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import mcp_types as types
from hypothesis import strategies as st
from pydantic import ValidationError

#: Methods a client may send: served, served with junk params, or unknown. Cancellation
#: and the handshake are left out on purpose: a cancelled request is owed no answer.
METHODS = st.sampled_from(
    [
        "ping",
        "tools/list",
        "prompts/list",
        "resources/list",
        "tools/call",
        "resources/read",
        "nope",
        "",
        "x/y",
    ]
)
IDS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text(max_size=12),
    st.sampled_from([0, -1, 2**53, "", "1", "probe"]),
)
#: Keys the fronts look up: junk under them reaches deeper than junk under random keys.
PROTOCOL_KEYS = st.sampled_from(
    ["_meta", "name", "arguments", "uri", "cursor", "progressToken", "method", "params", "requestId"]
)
JUNK = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=6), PROTOCOL_KEYS), inner, max_size=3),
    ),
    max_leaves=8,
)


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    method = draw(st.one_of(METHODS, METHODS, JUNK))  # mostly a method, sometimes not a string
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(IDS), "method": method}
    params = draw(
        st.one_of(
            st.none(),
            JUNK,
            st.just({"name": "a_echo", "arguments": {"text": "x"}}),
            st.just({"name": "no_such_tool"}),
            st.just({"uri": "assern://a/nothing"}),
            st.builds(lambda meta: {"_meta": meta}, JUNK),
            st.builds(lambda meta: {"name": "a_echo", "arguments": {"text": "x"}, "_meta": meta}, JUNK),
        )
    )
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


#: Values of every JSON type, truthy and falsy: what a check written for one type trips on.
ODD = st.sampled_from([True, False, 0, 7, 1.5, "", "x", [], [1], {}, {"x": 1}, None])


@st.composite
def lane_requests(draw: st.DrawFn) -> bytes:
    """tools/list and tools/call with junk under the keys a front reads before the SDK's
    models do (`name`, `arguments`, `_meta` and the rest): the raw lanes' own checks."""
    params: dict[str, Any] = draw(st.sampled_from([{}, {"name": "a_echo", "arguments": {"text": "x"}}]))
    params = {**params, **draw(st.dictionaries(PROTOCOL_KEYS, st.one_of(ODD, JUNK), min_size=1, max_size=4))}
    method = draw(st.sampled_from(["tools/list", "tools/call"]))
    return json.dumps({"jsonrpc": "2.0", "id": draw(IDS), "method": method, "params": params}).encode()


def nested(depth: int, request_id: int | None) -> bytes:
    inner = b"[" * depth + b"]" * depth
    if request_id is None:
        return inner
    return (
        b'{"jsonrpc":"2.0","method":"ping","params":{"x":'
        + inner
        + b'},"id":'
        + str(request_id).encode()
        + b"}"
    )


LINES = st.one_of(
    requests(),
    st.binary(max_size=64).map(lambda raw: raw.replace(b"\n", b" ")),
    st.text(max_size=40).map(lambda text: text.replace("\n", " ").encode()),
    JUNK.map(lambda value: json.dumps(value).encode()),
    st.builds(nested, st.sampled_from([600, 3_000, 100_000]), st.one_of(st.none(), st.integers(0, 10**6))),
    st.builds(  # valid JSON-RPC of the wrong kind: a response, a batch, a bad version
        lambda request_id: json.dumps(
            [{"jsonrpc": "2.0", "id": request_id, "result": {}}, {"jsonrpc": "1.0", "id": request_id}]
        ).encode(),
        IDS,
    ),
)


def usable(request_id: object) -> bool:
    return isinstance(request_id, str | int) and not isinstance(request_id, bool)


def owed(line: bytes) -> list[object] | None:
    """The ids the answers to `line` carry; None when it is owed no answer."""
    if not line.strip():
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return ["?"]  # an error, whose id is the recovered one or null
    if isinstance(value, dict) and isinstance(value.get("method"), str) and "id" in value:
        request_id = value["id"]
        return [request_id] if usable(request_id) else ["?"]
    if is_message(value):
        return None  # a notification, or a response to nothing this server asked: dropped
    return ["?"]  # not JSON-RPC: an invalid request, answered with the id found or null


def is_message(value: object) -> bool:
    """Whether `value` is a JSON-RPC 2.0 message by the protocol's own schema."""
    try:
        types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError:
        return False
    return True


def owed_count(lines: list[bytes]) -> int:
    """How many answers `lines` are owed in all."""
    return sum(len(ids) for line in lines if (ids := owed(line)) is not None)


def check_answers(lines: list[bytes], answers: list[dict[str, Any]]) -> None:
    """Every line got what it is owed, and nothing else came."""
    expected: Counter[str] = Counter()
    loose = 0
    for line in lines:
        ids = owed(line)
        if ids is None:
            continue
        for request_id in ids:
            if request_id == "?":
                loose += 1
            else:
                expected[json.dumps(request_id)] += 1
    got: Counter[str] = Counter()
    for answer in answers:
        assert "result" in answer or "error" in answer, answer
        got[json.dumps(answer.get("id"))] += 1
    for key, count in expected.items():
        assert got[key] >= count, f"no answer with id {key}: {answers}"
        got[key] -= count
    # What is left answers the lines whose id could not be known (null, or recovered).
    assert sum(got.values()) == loose, f"expected {loose} other answers, got {+got}"

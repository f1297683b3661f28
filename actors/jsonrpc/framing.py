"""Newline-delimited JSON-RPC 2.0: the one place its lines are read, bounded and written.

Every peer of assern speaks it one message a line: the stdio client, the MCP socket's
clients, the backends' stdout and stdin (the control socket uses the same lines for its
own JSON commands). So the limits are set once, here, and every message assern writes
itself is encoded by one of `request`, `notification`, `result` or `error` (a backend's
answer on the spliced lane is passed on as its own bytes: actors/backend/splice.py).

Decoding is bounded as well as the lines: `loads` refuses JSON nested deeper than
`MAX_DEPTH` (a `TooDeep`, which is a `ValueError` like any other undecodable line), so a
hostile line can never reach the interpreter's recursion limit in the parser or in any
code that walks the value later. `recover_id` finds the request id of a line that could
not be decoded, so that its sender still gets an error answer it can match.

Encoding is compact UTF-8, as the `mcp` SDK writes its messages; a string with a lone
surrogate (which UTF-8 cannot carry) is written with every non-ASCII character escaped.
Nothing here imports the SDK.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from typing import TYPE_CHECKING, Any

from assern.supervisor.io.reader import LineReader, LineTooLong

if TYPE_CHECKING:
    from collections.abc import Mapping

    import trio

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_DEPTH",
    "MAX_LINE",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "LineReader",
    "LineTooLong",
    "TooDeep",
    "decode",
    "encode",
    "encoded_result",
    "error",
    "line_reader",
    "loads",
    "not_json",
    "notification",
    "recover_id",
    "request",
    "result",
    "too_deep",
    "too_long",
]

#: The longest line assern reads from any peer: a longer one is answered with an error
#: (when its id can be recovered) and skipped, and the peer's stream goes on.
MAX_LINE = 64 * 1024 * 1024
#: The deepest nesting of arrays and objects assern decodes. MCP messages nest a few
#: dozen levels at most (JSON schemas included); the bound keeps every parser and every
#: walk over a decoded value well inside Python's recursion limit (1000).
MAX_DEPTH = 512

# The error codes of JSON-RPC 2.0 itself.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

RequestId = str | int


def line_reader(stream: trio.abc.ReceiveStream) -> LineReader:
    """The lines of a JSON-RPC peer's stream, bounded by `MAX_LINE`."""
    return LineReader(stream, MAX_LINE)


#: Whether CPython's JSON parser itself stops near Python's recursion limit (about 1,000
#: levels), which bounds an unchecked decode (`loads`). From 3.13 on it bounds its C
#: recursion on its own, about ten times deeper: there every line is scanned.
_PARSER_STOPS_DEEP = sys.version_info < (3, 13)


class TooDeep(ValueError):
    """A JSON text nested deeper than `MAX_DEPTH` (valid JSON, refused all the same)."""


#: A JSON string (escapes included), unrolled so that long strings match in one pass.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRINGS = re.compile(_STRING, re.DOTALL)
#: Opening brackets as +1 and closing ones as -1 (a signed byte), everything else dropped.
_DELTAS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def nesting_exceeds(data: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether `data` (JSON text) nests arrays and objects deeper than `limit`.

    Free for the usual line, which holds fewer brackets than `limit` at all; otherwise
    the strings are blanked and the running depth over the brackets is summed in C.
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    brackets = _STRINGS.sub(b"", data).translate(None, _NOT_BRACKETS).translate(_DELTAS)
    return max(itertools.accumulate(memoryview(brackets).cast("b")), default=0) > limit


def loads(data: bytes | str, *, checked: bool = True) -> Any:
    """The JSON value of `data`, decoded with bounded depth.

    `checked=False` skips the depth scan and relies on the parser's own recursion guard
    alone (caught: still a `TooDeep`, never a crash), where that guard stops near
    Python's recursion limit (before Python 3.13). For a backend's output, whose
    results may be large and bracket-dense, and are mostly passed on undecoded anyway.

    Raises:
        TooDeep: nested deeper than `MAX_DEPTH` (unchecked, before 3.13: than the parser takes).
        ValueError: not JSON (or not UTF-8).
    """
    raw = data.encode() if isinstance(data, str) else data
    if (checked or not _PARSER_STOPS_DEEP) and nesting_exceeds(raw):
        raise TooDeep(f"the JSON is nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(raw)
    except RecursionError:  # the bound above should make this unreachable; never crash on it
        raise TooDeep(f"the JSON is nested deeper than {MAX_DEPTH} levels") from None


_TOKEN = re.compile(_STRING + rb"|[\[\]{}]", re.DOTALL)
_ID_VALUE = re.compile(rb"\s*:\s*(-?\d+(?![.eE\d])|" + _STRING + rb")")


def recover_id(data: bytes) -> RequestId | None:
    """The `id` member of the top-level object in `data`, if one can be read.

    For a line that could not be decoded (too deep, too long, not JSON further on): its
    sender's request is answered with this id. None when there is no such member or its
    value is not a string or an integer.
    """
    depth = 0
    for match in _TOKEN.finditer(data):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
        elif token in (b"]", b"}"):
            depth -= 1
            if depth <= 0:
                return None
        elif depth == 1 and token == b'"id"':
            value = _ID_VALUE.match(data, match.end())
            if value is None:
                continue  # a string value "id", not the key
            try:
                found = json.loads(value.group(1))
            except ValueError:
                return None
            return found if isinstance(found, str | int) and not isinstance(found, bool) else None
    return None


def decode(line: bytes) -> Any:
    """The JSON value of one line, or the bytes of the error line to answer it with.

    Not JSON: a parse error (-32700). Nested deeper than `MAX_DEPTH`: an invalid request
    (-32600) that says so, with the request's id when it can be recovered.
    """
    try:
        return loads(line)
    except TooDeep as exc:
        return too_deep(line, exc)
    except ValueError:
        return not_json()


def not_json() -> bytes:
    """The error line for a line that is not JSON (its id cannot be known)."""
    return error(None, PARSE_ERROR, "Parse error: the line is not valid JSON")


def too_deep(line: bytes, exc: TooDeep) -> bytes:
    """The error line for a line nested deeper than `MAX_DEPTH`."""
    return error(recover_id(line), INVALID_REQUEST, f"Invalid request: {exc}")


def too_long(head: bytes) -> bytes:
    """The error line for a line longer than `MAX_LINE` that began with `head`."""
    message = f"Invalid request: the message exceeded {MAX_LINE} bytes and was skipped"
    return error(recover_id(head), INVALID_REQUEST, message)


#: One encoder for every line (`json.dumps` with options builds a new one per call).
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_COMPACT_ASCII = json.JSONEncoder(separators=(",", ":")).encode


def encode(message: Any) -> bytes:
    """One JSON line, compact and in UTF-8."""
    try:
        return _COMPACT(message).encode() + b"\n"
    except UnicodeEncodeError:  # a lone surrogate in some string: escape everything
        return _COMPACT_ASCII(message).encode() + b"\n"


def request(request_id: RequestId, method: str, params: Mapping[str, Any] | None = None) -> bytes:
    """A request line (`params` left out when None)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return encode(message)


def notification(method: str, params: Mapping[str, Any] | None = None) -> bytes:
    """A notification line (`params` left out when None)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return encode(message)


def result(request_id: RequestId | None, body: Any) -> bytes:
    """The line of a successful response."""
    return encode({"jsonrpc": "2.0", "id": request_id, "result": body})


def encoded_result(request_id: RequestId | None, body: bytes) -> bytes:
    """The line of a successful response whose result is JSON encoded already.

    For results kept encoded (the catalog's tool list, the handshake's answer): they are
    joined, not parsed and written again. `join`, not %-formatting: `bytes %` copies a
    long body about 50 times slower.
    """
    head = b'{"jsonrpc":"2.0","id":' + _COMPACT(request_id).encode() + b',"result":'
    return b"".join((head, body, b"}\n"))


def error(request_id: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    """The line of an error response (`data` left out when None)."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return encode({"jsonrpc": "2.0", "id": request_id, "error": body})

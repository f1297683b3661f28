"""Newline-delimited JSON-RPC 2.0: the one place its lines are read, bounded and written.

Every peer of assern speaks it one message a line: the stdio client, the MCP socket's
clients, the backends' stdout and stdin (the control socket uses the same lines for its
own JSON commands). So the limits are set once, here, and every message assern writes
itself is encoded by one of `request`, `notification`, `result` or `error` (a backend's
answer on the spliced lane is passed on as its own bytes: actors/backend/splice.py).

Encoding is compact UTF-8, as the `mcp` SDK writes its messages; a string with a lone
surrogate (which UTF-8 cannot carry) is written with every non-ASCII character escaped.
Nothing here imports the SDK.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from assern.supervisor.io.reader import LineReader, LineTooLong

if TYPE_CHECKING:
    from collections.abc import Mapping

    import trio

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_LINE",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "LineReader",
    "LineTooLong",
    "decode",
    "encode",
    "encoded_result",
    "error",
    "line_reader",
    "notification",
    "request",
    "result",
]

#: The longest line assern reads from any peer: a longer one ends that peer's stream.
MAX_LINE = 64 * 1024 * 1024

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


def decode(line: bytes) -> Any:
    """The JSON value of one line, or the bytes of the parse-error line to answer it with."""
    try:
        return json.loads(line)
    except ValueError:
        return error(None, PARSE_ERROR, "Parse error: the line is not valid JSON")


def encode(message: Any) -> bytes:
    """One JSON line, compact and in UTF-8."""
    try:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    except UnicodeEncodeError:  # a lone surrogate in some string: escape everything
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"


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
    head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id, ensure_ascii=False).encode() + b',"result":'
    return b"".join((head, body, b"}\n"))


def error(request_id: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    """The line of an error response (`data` left out when None)."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return encode({"jsonrpc": "2.0", "id": request_id, "error": body})

"""Newline-delimited JSON-RPC over a trio byte stream: lines in, and bad lines answered.

Used for stdio and for socket clients alike (and the control socket reads its lines
here too). A line that is not JSON, or not a JSON-RPC message, is answered with a
JSON-RPC error (parse error or invalid request) and the connection goes on. What the
lines mean is the session's business (protocol.py, or the SDK's for a 2026-07-28
client, modern.py); lines go out through a `SendRaw` (supervisor/io/writer.py), in order,
from synchronous code too.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import trio
from pydantic import ValidationError

from assern.supervisor.io.reader import receive_some
from assern.supervisor.io.writer import DirectWriter

MAX_LINE = 64 * 1024 * 1024


class LineTooLong(ValueError):
    """A line grew beyond `MAX_LINE`: its sender is not read any further."""


#: Where encoded lines go, in order with everything else written to the client.
SendRaw = DirectWriter


def encode(message: Any) -> bytes:
    """One JSON line, compact and in UTF-8 as the SDK writes its messages."""
    try:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    except UnicodeEncodeError:  # a lone surrogate in some string: escape everything
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def error_line(request_id: Any, code: int, message: str) -> bytes:
    payload = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(payload).encode() + b"\n"


def decode_line(line: bytes) -> Any:
    """The decoded JSON value, or the bytes of a parse-error line to answer with."""
    try:
        return json.loads(line)
    except ValueError:
        return error_line(None, types.PARSE_ERROR, "Parse error: the line is not valid JSON")


def parse_message(raw: Any) -> types.JSONRPCMessage | bytes:
    """A decoded value as a JSON-RPC message, or the bytes of an invalid-request line."""
    try:
        return types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except ValidationError as exc:
        request_id = raw.get("id") if isinstance(raw, dict) else None
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            request_id = None
        first = exc.errors()[0] if exc.errors() else {"msg": "not a JSON-RPC 2.0 message"}
        where = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int))
        detail = f"{first['msg']}" + (f" at {where}" if where else "")
        return error_line(request_id, types.INVALID_REQUEST, f"Invalid request: {detail}")


class LineReader:
    """The lines of a byte stream, one at a time (without their newline)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = bytearray()
        self._start = 0
        self._eof = False

    async def receive(self) -> bytes | None:
        """The next line; None once the peer closed its side.

        Raises:
            LineTooLong: a line grew beyond `MAX_LINE`.
        """
        while True:
            end = self._buffer.find(b"\n", self._start)
            if end >= 0:
                line = bytes(self._buffer[self._start : end])
                self._start = end + 1
                return line
            if self._eof:
                rest = bytes(self._buffer[self._start :])
                self._buffer.clear()
                self._start = 0
                return rest if rest.strip() else None
            del self._buffer[: self._start]
            self._start = 0
            if len(self._buffer) > MAX_LINE:
                raise LineTooLong("a client message exceeded 64 MiB")
            chunk = await receive_some(self._stream, 65536)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


async def read_lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[bytes]:
    reader = LineReader(stream)
    while (line := await reader.receive()) is not None:
        yield line

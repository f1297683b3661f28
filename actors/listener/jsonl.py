"""Newline-delimited JSON-RPC over any trio byte stream pair, as the SDK's message streams.

Used for stdio and for socket clients alike. A line that is not JSON, or not a JSON-RPC
message, is answered here with a JSON-RPC error (parse error or invalid request) and
the session goes on: the SDK itself would drop such lines silently.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import mcp_types as types
import structlog
import trio
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from assern.supervisor.writer import DirectWriter

log = structlog.get_logger()

MAX_LINE = 64 * 1024 * 1024


def error_line(request_id: Any, code: int, message: str) -> bytes:
    payload = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(payload).encode() + b"\n"


def decode_line(line: bytes) -> Any:
    """The decoded JSON value, or the bytes of a parse-error line to answer with."""
    try:
        return json.loads(line)
    except ValueError:
        return error_line(None, types.PARSE_ERROR, "Parse error: the line is not valid JSON")


def to_message(raw: Any) -> SessionMessage | bytes:
    """A message for the SDK, or the bytes of an invalid-request line to answer with."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(raw, by_name=False))
    except ValidationError as exc:
        request_id = raw.get("id") if isinstance(raw, dict) else None
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            request_id = None
        first = exc.errors()[0] if exc.errors() else {"msg": "not a JSON-RPC 2.0 message"}
        where = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int))
        detail = f"{first['msg']}" + (f" at {where}" if where else "")
        return error_line(request_id, types.INVALID_REQUEST, f"Invalid request: {detail}")


async def read_lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[bytes]:
    buffer = bytearray()
    while True:
        chunk = await stream.receive_some(65536)
        if not chunk:
            if buffer.strip():
                yield bytes(buffer)
            return
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            yield bytes(buffer[start:end])
            start = end + 1
        del buffer[:start]
        if len(buffer) > MAX_LINE:
            raise ValueError("a client message exceeded 64 MiB")


def parse_line(line: bytes) -> SessionMessage | bytes:
    """A message for the SDK, or the bytes of the error line to answer with."""
    raw = decode_line(line)
    return raw if isinstance(raw, bytes) else to_message(raw)


#: Sees every decoded client message first; returns True when it took the message itself.
Intercept = Callable[[Any], bool]
#: Where already-encoded lines go, in order with the SDK's own messages.
SendRaw = DirectWriter


@contextlib.asynccontextmanager
async def jsonl_streams(
    receive: trio.abc.ReceiveStream,
    send: trio.abc.SendStream,
    intercept: Intercept | None = None,
    *,
    answered: types.RequestId | None = None,
) -> AsyncIterator[tuple[Any, Any, SendRaw]]:
    """Yield (read, write, send_raw) over a byte stream pair.

    `read` and `write` are anyio streams of `SessionMessage` for the SDK; `send_raw`
    writes already-encoded lines in order with everything else, from synchronous code too
    (supervisor/writer.py: straight into the pipe or socket when it takes them). `intercept`, when
    given, sees each decoded message before the SDK and may take it (the raw lane).
    `answered` is the id of a request the client already got its response to (the
    `initialize` the front door answered, see front_door.py): the SDK's own response to
    it, the first one with that id, is dropped.
    The read stream ends when the peer closes its side. Leaving the block stops the pumps.
    """
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](32)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](32)
    out = DirectWriter(send)

    async def pump_in() -> None:
        async with read_send:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                async for line in read_lines(receive):
                    if not line.strip():
                        continue
                    raw = decode_line(line)
                    if not isinstance(raw, bytes) and intercept is not None and intercept(raw):
                        continue
                    parsed = raw if isinstance(raw, bytes) else to_message(raw)
                    if isinstance(parsed, bytes):
                        await out.write(parsed)
                        continue
                    try:
                        await read_send.send(parsed)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return

    async def pump_messages() -> None:
        drop = answered
        async with write_recv:
            async for message in write_recv:
                reply = message.message
                if (
                    drop is not None
                    and isinstance(reply, types.JSONRPCResponse | types.JSONRPCError)
                    and reply.id == drop
                ):
                    drop = None  # answered already
                    if isinstance(reply, types.JSONRPCError):
                        log.warning("early_answer_contradicted", error=reply.error.message)
                    continue
                data = reply.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await out.write(data.encode() + b"\n")
                except trio.BrokenResourceError:
                    return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_in)
        nursery.start_soon(pump_messages)
        nursery.start_soon(out.pump)
        try:
            yield read_recv, write_send, out
        finally:
            nursery.cancel_scope.cancel()

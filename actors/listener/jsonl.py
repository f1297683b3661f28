"""A client's lines as JSON-RPC messages: decoded, validated, and bad lines answered.

Used for stdio and for socket clients alike. Lines come from the framing's bounded
reader (actors/jsonrpc/framing.py); a line that is not JSON, is nested too deep, is too
long, or is not a JSON-RPC message, is answered with a JSON-RPC error (parse error or
invalid request, with the request's id when it can be recovered), logged, and skipped:
the connection goes on. What the messages mean is the session's business (protocol.py,
or the SDK's for a 2026-07-28 client, modern.py); lines go out through a `SendRaw`
(supervisor/io/writer.py), in order, from synchronous code too.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import structlog
from pydantic import ValidationError

from assern.actors.jsonrpc import framing
from assern.supervisor.io.reader import LineReader, LineTooLong
from assern.supervisor.io.writer import DirectWriter

log = structlog.get_logger()

#: Where encoded lines go, in order with everything else written to the client.
SendRaw = DirectWriter

#: What `next_value` returns once the client closed its side.
END = object()


async def next_value(reader: LineReader, out: SendRaw) -> Any:
    """The client's next JSON value, or `END`. Bad lines are answered here and skipped.

    Raises what reading or writing the stream raises (the client is gone).
    """
    while True:
        try:
            line = await reader.receive()
        except LineTooLong as exc:
            log.warning("client_message_refused", error=str(exc))
            await out.write(framing.too_long(exc.head))
            continue
        if line is None:
            return END
        if not line.strip():
            continue
        try:
            return framing.loads(line)
        except framing.TooDeep as exc:
            log.warning("client_message_refused", error=str(exc), size=len(line))
            await out.write(framing.too_deep(line, exc))
        except ValueError:
            log.debug("client_line_not_json", size=len(line))
            await out.write(framing.not_json())


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
        return framing.error(request_id, framing.INVALID_REQUEST, f"Invalid request: {detail}")

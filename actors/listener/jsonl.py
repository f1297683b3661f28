"""A client's lines as JSON-RPC messages: decoded, validated, and bad lines answered.

Used for stdio and for socket clients alike. Lines come from the framing's bounded
reader (actors/jsonrpc/framing.py); a line that is not JSON, or not a JSON-RPC
message, is answered with a JSON-RPC error (parse error or invalid request) and the
connection goes on. What the messages mean is the session's business (protocol.py,
or the SDK's for a 2026-07-28 client, modern.py); lines go out through a `SendRaw`
(supervisor/io/writer.py), in order, from synchronous code too.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from pydantic import ValidationError

from assern.actors.jsonrpc import framing
from assern.supervisor.io.writer import DirectWriter

#: Where encoded lines go, in order with everything else written to the client.
SendRaw = DirectWriter


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

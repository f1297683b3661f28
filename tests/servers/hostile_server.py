"""A stdio MCP server that writes hostile lines on its stdout, between correct answers.

It speaks the handshake era itself (no SDK): `initialize`, `tools/list` (one tool,
`echo`) and `tools/call`. Before every answer it writes a line of JSON nested 100,000
deep and a line that is not JSON at all. `echo` with `text = "deep"` is answered with a
result nested 3,000 deep (its id readable at the start of the line); any other text is
echoed back.
"""

from __future__ import annotations

import json
import sys

DEEP = 100_000


def write(line: bytes) -> None:
    sys.stdout.buffer.write(line + b"\n")
    sys.stdout.buffer.flush()


def answer(request_id: object, result: object) -> None:
    write(b"[" * DEEP + b"]" * DEEP)
    write(b"this is not json")
    write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode())


def main() -> None:
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # notifications
        if method == "initialize":
            answer(
                request_id,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"},
                },
            )
        elif method == "tools/list":
            schema = {"type": "object", "properties": {"text": {"type": "string"}}}
            answer(request_id, {"tools": [{"name": "echo", "inputSchema": schema}]})
        elif method == "tools/call":
            text = message["params"].get("arguments", {}).get("text", "")
            if text == "deep":
                head = json.dumps({"jsonrpc": "2.0", "id": request_id}).encode()[:-1]
                write(head + b',"result":{"content":' + b"[" * 3000 + b"]" * 3000 + b"}}")
            else:
                answer(request_id, {"content": [{"type": "text", "text": text}]})
        elif method == "ping":
            answer(request_id, {})
        else:
            write(
                json.dumps(
                    {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no"}}
                ).encode()
            )


if __name__ == "__main__":
    main()

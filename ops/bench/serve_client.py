"""A client of `assern serve` written by hand, for the benchmarks that time a start: spawn
it, and send the handshake and the first `tools/list` at once, as a client does."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def line(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as a line of the stdio transport."""
    return json.dumps(message).encode() + b"\n"


def spawn_listing(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | str,
    client: str = "bench",
    stderr: int | None = subprocess.DEVNULL,
) -> subprocess.Popen[bytes]:
    """`argv` (an `assern serve`) started with pipes, sent `initialize` (id 1, protocol
    2025-06-18, as `client`), `notifications/initialized` and `tools/list` (id 2)."""
    process = subprocess.Popen(
        list(argv), env=dict(env), cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
    )
    assert process.stdin is not None
    assert process.stdout is not None
    client_info = {"name": client, "version": "1"}
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client_info}
    process.stdin.write(line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}))
    process.stdin.write(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    process.stdin.write(line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
    process.stdin.flush()
    return process

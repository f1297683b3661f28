"""`use = "audit"`: one JSON line per call in a file of its own.

    [[middleware]]
    use = "audit"
    options = { path = "~/.assern/audit.jsonl" }

Each line: `ts` (UTC), `client`, `server`, `tool` (the backend's name), `exposed` (the
client's), `arguments_sha256` (of the arguments as canonical JSON: which call it was,
without its values), `duration_ms`, and `outcome`: "ok", "tool_error" (the answer says
`isError`), "error" (with `error`, the protocol error's message) or "cancelled". The file
is created 0600 and only appended to. It is opened before the first call is forwarded:
an audit that cannot write its file refuses the call rather than let it pass unrecorded.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import trio

from assern.actors.gate.middlewares.options import read_options

if TYPE_CHECKING:
    from collections.abc import Mapping

    import mcp_types as types

    from assern.actors.gate.middleware import Call, Next

log = structlog.get_logger()


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """SHA-256 of the arguments as canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def record(
    call: Call, *, started: float, ended: float, outcome: str, error: str | None = None
) -> dict[str, Any]:
    """The audit line of one call (as a dict)."""
    line: dict[str, Any] = {
        "ts": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds"),
        "client": call.client,
        "server": call.server,
        "tool": call.tool,
        "exposed": call.exposed,
        "arguments_sha256": arguments_digest(call.arguments),
        "duration_ms": round((ended - started) * 1000, 3),
        "outcome": outcome,
    }
    if error is not None:
        line["error"] = error
    return line


class Audit:
    """The middleware: its file, opened on the first call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return self._fd

    def _write(self, line: Mapping[str, Any]) -> None:
        # One short append to a local file (a single write of an O_APPEND descriptor, so
        # lines of concurrent calls never interleave): microseconds, less than handing it
        # to a worker thread would cost, and possible in a cancelled call's cleanup.
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode()
        try:
            os.write(self._open(), data)
        except OSError as exc:
            log.error("audit_write_failed", path=str(self.path), error=str(exc), tool=line.get("tool"))

    def close(self) -> None:
        """The entry is gone (a reload changed it): let go of the file."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    async def __call__(self, call: Call, next_: Next) -> types.CallToolResult:
        self._open()  # raises when the file cannot be opened: the call is refused, not unrecorded
        started = trio.current_time()
        try:
            result = await next_(call)
        except trio.Cancelled:
            self._write(record(call, started=started, ended=trio.current_time(), outcome="cancelled"))
            raise
        except Exception as exc:
            message = getattr(exc, "message", None) or str(exc)
            self._write(
                record(call, started=started, ended=trio.current_time(), outcome="error", error=message)
            )
            raise
        outcome = "tool_error" if result.is_error else "ok"
        self._write(record(call, started=started, ended=trio.current_time(), outcome=outcome))
        return result


def factory(options: Mapping[str, Any]) -> Audit:
    """Options: `path` (required; absolute, or starting with `~`)."""
    read = read_options(options, {"path": str})
    if "path" not in read:
        raise ValueError("option 'path' is required: the JSON-lines file to append to")
    path = Path(read["path"]).expanduser()
    if not path.is_absolute():
        raise ValueError(f"option 'path' must be absolute or start with ~, got {read['path']!r}")
    return Audit(path)

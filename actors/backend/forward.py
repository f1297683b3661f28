"""Raw JSON-RPC forwarding to a stdio backend: the fast lane for tools/call.

Requests sent here bypass the SDK client: they go out as one JSON line with an id of
our own (`a1`, `a2`, … — the SDK only mints integers, so the id spaces never meet), and
their responses and progress notifications are picked off the backend's stdout before
the SDK sees them. Nothing is re-validated on the way through; the result dict is
handed up as the backend wrote it. Everything else (the handshake, lists, server-to-
client requests) still goes through the SDK client on the same pipe.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
from mcp.shared.exceptions import MCPError

ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]


class ForwardLost(Exception):
    """The backend went away before it answered."""


@attrs.define(eq=False)
class _Pending:
    wake: trio.Event = attrs.field(factory=trio.Event)
    progress: collections.deque[tuple[float, float | None, str | None]] = attrs.field(
        factory=collections.deque
    )
    done: bool = False
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    lost: str | None = None

    def poke(self) -> None:
        self.wake.set()


class Forwarder:
    """Pending raw requests of one backend process. Owned by that process's transport."""

    def __init__(self, out: trio.MemorySendChannel[bytes]) -> None:
        self._out = out
        self._pending: dict[str, _Pending] = {}
        self._next = 0
        self._closed: str | None = None

    def route(self, raw: Any) -> bool:
        """Take a decoded backend message if it belongs to a raw request (synchronous)."""
        if not isinstance(raw, dict) or not self._pending:
            return False
        request_id = raw.get("id")
        if isinstance(request_id, str):
            pending = self._pending.get(request_id)
            if pending is None or ("result" not in raw and "error" not in raw):
                return False
            pending.done = True
            pending.result = raw.get("result") if "result" in raw else None
            pending.error = raw.get("error") if "result" not in raw else None
            pending.poke()
            return True
        if raw.get("method") == "notifications/progress":
            params = raw.get("params")
            token = params.get("progressToken") if isinstance(params, dict) else None
            pending = self._pending.get(token) if isinstance(token, str) else None
            if pending is None:
                return False
            pending.progress.append((params.get("progress", 0), params.get("total"), params.get("message")))
            pending.poke()
            return True
        return False

    def close(self, reason: str) -> None:
        """Fail every pending request: the process is gone."""
        self._closed = reason
        for pending in self._pending.values():
            pending.lost = reason
            pending.poke()

    async def request(
        self, method: str, params: dict[str, Any], progress: ProgressSink | None = None
    ) -> dict[str, Any]:
        """Send one request and wait for its result dict.

        Raises MCPError for an error response and ForwardLost when the process goes away.
        On cancellation the backend is sent `notifications/cancelled` for our id.
        """
        if self._closed is not None:
            raise ForwardLost(self._closed)
        self._next += 1
        request_id = f"a{self._next}"
        if progress is not None:
            meta = dict(params.get("_meta") or {})
            meta["progressToken"] = request_id
            params = {**params, "_meta": meta}
        pending = _Pending()
        self._pending[request_id] = pending
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        try:
            await self._out.send(line.encode() + b"\n")
            while True:
                await pending.wake.wait()
                pending.wake = trio.Event()
                while pending.progress and progress is not None:
                    await progress(*pending.progress.popleft())
                if pending.done or pending.lost is not None:
                    break
        except trio.Cancelled:
            if not pending.done and pending.lost is None:
                self._cancel(request_id)
            raise
        finally:
            del self._pending[request_id]
        if pending.lost is not None and not pending.done:
            raise ForwardLost(pending.lost)
        if pending.error is not None:
            error = pending.error
            raise MCPError(
                code=int(error.get("code", -32603)),
                message=str(error.get("message", "backend error")),
                data=error.get("data"),
            )
        return pending.result if isinstance(pending.result, dict) else {}

    def _cancel(self, request_id: str) -> None:
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "cancelled by the client"},
        }
        try:
            self._out.send_nowait(json.dumps(note).encode() + b"\n")
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            pass

"""Raw JSON-RPC forwarding to a stdio backend: the fast lane for tools/call.

Requests sent here bypass the SDK client: they go out as one JSON line with an id of
our own (`a1`, `a2`, … — the SDK only mints integers, so the id spaces never meet), and
their responses and progress notifications are picked off the backend's stdout before
the SDK sees them. Nothing is re-validated on the way through; the result dict is
handed up as the backend wrote it. Everything else (the handshake, lists, server-to-
client requests) still goes through the SDK client on the same pipe.

Each pending request has a `Sink` that the backend's stdout reader calls synchronously
with what arrives for it. `request` waits for the answer in the caller's task; a spliced
call (actors/backend/splice.py) hands its answer on without any task of its own.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs
import trio
from mcp.shared.exceptions import MCPError

ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]


#: Why pending requests fail when their backend's incarnation is being stopped by us.
STOPPING = "the backend is stopping"


class ForwardLost(Exception):
    """The backend went away before it answered."""


class Outbox(Protocol):
    """The backend's stdin, in order with the SDK's messages (supervisor/writer.py)."""

    def write_nowait(self, data: bytes) -> bool:
        """Write or queue `data` at once; False when refused (nothing written)."""

    async def write(self, data: bytes) -> None:
        """Write `data`; raises trio.BrokenResourceError once the pipe is broken."""


class Sink(Protocol):
    """Where what the backend sends about one request goes (called synchronously)."""

    def answered(self, message: dict[str, Any], line: bytes) -> None:
        """The response (a dict with `result` or `error`), and its line exactly as the
        backend wrote it (without the newline); the request is no longer pending."""

    def progressed(self, params: dict[str, Any], line: bytes) -> None:
        """A progress notification's params (its token still the request's own id) and line."""

    def lost(self, reason: str) -> None:
        """The process went away before answering; the request is no longer pending."""


def swap_id(line: bytes, ours: str, theirs: str | int) -> bytes | None:
    """`line` with our request id in it replaced by `theirs`, as a line to send on.

    Our ids (`a12`) are written by the backend as the JSON string `"a12"`. When that
    string occurs exactly once in the line, it is the id (or the progress token) that
    the decoded message showed; anything else (it also occurs in a result, or the
    backend escaped it differently) returns None, and the caller re-encodes instead.
    """
    token = b'"' + ours.encode() + b'"'
    if line.count(token) != 1:
        return None
    return line.replace(token, json.dumps(theirs).encode()) + b"\n"


def error_of(message: dict[str, Any]) -> MCPError:
    """The backend's JSON-RPC error response as an MCPError (code, message, data)."""
    error = message.get("error")
    error = error if isinstance(error, dict) else {}
    return MCPError(
        code=int(error.get("code", -32603)),
        message=str(error.get("message", "backend error")),
        data=error.get("data"),
    )


@attrs.define(eq=False)
class _Waiter:
    """The sink of `Forwarder.request`: wakes the waiting task."""

    wake: trio.Event = attrs.field(factory=trio.Event)
    progress: collections.deque[dict[str, Any]] = attrs.field(factory=collections.deque)
    response: dict[str, Any] | None = None
    lost_reason: str | None = None

    def answered(self, message: dict[str, Any], line: bytes) -> None:
        self.response = message
        self.wake.set()

    def progressed(self, params: dict[str, Any], line: bytes) -> None:
        self.progress.append(params)
        self.wake.set()

    def lost(self, reason: str) -> None:
        self.lost_reason = reason
        self.wake.set()


class Forwarder:
    """Pending raw requests of one backend process. Owned by that process's transport."""

    def __init__(self, out: Outbox) -> None:
        self._out = out
        self._pending: dict[str, Sink] = {}
        self._next = 0
        self._closed: str | None = None

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def route(self, raw: Any, line: bytes = b"") -> bool:
        """Take a decoded backend message if it belongs to a raw request (synchronous).

        `line` is the message as the backend wrote it, handed on to the request's sink.
        """
        if not isinstance(raw, dict) or not self._pending:
            return False
        request_id = raw.get("id")
        if isinstance(request_id, str):
            if "result" not in raw and "error" not in raw:
                return False
            sink = self._pending.pop(request_id, None)
            if sink is None:
                return False
            sink.answered(raw, line)
            return True
        if raw.get("method") == "notifications/progress":
            params = raw.get("params")
            token = params.get("progressToken") if isinstance(params, dict) else None
            sink = self._pending.get(token) if isinstance(token, str) else None
            if sink is None:
                return False
            sink.progressed(params, line)
            return True
        return False

    def close(self, reason: str) -> None:
        """Fail every pending request: the process is gone."""
        if self._closed is None:
            self._closed = reason
        pending, self._pending = self._pending, {}
        for sink in pending.values():
            sink.lost(reason)

    def send_nowait(self, method: str, params: dict[str, Any], sink: Sink, *, progress: bool) -> str | None:
        """Send one request without waiting; its sink gets what comes back.

        With `progress`, the backend is asked for progress notifications (their token is
        the request's id). Returns our id for the request, or None when it could not be
        sent now (the process is gone or its stdin is backed up): nothing was sent then.
        """
        if self._closed is not None:
            return None
        request_id = f"a{self._next + 1}"
        if progress:
            meta = dict(params.get("_meta") or {})
            meta["progressToken"] = request_id
            params = {**params, "_meta": meta}
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        if not self._out.write_nowait(line.encode() + b"\n"):
            return None
        self._next += 1
        self._pending[request_id] = sink
        return request_id

    def cancel(self, request_id: str, reason: str = "cancelled by the client") -> bool:
        """Forget a pending request and tell the backend; False when it was not pending."""
        if self._pending.pop(request_id, None) is None:
            return False
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": reason},
        }
        self._out.write_nowait(json.dumps(note).encode() + b"\n")
        return True

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
        waiter = _Waiter()
        self._pending[request_id] = waiter
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        try:
            try:
                await self._out.write(line.encode() + b"\n")
            except trio.BrokenResourceError as exc:
                raise ForwardLost("the backend closed its stdin") from exc
            while True:
                await waiter.wake.wait()
                waiter.wake = trio.Event()
                while waiter.progress and progress is not None:
                    p = waiter.progress.popleft()
                    await progress(p.get("progress", 0), p.get("total"), p.get("message"))
                if waiter.response is not None or waiter.lost_reason is not None:
                    break
        except trio.Cancelled:
            if waiter.response is None and waiter.lost_reason is None:
                self.cancel(request_id)
            raise
        finally:
            self._pending.pop(request_id, None)
        if waiter.response is None:
            raise ForwardLost(waiter.lost_reason or "the backend went away")
        if "result" not in waiter.response:
            raise error_of(waiter.response)
        result = waiter.response.get("result")
        return result if isinstance(result, dict) else {}

"""The JSON-RPC request table of one stdio backend process: our ids, their answers.

Every request assern sends a stdio backend goes out here as one JSON line with an id
of our own (`a1`, `a2`, …): the handshake-era session's requests (actors/backend/
client.py) and the raw lane's tools/calls (splice.py). The backend's stdout reader
hands each decoded message to `route` first, which picks off the responses and the
progress notifications that belong to a pending request; everything else (the
backend's own requests and notifications) goes on to the session. When the SDK
speaks to a stdio backend (protocol "auto" or a version pin), its requests carry
integer ids, so the two id spaces never meet on the shared pipe.

Each pending request has a `Sink` that the stdout reader calls synchronously with
what arrives for it. `request` waits for the answer in the caller's task; a spliced
call (splice.py) hands its answer on without any task of its own. Results are handed
up as the backend wrote them: validating them is the caller's business.
"""

from __future__ import annotations

import collections
import json
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import mcp_types as types
import trio

from assern.actors.jsonrpc import framing
from assern.actors.jsonrpc.errors import RpcError

if TYPE_CHECKING:
    from assern.actors.backend.messages import ProgressSink

#: Why pending requests fail when their backend's incarnation is being stopped by us.
STOPPING = "the backend is stopping"


class ForwardLost(Exception):
    """The backend went away before it answered."""


class Outbox(Protocol):
    """The backend's stdin: one writer for every line that goes there (supervisor/io/writer.py)."""

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


class Requester(Protocol):
    """Who sends a backend a request and waits for its result dict: a stdio backend's
    `Forwarder`, or a streamable-HTTP backend's `PostLane` (http_lane.py)."""

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        progress: ProgressSink | None = None,
    ) -> dict[str, Any]:
        """The result dict; RpcError for an error response, ForwardLost when the backend is gone."""
        ...


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


def error_of(message: dict[str, Any]) -> RpcError:
    """The backend's JSON-RPC error response as an RpcError (code, message, data)."""
    return RpcError.from_dict(message.get("error"))


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
    """Pending requests of one backend process, and its stdin. Owned by that process's transport."""

    def __init__(self, out: Outbox) -> None:
        self._out = out
        self._pending: dict[str, Sink] = {}
        self._next = 0
        self._closed: str | None = None

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def route(self, raw: Any, line: bytes = b"") -> bool:
        """Take a decoded backend message if it belongs to a pending request (synchronous).

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
            if not isinstance(params, dict):
                return False
            token = params.get("progressToken")
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
        if not self._out.write_nowait(framing.request(request_id, method, params)):
            return None
        self._next += 1
        self._pending[request_id] = sink
        return request_id

    def cancel(self, request_id: str, reason: str = "cancelled by the client") -> bool:
        """Forget a pending request and tell the backend; False when it was not pending."""
        if self._pending.pop(request_id, None) is None:
            return False
        note = framing.notification("notifications/cancelled", {"requestId": request_id, "reason": reason})
        self._out.write_nowait(note)
        return True

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        progress: ProgressSink | None = None,
        *,
        cancellable: bool = True,
    ) -> dict[str, Any]:
        """Send one request and wait for its result dict.

        Raises RpcError for an error response (or a result that is not a JSON object)
        and ForwardLost when the process goes away. On cancellation the backend is sent
        `notifications/cancelled` for our id, unless the request is not `cancellable`
        (`initialize` must not be cancelled).
        """
        if self._closed is not None:
            raise ForwardLost(self._closed)
        self._next += 1
        request_id = f"a{self._next}"
        if progress is not None:
            meta = dict((params or {}).get("_meta") or {})
            meta["progressToken"] = request_id
            params = {**(params or {}), "_meta": meta}
        waiter = _Waiter()
        self._pending[request_id] = waiter
        try:
            try:
                await self._out.write(framing.request(request_id, method, params))
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
            if cancellable and waiter.response is None and waiter.lost_reason is None:
                self.cancel(request_id)
            raise
        finally:
            self._pending.pop(request_id, None)
        if waiter.response is None:
            raise ForwardLost(waiter.lost_reason or "the backend went away")
        if "result" not in waiter.response:
            raise error_of(waiter.response)
        result = waiter.response["result"]
        if not isinstance(result, dict):
            raise RpcError(types.INTERNAL_ERROR, f"the backend's {method} result is not a JSON object")
        return result

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send one notification; raises ForwardLost once the backend's stdin is closed."""
        try:
            await self._out.write(framing.notification(method, params))
        except trio.BrokenResourceError as exc:
            raise ForwardLost("the backend closed its stdin") from exc

    async def respond(
        self, request_id: str | int, result: dict[str, Any] | None = None, error: RpcError | None = None
    ) -> None:
        """Answer one of the backend's own requests with `result`, or with `error`.

        A backend that closed its stdin is gone: nobody is left to answer, so that is
        not an error here.
        """
        if error is not None:
            line = framing.error(request_id, error.code, error.message, error.data)
        else:
            line = framing.result(request_id, result if result is not None else {})
        try:
            await self._out.write(line)
        except trio.BrokenResourceError:
            pass

    async def write(self, data: bytes) -> None:
        """Write one complete line someone else encoded (the SDK's messages, on its paths).

        Raises trio.BrokenResourceError once the backend's stdin is closed.
        """
        await self._out.write(data)

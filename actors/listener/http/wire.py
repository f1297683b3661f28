"""One HTTP session's messages as the newline-delimited JSON a `ClientConnection` speaks.

The `mcp` SDK's streamable-HTTP transport turns POSTs, the GET stream and DELETE into
a stream of JSON-RPC messages and back; a client connection (session.py) reads and
writes lines. `SessionWire` joins the two: what the client posts becomes lines for the
connection, and each line the connection writes becomes a message for the transport,
tagged with the request it belongs to so the transport puts it on the right SSE stream:

- a response or error goes to the stream of the POST that carried its request (the
  transport routes those by id);
- a progress notification goes to the stream of the request that gave its
  `progressToken`;
- anything else (log messages, list changes, resource updates and the backends'
  server-to-client requests) goes to the client's GET stream, as the specification
  describes for messages not tied to one request.

The wire also knows which client requests are still unanswered, so the HTTP front can
cancel the call of a client that hung up on its POST (`abandon`).

A request the front answers itself (plain.py) skips the transport both ways: its line
goes to the connection as posted (`post_line`), and its answer comes back as the line
the connection wrote, to the POST that claimed it. An answer whose POST is gone by then
goes to the transport like any other, which keeps it for a client that resumes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import mcp_types as types
import structlog
import trio
from mcp.shared.message import ServerMessageMetadata, SessionMessage

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream

log = structlog.get_logger()

#: Lines that may wait for the connection before the transport's reader waits.
INBOUND_BUFFER = 64
#: A stream of ours (trio) or of the SDK's transport (anyio) that is closed or broken.
_SESSION_ENDED = (
    trio.ClosedResourceError,
    trio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
)

RequestKey = str


def usable_id(value: Any) -> bool:
    """Whether `value` can be a JSON-RPC request's id (a string or an integer, not a bool)."""
    return isinstance(value, str | int) and not isinstance(value, bool)


def request_key(request_id: types.RequestId) -> RequestKey:
    """A request id as the transport keys its streams (ids 1 and "1" are one stream)."""
    return str(request_id)


@attrs.define(eq=False)
class Claim:
    """A POST waiting for its request's answer, to send it itself."""

    request_id: types.RequestId
    answered: trio.Event = attrs.field(factory=trio.Event)
    #: the answer as the connection wrote it, once it came (None once `answered`: the
    #: session ended first)
    line: bytes | None = None

    def answer(self) -> bytes | None:
        """The answer so far (read afresh: another task may have just set it)."""
        return self.line


class _LinesIn(trio.abc.ReceiveStream):
    """The connection's side of the inbound lines."""

    def __init__(self, channel: trio.MemoryReceiveChannel[bytes]) -> None:
        self._channel = channel
        self._rest = b""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if not self._rest:
            try:
                self._rest = await self._channel.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                return b""
        if max_bytes is None or max_bytes >= len(self._rest):
            data, self._rest = self._rest, b""
        else:
            data, self._rest = self._rest[:max_bytes], self._rest[max_bytes:]
        return data

    async def aclose(self) -> None:
        self._channel.close()
        await trio.lowlevel.checkpoint()


class _LinesOut(trio.abc.SendStream):
    """The connection's side of the outbound lines: each whole line goes to the wire."""

    def __init__(self, wire: SessionWire) -> None:
        self._wire = wire
        self._partial = b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        buffer = self._partial + bytes(data)
        *lines, self._partial = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                await self._wire.deliver(line)

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


class SessionWire:
    """Carries one session's messages between the SDK transport and a connection."""

    def __init__(
        self,
        read: ReadStream[SessionMessage | Exception],
        write: WriteStream[SessionMessage],
    ) -> None:
        self._read = read
        self._write = write
        self._lines_send, lines_receive = trio.open_memory_channel[bytes](INBOUND_BUFFER)
        #: the byte streams the connection reads and writes
        self.receive_stream: trio.abc.ReceiveStream = _LinesIn(lines_receive)
        self.send_stream: trio.abc.SendStream = _LinesOut(self)
        #: client requests not answered yet, by key, with their id as the client sent it
        self.unanswered: dict[RequestKey, types.RequestId] = {}
        #: progress tokens by the key of the request that gave them
        self._progress: dict[str, RequestKey] = {}
        #: requests whose POST waits for the answer itself, by key
        self._claims: dict[RequestKey, Claim] = {}

    async def pump_in(self) -> None:
        """Hand what the client posts to the connection, until the session ends."""
        async with self._lines_send:
            try:
                async for item in self._read:
                    if isinstance(item, Exception):
                        log.debug("http_message_refused", error=f"{type(item).__name__}: {item}")
                        continue
                    await self.post(item.message)
            except _SESSION_ENDED:
                pass  # the transport ended the session (DELETE, idle, stop): input is over

    async def post(self, message: types.JSONRPCMessage) -> None:
        """One message from the client, on to the connection."""
        if isinstance(message, types.JSONRPCRequest):
            key = request_key(message.id)
            self.unanswered[key] = message.id
            token = _progress_token(message.params)
            if token is not None:
                self._progress[str(token)] = key
        line = message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        await self._lines_send.send(line + b"\n")

    async def post_line(self, line: bytes, request_id: types.RequestId | None = None) -> Claim | None:
        """One message from the client as its JSON `line`, on to the connection; for a
        request (`request_id`), the claim its POST waits on for the answer."""
        claim = None
        if request_id is not None:
            key = request_key(request_id)
            self.unanswered[key] = request_id
            claim = self._claims[key] = Claim(request_id)
        try:
            await self._lines_send.send(line + b"\n")
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            if claim is not None:
                self.release(claim)
            raise
        return claim

    def release(self, claim: Claim) -> bytes | None:
        """The claiming POST is done (answered, gone or switching to a stream): the answer
        is no longer handed to it. The answer it got and did not send, if any."""
        key = request_key(claim.request_id)
        if self._claims.get(key) is claim:
            del self._claims[key]
        return claim.line

    def end(self) -> None:
        """The session ended: every waiting POST is woken without an answer."""
        claims, self._claims = self._claims, {}
        for claim in claims.values():
            claim.answered.set()

    async def abandon(self, request_id: types.RequestId, reason: str) -> bool:
        """The client hung up on `request_id` before its answer: cancel it, as a client's
        `notifications/cancelled` would. False when it was answered already."""
        if request_key(request_id) not in self.unanswered:
            return False
        note = types.JSONRPCNotification(
            jsonrpc="2.0",
            method="notifications/cancelled",
            params={"requestId": request_id, "reason": reason},
        )
        try:
            await self._lines_send.send(note.model_dump_json(by_alias=True).encode() + b"\n")
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        return True

    async def deliver(self, line: bytes) -> None:
        """One line the connection wrote: an answer a POST claimed, to that POST; any
        other, on to the transport, on the stream it belongs to."""
        if self._claims and self._hand_to_claim(line):
            return
        await self.to_transport(line)

    def _hand_to_claim(self, line: bytes) -> bool:
        try:
            head = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(head, dict) or "method" in head or not usable_id(head.get("id")):
            return False
        key = request_key(head["id"])
        claim = self._claims.pop(key, None)
        if claim is None:
            return False
        self._settle(key)
        claim.line = line
        claim.answered.set()
        return True

    async def to_transport(self, line: bytes) -> None:
        """One line the connection wrote, on to the transport, on the stream it belongs to."""
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            log.error("http_line_unreadable", error=str(exc)[:200])
            return
        related: types.RequestId | None = None
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            if message.id is not None:
                self._settle(request_key(message.id))
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/progress":
            token = (message.params or {}).get("progressToken")
            key = self._progress.get(str(token))
            if key is not None:
                related = self.unanswered.get(key)
        metadata = ServerMessageMetadata(related_request_id=related) if related is not None else None
        try:
            await self._write.send(SessionMessage(message, metadata=metadata))
        except _SESSION_ENDED:
            pass  # the session ended: nobody to tell

    def _settle(self, key: RequestKey) -> None:
        if self.unanswered.pop(key, None) is not None:
            for token in [t for t, k in self._progress.items() if k == key]:
                del self._progress[token]


def _progress_token(params: dict[str, Any] | None) -> str | int | None:
    meta = (params or {}).get("_meta")
    if isinstance(meta, dict):
        token = meta.get("progressToken")
        if usable_id(token):
            return token
    return None

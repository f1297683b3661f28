"""The front door: the stdio client's `initialize` answered while the tree is still loading.

`assern serve` has the stdio client's pipes before it has anything else: importing the
tree (and with it pydantic and the protocol models) takes a noticeable part of a
second, and the backends start after that. So the primary (or isolated) process claims stdio first,
opens this door on it, and imports the tree meanwhile (app/cli.py). The door
reads the client's bytes and keeps every one of them, in order, for the listener. Only
one message is ever answered here: the first line, when it is a handshake-era
`initialize` request of the expected shape, and only when `[settings] initialize_wait`
is 0 (otherwise the handshake may wait for backends, which only the session knows
about). The answer is the one the listener's session (session.py, protocol.py) would
give at that moment, byte for byte, which is also the one the `mcp` SDK's server gives
(tests/app/test_front_door.py compares all three):

- `protocolVersion`: the requested version when it is a handshake-era one, else the
  latest handshake-era one (`HANDSHAKE_VERSIONS`, the SDK's own list; a test keeps
  them equal);
- `capabilities`: what `ClientConnection.capabilities()` answers while the catalog is
  still empty, i.e. from the capability cache alone (actors/router/capability_file.py);
- `serverInfo` and `instructions`: `SERVER_NAME`, `SERVER_VERSION` and the session's
  instructions.

The session answers its own `initialize` with `initialize_response` and `negotiate`
too (actors/listener/handshake.py), so the two cannot drift apart.

Anything else (a line before the initialize, a malformed line, `notifications/
initialized`, a 2026-07-28 client's requests) is only kept. When the stdio listener
starts it takes the door over (`take`): it gets the kept bytes followed by the live
stream, and the id of the initialize already answered. The session still reads that
initialize first and records it (the client's name, the negotiated version) without
answering it again; everything after it is the session's to answer. The door answers
nothing once taken over.

This module imports nothing heavy (no SDK, no pydantic): it runs before they are loaded.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import attrs
import structlog
import trio

from assern.actors.jsonrpc import framing
from assern.actors.listener.handshake import (
    SERVER_NAME,
    SERVER_VERSION,
    RequestId,
    Wire,
    capabilities_from,
    initialize_request_id,
    initialize_response,
    negotiate,
)
from assern.supervisor.io.reader import receive_some

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

log = structlog.get_logger()

#: The door stops reading (the client waits) once it holds this much for the listener.
MAX_KEPT = 64 * 1024 * 1024

#: What reading or writing a pipe whose other side is gone raises.
_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class Replay(trio.abc.ReceiveStream):
    """What the door kept, then the live stream (which ended already when `eof`)."""

    def __init__(self, kept: bytes, live: trio.abc.ReceiveStream, *, eof: bool) -> None:
        self._kept = bytearray(kept)
        self._live = live
        self._eof = eof

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._kept:
            size = len(self._kept) if max_bytes is None else max_bytes
            chunk = bytes(self._kept[:size])
            del self._kept[:size]
            await trio.lowlevel.checkpoint()
            return chunk
        if self._eof:
            await trio.lowlevel.checkpoint()
            return b""
        return await receive_some(self._live, max_bytes or 65536)

    async def aclose(self) -> None:
        await self._live.aclose()


class FrontDoor:
    """Keeps the stdio client's bytes until the listener takes over; answers its initialize.

    Args:
        receive: The client's side to read (stdin).
        send: The client's side to write (stdout).
        answer: Answer an early `initialize` at all (False when `initialize_wait` > 0).
        capabilities: The capabilities to announce (called once, when answering).
        instructions: The session's instructions, as the session gives them.
        release: Lets go of the wire for good (closes it; see `close`).
    """

    def __init__(
        self,
        receive: trio.abc.ReceiveStream,
        send: trio.abc.SendStream,
        *,
        answer: bool = True,
        capabilities: Callable[[], Mapping[str, Any]] = lambda: capabilities_from(()),
        server_name: str = SERVER_NAME,
        server_version: str = SERVER_VERSION,
        instructions: str | None = None,
        release: Callable[[], None] = lambda: None,
    ) -> None:
        self._receive = receive
        self._send = send
        self._answer = answer
        self._capabilities = capabilities
        self._server = (server_name, server_version, instructions)
        self._release: Callable[[], None] | None = release
        self._kept = bytearray()
        self._scanned = 0  # where the search for the first line goes on
        self._decided = False  # the first line was seen (answered or not)
        self._eof = False
        self._answered: RequestId | None = None
        self._wire: Wire | None = None
        self._scope = trio.CancelScope()
        self._reading = False
        self._stopped = trio.Event()

    @property
    def answered(self) -> RequestId | None:
        """The id of the `initialize` the door answered, if it did."""
        return self._answered

    async def run(self) -> None:
        """Read and keep the client's bytes until taken over (or EOF, or enough kept)."""
        if self._wire is not None:
            return
        self._reading = True
        try:
            with self._scope, structlog.contextvars.bound_contextvars(actor="front_door"):
                while len(self._kept) < MAX_KEPT:
                    try:
                        chunk = await self._receive.receive_some(65536)
                    except _GONE:
                        chunk = b""  # the session ends there, as the listener's would
                    if not chunk:
                        self._eof = True
                    else:
                        self._kept += chunk
                    reply = None if self._decided else self._first_line()
                    if reply is not None:
                        await self._write(reply)
                    if self._eof:
                        return
        finally:
            self._stopped.set()

    async def _write(self, reply: bytes) -> None:
        # Never half a line on the wire, whatever cancels us.
        with trio.CancelScope(shield=True), contextlib.suppress(*_GONE):
            await self._send.send_all(reply)

    def _first_line(self) -> bytes | None:
        """Look at the first non-blank line once it is complete; the answer to send, if any."""
        while not self._decided:
            end = self._kept.find(b"\n", self._scanned)
            if end < 0 and not self._eof:
                return None
            end = len(self._kept) if end < 0 else end
            line = bytes(self._kept[self._scanned : end])
            self._scanned = end + 1
            if line.strip():
                self._decided = True
                return self._reply(line)
            if end >= len(self._kept):
                return None
        return None

    def _reply(self, line: bytes) -> bytes | None:
        if not self._answer:
            return None
        try:
            message = framing.loads(line)
        except ValueError:  # not JSON, or nested too deep: the session answers it
            return None
        request_id = initialize_request_id(message)
        if request_id is None:
            return None
        params = message["params"]
        name, version, instructions = self._server
        try:
            capabilities = self._capabilities()
        except Exception:
            log.exception("front_door_capabilities_failed")
            return None  # the session answers it
        reply = initialize_response(
            request_id,
            params["protocolVersion"],
            capabilities,
            server_name=name,
            server_version=version,
            instructions=instructions,
        )
        self._answered = request_id
        log.info(
            "initialize_answered_early",
            client_name=params["clientInfo"]["name"],
            protocol=negotiate(params["protocolVersion"]),
        )
        return reply

    async def take(self) -> Wire:
        """Stop reading and hand the wire over (the kept bytes first).

        A later take (a restarted listener) gets the same wire, without `answered`.
        """
        if self._wire is not None:
            return attrs.evolve(self._wire, answered=None)
        self._scope.cancel()
        if self._reading:
            await self._stopped.wait()
        kept, self._kept = bytes(self._kept), bytearray()
        self._wire = Wire(
            receive=Replay(kept, self._receive, eof=self._eof), send=self._send, answered=self._answered
        )
        log.info("stdio_taken_over", kept_bytes=len(kept), answered=self._answered is not None, eof=self._eof)
        return self._wire

    def close(self) -> None:
        """Let go of the wire for good (idempotent): the stdio client is gone."""
        release, self._release = self._release, None
        if release is not None:
            release()

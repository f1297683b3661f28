"""Handshake-era HTTP sessions: one `Mcp-Session-Id`, one client connection.

A POST of `initialize` without a session id opens a session: the `mcp` SDK's
streamable-HTTP transport (POST answered as JSON or an SSE stream, the GET stream,
DELETE, the protocol-version header) serves its HTTP side, and a `ClientConnection`
served by the listener (kind "http") serves its MCP side, joined by a `SessionWire`.
A session belongs to the token that opened it: the same id with another token (or
none) is answered as an unknown session. Sessions are limited in all and per token,
and end when idle too long, when the client deletes them, or when the front stops.

The messages most requests carry (a single request without progress, a notification)
the front answers itself (plain.py), past the transport and its cost.

Each session keeps its last events (replay.py) so a client that lost a stream resumes
it with `Last-Event-ID`. A broken stream is therefore not taken as the client giving
up (the specification says a disconnection is no cancellation): a call whose stream
broke is cancelled at its backend only when the client has not resumed that stream
within `resume_grace` seconds (at once when the session keeps no events).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import attrs
import structlog
import trio
from mcp.server.streamable_http import StreamableHTTPServerTransport

from assern.actors.listener.http import plain
from assern.actors.listener.http.refusal import Refusal
from assern.actors.listener.http.replay import ReplayBuffer
from assern.actors.listener.http.wire import SessionWire, request_key

if TYPE_CHECKING:
    from mcp_types import RequestId
    from starlette.types import Message, Receive, Scope, Send

log = structlog.get_logger()

#: Serves one connection over a byte stream pair until it ends (ListenerActor.serve_connection).
ServeConnection = Callable[[str, trio.abc.ReceiveStream, trio.abc.SendStream], Awaitable[None]]


@attrs.frozen(kw_only=True)
class SessionLimits:
    total: int
    per_token: int
    idle_timeout: float
    #: events each session keeps for resumption (0: none, a broken stream is lost)
    replay_events: int = 0
    #: seconds a call whose stream broke waits for its client to resume it
    resume_grace: float = 0.0


@attrs.define(eq=False)
class Session:
    id: str
    owner: str | None
    transport: StreamableHTTPServerTransport
    replay: ReplayBuffer | None = None
    resume_grace: float = 0.0
    wire: SessionWire | None = None
    cancel: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    #: seconds the session may go with no request in flight (inf: for ever)
    idle_timeout: float = math.inf
    #: cancelled once the session was idle for `idle_timeout`
    idle: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    in_flight: int = 0

    @contextmanager
    def busy(self) -> Iterator[None]:
        """A request is being served (an open GET stream too): the session is not idle."""
        self.in_flight += 1
        self.idle.deadline = math.inf
        try:
            yield
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self.idle.deadline = trio.current_time() + self.idle_timeout


class HandshakeSessions:
    """The open handshake-era sessions of one HTTP front."""

    def __init__(self, serve: ServeConnection, limits: Callable[[], SessionLimits]) -> None:
        self._serve = serve
        self._limits = limits
        self.sessions: dict[str, Session] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the sessions' tasks; they all end when this is cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self.sessions.clear()

    def owned_by(self, owner: str | None) -> int:
        return sum(1 for session in self.sessions.values() if session.owner == owner)

    async def handle(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        owner: str | None,
        *,
        session_id: str | None,
        posted: tuple[RequestId, ...],
        last_event_id: str | None = None,
        simple: plain.Plain | None = None,
        version: str | None = None,
    ) -> Refusal | None:
        """Serve one request of the handshake era; a refusal when it may not reach a session.

        `session_id`: its `Mcp-Session-Id`; `posted`: the ids of the requests it posts;
        `last_event_id`: the `Last-Event-ID` of a GET that resumes a stream; `simple`:
        the POST's message when the front may answer it itself; `version`: its
        `MCP-Protocol-Version`.
        """
        if session_id is not None:
            session = self.sessions.get(session_id)
            if session is None or session.owner != owner:
                reason = "unknown_session" if session is None else "session_of_another_token"
                return Refusal(404, "Session not found", reason)
            with session.busy():
                if simple is not None and self._may_answer(session, simple):
                    return await self._answer(session, simple, receive, send, version)
                await self._serve_request(session, scope, receive, send, posted, last_event_id)
            if session.transport.is_terminated:
                self._forget(session)
            return None
        limits = self._limits()
        if len(self.sessions) >= limits.total:
            return Refusal(503, f"Too many open sessions ({limits.total})", "session_limit")
        if self.owned_by(owner) >= limits.per_token:
            return Refusal(
                429, f"Too many open sessions for this token ({limits.per_token})", "token_session_limit"
            )
        session = await self._open(owner, limits)
        with session.busy():
            status = await self._serve_request(session, scope, receive, send, posted)
        if status is None or status >= 400:
            self._forget(session)  # nothing was established (no initialize, or refused)
            session.cancel.cancel()
        else:
            log.info("http_session_opened", session=session.id[:8], token=owner)
        return None

    async def _open(self, owner: str | None, limits: SessionLimits) -> Session:
        assert self._nursery is not None, "the sessions' nursery runs before requests are served"
        replay = ReplayBuffer(limits.replay_events) if limits.replay_events > 0 else None
        transport = StreamableHTTPServerTransport(mcp_session_id=uuid.uuid4().hex, event_store=replay)
        session = Session(
            id=transport.mcp_session_id or "",
            owner=owner,
            transport=transport,
            replay=replay,
            resume_grace=limits.resume_grace,
            idle_timeout=limits.idle_timeout,
        )
        self.sessions[session.id] = session
        await self._nursery.start(self._run_session, session)
        return session

    async def _run_session(self, session: Session, *, task_status: trio.TaskStatus[None]) -> None:
        started = False
        with session.cancel:
            try:
                async with session.transport.connect() as (read, write):
                    wire = session.wire = SessionWire(read, write)
                    task_status.started()
                    started = True
                    idle = session.idle
                    with idle:
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(wire.pump_in)
                            await self._serve("http", wire.receive_stream, wire.send_stream)
                            nursery.cancel_scope.cancel()
                    if idle.cancelled_caught:
                        log.info("http_session_idle", session=session.id[:8])
            except Exception:
                if not started:
                    raise  # opening it failed: the request that asked gets the error
                # one session's failure ends that session, never the front's others
                log.exception("http_session_failed", session=session.id[:8])
            finally:
                self._forget(session)
                if session.wire is not None:
                    session.wire.end()
                if not session.transport.is_terminated:
                    with trio.CancelScope(shield=True):
                        await session.transport.terminate()

    def _may_answer(self, session: Session, simple: plain.Plain) -> bool:
        """Whether the front answers `simple` itself: the session's connection runs, and
        the request's id is not one in flight already (the transport refuses that)."""
        wire = session.wire
        if wire is None or session.transport.is_terminated:
            return False
        return simple.request_id is None or request_key(simple.request_id) not in wire.unanswered

    async def _answer(
        self,
        session: Session,
        simple: plain.Plain,
        receive: Receive,
        send: Send,
        version: str | None,
    ) -> Refusal | None:
        wire = session.wire
        assert wire is not None
        try:
            if simple.request_id is None:
                await plain.accept(wire, simple, send, session_id=session.id)
                return None
            outcome = await plain.answer(
                wire, simple, receive, send, session_id=session.id, version=version, replay=session.replay
            )
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return Refusal(404, "Session not found", "session_ended")
        if outcome is plain.Outcome.LEFT:
            await self._abandon(session, simple.request_id, None)
        elif outcome is plain.Outcome.LEFT_STREAM:
            await self._hung_up(session, simple.request_id)
        return None

    async def _serve_request(
        self,
        session: Session,
        scope: Scope,
        receive: Receive,
        send: Send,
        posted: tuple[RequestId, ...],
        last_event_id: str | None = None,
    ) -> int | None:
        """Let the session's transport answer; cancel a call whose client hung up on it."""
        status: int | None = None
        disconnected = False

        async def watching_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        async def watching_receive() -> Message:
            nonlocal disconnected
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected = True
            return message

        resumed: str | None = None
        if last_event_id is not None:
            resumed = session.replay.stream_of(last_event_id) if session.replay is not None else None
            log.info(
                "http_stream_resumed",
                session=session.id[:8],
                last_event=last_event_id[:20],
                found=resumed is not None,
            )
        await session.transport.handle_request(scope, watching_receive, watching_send)
        if disconnected:
            for request_id in self._carried(session, posted, resumed):
                await self._hung_up(session, request_id)
        return status

    def _carried(
        self, session: Session, posted: tuple[RequestId, ...], resumed: str | None
    ) -> list[RequestId]:
        """The unanswered calls whose answers this request's stream was carrying: those it
        posted, or the one whose stream it resumed (a GET with `Last-Event-ID`)."""
        wire = session.wire
        if wire is None:
            return []
        if posted:
            return [r for r in posted if request_key(r) in wire.unanswered]
        found = wire.unanswered.get(resumed) if resumed is not None else None
        return [] if found is None else [found]

    async def _hung_up(self, session: Session, request_id: RequestId) -> None:
        """The stream carrying `request_id`'s answer broke: cancel the call, at once when
        the client cannot resume the stream, else unless it resumes within the grace."""
        replay = session.replay
        if replay is None or session.resume_grace <= 0:
            await self._abandon(session, request_id, None)
            return
        assert self._nursery is not None, "requests are served while the sessions' nursery runs"
        self._nursery.start_soon(self._abandon, session, request_id, replay.resumed[request_key(request_id)])

    async def _abandon(self, session: Session, request_id: RequestId, resumed: int | None) -> None:
        """Cancel `request_id` (after the grace, unless resumed since `resumed`)."""
        if resumed is not None:
            await trio.sleep(session.resume_grace)
            assert session.replay is not None
            if session.replay.resumed[request_key(request_id)] != resumed:
                return  # the client came back for the answer
        wire = session.wire
        if wire is not None and await wire.abandon(request_id, "the HTTP client disconnected"):
            log.info("http_call_abandoned", session=session.id[:8], request=request_id)

    def _forget(self, session: Session) -> None:
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]

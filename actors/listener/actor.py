"""The listener: accepts clients and runs one `ClientConnection` per connection.

Clients come over stdio and, on a primary, over its MCP Unix socket; `assernctl` comes
over the control socket. Each MCP connection is a byte stream pair that its
`ClientConnection` (session.py) reads and writes itself. The stdio client is usually
met at the front door first (app/front_door.py: `assern serve` opens it before the tree is
even imported): the listener then takes the door over, with what the client sent
meanwhile and the initialize the door already answered, instead of claiming stdio
itself. The listener also fans backend
notifications (resource updates, log messages) out to the connected clients, and
decides when a primary may stop: once its stdio client left and no socket client
remains (never for a daemon). Stopping then happens under the instance lock, after one
last look at the backlog, so a proxy that connected just before is served rather than
dropped.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types
import structlog
import trio

from assern.actors.jsonrpc import framing
from assern.actors.listener import control_protocol as proto
from assern.actors.listener.control import ControlPlane, serve_control
from assern.actors.listener.report import ClientView
from assern.actors.listener.session import ClientConnection, SessionContext
from assern.actors.listener.socket_basics import peer_credentials
from assern.actors.listener.stdio import claim_stdio
from assern.actors.listener.unix_socket import UnixListener, refuse
from assern.actors.router.views import estimate_tokens
from assern.supervisor.trionics import main_error

if TYPE_CHECKING:
    from assern.actors.listener.handshake import RequestId, StdioDoor
    from assern.actors.listener.http.server import HttpListen
    from assern.actors.listener.roots_check import SessionFolder

log = structlog.get_logger()

#: JSON-RPC error code of the line a refused MCP socket peer gets before the hang-up.
REFUSED = -32001

Serve = Callable[[socket.socket], Awaitable[None]]


def refusal_for(peer_uid: int | None, own_uid: int, *, control: bool) -> bytes | None:
    """The line a socket peer running as `peer_uid` is refused with, None if it is served.

    Only our own user is served; unknown credentials (None) never pass. The control
    socket's peer gets the control protocol's `forbidden` error, an MCP socket's peer a
    JSON-RPC error (`REFUSED`) with no id.
    """
    if peer_uid is not None and peer_uid == own_uid:
        return None
    message = f"refused: this assern serves uid {own_uid} only"
    if control:
        return proto.error_line(None, proto.FORBIDDEN, message)
    return framing.error(None, REFUSED, message)


@attrs.frozen(kw_only=True)
class BackendNote:
    server: str
    note: types.ServerNotification


@attrs.frozen(kw_only=True, eq=False)
class SocketService:
    """A primary's sockets and how it may stop serving them.

    Attributes:
        mcp: The MCP socket (newline-delimited JSON-RPC, like stdio).
        control: The control socket (`assernctl`).
        plane: What the control commands act on.
        lock: Takes the instance lock (the one starts hold while they elect a primary).
        linger: Stay up with no client at all (`assern daemon`).
    """

    mcp: UnixListener
    control: UnixListener
    plane: ControlPlane
    lock: Callable[[], AbstractAsyncContextManager[None]]
    linger: bool = False

    def withdraw(self) -> None:
        """Remove both socket files and stop listening (idempotent)."""
        self.mcp.withdraw()
        self.control.withdraw()


async def contained(client: str, serving: Awaitable[None]) -> None:
    """Serve one connection as its own failure domain.

    Whatever goes wrong while serving one client (a bug, a hostile input nobody thought
    of) ends that client's connection, logged with the reason, and nothing else: not the
    listener, not another client's session. The listener restarts only for its own
    faults (a socket it cannot serve). Cancellation is never caught here.
    """
    try:
        await serving
    except Exception as exc:
        cause = main_error(exc)  # the error itself, not the nurseries' groups around it
        log.error(
            "client_connection_failed",
            client=client,
            error=f"{type(cause).__name__}: {cause}",
            exc_info=exc,
        )


class ListenerActor:
    """Serves stdio, socket and control clients; knows when nobody is left.

    Args:
        shared: What every client session reads.
        notes: Backend notifications to fan out.
        stdio: Serve our own stdin/stdout as a client.
        on_stdio_closed: Called once the stdio client is gone.
        on_idle: Called when the last client is gone and no new one can come: stop.
        on_staying: Called when the stdio client left but socket clients keep us up.
        stdio_gone: Returns when the stdio client is known to be gone even though its
            pipes may still be open (the launcher of a detached primary exited).
        sockets: A primary's sockets, or None for an isolated instance.
        door: The front door that holds stdio (`assern serve`); without one, the
            listener claims stdio itself.
        stdio_profile: The profile the stdio client gets (`assern serve --profile`),
            or None to match its name against the profiles.
        http: The HTTP front's socket and settings, or None to serve no HTTP.
    """

    def __init__(
        self,
        shared: SessionContext,
        notes: trio.MemoryReceiveChannel[BackendNote],
        *,
        stdio: bool = True,
        on_stdio_closed: Callable[[], None] = lambda: None,
        on_idle: Callable[[], None] = lambda: None,
        on_staying: Callable[[], None] = lambda: None,
        stdio_gone: Callable[[], Awaitable[None]] | None = None,
        sockets: SocketService | None = None,
        door: StdioDoor | None = None,
        stdio_profile: str | None = None,
        http: HttpListen | None = None,
    ) -> None:
        self.shared = shared
        self.http = http
        self.stdio_profile = stdio_profile
        self.door = door
        self.notes = notes
        self.stdio = stdio
        self.sockets = sockets
        self._on_stdio_closed = on_stdio_closed
        self._on_idle = on_idle
        self._on_staying = on_staying
        self._stdio_gone = stdio_gone
        self.connections: dict[str, ClientConnection] = {}
        self._ids = itertools.count(1)
        self._stdio_done = trio.Event()
        #: MCP socket clients accepted and not yet gone (counted from the accept on)
        self._socket_clients = 0
        self._clients_changed = trio.Event()
        self._nursery: trio.Nursery | None = None
        #: set to stop the HTTP front gracefully (see `stop_http`)
        self._http_stop = trio.Event()
        #: set once the HTTP front stopped (or at once when there is none)
        self.http_stopped = trio.Event()
        if http is None:
            self.http_stopped.set()

    # ------------------------------------------------------------------ running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with structlog.contextvars.bound_contextvars(actor="listener"):
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._fan_out)
                if self.stdio:
                    nursery.start_soon(self._serve_stdio)
                if self.sockets is not None:
                    nursery.start_soon(self._accept, self.sockets.mcp, self._serve_socket)
                    nursery.start_soon(self._accept, self.sockets.control, self._serve_control)
                if self.stdio or self.sockets is not None:
                    nursery.start_soon(self._lifetime)
                if self.http is not None:
                    await nursery.start(self._serve_http, self.http)
                task_status.started()

    def client_views(self) -> list[ClientView]:
        """The connected MCP clients, for status."""
        views = []
        for connection in self.connections.values():
            catalog = connection.routing.catalog
            views.append(
                ClientView(
                    id=connection.client_id,
                    kind=connection.client_id.rsplit("-", 1)[0],
                    name=connection.client_name,
                    connected_at=connection.connected_at,
                    profile=connection.profile,
                    exposure=catalog.exposure,
                    list_tokens=estimate_tokens(catalog.tools_json),
                    roots=connection.roots.document(),
                )
            )
        return views

    async def serve_connection(
        self,
        kind: str,
        receive: trio.abc.ReceiveStream,
        send: trio.abc.SendStream,
        *,
        answered: RequestId | None = None,
        profile: str | None = None,
        folder: SessionFolder | None = None,
        opened: Callable[[ClientConnection], None] = lambda connection: None,
    ) -> None:
        """Serve one client over a byte stream pair until it disconnects.

        `answered`: the id of the initialize the front door answered already.
        `profile`: the profile it gets whatever its name (None: matched by its name).
        `folder`: the folder its configuration was resolved for (None: the listener's).
        `opened`: sees the connection before it is served.
        """
        client_id = f"{kind}-{next(self._ids)}"
        connection = ClientConnection(client_id, self.shared, profile=profile, folder=folder)
        self.connections[client_id] = connection
        opened(connection)
        try:
            await contained(client_id, connection.serve(receive, send, answered=answered))
        finally:
            del self.connections[client_id]

    async def host_modern(
        self, kind: str, client_name: str | None, *, task_status: trio.TaskStatus[Any]
    ) -> None:
        """Host a 2026-07-28 connection whose requests arrive one by one (the HTTP front's
        stateless clients) until cancelled; its server is reported through `task_status`."""
        client_id = f"{kind}-{next(self._ids)}"
        connection = ClientConnection(client_id, self.shared)
        self.connections[client_id] = connection
        try:
            await connection.host_modern(client_name, task_status=task_status)
        finally:
            del self.connections[client_id]

    # --------------------------------------------------------------------- http

    async def _serve_http(self, http: HttpListen, *, task_status: trio.TaskStatus[None]) -> None:
        from assern.actors.listener.http.server import FrontParts, serve_http

        parts = FrontParts(
            serve_connection=self.serve_connection,
            host_modern=partial(self.host_modern, "http"),
            readiness=self._readiness,
            backends=lambda: {name: h.status for name, h in self.shared.directory().items()},
            stats=self.shared.stats,
            clients=self._client_counts,
        )
        try:
            await serve_http(http, parts, self._http_stop.wait, task_status=task_status)
        finally:
            if self._http_stop.is_set():
                self.http_stopped.set()

    def stop_http(self) -> None:
        """Stop the HTTP front gracefully: no new connections; open requests get its
        `graceful_timeout`, then its sessions end (`http_stopped` is set then)."""
        self._http_stop.set()

    def _readiness(self) -> tuple[bool, dict[str, str]]:
        """Ready once the configuration is loaded and the first backends settled."""
        states = {name: handle.state.value for name, handle in self.shared.directory().items()}
        return self.shared.settled.is_set(), states

    def _client_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for connection in self.connections.values():
            kind = connection.client_id.rsplit("-", 1)[0]
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    # -------------------------------------------------------------------- stdio

    async def _serve_stdio(self) -> None:
        if self._stdio_done.is_set():
            return  # a restarted listener: the stdio client left before
        async with trio.open_nursery() as nursery:
            if self._stdio_gone is not None:
                nursery.start_soon(self._end_stdio_when_gone, nursery.cancel_scope)
            if self.door is not None:
                wire = await self.door.take()
                await self.serve_connection(
                    "stdio", wire.receive, wire.send, answered=wire.answered, profile=self.stdio_profile
                )
            else:
                with claim_stdio() as (stdin, stdout):
                    await self.serve_connection("stdio", stdin, stdout, profile=self.stdio_profile)
            nursery.cancel_scope.cancel()
        if self.door is not None:
            self.door.close()
        log.info("stdio_closed")
        self._stdio_done.set()
        self._on_stdio_closed()

    async def _end_stdio_when_gone(self, scope: trio.CancelScope) -> None:
        assert self._stdio_gone is not None
        await self._stdio_gone()
        log.info("launcher_gone")
        scope.cancel()

    # ------------------------------------------------------------------ sockets

    async def _accept(self, listener: UnixListener, serve: Serve) -> None:
        control = self.sockets is not None and listener is self.sockets.control
        while (sock := await listener.accept()) is not None:
            self._admit(sock, serve, control=control)
            await trio.lowlevel.checkpoint()

    def _admit(self, sock: socket.socket, serve: Serve, *, control: bool) -> None:
        """Check the peer's uid and start serving it (synchronously counted)."""
        try:
            uid, pid = peer_credentials(sock)
        except OSError:
            uid = pid = None
        if (refusal := refusal_for(uid, os.getuid(), control=control)) is not None:
            kind = "control" if control else "mcp"
            log.warning("connection_refused", socket=kind, peer_uid=uid, peer_pid=pid)
            refuse(sock, refusal)
            return
        assert self._nursery is not None
        if not control:
            self._socket_clients += 1
            self._note_clients()
        self._nursery.start_soon(serve, sock)

    def _note_clients(self) -> None:
        changed, self._clients_changed = self._clients_changed, trio.Event()
        changed.set()

    async def _serve_socket(self, sock: socket.socket) -> None:
        try:
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
            async with stream:
                await self.serve_connection("socket", stream, stream)
        finally:
            self._socket_clients -= 1
            self._note_clients()

    async def _serve_control(self, sock: socket.socket) -> None:
        assert self.sockets is not None
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        async with stream:
            with structlog.contextvars.bound_contextvars(client="control"):
                await contained("control", serve_control(self.sockets.plane, stream))

    # ----------------------------------------------------------------- lifetime

    async def _lifetime(self) -> None:
        """Call `on_idle` once no client is left and none can come; never for a daemon."""
        if self.stdio:
            await self._stdio_done.wait()
        sockets = self.sockets
        if sockets is None:
            self._on_idle()
            return
        if sockets.linger:
            return
        while True:
            if self._socket_clients:
                self._on_staying()
                log.info("instance_staying", socket_clients=self._socket_clients)
            while self._socket_clients:
                await self._clients_changed.wait()
            if await self._retire(sockets):
                log.info("instance_idle")
                self._on_idle()
                return

    async def _retire(self, sockets: SocketService) -> bool:
        """Withdraw the sockets unless a client arrived meanwhile; True when withdrawn."""
        async with sockets.lock():
            for sock in sockets.mcp.accept_pending():
                self._admit(sock, self._serve_socket, control=False)
            if self._socket_clients:
                return False
            sockets.withdraw()
            return True

    # ------------------------------------------------------------ notifications

    async def _fan_out(self) -> None:
        async for item in self.notes:
            for connection in list(self.connections.values()):
                try:
                    await connection.backend_notification(item.server, item.note)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass
                except Exception as exc:  # one connection's fault: the others still get theirs
                    log.error(
                        "client_notification_failed",
                        client=connection.client_id,
                        error=f"{type(exc).__name__}: {exc}",
                        exc_info=exc,
                    )

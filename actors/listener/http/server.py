"""The HTTP front as the listener runs it: hypercorn's trio worker on a bound socket.

The socket is bound before the tree starts (`bind_socket`), so a taken port is a clear
error of `assern serve --http` rather than a failing child, and it outlives restarts of
the listener: each run serves a duplicate of it. The front's parts live in one nursery:
the handshake-era sessions, the stateless clients and hypercorn itself; stopping the
front gives open requests `graceful_timeout` seconds (hypercorn's own deadline) and
then ends every session, which cancels what their calls still run at the backends.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable, Mapping

import attrs
import structlog
import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config, Sockets
from hypercorn.trio.run import worker_serve

from assern.actors.backend.status import BackendStatus
from assern.actors.config.listen import Bind, ListenSpec
from assern.actors.listener.http.app import HttpApp, Readiness
from assern.actors.listener.http.legacy_sse import LegacySse
from assern.actors.listener.http.metrics import Metrics
from assern.actors.listener.http.sessions import HandshakeSessions, ServeConnection, SessionLimits
from assern.actors.listener.http.stateless import HostModern, StatelessClients
from assern.actors.listener.http.tokens import TokenStore
from assern.actors.listener.stats import CallStats
from assern.actors.listener.unix_socket import BACKLOG

log = structlog.get_logger()


class BindFailed(OSError):
    """The HTTP front's address cannot be bound."""


def bind_socket(bind: Bind) -> socket.socket:
    """A listening TCP socket on `bind` (port 0: a free one).

    Raises:
        BindFailed: naming the address and why.
    """
    try:
        infos = socket.getaddrinfo(bind.host, bind.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BindFailed(f"cannot serve HTTP on {bind}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise BindFailed(f"cannot serve HTTP on {bind}: {exc.strerror or exc}") from None
    sock.set_inheritable(False)
    return sock


@attrs.frozen(kw_only=True, eq=False)
class HttpListen:
    """What the listener needs to serve HTTP.

    Attributes:
        sock: The bound, listening socket.
        bind: The address it was asked for (checks of `Host` and `Origin` use it).
        spec: The current `[listen]` (read per request: limits and tokens follow reloads).
    """

    sock: socket.socket
    bind: Bind
    spec: Callable[[], ListenSpec]

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def url(self) -> str:
        scheme = "https" if self.spec().tls else "http"
        return f"{scheme}://{attrs.evolve(self.bind, port=self.port)}/mcp"


@attrs.frozen(kw_only=True, eq=False)
class FrontParts:
    """What the front reads of the instance."""

    serve_connection: ServeConnection
    host_modern: HostModern
    readiness: Readiness
    backends: Callable[[], Mapping[str, BackendStatus]]
    stats: CallStats
    clients: Callable[[], Mapping[str, int]]


def _config(spec: ListenSpec) -> Config:
    config = Config()
    config.graceful_timeout = spec.graceful_timeout
    config.h11_max_incomplete_size = spec.max_header_bytes
    config.h2_max_header_list_size = spec.max_header_bytes
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.keep_alive_timeout = 75.0  # longer than common load balancers' idle timeouts
    if spec.tls:
        config.certfile = str(spec.certfile)
        config.keyfile = str(spec.keyfile)
    return config


async def serve_http(
    listen: HttpListen,
    parts: FrontParts,
    stopping: Callable[[], Awaitable[None]],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the HTTP front until cancelled or until `stopping` returns (then gracefully)."""
    spec = listen.spec()

    def limits() -> SessionLimits:
        current = listen.spec()
        return SessionLimits(
            total=current.max_sessions,
            per_token=current.max_sessions_per_token,
            idle_timeout=current.session_idle_timeout,
            replay_events=current.replay_events,
            resume_grace=current.resume_grace,
        )

    sessions = HandshakeSessions(parts.serve_connection, limits)
    stateless = StatelessClients(
        parts.host_modern,
        idle_timeout=lambda: listen.spec().session_idle_timeout,
        max_body=lambda: listen.spec().max_body_bytes,
    )
    tokens = TokenStore(spec.tokens_file)
    app = HttpApp(
        bind=listen.bind,
        spec=listen.spec,
        tokens=tokens,
        sessions=sessions,
        stateless=stateless,
        readiness=parts.readiness,
        metrics=Metrics(parts.backends, parts.stats, parts.clients),
        legacy=LegacySse(parts.serve_connection),
    )
    config = _config(spec)
    sock = listen.sock.dup()
    sockets = Sockets(
        secure_sockets=[sock] if spec.tls else [],
        insecure_sockets=[] if spec.tls else [sock],
        quic_sockets=[],
    )
    async with trio.open_nursery() as nursery:

        async def run_hypercorn(*, task_status: trio.TaskStatus[list[str]]) -> None:
            try:
                await worker_serve(
                    ASGIWrapper(app),  # type: ignore[arg-type]  # hypercorn's scopes are TypedDicts
                    config,
                    sockets=sockets,
                    shutdown_trigger=stopping,
                    task_status=task_status,
                )
            finally:
                sock.close()
            nursery.cancel_scope.cancel()  # stopped gracefully: the sessions end now

        await nursery.start(sessions.run)
        await nursery.start(stateless.run)
        binds = await nursery.start(run_hypercorn)
        log.info(
            "http_listening",
            url=listen.url(),
            binds=binds,
            auth="token" if spec.needs_token(tokens_exist=tokens.any()) else "none",
            tls=spec.tls,
        )
        task_status.started()

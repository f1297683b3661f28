"""The page actor: serves the status page from the first `assernctl web` on.

Until a first `OpenPage` arrives, the actor only waits on its mailbox: no socket, no
server, no timer. The first one binds a free port on 127.0.0.1 and starts hypercorn's
trio worker on it (imported then, not before) with the page's application (asgi.py);
every `OpenPage` mints a one-time code (codes.py) and is answered with the page's
address. The socket and the keys belong to the actor object, so a restart of the actor
serves the same address to the same signed-in browsers.
"""

from __future__ import annotations

import logging
import socket

import attrs
import outcome
import structlog
import trio

from assern.actors.listener.page.asgi import LogTail, PageApp, Status
from assern.actors.listener.page.codes import Keys
from assern.actors.listener.unix_socket import BACKLOG
from assern.supervisor.mailbox import Reply, reply_to

log = structlog.get_logger()

#: The only address the page listens on.
HOST = "127.0.0.1"


@attrs.frozen(kw_only=True)
class PageAddress:
    """Where the page is, and the one-time address that signs a browser in.

    Attributes:
        url: The page's own address (no key in it).
        login: The address with a fresh one-time code (`/login?code=…`).
        expires_in: Seconds the code stays valid.
    """

    url: str
    login: str
    expires_in: float


@attrs.frozen(kw_only=True, eq=False)
class OpenPage:
    """Start the page if it is not served yet, and mint a code for one browser."""

    reply: Reply[PageAddress] = attrs.field(repr=False)


class PageActor:
    """Serves the page once asked to.

    Args:
        inbox: `OpenPage` requests (from the control socket's `web` command).
        status: Reads the status document.
        logs: Reads the log's last lines.
    """

    def __init__(self, inbox: trio.MemoryReceiveChannel[OpenPage], *, status: Status, logs: LogTail) -> None:
        self.inbox = inbox
        self._status = status
        self._logs = logs
        self.keys = Keys()
        self._sock: socket.socket | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with structlog.contextvars.bound_contextvars(actor="page"):
            async with trio.open_nursery() as nursery:
                served = False
                if self._sock is not None:  # restarted: serve the same address again
                    await nursery.start(self._serve, self._sock)
                    served = True
                task_status.started()
                async for request in self.inbox:
                    with request.reply:
                        if not served:
                            try:
                                self._sock = self._sock or _bind()
                            except OSError as exc:  # told to the caller; the next one tries again
                                reply_to(request.reply, outcome.Error(exc))
                                continue
                            await nursery.start(self._serve, self._sock)
                            served = True
                        reply_to(request.reply, outcome.Value(self._address()))

    def close(self) -> None:
        """Stop listening for good (the instance stops)."""
        if self._sock is not None:
            self._sock.close()

    def _address(self) -> PageAddress:
        assert self._sock is not None
        url = f"http://{HOST}:{self._sock.getsockname()[1]}/"
        return PageAddress(url=url, login=f"{url}login?code={self.keys.mint()}", expires_in=self.keys.ttl)

    async def _serve(self, sock: socket.socket, *, task_status: trio.TaskStatus[list[str]]) -> None:
        from hypercorn.app_wrappers import ASGIWrapper
        from hypercorn.config import Config, Sockets
        from hypercorn.trio.run import worker_serve

        config = Config()
        config.accesslog = None
        config.errorlog = logging.getLogger("hypercorn.error")
        config.graceful_timeout = 1.0
        port = int(sock.getsockname()[1])
        app = PageApp(keys=self.keys, port=port, status=self._status, logs=self._logs)
        listening = sock.dup()
        sockets = Sockets(secure_sockets=[], insecure_sockets=[listening], quic_sockets=[])
        log.info("page_listening", url=f"http://{HOST}:{port}/")
        try:
            await worker_serve(
                ASGIWrapper(app),  # type: ignore[arg-type]  # hypercorn's scopes are TypedDicts
                config,
                sockets=sockets,
                task_status=task_status,
            )
        finally:
            listening.close()


def _bind() -> socket.socket:
    """A listening socket on a free port of 127.0.0.1."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((HOST, 0))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock

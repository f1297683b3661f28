"""Listening Unix sockets that only their own user may use.

A `UnixListener` is bound before trio starts (the election of a primary is synchronous)
and served by the listener actor afterwards. The socket file is created 0600 inside a
0700 folder, and every accepted connection is checked once more against the peer's
credentials (`SO_PEERCRED` on Linux, `LOCAL_PEERCRED` on macOS and the BSDs): a
connection from another user is told why and closed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from typing import TYPE_CHECKING

import structlog
import trio

if TYPE_CHECKING:
    from pathlib import Path

log = structlog.get_logger()

BACKLOG = 128
#: accept() errors that concern one connection or a passing shortage, not the listener
_TRANSIENT = {errno.ECONNABORTED, errno.EPROTO, errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def bind_unix(path: Path) -> socket.socket:
    """A non-blocking listening socket at `path`, created with mode 0600.

    Raises:
        OSError: the path is taken, too long, or not writable.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)  # no moment with wider permissions than 0600
        try:
            sock.bind(str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class UnixListener:
    """A bound, listening Unix socket and the file that names it.

    `withdraw()` removes the file (only if it is still ours) and closes the socket, so no
    new client can reach this instance; connections already accepted go on.
    """

    def __init__(self, sock: socket.socket, path: Path, *, owned: bool = True) -> None:
        self.sock = sock
        self.path = path
        #: whether the file is ours to remove (not for a socket a service manager gave us)
        self.owned = owned
        info = os.stat(path)
        self._identity = (info.st_dev, info.st_ino)
        self._closed = False

    @classmethod
    def bind(cls, path: Path) -> UnixListener:
        return cls(bind_unix(path), path)

    @property
    def withdrawn(self) -> bool:
        return self._closed

    async def accept(self) -> socket.socket | None:
        """The next connection, or None once the listener was withdrawn."""
        while not self._closed:
            try:
                conn, _address = self.sock.accept()
            except BlockingIOError:
                pass
            except OSError as exc:
                if self.withdrawn or exc.errno == errno.EBADF:  # closed by another task meanwhile
                    return None
                if exc.errno not in _TRANSIENT:
                    raise
                log.warning("accept_failed", socket=str(self.path), error=exc.strerror)
                await trio.sleep(0.05)  # a shortage of descriptors or memory: let it pass
                continue
            else:
                return conn  # the caller owns it now: no checkpoint may come between
            try:
                await trio.lowlevel.wait_readable(self.sock)
            except (trio.ClosedResourceError, OSError):
                return None
        return None

    def accept_pending(self) -> list[socket.socket]:
        """Every connection already waiting in the backlog, without blocking."""
        pending: list[socket.socket] = []
        while not self._closed:
            try:
                conn, _address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                if exc.errno in _TRANSIENT:
                    continue
                break
            pending.append(conn)
        return pending

    def withdraw(self) -> None:
        """Remove the socket file (if it is still this socket's, and ours to remove) and
        close the socket."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            info = os.stat(self.path)
            if self.owned and (info.st_dev, info.st_ino) == self._identity:
                os.unlink(self.path)
        with contextlib.suppress(RuntimeError):  # outside trio nobody waits on it
            trio.lowlevel.notify_closing(self.sock)
        self.sock.close()

    def forget(self) -> None:
        """Close this process's descriptor only; the file and the listening socket stay.

        For the launcher after `fork`: the primary child keeps listening.
        """
        self._closed = True
        self.sock.close()


def refuse(sock: socket.socket, line: bytes) -> None:
    """Tell a refused peer why (best effort, never blocking), then close."""
    with contextlib.suppress(OSError):
        sock.setblocking(False)
        sock.send(line)
    sock.close()

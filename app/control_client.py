"""The client side of an instance's sockets: one control command, or an MCP connection.

Plain blocking sockets: `assernctl` and the election of a primary run before (or
without) trio. Every connection checks that the instance runs as our own user.
"""

from __future__ import annotations

import json
import os
import socket

from assern.actors.listener.socket_basics import PROTOCOL_VERSION, same_user

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (app/quick.py)

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

MAX_REPLY = 64 * 1024 * 1024


class ControlUnavailable(Exception):
    """Nobody (of ours) answers at the socket: missing, refused, timed out or foreign."""


class ControlError(Exception):
    """The instance answered the command with an error.

    Attributes:
        code: The error's stable code, e.g. "unknown_server" (see docs/operations.md).
        message: What went wrong, for people.
        data: Details, when the error has any.
    """

    def __init__(self, code: str, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def connect_unix(path: Path, timeout: float | None) -> socket.socket:
    """A connected socket to `path`, served by a process of our own uid.

    Raises:
        ControlUnavailable: nobody listens there, or somebody else's process does.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except OSError as exc:
        sock.close()
        raise ControlUnavailable(f"{path}: {exc.strerror or exc}") from None
    if not same_user(sock):
        sock.close()
        raise ControlUnavailable(f"{path} is served by another user's process (uid {os.getuid()} expected)")
    return sock


def _read_line(sock: socket.socket) -> bytes:
    buffer = bytearray()
    while b"\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buffer += chunk
        if len(buffer) > MAX_REPLY:
            raise ControlUnavailable("the reply exceeded 64 MiB")
    return bytes(buffer.split(b"\n", 1)[0])


def request(
    path: Path, command: str, *, timeout: float | None = 10.0, connect_timeout: float = 2.0, **fields: Any
) -> Any:
    """Send one command to a control socket and return its result.

    Args:
        path: The instance's control socket.
        command: "hello", "status", "list", "search", "call", "restart", "stop", "start",
            "reload" or "shutdown".
        timeout: Seconds to wait for the answer; None waits as long as it takes.
        connect_timeout: Seconds to wait for the connection itself.
        fields: The command's arguments (e.g. `server="github"`).

    Raises:
        ControlUnavailable: no instance answers at `path` (or it hung up).
        ControlError: the instance refused or failed the command.
    """
    sock = connect_unix(path, connect_timeout)
    with sock:
        sock.settimeout(timeout)
        try:
            sock.sendall(json.dumps({"v": PROTOCOL_VERSION, "command": command, **fields}).encode() + b"\n")
            line = _read_line(sock)
        except OSError as exc:
            raise ControlUnavailable(f"{path}: {exc.strerror or exc}") from None
    if not line:
        raise ControlUnavailable(f"{path}: the instance closed the connection without answering")
    try:
        reply = json.loads(line)
    except ValueError:
        raise ControlUnavailable(f"{path}: the answer is not JSON") from None
    if not isinstance(reply, dict):
        raise ControlUnavailable(f"{path}: the answer is not a JSON object")
    if not reply.get("ok"):
        found = reply.get("error")
        error: dict[str, Any] = found if isinstance(found, dict) else {}
        raise ControlError(
            str(error.get("code", "error")), str(error.get("message", "failed")), error.get("data")
        )
    return reply.get("result")

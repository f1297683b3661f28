"""Taking the daemon's sockets from a running daemon, which then drains and stops.

A start asked to supersede (`assern daemon --supersede`, `assernctl daemon restart`), under
`daemon.lock`:

1. opens a control connection to the running daemon and asks its `hello` (pid, build,
   generation), keeping the connection;
2. binds its own two sockets under temporary names beside the daemon's and renames them
   over `daemon.sock` and `daemon.ctl`: a rename is atomic, so a client connecting at any
   moment reaches one daemon or the other, never no socket;
3. sends `supersede` (its build, its pid, the drain deadline) on the kept connection: the
   old daemon stops accepting (its sockets close; the files, the successor's now, stay),
   tells every session whose `assern serve` resumes sessions (`assern/superseded`), lets
   its calls in flight finish (at most the deadline), and stops (`superseded by BUILD`).
   A daemon too old to know `supersede` is asked to `shutdown` instead.

The successor keeps the connection to follow the draining daemon for its status (the calls
it still runs) until it is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from typing import TYPE_CHECKING, Any

import attrs

from assern.actors.listener.control_protocol import UNKNOWN_COMMAND
from assern.actors.listener.socket_basics import PROTOCOL_VERSION
from assern.actors.listener.unix_socket import UnixListener, bind_unix
from assern.app.control_client import ControlUnavailable, connect_unix
from assern.app.instance import InstanceError, Slot

if TYPE_CHECKING:
    from pathlib import Path

#: Seconds the running daemon has to answer `hello` and `supersede`.
ANSWER_TIMEOUT = 10.0


@attrs.define(eq=False)
class Predecessor:
    """The daemon a successor superseded, while it drains."""

    pid: int
    build: str
    generation: int
    reason: str
    #: the control connection kept to it (None once it is gone)
    sock: socket.socket | None
    #: its calls still in flight, as it last said (None: not asked yet)
    calls_in_flight: int | None = None
    draining: bool = True


def command_line(command: str, request_id: int, **fields: Any) -> bytes:
    """One control request line."""
    return (
        json.dumps({"v": PROTOCOL_VERSION, "command": command, "id": request_id, **fields}).encode() + b"\n"
    )


def _ask(sock: socket.socket, command: str, request_id: int, **fields: Any) -> dict[str, Any]:
    """Send one command and read its reply line (blocking, bounded by the socket's timeout)."""
    sock.sendall(command_line(command, request_id, **fields))
    buffer = bytearray()
    while not buffer.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            raise ControlUnavailable("the running daemon closed the connection without answering")
        buffer += chunk
    reply = json.loads(buffer)
    if not isinstance(reply, dict):
        raise ControlUnavailable("the running daemon's answer is not a JSON object")
    return reply


def take_over(
    slot: Slot, *, build: str, reason: str, deadline: float
) -> tuple[UnixListener, UnixListener, Predecessor]:
    """Take `slot`'s sockets from the daemon answering there (the caller holds the lock).

    Raises:
        InstanceError: the running daemon did not answer, or the sockets cannot be bound.
    """
    try:
        sock = connect_unix(slot.control, ANSWER_TIMEOUT)
    except ControlUnavailable as exc:
        raise InstanceError(f"cannot reach the running daemon to supersede it: {exc}") from None
    try:
        sock.settimeout(ANSWER_TIMEOUT)
        hello = _ask(sock, "hello", 1).get("result")
        if not isinstance(hello, dict) or not isinstance(hello.get("pid"), int):
            raise InstanceError("the running daemon's hello has no pid")
        generation = hello.get("generation")
        predecessor = Predecessor(
            pid=hello["pid"],
            build=str(hello.get("build") or hello.get("version") or "unknown"),
            generation=generation if isinstance(generation, int) else 1,
            reason=reason,
            sock=sock,
        )
        mcp, control = _bind_over(slot)
        reply = _ask(sock, "supersede", 2, build=build, pid=os.getpid(), deadline=deadline)
        if not reply.get("ok"):
            found = reply.get("error")
            error: dict[str, Any] = found if isinstance(found, dict) else {}
            if error.get("code") != UNKNOWN_COMMAND:
                raise InstanceError(f"the running daemon refused to be superseded: {error.get('message')}")
            _ask(sock, "shutdown", 3)  # a daemon from before `supersede`: it stops at once
        return mcp, control, predecessor
    except (OSError, ValueError, ControlUnavailable) as exc:
        sock.close()
        raise InstanceError(f"superseding the running daemon failed: {exc}") from None
    except BaseException:
        sock.close()
        raise


def _bind_over(slot: Slot) -> tuple[UnixListener, UnixListener]:
    """Bind both sockets under temporary names and rename them over the slot's."""
    bound: list[tuple[socket.socket, Path]] = []
    try:
        for path in (slot.mcp, slot.control):
            temporary = path.with_name(f"{path.stem}-next{path.suffix}")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            bound.append((bind_unix(temporary), temporary))
        for (_, temporary), path in zip(bound, (slot.mcp, slot.control), strict=True):
            os.rename(temporary, path)
    except BaseException:
        for listening, temporary in bound:
            listening.close()
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise
    return UnixListener(bound[0][0], slot.mcp), UnixListener(bound[1][0], slot.control)

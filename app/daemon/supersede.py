"""Taking the daemon's sockets from a running daemon, which then drains and stops.

A start asked to supersede (`assern daemon --supersede`, `assernctl daemon restart`), under
`daemon.lock`:

1. opens a control connection to the running daemon and asks its `hello` (pid, build,
   generation), keeping the connection (`begin_takeover`);
2. warms: asks the running daemon's `contexts` (what each session stated in its hello,
   and which backends of its view run), resolves each view that a moving session uses
   as a new connection would and starts the backends that ran there, for at most
   `WARM_BOUND` seconds in all (app/daemon/warm.py). A daemon too old to know
   `contexts` is superseded without warming;
3. binds its own two sockets under temporary names beside the daemon's and renames them
   over `daemon.sock` and `daemon.ctl` (`Takeover.complete`): a rename is atomic, so a
   client connecting at any moment reaches one daemon or the other, never no socket;
4. sends `supersede` (its build, its pid, the drain deadline) on the kept connection: the
   old daemon stops accepting (its sockets close; the files, the successor's now, stay),
   tells every session whose `assern serve` resumes sessions (`assern/superseded`), lets
   its calls in flight finish (at most the deadline), and stops (`superseded by BUILD`).
   A daemon too old to know `supersede` is asked to `shutdown` instead.

Until step 3 the running daemon serves every client as before. The successor keeps the
connection to follow the draining daemon for its status (the calls it still runs) until
it is gone.
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
from assern.app.daemon.launch import alive
from assern.app.instance import InstanceError, Slot
from assern.app.instance_lock import InstanceLock

if TYPE_CHECKING:
    from pathlib import Path

#: Seconds the running daemon has to answer `hello`, `contexts` and `supersede`.
ANSWER_TIMEOUT = 10.0
#: The longest answer read from the running daemon (`contexts` carries every session's
#: environment).
MAX_ANSWER = 64 << 20


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
    """Send one command and read its reply line (blocking, bounded by the socket's timeout).

    The daemon answers each request with one line and sends nothing unasked, so a read
    of many bytes at once never takes the start of a later answer."""
    sock.sendall(command_line(command, request_id, **fields))
    buffer = bytearray()
    while not buffer.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise ControlUnavailable("the running daemon closed the connection without answering")
        buffer += chunk
        if len(buffer) > MAX_ANSWER:
            raise ControlUnavailable(f"the running daemon's answer exceeded {MAX_ANSWER} bytes")
    reply = json.loads(buffer)
    if not isinstance(reply, dict):
        raise ControlUnavailable("the running daemon's answer is not a JSON object")
    return reply


@attrs.define(eq=False)
class Takeover:
    """A takeover begun: the running daemon answered `hello` on the kept connection and
    the start holds `daemon.lock`; the sockets are still the running daemon's until
    `complete` (step 2 of the module), which the successor calls once it warmed."""

    slot: Slot
    build: str
    deadline: float
    predecessor: Predecessor
    #: held from `begin_takeover` until `complete` or `abandon`
    lock: InstanceLock

    def contexts(self) -> tuple[dict[str, Any] | None, str | None]:
        """The running daemon's `contexts` (what its sessions stated and which backends
        of their views run: app/daemon/warm.py reads it), or None and why there is none:
        a daemon too old to know the command, or one that did not answer it."""
        sock = self.predecessor.sock
        if sock is None:
            return None, "the connection to the running daemon is closed"
        try:
            reply = _ask(sock, "contexts", 4)
        except (OSError, ValueError, ControlUnavailable) as exc:
            return None, f"the running daemon did not answer `contexts`: {exc}"
        if reply.get("ok") and isinstance(reply.get("result"), dict):
            return reply["result"], None
        found = reply.get("error")
        error: dict[str, Any] = found if isinstance(found, dict) else {}
        if error.get("code") == UNKNOWN_COMMAND:
            return None, f"the running daemon (build {self.predecessor.build}) does not know `contexts`"
        return None, f"the running daemon refused `contexts`: {error.get('message')}"

    def complete(self) -> tuple[UnixListener, UnixListener]:
        """Rename this daemon's sockets over the running daemon's and tell it `supersede`
        (a daemon from before `supersede` is told `shutdown`); the lock is released.

        Raises:
            InstanceError: the running daemon went away or refused, or the sockets cannot
                be bound.
        """
        sock = self.predecessor.sock
        try:
            if sock is None:
                raise InstanceError("the connection to the running daemon is closed")
            mcp, control = _bind_over(self.slot)
            try:
                reply = _ask(sock, "supersede", 2, build=self.build, pid=os.getpid(), deadline=self.deadline)
            except (OSError, ControlUnavailable):
                if alive(self.predecessor.pid):
                    mcp.withdraw()
                    control.withdraw()
                    raise
                self._close()
                return mcp, control  # it died while this daemon warmed: the sockets are ours
            if not reply.get("ok"):
                found = reply.get("error")
                error: dict[str, Any] = found if isinstance(found, dict) else {}
                if error.get("code") != UNKNOWN_COMMAND:
                    refused = error.get("message")
                    raise InstanceError(f"the running daemon refused to be superseded: {refused}")
                _ask(sock, "shutdown", 3)  # a daemon from before `supersede`: it stops at once
            return mcp, control
        except (OSError, ValueError, ControlUnavailable) as exc:
            self._close()
            raise InstanceError(f"superseding the running daemon failed: {exc}") from None
        except BaseException:
            self._close()
            raise
        finally:
            self.lock.release()

    def abandon(self) -> None:
        """Give the takeover up before `complete`: the running daemon goes on as it was."""
        self._close()
        self.lock.release()

    def _close(self) -> None:
        sock, self.predecessor.sock = self.predecessor.sock, None
        if sock is not None:
            sock.close()


def begin_takeover(slot: Slot, *, build: str, reason: str, deadline: float, lock: InstanceLock) -> Takeover:
    """Connect to the daemon answering at `slot` and ask its `hello` (the caller holds
    `lock`, which the returned takeover releases when it completes or is abandoned).

    Raises:
        InstanceError: the running daemon did not answer.
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
    except (OSError, ValueError, ControlUnavailable) as exc:
        sock.close()
        raise InstanceError(f"superseding the running daemon failed: {exc}") from None
    except BaseException:
        sock.close()
        raise
    return Takeover(slot=slot, build=build, deadline=deadline, predecessor=predecessor, lock=lock)


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

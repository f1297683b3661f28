"""The link to one backend process: its pipes, and who reads what comes out of them.

We spawn the process ourselves (not with the SDK's `stdio_client`) so that it gets the
complete computed environment, a parent-death signal and its own process group, and so
that its stderr becomes log events instead of noise on ours.

Each stdout line is decoded once. The `Forwarder` (forward.py) takes the responses and
progress notifications of pending requests; the rest goes to an `Inbound`: our own
handshake-era session (client.py) in the common case, or the bridge to the SDK's
message streams (sdk_client.py) for a stdio backend on protocol "auto" or a version pin.
Nothing here imports the SDK.
"""

from __future__ import annotations

import contextlib
import shutil
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from assern.actors.backend.forward import STOPPING, Forwarder, Requester
from assern.actors.jsonrpc import framing
from assern.supervisor.io.process import ChildProcess, spawn, stop_process
from assern.supervisor.io.reader import LineReader, LineTooLong
from assern.supervisor.io.writer import DirectWriter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from assern.actors.config.spec import ServerSpec

STDERR_TAIL = 50


@attrs.define(eq=False)
class ProcessLink:
    """What the backend actor knows about its current process. Owned by that actor."""

    process: ChildProcess | None = None
    #: the request table and stdin of this process (set while the process runs)
    forwarder: Forwarder | None = None
    #: a streamable-HTTP backend's raw lane (set while its handshake-era session runs)
    poster: Requester | None = None
    #: makes such a lane for the session's protocol version (and a 2026-07-28 one's
    #: headers), set while a streamable-HTTP transport runs
    open_lane: Callable[..., Requester] | None = None
    exited: trio.Event = attrs.field(factory=trio.Event)
    exit_code: int | None = None
    stderr_tail: deque[str] = attrs.field(factory=lambda: deque(maxlen=STDERR_TAIL))


class Inbound(Protocol):
    """Who gets the backend's messages that are not answers to a pending request."""

    async def receive(self, message: Any) -> None:
        """One decoded message (any JSON value), or the ValueError of a line that is not JSON.

        Awaited by the stdout reader: whatever takes long must go to a task of its own.
        """

    def closed(self) -> None:
        """Nothing more will come: stdout ended, or stdin broke."""


def unreadable(forwarder: Forwarder, head: bytes, reason: str) -> None:
    """A backend line that cannot be decoded: fail the pending request it answers, if any.

    The line itself is dropped (the inbound side logs it); the request is answered with an
    internal error instead of waiting for its timeout.
    """
    request_id = framing.recover_id(head)
    if not isinstance(request_id, str):
        return
    error = {"code": framing.INTERNAL_ERROR, "message": f"the backend's answer was dropped: {reason}"}
    forwarder.route({"jsonrpc": "2.0", "id": request_id, "error": error})


class CommandNotFound(Exception):
    pass


def resolve_command(spec: ServerSpec) -> list[str]:
    """The argv to run: the command found on the spec's own PATH, then its args."""
    assert spec.command is not None
    found = shutil.which(spec.command, path=spec.env.get("PATH"))
    if found is None:
        raise CommandNotFound(f"command '{spec.command}' of server '{spec.name}' was not found on its PATH")
    return [found, *spec.args]


@contextlib.asynccontextmanager
async def stdio_process(
    spec: ServerSpec,
    link: ProcessLink,
    inbound: Inbound,
    on_stderr: Callable[[str], None],
    on_spawn: Callable[[int], None] = lambda _pid: None,
) -> AsyncIterator[Forwarder]:
    """Spawn the backend and yield its `Forwarder` (also `link.forwarder`) while it runs.

    On exit (normal, error or cancellation) the process group is stopped with bounded,
    shielded waits. When the process exits by itself, `link.exited` is set; when its
    stdout ends, pending requests fail at once and `inbound` is told.
    """
    argv = resolve_command(spec)
    process = spawn(argv, env=spec.env, cwd=spec.cwd)
    link.process = process
    on_spawn(process.pid)  # recorded before anything can go wrong (see PidRegistry)
    stdin = DirectWriter(process.stdin)
    forwarder = link.forwarder = Forwarder(stdin)

    async def pump_stdout() -> None:
        try:
            with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                lines = framing.line_reader(process.stdout)
                while True:
                    try:
                        line = await lines.receive()
                    except LineTooLong as exc:  # dropped; a request it answered fails
                        unreadable(forwarder, exc.head, str(exc))
                        await inbound.receive(exc)
                        continue
                    if line is None:
                        break
                    if not line.strip():
                        continue
                    try:
                        raw = framing.loads(line, checked=False)
                    except framing.TooDeep as exc:
                        unreadable(forwarder, line, str(exc))
                        await inbound.receive(exc)
                        continue
                    except ValueError as exc:
                        await inbound.receive(exc)
                        continue
                    if not forwarder.route(raw, line):
                        await inbound.receive(raw)
        finally:
            inbound.closed()
        # Not when cancelled: then we are stopping the backend, and the requests still
        # pending are failed with that reason (STOPPING) as the process is stopped.
        forwarder.close("the backend closed its stdout")

    async def pump_stdin() -> None:
        await stdin.pump()
        forwarder.close("the backend closed its stdin")
        inbound.closed()

    async def pump_stderr() -> None:
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
            lines = LineReader(process.stderr, framing.MAX_LINE)
            while (raw := await lines.receive()) is not None:
                line = raw.decode(errors="replace").rstrip()
                link.stderr_tail.append(line)
                on_stderr(line)

    async def watch_exit() -> None:
        link.exit_code = await process.wait()
        link.exited.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_stdout)
        nursery.start_soon(pump_stdin)
        nursery.start_soon(pump_stderr)
        nursery.start_soon(watch_exit)
        try:
            yield forwarder
        finally:
            forwarder.close(STOPPING)
            code = await stop_process(process)
            if link.exit_code is None:
                link.exit_code = code
            nursery.cancel_scope.cancel()

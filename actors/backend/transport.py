"""The link to one backend process: its stdio as the SDK's message streams.

We spawn the process ourselves (not with the SDK's `stdio_client`) so that it gets the
complete computed environment, a parent-death signal and its own process group, and so
that its stderr becomes log events instead of noise on ours.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections import deque
from collections.abc import AsyncIterator, Callable

import anyio
import attrs
import mcp_types as types
import trio
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from assern.actors.backend.forward import STOPPING, Forwarder
from assern.actors.config.spec import ServerSpec
from assern.supervisor.process import ChildProcess, spawn, stop_process
from assern.supervisor.writer import DirectWriter

STDERR_TAIL = 50
_MAX_LINE = 64 * 1024 * 1024


@attrs.define(eq=False)
class ProcessLink:
    """What the backend actor knows about its current process. Owned by that actor."""

    process: ChildProcess | None = None
    #: the raw fast lane over this process's pipes (set while the process runs)
    forwarder: Forwarder | None = None
    exited: trio.Event = attrs.field(factory=trio.Event)
    exit_code: int | None = None
    stderr_tail: deque[str] = attrs.field(factory=lambda: deque(maxlen=STDERR_TAIL))


class CommandNotFound(Exception):
    pass


def resolve_command(spec: ServerSpec) -> list[str]:
    """The argv to run: the command found on the spec's own PATH, then its args."""
    assert spec.command is not None
    found = shutil.which(spec.command, path=spec.env.get("PATH"))
    if found is None:
        raise CommandNotFound(f"command '{spec.command}' of server '{spec.name}' was not found on its PATH")
    return [found, *spec.args]


async def _lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[bytes]:
    buffer = bytearray()
    while True:
        chunk = await stream.receive_some(65536)
        if not chunk:
            if buffer:
                yield bytes(buffer)
            return
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            yield line
        if len(buffer) > _MAX_LINE:
            raise ValueError("a message from the backend exceeded 64 MiB")


def parse_message(raw: object) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(raw, by_name=False))
    except ValueError as exc:
        return exc


@contextlib.asynccontextmanager
async def stdio_transport(
    spec: ServerSpec,
    link: ProcessLink,
    on_stderr: Callable[[str], None],
    on_spawn: Callable[[int], None] = lambda _pid: None,
) -> AsyncIterator[TransportStreams]:
    """Spawn the backend and yield (read, write) anyio streams of `SessionMessage`.

    On exit (normal, error or cancellation) the process group is stopped with bounded,
    shielded waits. When the process exits by itself, `link.exited` is set and the read
    stream ends, so pending requests fail at once.
    """
    argv = resolve_command(spec)
    process = spawn(argv, env=spec.env, cwd=spec.cwd)
    link.process = process
    on_spawn(process.pid)  # recorded before anything can go wrong (see PidRegistry)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](16)
    stdin = DirectWriter(process.stdin)
    forwarder = link.forwarder = Forwarder(stdin)

    async def pump_stdout() -> None:
        async with read_send:
            with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                async for line in _lines(process.stdout):
                    if not line.strip():
                        continue
                    try:
                        raw = json.loads(line)
                    except ValueError as exc:
                        item: SessionMessage | Exception = exc
                    else:
                        if forwarder.route(raw, line):
                            continue
                        item = parse_message(raw)
                    try:
                        await read_send.send(item)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return
        forwarder.close("the backend closed its stdout")

    async def pump_messages() -> None:
        async with write_recv:
            async for message in write_recv:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await stdin.write(data.encode() + b"\n")
                except trio.BrokenResourceError:
                    return

    async def pump_stdin() -> None:
        await stdin.pump()
        read_send.close()
        forwarder.close("the backend closed its stdin")

    async def pump_stderr() -> None:
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
            async for raw in _lines(process.stderr):
                line = raw.decode(errors="replace").rstrip()
                link.stderr_tail.append(line)
                on_stderr(line)

    async def watch_exit() -> None:
        link.exit_code = await process.wait()
        link.exited.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_stdout)
        nursery.start_soon(pump_messages)
        nursery.start_soon(pump_stdin)
        nursery.start_soon(pump_stderr)
        nursery.start_soon(watch_exit)
        try:
            yield read_recv, write_send
        finally:
            forwarder.close(STOPPING)
            code = await stop_process(process)
            if link.exit_code is None:
                link.exit_code = code
            nursery.cancel_scope.cancel()

"""A stdio transport for the official `mcp` Client that we own: the pid, the spawn time,
the wire size of list results, and a bounded, complete stop.

The SDK's own `stdio_client` hides the process; the benchmark needs it (memory, kill -9
of a backend below it, py-spy) and needs the exact moment of spawn. Messages are parsed
with the SDK's own JSON-RPC adapter, so the client sees what it would see over
`stdio_client`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import trio
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

# isort: split
import procs

#: how long a server gets to exit after its stdin closed (the SDK client gives 2 s), then SIGTERM
STDIN_GRACE = 2.0
TERM_GRACE = 2.0


class SpawnedServer:
    """Spawn `argv` as an MCP server on stdio; `connect()` is the `Client`'s transport.

    Attributes:
        spawned_at: `time.perf_counter()` just before the spawn.
        pid: The server's pid (set on entry).
        list_line: The latest `tools/list` response line, as it came over the wire.
        list_first_bytes: For each `tools/list` request written, the seconds until the
            next bytes came back from the server: its own time to answer, without the
            transfer of the rest of a long list and the client's reading of it.
        watch: Samples the server's process tree (memory, members) every `watch_every`
            s while it runs; with None, only at the start and at the stop (a server that
            starts no processes of its own, such as a direct backend).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path | None = None,
        stderr: Path,
        watch_every: float | None = 0.1,
    ) -> None:
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.stderr_path = stderr
        self.spawned_at = 0.0
        self.pid = 0
        self.list_line = b""
        self.list_first_bytes: list[float] = []
        self._list_sent_at: float | None = None
        self.leftover: list[procs.Ident] = []
        self.watch: procs.TreeWatch | None = None
        self.watch_every = watch_every

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[TransportStreams]:
        """Spawn the server and yield its (read, write) message streams; stop it on exit."""
        read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](16)
        with self.stderr_path.open("ab") as stderr:
            self.spawned_at = time.perf_counter()
            process = await trio.lowlevel.open_process(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
            self.pid = process.pid
            watch = self.watch = procs.TreeWatch(process.pid, self.watch_every or 0.1)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._pump_out, process, read_send)
                nursery.start_soon(self._pump_in, process, write_recv)
                if self.watch_every is not None:
                    nursery.start_soon(watch.run)
                try:
                    yield read_recv, write_send
                finally:
                    with trio.CancelScope(shield=True):
                        await self._stop(process, watch)
                    for stream in (read_send, read_recv, write_send, write_recv):
                        stream.close()
                    nursery.cancel_scope.cancel()

    async def _pump_out(self, process: trio.Process, sink: Any) -> None:
        assert process.stdout is not None
        buffer = bytearray()
        # The client may close its end first, with a notification still on its way (an
        # aggregator's list_changed as the client leaves): that ends the pump, quietly.
        quiet = (
            trio.ClosedResourceError,
            trio.BrokenResourceError,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            OSError,
        )
        async with sink:
            with contextlib.suppress(*quiet):
                while chunk := await process.stdout.receive_some(1 << 16):
                    if self._list_sent_at is not None:
                        self.list_first_bytes.append(time.perf_counter() - self._list_sent_at)
                        self._list_sent_at = None
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end])
                        del buffer[: end + 1]
                        if line.strip():
                            await sink.send(self._parse(line))

    def _parse(self, line: bytes) -> SessionMessage | Exception:
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            return exc
        if isinstance(message, types.JSONRPCResponse) and "tools" in message.result:
            self.list_line = line
        return SessionMessage(message)

    async def _pump_in(self, process: trio.Process, source: Any) -> None:
        assert process.stdin is not None
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
            async with source:
                async for message in source:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    listing = getattr(message.message, "method", None) == "tools/list"
                    await process.stdin.send_all(data.encode() + b"\n")
                    if listing:
                        self._list_sent_at = time.perf_counter()

    async def _stop(self, process: trio.Process, watch: procs.TreeWatch) -> None:
        """Close stdin, then SIGTERM and SIGKILL the process group, each after a grace;
        then give every process ever seen in the tree 2 s and kill what is left."""
        watch.sample()
        if process.stdin is not None:
            with contextlib.suppress(OSError, trio.ClosedResourceError, trio.BrokenResourceError):
                await process.stdin.aclose()
        for sig, grace in ((None, STDIN_GRACE), (signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, 1.0)):
            if sig is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, sig)
            with trio.move_on_after(grace):
                await process.wait()
                break
        members = [who for pid, who in watch.seen.items() if pid != process.pid]
        self.leftover = await procs.reap(members, grace=2.0)

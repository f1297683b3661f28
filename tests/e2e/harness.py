"""End-to-end harness: a private ASSERN_HOME, config snippets and the real `assern` command.

Tests start the installed `assern` console script as a child process and talk to it with
the official `mcp` client, against real MCP servers: `mcp-server-time` from PyPI and the
SDK-built test server in tests/servers/testing_server.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

TESTING_SERVER = Path(__file__).resolve().parents[1] / "servers" / "testing_server.py"
NOTES_SERVER = TESTING_SERVER.with_name("notes_server.py")


def assern_command() -> str:
    found = shutil.which("assern", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("the `assern` console script is not installed beside this Python")
    return found


@attrs.define
class AssernEnv:
    home: Path
    assern_home: Path
    work: Path
    env: dict[str, str]

    def params(self, *args: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=assern_command(), args=list(args), env=self.env, cwd=str(self.work)
        )

    def serve(self, config: Path, *extra: str) -> StdioServerParameters:
        return self.params("serve", "--config", str(config), *extra)

    def per_config(self) -> None:
        """Turn the workstation daemon off for this test (`ASSERN_NO_DAEMON=1`): each
        configuration gets an instance of its own, shared by its clients (the primary and
        its proxies), as before the daemon."""
        self.env["ASSERN_NO_DAEMON"] = "1"

    def trust(self, folder: Path) -> None:
        """`assernctl trust --yes FOLDER`: its own files (`.assern/`, mcp-config.json) apply."""
        found = shutil.which("assernctl", path=str(Path(sys.executable).parent))
        assert found is not None, "the `assernctl` console script is not installed beside this Python"
        done = subprocess.run(
            [found, "trust", "--yes", str(folder)],
            env=self.env,
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    def log_events(self) -> list[dict[str, object]]:
        path = self.assern_home / "logs" / "assern.log"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Wire:
    """The raw newline-delimited JSON-RPC wire of an `assern serve` process."""

    def __init__(self, send: trio.abc.SendStream, receive: trio.abc.ReceiveStream) -> None:
        self.stdin = send
        self.stdout = receive
        #: every message received so far, in order
        self.received: list[dict[str, Any]] = []
        self._buffer = b""

    @staticmethod
    def line(message: dict[str, Any]) -> bytes:
        return json.dumps(message).encode() + b"\n"

    @classmethod
    def of(cls, process: trio.Process) -> Wire:
        assert process.stdin is not None
        assert process.stdout is not None
        return cls(process.stdin, process.stdout)

    async def send_line(self, line: bytes | str) -> None:
        data = line.encode() if isinstance(line, str) else line
        await self.stdin.send_all(data + b"\n")

    async def send(self, message: dict[str, Any]) -> None:
        await self.stdin.send_all(self.line(message))

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            chunk = await self.stdout.receive_some(65536)
            assert chunk, "assern closed its stdout"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        self.received.append(json.loads(line))
        return self.received[-1]

    async def response(self, request_id: Any) -> dict[str, Any]:
        """The next message with this id (notifications in between are skipped)."""
        while True:
            message = await self.receive()
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message

    async def handshake(self, client: str, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        """`initialize` (id 1, protocol 2025-11-25) then `initialized`; the initialize answer."""
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": capabilities or {},
                    "clientInfo": {"name": client, "version": "1"},
                },
            }
        )
        answer = await self.response(1)
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer


#: A raw `initialize` POST of the handshake era, for tests that speak HTTP by hand.
HTTP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
#: The `_meta` envelope of a raw 2026-07-28 request, for tests that speak HTTP by hand.
MODERN_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
#: The headers of a raw MCP POST.
POST_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def in_session(session: str) -> dict[str, str]:
    """The headers of a POST in the handshake-era HTTP session `session`."""
    return {**POST_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}


def server_table(name: str, *flags: str) -> str:
    """A `[servers.NAME]` table that runs the SDK test server."""
    args = ", ".join(f'"{a}"' for a in (str(TESTING_SERVER), "--name", name, *flags))
    return f'[servers.{name}]\ncommand = "${{ASSERN_PYTHON}}"\nargs = [{args}]\n'


def notes_table(name: str = "notes", *flags: str, extra: str = "") -> str:
    """A `[servers.NAME]` table that runs the notes server (annotated, structured tools)."""
    args = ", ".join(f'"{a}"' for a in (str(NOTES_SERVER), "--name", name, *flags))
    return f'[servers.{name}]\ncommand = "${{ASSERN_PYTHON}}"\nargs = [{args}]\n{extra}'


TIME_SERVER = (
    '[servers.time]\ncommand = "${ASSERN_PYTHON}"\n'
    'args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]\n'
)


def make_env(tmp_path: Path) -> AssernEnv:
    home = tmp_path / "home"
    assern_home = tmp_path / "assern-home"
    work = tmp_path / "work"
    for folder in (home, assern_home, work):
        folder.mkdir()
    env = {
        "HOME": str(home),
        "ASSERN_HOME": str(assern_home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "ASSERN_PYTHON": sys.executable,
    }
    return AssernEnv(home=home, assern_home=assern_home, work=work, env=env)


def stop_daemon(env: AssernEnv, timeout: float = 20.0) -> None:
    """Stop the workstation daemon of this test's ASSERN_HOME (started by the first
    `assern serve`, app/daemon/launch.py) and wait until it is gone; killed after
    `timeout` seconds. Nothing to do when none runs."""
    import signal
    import time

    from assern.app.control_client import ControlError, ControlUnavailable, request
    from assern.app.instance import socket_directory

    control = socket_directory(env.assern_home, env.env).path / "daemon.ctl"
    if not control.exists():
        return
    try:
        hello = request(control, "hello", timeout=10, connect_timeout=5)
        request(control, "shutdown", timeout=10, connect_timeout=5)
    except (ControlUnavailable, ControlError):
        return
    pid = hello.get("pid") if isinstance(hello, dict) else None
    if not isinstance(pid, int):
        return
    deadline = time.monotonic() + timeout
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if process_alive(pid):
        os.kill(pid, signal.SIGKILL)


def process_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for a parent that does not reap counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def find_pids(fragment: str) -> list[int]:
    """Pids whose command line contains `fragment` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if fragment in cmdline and process_alive(int(entry.name)):
                found.append(int(entry.name))
    return found


@attrs.define
class HttpFront:
    """A running `assern serve --http … --no-stdio` and where it serves MCP."""

    process: trio.Process
    url: str
    #: what the process wrote on stderr after the address line
    stderr: list[str]

    @property
    def base(self) -> str:
        return self.url.removesuffix("/mcp")


@asynccontextmanager
async def http_front(
    env: AssernEnv, config: Path, *extra: str, address: str = "127.0.0.1:0"
) -> AsyncIterator[HttpFront]:
    """Start assern with only an HTTP front (on a free loopback port unless `address`
    says otherwise); stop it afterwards."""
    command = [
        assern_command(),
        "serve",
        "--config",
        str(config),
        "--http",
        address,
        "--no-stdio",
        *extra,
    ]
    process = await trio.lowlevel.open_process(
        command, env=env.env, cwd=str(env.work), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert process.stderr is not None
    buffer, lines = b"", list[str]()
    url = None
    with trio.fail_after(30):
        while url is None:
            chunk = await process.stderr.receive_some()
            if not chunk:
                pytest.fail(f"assern exited before serving HTTP: {buffer.decode(errors='replace')}")
            buffer += chunk
            found = re.search(rb"serving MCP over HTTP at (\S+)", buffer)
            if found:
                url = found.group(1).decode()
    front = HttpFront(process=process, url=url, stderr=lines)

    async def drain(stream: trio.abc.ReceiveStream) -> None:
        while chunk := await stream.receive_some():
            lines.append(chunk.decode(errors="replace"))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain, process.stderr)
            yield front
            nursery.cancel_scope.cancel()
    finally:
        with trio.move_on_after(15) as waited:
            process.terminate()
            await process.wait()
        if waited.cancelled_caught:
            process.kill()
            await process.wait()


ERAS = ("legacy", "2026-07-28")


@asynccontextmanager
async def clients_of_every_era(
    env: AssernEnv, config: Path, eras: tuple[str, ...] = ERAS, **options: Any
) -> AsyncIterator[list[tuple[str, Client]]]:
    """One official client per protocol era, all on one instance: the first starts it,
    the others join it as proxies. A test of every era thus starts its backends once
    (each is a process whose SDK import costs a second or two)."""
    async with AsyncExitStack() as stack:
        clients = []
        for era in eras:
            client = await stack.enter_async_context(Client(env.serve(config), mode=era, **options))
            clients.append((era, client))
        yield clients

"""An open status page, for the benchmarks: what a browser tab showing it costs.

`page_open` signs in as a browser does (`assernctl web --print`, then the one-time
address, whose answer sets the cookie) and reads the page's event stream for as long
as the block lasts, counting its events: the instance renders and sends the page's
changed parts every second meanwhile, exactly as for a tab left open.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from urllib.parse import urlsplit

import attrs
import trio


@attrs.define
class PageSeen:
    """What the open page received."""

    events: int = 0
    bytes: int = 0


async def _get(host: str, port: int, target: str, headers: str = "") -> trio.SocketStream:
    stream = await trio.open_tcp_stream(host, port)
    request = f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\n{headers}\r\n"
    await stream.send_all(request.encode())
    return stream


async def ctl(assernctl: Path, config: Path, env: Mapping[str, str], cwd: Path, *args: str) -> str:
    done = await trio.run_process(
        [str(assernctl), *args, "--config", str(config)],
        env=dict(env),
        cwd=str(cwd),
        capture_stdout=True,
        capture_stderr=True,
        stdin=subprocess.DEVNULL,
    )
    return str(done.stdout.decode())


async def primary_pid(assernctl: Path, config: Path, env: Mapping[str, str], cwd: Path) -> int:
    """The pid of the instance serving `config` (a shared `assern serve` runs detached)."""
    return int(json.loads(await ctl(assernctl, config, env, cwd, "status", "--json"))["pid"])


@contextlib.asynccontextmanager
async def page_open(
    assernctl: Path, config: Path, env: Mapping[str, str], cwd: Path
) -> AsyncIterator[PageSeen]:
    """The instance of `config` with its page open in one (scripted) tab."""
    login = urlsplit((await ctl(assernctl, config, env, cwd, "web", "--print")).strip())
    host, port = login.hostname, login.port
    if host is None or port is None:
        raise SystemExit(f"assernctl web --print gave no address: {login.geturl()!r}")
    head = b""
    async with await _get(host, port, f"{login.path}?{login.query}", "Connection: close\r\n") as stream:
        while chunk := await stream.receive_some():
            head += chunk
    found = re.search(rb"(?im)^set-cookie: (assern_page=[^;\r\n]+)", head)
    if found is None:
        raise SystemExit(f"the page did not sign in: {head[:200]!r}")
    seen = PageSeen()
    events = await _get(host, port, "/events", f"Cookie: {found.group(1).decode()}\r\n")
    async with events, trio.open_nursery() as nursery:

        async def read() -> None:
            while chunk := await events.receive_some():
                seen.bytes += len(chunk)
                seen.events += chunk.count(b"event: parts")

        nursery.start_soon(read)
        yield seen
        nursery.cancel_scope.cancel()

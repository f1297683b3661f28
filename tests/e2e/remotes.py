"""Helpers for the remote-backend tests: a test server over HTTP on a loopback port,
and what `assernctl status` says of the backend `remote`."""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from harness import AssernEnv
from instances import ctl_json


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def http_server(argv: list[str]) -> AsyncIterator[int | None]:
    """The test server `argv`, once it says `ready` on stderr (and the port it listens on,
    when it says `ready PORT`); killed afterwards."""
    remote = await trio.lowlevel.open_process(argv, stderr=subprocess.PIPE)
    try:
        with trio.fail_after(30):
            assert remote.stderr is not None
            seen = b""
            while (said := re.search(rb"ready(?: (\d+))?\r?\n", seen)) is None:
                chunk = await remote.stderr.receive_some(1024)
                assert chunk, "the HTTP test server exited before it was ready"
                seen += chunk
        yield int(said.group(1)) if said.group(1) else None
    finally:
        remote.kill()
        await remote.wait()


async def remote_status(env: AssernEnv, config: Path) -> dict[str, Any]:
    status = await ctl_json(env, "status", "--config", str(config))
    [remote] = [b for b in status["backends"] if b["name"] == "remote"]
    return dict(remote)


async def until_ready(env: AssernEnv, config: Path, restarted_after: int = -1) -> None:
    """Until the backend is ready (and has restarted since it had `restarted_after`)."""
    while True:
        status = await remote_status(env, config)
        if status["state"] == "ready" and status["restarts"] > restarted_after:
            return
        await trio.sleep(0.1)

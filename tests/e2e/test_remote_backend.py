"""A remote backend over streamable HTTP, with a header from the environment."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from content import text_in
from harness import AssernEnv
from mcp import Client

pytestmark = pytest.mark.e2e

HTTP_SERVER = Path(__file__).resolve().parents[1] / "servers" / "http_server.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_a_remote_backend_is_aggregated_with_its_headers(
    assern_env: AssernEnv, write_config: Callable[[str], Path], transport: str
) -> None:
    port = free_port()
    flags = ["--sse"] if transport == "sse" else []
    remote = await trio.lowlevel.open_process(
        [sys.executable, str(HTTP_SERVER), "--port", str(port), *flags], stderr=subprocess.PIPE
    )
    try:
        with trio.fail_after(30):
            assert remote.stderr is not None
            seen = b""
            while b"ready" not in seen:
                chunk = await remote.stderr.receive_some(1024)
                assert chunk, "the HTTP test server exited before it was ready"
                seen += chunk
        path = "/sse" if transport == "sse" else "/mcp"
        config = write_config(
            "[servers.remote]\n"
            f'url = "http://127.0.0.1:{port}{path}"\n'
            f'transport = "{transport}"\n'
            'headers = { Authorization = "Bearer ${REMOTE_TOKEN}" }\n'
        )
        assern_env.env["REMOTE_TOKEN"] = "s3cret-token"
        with trio.fail_after(60):
            async with Client(assern_env.serve(config), mode="legacy") as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert names == {"remote_echo", "remote_whoami"}
                echoed = await client.call_tool("remote_echo", {"text": "over http"})
                assert text_in(echoed.content[0]) == "over http"
                who = await client.call_tool("remote_whoami", {})
                assert text_in(who.content[0]) == "Bearer s3cret-token"
        assert "s3cret-token" not in (assern_env.assern_home / "logs" / "assern.log").read_text()
    finally:
        remote.kill()
        await remote.wait()

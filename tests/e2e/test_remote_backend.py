"""Remote backends over streamable HTTP and over HTTP+SSE: aggregated with a header from
the environment, supervised like a process (a lost server is an exit: restarted with
backoff, the reason in `assernctl status`), and held to their per-backend timeout (a
JSON-RPC error naming it)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from content import text_in
from harness import AssernEnv
from mcp import Client
from mcp.shared.exceptions import MCPError
from remotes import free_port, http_server, remote_status

pytestmark = pytest.mark.e2e

HTTP_SERVER = Path(__file__).resolve().parents[1] / "servers" / "http_server.py"
TRANSPORTS = ["streamable-http", "sse"]


@asynccontextmanager
async def remote_server(port: int, transport: str) -> AsyncIterator[int | None]:
    """The HTTP test server on `port`, once it listens; killed afterwards."""
    flags = ["--sse"] if transport == "sse" else []
    async with http_server([sys.executable, str(HTTP_SERVER), "--port", str(port), *flags]) as said:
        yield said


def remote_table(port: int, transport: str, extra: str = "") -> str:
    path = "/sse" if transport == "sse" else "/mcp"
    return (
        "[servers.remote]\n"
        f'url = "http://127.0.0.1:{port}{path}"\n'
        f'transport = "{transport}"\n'
        'headers = { Authorization = "Bearer ${REMOTE_TOKEN}" }\n' + extra
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_remote_backend_is_aggregated_with_its_headers(
    assern_env: AssernEnv, write_config: Callable[[str], Path], transport: str
) -> None:
    port = free_port()
    async with remote_server(port, transport):
        config = write_config(remote_table(port, transport))
        assern_env.env["REMOTE_TOKEN"] = "s3cret-token"
        with trio.fail_after(60):
            async with Client(assern_env.serve(config), mode="legacy") as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert names == {
                    "remote_echo",
                    "remote_sleep",
                    "remote_whoami",
                    "remote_get_meta",
                    "remote_announce",
                }
                echoed = await client.call_tool("remote_echo", {"text": "over http"})
                assert text_in(echoed.content[0]) == "over http"
                who = await client.call_tool("remote_whoami", {})
                assert text_in(who.content[0]) == "Bearer s3cret-token"
    logged = (assern_env.assern_home / "logs" / "assern.log").read_text()
    assert "s3cret-token" not in logged
    assert "HTTP Request" not in logged  # the HTTP client's line per request stays out


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_lost_remote_server_is_restarted_with_backoff_and_status_says_why(
    assern_env: AssernEnv, write_config: Callable[[str], Path], transport: str
) -> None:
    port = free_port()
    # Restarts every second at most while the server is down, never enough to give up on
    # it; a call queued meanwhile waits at most startup_timeout + timeout for it.
    config = write_config(
        remote_table(
            port,
            transport,
            "backoff_initial = 0.5\nbackoff_max = 1\nmax_restarts = 100\nstartup_timeout = 2\ntimeout = 2\n",
        )
    )
    assern_env.env["REMOTE_TOKEN"] = "t"
    with trio.fail_after(90):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            async with remote_server(port, transport):
                # assern may have tried before the server listened: wait for its restart
                while (await remote_status(assern_env, config))["state"] != "ready":  # noqa: ASYNC110 - another process's state
                    await trio.sleep(0.1)
                echoed = await client.call_tool("remote_echo", {"text": "first"})
                assert text_in(echoed.content[0]) == "first"
                before = (await remote_status(assern_env, config))["restarts"]

            # the server is gone: a call gets a clear error (at once, or once its wait for
            # the restarting backend is over), and the backend restarts with backoff. Over SSE
            # the end of the event stream tells assern before any call; over streamable HTTP
            # no stream is open to end, and the call is what finds the server gone.
            async def call_lost() -> None:
                with pytest.raises(MCPError, match="server 'remote' is unavailable"):
                    await client.call_tool("remote_echo", {"text": "lost"})

            async def noticed() -> dict[str, Any]:
                with trio.fail_after(15):  # noticed at once, not at the next ping
                    while (down := await remote_status(assern_env, config))["restarts"] == before:  # noqa: ASYNC110 - another process's state
                        await trio.sleep(0.1)
                return down

            if transport == "sse":
                down = await noticed()
                await call_lost()
            else:
                await call_lost()
                down = await noticed()
            assert down["state"] in ("restarting", "starting")
            assert down["last_error"] or down["last_exit"]
            why = f"{down['last_error']} {down['last_exit']}"
            assert any(word in why.lower() for word in ("connect", "closed", "event stream")), why
            # it comes back on the same address: the next restart finds it
            async with remote_server(port, transport):
                while (up := await remote_status(assern_env, config))["state"] != "ready":
                    assert up["state"] != "failed", up
                    await trio.sleep(0.1)
                assert up["restarts"] >= 1
                echoed = await client.call_tool("remote_echo", {"text": "again"})
                assert text_in(echoed.content[0]) == "again"
    restarts = [e for e in assern_env.log_events() if e.get("event") == "backend_restart_scheduled"]
    assert restarts, "each restart is logged with its delay"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_remote_call_past_the_backend_s_timeout_is_answered_with_an_error(
    assern_env: AssernEnv, write_config: Callable[[str], Path], transport: str
) -> None:
    port = free_port()
    config = write_config(remote_table(port, transport, "timeout = 1\n"))
    assern_env.env["REMOTE_TOKEN"] = "t"
    async with remote_server(port, transport):
        with trio.fail_after(60):
            async with Client(assern_env.serve(config), mode="legacy") as client:
                started = trio.current_time()
                with pytest.raises(MCPError, match="server 'remote' did not answer within 1 s"):
                    await client.call_tool("remote_sleep", {"seconds": 10})
                assert trio.current_time() - started < 8
                quick = await client.call_tool("remote_sleep", {"seconds": 0})
                assert text_in(quick.content[0]) == "slept 0 s"


async def test_a_slow_call_and_a_notification_after_a_quiet_spell_reach_the_client(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    """Nothing below the backend's own `timeout` gives up first, such as an HTTP
    client's read timeout (httpx's default is 5 s): a call that answers after 6 s is
    answered, and the backend's own event stream outlives silence: 13 s after a call
    (past the two 5 s read timeouts after which the SDK's client used to give the
    stream up), the server adds a tool and says so, and a client of assern sees it.
    (Both transports' HTTP clients get their timeouts from one function:
    test_http_clients.py.)"""
    port = free_port()
    config = write_config(remote_table(port, "streamable-http", "timeout = 30\n"))
    assern_env.env["REMOTE_TOKEN"] = "t"
    async with remote_server(port, "streamable-http"):
        with trio.fail_after(60):
            async with Client(assern_env.serve(config), mode="legacy") as client:
                await client.call_tool("remote_announce", {"after": 13})
                slow = await client.call_tool("remote_sleep", {"seconds": 6})  # the event stream stays quiet
                assert text_in(slow.content[0]) == "slept 6 s"
                await trio.sleep(6)
                while "remote_late" not in {tool.name for tool in (await client.list_tools()).tools}:  # noqa: ASYNC110 - another process's state
                    await trio.sleep(0.5)


async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(text="sampled"), model="m")


async def test_a_2026_remote_backend_hears_the_calling_client_s_capabilities(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    """A 2026-07-28 client's request reaches a 2026-07-28 HTTP backend declaring what that
    client declared (sampling only), not what assern could relay: the backend asks it
    only what it can answer, as over stdio."""
    port = free_port()
    assern_env.env["REMOTE_TOKEN"] = "t"
    async with remote_server(port, "streamable-http"):
        config = write_config(remote_table(port, "streamable-http", 'protocol = "2026-07-28"\n'))
        with trio.fail_after(60):
            async with Client(
                assern_env.serve(config), mode="2026-07-28", sampling_callback=sample
            ) as client:
                seen = json.loads(text_in((await client.call_tool("remote_get_meta", {})).content[0]))
                assert seen[types.CLIENT_CAPABILITIES_META_KEY] == {"sampling": {}}
                assert seen[types.PROTOCOL_VERSION_META_KEY] == "2026-07-28"
                # assern's own requests (its listings) still declare what assern relays
                assert text_in((await client.call_tool("remote_echo", {"text": "on"})).content[0]) == "on"

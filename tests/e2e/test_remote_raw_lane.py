"""A streamable-HTTP backend's calls on the raw lane (actors/backend/http_lane.py): what a
call carries besides its answer still reaches the client that made it.

The backend is the testing server served over streamable HTTP; a client of assern calls
its tools, each posted as it came in the backend's handshake-era session: progress
notifications, a log message and a list change sent during the call, a stream the
server closes mid-call (resumed), server-to-client requests (sampling, roots) answered
by the calling client, and a cancellation that
reaches the backend as `notifications/cancelled`; and the clients of the HTTP front in
both eras.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from content import text_in
from harness import AssernEnv, http_front
from instances import text_of
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import FileUrl
from remotes import free_port, http_server, remote_status, until_ready

pytestmark = [
    pytest.mark.e2e,
    # The SDK's HTTP client leaves httpx2's response iterators to the collector when a
    # stream ends under trio; nothing is lost, but the collector warns about each.
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object:pytest.PytestUnraisableExceptionWarning"
    ),
]

TESTING_SERVER = Path(__file__).resolve().parents[1] / "servers" / "testing_server.py"


@asynccontextmanager
async def remote_testing_server(port: int = 0, *flags: str) -> AsyncIterator[int]:
    """The testing server over streamable HTTP on loopback `port` (0: a free one), with
    `flags`: its port."""
    argv = [sys.executable, str(TESTING_SERVER), "--name", "remote", "--http", str(port), *flags]
    async with http_server(argv) as listening:
        assert listening is not None
        yield listening


def config_of(port: int) -> str:
    return f'[servers.remote]\nurl = "http://127.0.0.1:{port}/mcp"\n'


async def test_progress_logs_and_list_changes_of_a_call_reach_its_client(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    steps: list[tuple[float, float | None, str | None]] = []
    logs: list[types.LoggingMessageNotificationParams] = []
    changed = trio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append((progress, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with remote_testing_server() as port:
        config = write_config(config_of(port))
        with trio.fail_after(60):
            async with Client(
                assern_env.serve(config), mode="legacy", logging_callback=on_log, message_handler=on_message
            ) as client:
                result = await client.call_tool(
                    "remote_progress", {"steps": 3}, progress_callback=on_progress
                )
                assert text_of(result) == "progressed"
                assert steps == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
                logged = await client.call_tool("remote_log", {"level": "warning", "message": "careful"})
                assert text_of(logged) == "logged"
                while not logs:  # noqa: ASYNC110 - the notification arrives on its own
                    await trio.sleep(0.01)
                assert (logs[0].level, logs[0].data) == ("warning", "careful")
                assert text_of(await client.call_tool("remote_add_tool", {"name": "later"})) == "added"
                await changed.wait()
                while "remote_later" not in {t.name for t in (await client.list_tools()).tools}:  # noqa: ASYNC110 - another process's state
                    await trio.sleep(0.05)
                assert text_of(await client.call_tool("remote_later", {})) == "called later"


async def test_a_call_whose_event_stream_the_server_closes_is_resumed(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    """The server closes the call's stream mid-call (its polling streams, 2025-11-25):
    assern resumes it with `Last-Event-ID` and the progress and answer sent meanwhile
    still reach the client."""
    steps: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(message)

    async with remote_testing_server() as port:
        config = write_config(config_of(port))
        with trio.fail_after(60):
            async with Client(assern_env.serve(config), mode="legacy") as client:
                await until_ready(assern_env, config)  # so the call takes the raw lane
                result = await client.call_tool(
                    "remote_break_off", {"seconds": 0.3}, progress_callback=on_progress
                )
                assert text_of(result) == "resumed"
                assert steps == ["before the break", "after the break"]


async def test_a_backend_s_requests_during_a_call_are_answered_by_the_calling_client(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked = text_in(params.messages[0].content)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=f"sampled {asked}"), model="m"
        )

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl("file:///work/project"))])

    async with remote_testing_server() as port:
        config = write_config(config_of(port))
        with trio.fail_after(60):
            async with Client(
                assern_env.serve(config), mode="legacy", sampling_callback=sampling, list_roots_callback=roots
            ) as client:
                sampled = await client.call_tool("remote_ask_sampling", {"prompt": "a haiku"})
                assert text_of(sampled) == "sampled a haiku"
                listed = await client.call_tool("remote_ask_roots", {})
                assert text_of(listed) == "file:///work/project"


async def test_a_cancelled_call_is_cancelled_at_the_backend(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled"
    async with remote_testing_server() as port:
        config = write_config(config_of(port))
        with trio.fail_after(60):
            async with Client(assern_env.serve(config), mode="legacy") as client:
                await until_ready(assern_env, config)  # the call reaches it at once, on the raw lane
                with trio.move_on_after(1):
                    await client.call_tool("remote_wait_cancel", {"marker": str(marker)})
                while not marker.exists():  # noqa: ASYNC110 - another process writes it
                    await trio.sleep(0.05)
                assert marker.read_text() == "cancelled"
                assert text_of(await client.call_tool("remote_echo", {"text": "still here"})) == "still here"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_clients_of_the_http_front_in_both_eras_reach_the_http_backend(
    assern_env: AssernEnv, write_config: Callable[[str], Path], mode: str
) -> None:
    """Through the HTTP front, in each era: a call, and a call during which the backend
    asks the client (a server-to-client request for a handshake-era client, an
    `input_required` round for a 2026-07-28 one)."""

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="sampled"), model="m"
        )

    async with remote_testing_server() as port:
        config = write_config(config_of(port))
        async with http_front(assern_env, config) as front:
            with trio.fail_after(60):
                async with Client(front.url, mode=mode, sampling_callback=sampling) as client:
                    await client.list_tools()
                    echoed = await client.call_tool("remote_echo", {"text": "over both hops"})
                    assert text_of(echoed) == "over both hops"
                    sampled = await client.call_tool("remote_ask_sampling", {"prompt": "a haiku"})
                    assert text_of(sampled) == "sampled"


async def test_a_server_that_forgot_the_session_is_reconnected(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    """The server restarts between two calls: the next call is answered HTTP 404 (no
    such session), which is the backend's exit; assern restarts it, with a new session,
    and the calls after that are answered."""
    port = free_port()
    config = write_config(config_of(port) + "backoff_initial = 0.2\nbackoff_max = 1\nmax_restarts = 100\n")
    with trio.fail_after(90):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            async with remote_testing_server(port):
                await until_ready(assern_env, config)  # assern may have tried before it listened
                assert text_of(await client.call_tool("remote_echo", {"text": "one"})) == "one"
                before = (await remote_status(assern_env, config))["restarts"]
            async with remote_testing_server(port):  # the same port, none of the old sessions
                with pytest.raises(MCPError, match="HTTP 404"):
                    await client.call_tool("remote_echo", {"text": "lost"})
                await until_ready(assern_env, config, restarted_after=before)
                assert "HTTP 404" in (await remote_status(assern_env, config))["last_error"]
                assert text_of(await client.call_tool("remote_echo", {"text": "two"})) == "two"


async def test_a_2026_remote_backend_s_calls_are_posted_with_that_revision_s_headers(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    """A backend pinned to 2026-07-28 gets the requests assern writes itself posted raw:
    with the revision's envelope and headers (the server refuses a call whose declared
    `Mcp-Param-Text` header is missing), progress on the way, and the backend's input
    rounds answered by the calling client, a handshake-era one (assern drives them)
    and a 2026-07-28 one over the HTTP front (its own rounds)."""
    steps: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked = text_in(params.messages[0].content)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=f"re: {asked}"), model="m"
        )

    async with remote_testing_server(0, "--routing-header", "text=Text") as port:
        config = write_config(config_of(port) + 'protocol = "2026-07-28"\n')
        with trio.fail_after(60):
            async with Client(assern_env.serve(config), mode="legacy", sampling_callback=sampling) as client:
                await until_ready(assern_env, config)
                echoed = await client.call_tool("remote_echo", {"text": "routed"})
                assert text_of(echoed) == "routed"
                done = await client.call_tool("remote_progress", {"steps": 2}, progress_callback=on_progress)
                assert text_of(done) == "progressed"
                assert steps == [1, 2]
                sampled = await client.call_tool("remote_ask_sampling", {"prompt": "a haiku"})
                assert text_of(sampled) == "re: a haiku"
            async with (
                http_front(assern_env, config) as front,
                Client(front.url, mode="2026-07-28", sampling_callback=sampling) as modern,
            ):
                await modern.list_tools()
                assert text_of(await modern.call_tool("remote_echo", {"text": "again"})) == "again"
                sampled = await modern.call_tool("remote_ask_sampling", {"prompt": "a sonnet"})
                assert text_of(sampled) == "re: a sonnet"

"""`assern serve` end to end: a real client, the real process, real backends."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from content import text_in
from harness import TIME_SERVER, AssernEnv, clients_of_every_era, server_table
from instances import stop_workstation
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.e2e


def text_of(result: types.CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


# Each backend is a process that loads the MCP SDK (a second or two of CPU): a test
# starts only the backends its subject needs.
BETA = server_table("my-beta") + 'allowed = ["echo", "get_*", "gate"]\n'


@pytest.fixture
def two_backends(assern_env: AssernEnv, write_config: Callable[[str], Path]) -> Path:
    return write_config(server_table("alpha") + BETA)


@pytest.fixture
def with_time_server(assern_env: AssernEnv, write_config: Callable[[str], Path]) -> Path:
    """The two test backends and a real third-party server."""
    return write_config(TIME_SERVER + server_table("alpha") + BETA)


@pytest.fixture
def alpha_only(assern_env: AssernEnv, write_config: Callable[[str], Path]) -> Path:
    return write_config(server_table("alpha"))


async def test_lists_and_calls_tools_of_every_backend(assern_env: AssernEnv, with_time_server: Path) -> None:
    with trio.fail_after(60):
        async with Client(assern_env.serve(with_time_server), mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"time_get_current_time", "time_convert_time", "alpha_echo", "alpha_add"} <= names
            # `allowed` keeps only echo, get_* and gate of my-beta; its dashes become `_`.
            assert {n for n in names if n.startswith("my_beta_")} == {
                "my_beta_echo",
                "my_beta_get_env",
                "my_beta_get_pid",
                "my_beta_get_meta",
                "my_beta_gate",
            }

            now = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
            assert not now.is_error
            assert '"timezone": "UTC"' in text_of(now)
            assert text_of(await client.call_tool("alpha_add", {"a": 2, "b": 3})) == "5"
            assert text_of(await client.call_tool("my_beta_echo", {"text": "routed"})) == "routed"


async def test_resources_templates_and_prompts_are_prefixed(assern_env: AssernEnv, alpha_only: Path) -> None:
    with trio.fail_after(60):
        async with Client(assern_env.serve(alpha_only), mode="legacy") as client:
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "assern://alpha/test://info" in uris
            assert "assern://alpha/file:///tmp/assern-test/readme.txt" in uris
            read = await client.read_resource("assern://alpha/test://info")
            assert text_in(read.contents[0]) == "info of alpha"
            assert str(read.contents[0].uri) == "assern://alpha/test://info"

            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            assert "assern://alpha/test://items/{item}" in templates
            item = await client.read_resource("assern://alpha/test://items/42")
            assert text_in(item.contents[0]) == "item 42"

            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            assert "alpha_generate_code" in prompts
            assert [a.name for a in prompts["alpha_generate_code"].arguments or []] == ["language", "task"]
            greeting = await client.get_prompt("alpha_greet", {"who": "Ada"})
            assert text_in(greeting.messages[0].content) == "Hello, Ada!"


async def test_unknown_and_refused_tools_get_clear_errors(assern_env: AssernEnv, two_backends: Path) -> None:
    with trio.fail_after(60):
        async with Client(assern_env.serve(two_backends), mode="legacy") as client:
            await client.list_tools()
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("echo", {"text": "x"})
            assert unknown.value.code == types.INVALID_PARAMS
            assert "alpha (alpha_echo)" in unknown.value.message
            assert "my-beta (my_beta_echo)" in unknown.value.message
            assert set(unknown.value.data["servers"]) == {"alpha", "my-beta"}

            with pytest.raises(MCPError) as typo:
                await client.call_tool("alpha_ech", {"text": "x"})
            assert "alpha_echo" in typo.value.data["suggestions"]

            with pytest.raises(MCPError) as refused:
                await client.call_tool("my_beta_add", {"a": 1, "b": 2})
            assert "not allowed" in refused.value.message
            assert refused.value.data["server"] == "my-beta"


async def test_a_backends_own_errors_reach_the_client_as_it_wrote_them(
    assern_env: AssernEnv, alpha_only: Path
) -> None:
    with trio.fail_after(60):
        async with Client(assern_env.serve(alpha_only), mode="legacy") as client:
            with pytest.raises(MCPError) as prompt:
                await client.get_prompt("alpha_greet", {})
            assert prompt.value.code == types.INVALID_PARAMS
            assert "who" in prompt.value.message
            with pytest.raises(MCPError) as resource:
                await client.read_resource("assern://alpha/test://nowhere")
            assert resource.value.code == types.INVALID_PARAMS
            assert "test://nowhere" in resource.value.message


async def test_calls_run_concurrently_and_backends_do_not_wait_for_each_other(
    assern_env: AssernEnv, two_backends: Path, tmp_path: Path
) -> None:
    gates = [tmp_path / f"gate-{i}" for i in range(5)]
    results: dict[int, str] = {}
    done = [trio.Event() for _ in gates]
    with trio.fail_after(60):
        async with Client(assern_env.serve(two_backends), mode="legacy") as client:
            await client.list_tools()

            async def call(i: int) -> None:
                results[i] = text_of(await client.call_tool("alpha_gate", {"path": str(gates[i])}))
                done[i].set()

            async with trio.open_nursery() as nursery:
                for i in range(len(gates)):
                    nursery.start_soon(call, i)
                # While five calls wait on alpha, the other backend answers.
                assert text_of(await client.call_tool("my_beta_echo", {"text": "free"})) == "free"
                # Open the gates last-first: calls handled one at a time would deadlock here.
                for i in reversed(range(len(gates))):
                    gates[i].touch()
                    with trio.fail_after(10):
                        await done[i].wait()
    assert results == dict.fromkeys(range(5), "opened")


async def test_progress_reaches_the_caller(assern_env: AssernEnv, alpha_only: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with trio.fail_after(60):
        async with Client(assern_env.serve(alpha_only), mode="legacy") as client:
            result = await client.call_tool("alpha_progress", {"steps": 3}, progress_callback=on_progress)
    assert text_of(result) == "progressed"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def test_the_clients_meta_reaches_the_backend(assern_env: AssernEnv, alpha_only: Path) -> None:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        pass

    with trio.fail_after(60):
        async with Client(assern_env.serve(alpha_only), mode="legacy") as client:
            # The first call may take the SDK's way (the session is not settled yet), the
            # later ones the raw lane: the meta must get through either way.
            # The SDK types `meta` as its RequestParamsMeta; a call's own keys are the point here
            # (hence the arg-type ignores below).
            results = [await client.call_tool("alpha_get_meta", {}, meta={"trace": "t-1"})]  # type: ignore[arg-type]
            await client.list_tools()
            results.append(await client.call_tool("alpha_get_meta", {}, meta={"trace": "t-2"}))  # type: ignore[arg-type]
            results.append(await client.call_tool("alpha_get_meta", {}, meta={"trace": "t-3"}))  # type: ignore[arg-type]
            results.append(
                await client.call_tool(
                    "alpha_get_meta",
                    {},
                    meta={"trace": "t-4"},  # type: ignore[arg-type]
                    progress_callback=on_progress,
                )
            )
    assert [json.loads(text_of(r)) for r in results] == [{"trace": f"t-{i}"} for i in range(1, 5)]


async def test_large_results_arrive_whole_and_in_step_with_small_ones(
    assern_env: AssernEnv, two_backends: Path
) -> None:
    # A few MB: many times what a pipe holds, so both of assern's pipes fill, its
    # writers queue the rest, and the small answers around must still arrive intact.
    sizes = [3_000_000, 1, 700_000, 65_536, 65_535]
    got: dict[int, str] = {}

    async def fetch(client: Client, n: int) -> None:
        got[n] = text_of(await client.call_tool("alpha_big", {"n": n}))

    with trio.fail_after(120):
        async with Client(assern_env.serve(two_backends), mode="legacy") as client:
            await client.list_tools()
            async with trio.open_nursery() as nursery:
                for n in sizes:
                    nursery.start_soon(fetch, client, n)
                assert text_of(await client.call_tool("my_beta_echo", {"text": "small"})) == "small"
    assert {n: len(text) for n, text in got.items()} == {n: n for n in sizes}
    assert all(set(text) == {"x"} for text in got.values())


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_cancellation_reaches_the_backend(
    assern_env: AssernEnv, alpha_only: Path, tmp_path: Path, era: str
) -> None:
    marker = tmp_path / "cancelled-marker"
    with trio.fail_after(60):
        async with Client(assern_env.serve(alpha_only), mode=era) as client:
            await client.list_tools()
            with trio.move_on_after(1):
                await client.call_tool("alpha_wait_cancel", {"marker": str(marker)})
            # The client sent notifications/cancelled; assern remaps it to the backend's id.
            while not marker.exists():  # noqa: ASYNC110 - another process writes the file
                await trio.sleep(0.02)
            assert marker.read_text() == "cancelled"
            # The session goes on.
            assert text_of(await client.call_tool("alpha_echo", {"text": "after"})) == "after"


async def test_list_changed_of_a_backend_reaches_the_client(assern_env: AssernEnv, alpha_only: Path) -> None:
    send, receive = trio.open_memory_channel[None](100)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            send.send_nowait(None)

    params = assern_env.serve(alpha_only)
    with trio.fail_after(60):
        async with Client(params, mode="legacy", message_handler=on_message) as client:
            await client.list_tools()
            while True:  # drain the notifications of backends that became ready meanwhile
                try:
                    receive.receive_nowait()
                except trio.WouldBlock:
                    break
            assert text_of(await client.call_tool("alpha_add_tool", {"name": "fresh"})) == "added"
            names: set[str] = set()
            while "alpha_fresh" not in names:
                await receive.receive()  # each re-list is driven by a list_changed
                names = {t.name for t in (await client.list_tools()).tools}
            assert text_of(await client.call_tool("alpha_fresh", {})) == "called fresh"


async def test_both_protocol_eras_work(assern_env: AssernEnv, alpha_only: Path) -> None:
    eras = ("legacy", "2026-07-28", "auto")
    with trio.fail_after(60):
        async with clients_of_every_era(assern_env, alpha_only, eras) as clients:
            for mode, client in clients:
                expected = "2025-11-25" if mode == "legacy" else "2026-07-28"
                assert client.protocol_version == expected
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert "alpha_echo" in names
                assert text_of(await client.call_tool("alpha_echo", {"text": mode})) == mode
                read = await client.read_resource("assern://alpha/test://info")
                assert text_in(read.contents[0]) == "info of alpha"


async def test_kill_of_a_backend_mid_call_fails_that_call_only(
    assern_env: AssernEnv, with_time_server: Path, tmp_path: Path
) -> None:
    with trio.fail_after(60):
        async with Client(assern_env.serve(with_time_server), mode="legacy") as client:
            pid = int(text_of(await client.call_tool("alpha_get_pid", {})))
            outcome: dict[str, BaseException | str] = {}
            finished = trio.Event()

            async def doomed() -> None:
                try:
                    outcome["result"] = text_of(
                        await client.call_tool("alpha_gate", {"path": str(tmp_path / "never")})
                    )
                except MCPError as exc:
                    outcome["error"] = exc
                finished.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(doomed)
                await trio.sleep(0.3)  # let the call reach the backend
                os.kill(pid, signal.SIGKILL)
                with trio.fail_after(5):  # "promptly"
                    await finished.wait()
            error = outcome.get("error")
            assert isinstance(error, MCPError)
            assert "alpha" in error.message
            assert "signal 9" in error.message
            assert text_of(await client.call_tool("my_beta_echo", {"text": "alive"})) == "alive"
            assert text_of(await client.call_tool("time_get_current_time", {"timezone": "UTC"}))


async def test_server_to_client_requests_go_back_to_the_calling_client(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    # A first run knows nothing about alpha yet: let the handshake wait for it.
    config = write_config("[settings]\ninitialize_wait = 30\n" + server_table("alpha"))
    asked: list[str] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(text_in(params.messages[0].content))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="sampled!"), model="test-model"
        )

    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    with trio.fail_after(60):
        async with Client(
            assern_env.serve(config), mode="legacy", sampling_callback=sampling, logging_callback=on_log
        ) as client:
            caps = client.server_capabilities
            assert caps.tools is not None
            assert caps.tools.list_changed is True
            assert caps.resources is not None
            assert caps.resources.subscribe is True  # the test server supports subscriptions
            result = await client.call_tool("alpha_ask_sampling", {"prompt": "write a haiku"})
            assert text_of(result) == "sampled!"
            assert asked == ["write a haiku"]
            assert text_of(
                await client.call_tool("alpha_log", {"level": "warning", "message": "careful"})
            ) == ("logged")
            with trio.fail_after(5):
                while not logs:  # noqa: ASYNC110 - the notification arrives on its own
                    await trio.sleep(0.01)
    assert logs[0].level == "warning"
    assert logs[0].logger is not None
    assert logs[0].logger.startswith("alpha")


async def test_capabilities_are_remembered_for_the_next_run(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            # No wait configured: the first run answers at once with what it knows.
            await client.list_tools()  # alpha is ready now; its capabilities are recorded
        await stop_workstation(assern_env)  # the next run is a new daemon
        assert (assern_env.assern_home / "cache" / "capabilities.json").exists()
        async with Client(assern_env.serve(config), mode="legacy") as client:
            again = client.server_capabilities
    assert again.resources is not None
    assert again.resources.subscribe is True
    assert again.logging is not None


async def test_a_2026_07_28_backend_is_aggregated_and_followed(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("modern", "--modern-only") + 'protocol = "2026-07-28"\n')
    send, receive = trio.open_memory_channel[None](100)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            send.send_nowait(None)

    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy", message_handler=on_message) as client:
            assert "modern_echo" in {t.name for t in (await client.list_tools()).tools}
            assert text_of(await client.call_tool("modern_echo", {"text": "new era"})) == "new era"
            assert text_of(await client.call_tool("modern_add_tool", {"name": "later"})) == "added"
            names: set[str] = set()
            while "modern_later" not in names:
                await receive.receive()  # the backend's change came on its listen stream
                names = {t.name for t in (await client.list_tools()).tools}

"""Search exposure over the official client, against real test servers and the time server:
the meta-tools, direct calls, pinned tools, progress and cancellation through call_tool,
servers not ready, and bad arguments."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from content import text_in
from harness import TIME_SERVER, AssernEnv, clients_of_every_era, server_table
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.e2e

SEARCH = '[settings]\nexposure = "search"\npinned = ["time_get_*"]\n\n'


def text_of(result: types.CallToolResult) -> str:
    return text_in(result.content[0])


def found_names(result: types.CallToolResult) -> list[str]:
    assert result.structured_content is not None
    return [tool["name"] for tool in result.structured_content["tools"]]


async def test_search_describe_and_call(assern_env: AssernEnv, write_config: Callable[[str], Path]) -> None:
    config = write_config(SEARCH + server_table("alpha") + TIME_SERVER)
    with trio.fail_after(60):
        async with clients_of_every_era(assern_env, config) as clients:
            for _mode, client in clients:
                await client.call_tool("alpha_echo", {"text": "ready"})
                await client.call_tool("time_get_current_time", {"timezone": "UTC"})
                listed = [tool.name for tool in (await client.list_tools()).tools]
                # The meta-tools, then the pinned tools; nothing else.
                assert listed[:3] == ["search_tools", "describe_tools", "call_tool"]
                assert sorted(listed[3:]) == ["time_get_current_time"]
                search = next(t for t in (await client.list_tools()).tools if t.name == "search_tools")
                assert search.output_schema is not None

                found = await client.call_tool("search_tools", {"query": "the current time in Tokyo"})
                assert not found.is_error
                assert found_names(found)[0] == "time_get_current_time"
                assert found.structured_content is not None
                total = found.structured_content["total"]
                assert total > 20  # every tool of both servers was searched
                assert "time_get_current_time (time)" in text_of(found)

                found = await client.call_tool("search_tools", {"query": "add two numbers", "limit": 3})
                assert found_names(found)[0] == "alpha_add"
                assert len(found_names(found)) <= 3

                described = await client.call_tool("describe_tools", {"names": ["alpha_add", "alpha_nope"]})
                assert not described.is_error
                assert described.structured_content is not None
                [definition] = described.structured_content["tools"]
                assert definition["name"] == "alpha_add"
                assert set(definition["inputSchema"]["properties"]) == {"a", "b"}
                assert described.structured_content["unknown"] == ["alpha_nope"]

                # call_tool answers with the tool's own result; a direct call still works.
                called = await client.call_tool(
                    "call_tool", {"name": "alpha_add", "arguments": {"a": 2, "b": 3}}
                )
                assert text_of(called) == "5"
                assert text_of(await client.call_tool("alpha_add", {"a": 1, "b": 1})) == "2"
                with pytest.raises(MCPError, match="Unknown tool 'alpha_ad'"):
                    await client.call_tool("call_tool", {"name": "alpha_ad", "arguments": {}})


async def test_no_good_match_says_so(assern_env: AssernEnv, write_config: Callable[[str], Path]) -> None:
    config = write_config(SEARCH + server_table("alpha"))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            await client.call_tool("alpha_echo", {"text": "ready"})  # (a call waits for its server)
            found = await client.call_tool("search_tools", {"query": "book a flight to Lisbon"})
            assert not found.is_error
            assert found.structured_content is not None
            assert found.structured_content["good_match"] is False
            assert len(found_names(found)) <= 3
            assert 'No good match for "book a flight to Lisbon"' in text_of(found)
            assert "Servers: alpha." in text_of(found)


#: bad arguments of the meta-tools, and what the error says of each
BAD_ARGUMENTS: list[tuple[str, dict[str, Any], str]] = [
    ("search_tools", {"query": "  "}, "search_tools needs `query`"),
    ("search_tools", {}, "search_tools needs `query`"),
    ("search_tools", {"query": "echo", "limit": 0}, "`limit` must be an integer from 1 to 50, got 0"),
    ("search_tools", {"query": "echo", "limit": 500}, "got 500"),
    ("search_tools", {"query": "echo", "server": "nope"}, "There is no server 'nope'. Servers: alpha."),
    ("search_tools", {"query": "echo", "top": 3}, "not `top`"),
    ("describe_tools", {"names": []}, "describe_tools needs `names`"),
    ("describe_tools", {"names": ["nope"]}, "Unknown tool 'nope'"),
    ("call_tool", {"arguments": {}}, "call_tool needs `name`"),
    ("call_tool", {"name": "search_tools"}, "call search_tools itself instead"),
    ("call_tool", {"name": "alpha_echo", "arguments": "text"}, "`arguments` must be an object"),
]


async def test_bad_arguments_get_a_clear_error(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    """Each bad call is answered with its error, and the session goes on (one session for
    all of them: each is a separate call)."""
    config = write_config(SEARCH + server_table("alpha"))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            await client.call_tool("alpha_echo", {"text": "ready"})
            for tool, arguments, message in BAD_ARGUMENTS:
                result = await client.call_tool(tool, arguments)
                assert result.is_error, (tool, arguments)
                assert message in text_of(result), (tool, arguments, text_of(result))
                assert text_of(await client.call_tool("alpha_echo", {"text": "still"})) == "still"


async def test_progress_and_cancellation_through_call_tool(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    config = write_config(SEARCH + server_table("alpha"))
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    marker = tmp_path / "cancelled"
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            result = await client.call_tool(
                "call_tool",
                {"name": "alpha_progress", "arguments": {"steps": 3}},
                progress_callback=on_progress,
            )
            assert text_of(result) == "progressed"
            assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
            with trio.move_on_after(1):
                await client.call_tool(
                    "call_tool", {"name": "alpha_wait_cancel", "arguments": {"marker": str(marker)}}
                )
            while not marker.exists():  # noqa: ASYNC110 - another process writes the file
                await trio.sleep(0.02)
            assert marker.read_text() == "cancelled"


async def test_a_search_does_not_wait_for_a_starting_server(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    config = write_config(  # nothing pinned: tools/list does not wait for `late` either
        '[settings]\nexposure = "search"\n\n'
        + server_table("alpha")
        + server_table("late", "--start-gate", str(gate))
        + "startup_timeout = 60\n"
    )
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            await client.call_tool("alpha_echo", {"text": "up"})
            with trio.fail_after(5):
                listed = await client.list_tools()
                found = await client.call_tool("search_tools", {"query": "echo text"})
            assert [tool.name for tool in listed.tools] == ["search_tools", "describe_tools", "call_tool"]
            assert found.structured_content is not None
            assert found.structured_content["not_ready"] == ["late (starting)"]
            assert "Not ready yet (their tools are not searched): late (starting)." in text_of(found)
            assert {tool["server"] for tool in found.structured_content["tools"]} == {"alpha"}
            gate.touch()
            with trio.fail_after(30):
                while True:
                    found = await client.call_tool("search_tools", {"query": "echo text"})
                    assert found.structured_content is not None
                    if "late_echo" in found_names(found):
                        break
                    await trio.sleep(0.05)
            assert "not_ready" not in found.structured_content

"""Learning from use through the real assern: the calls of tools a search answered are
counted (names and counts only) in $ASSERN_HOME/search-use.json, kept across a restart,
lift the tool in the next search and show in `assernctl search --explain`; with
`[settings.search] learn = "off"` nothing is counted or lifted."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import mcp_types as types
import pytest
import trio
from harness import AssernEnv, server_table
from instances import ctl_json, stop_workstation
from mcp import Client

pytestmark = pytest.mark.e2e

#: by words alone: with the semantic extra installed, the meaning would weigh in once the
#: vectors are loaded (from the cache, at the second start), and the lift measured here
#: is that of the counts
SEARCH = '[settings]\nexposure = "search"\n\n[settings.search]\nsemantic = "off"\n\n'
OFF = '[settings]\nexposure = "search"\n\n[settings.search]\nlearn = "off"\nsemantic = "off"\n\n'
#: "return text" ranks alpha_echo first, alpha_big second (by words)
QUERY = {"query": "return text"}


def names(result: types.CallToolResult) -> list[str]:
    assert result.structured_content is not None, result
    return [tool["name"] for tool in result.structured_content["tools"]]


async def search_and_call(assern_env: AssernEnv, config: Path, calls: int) -> list[str]:
    """Search, then call the second tool found `calls` times (through call_tool and
    directly), and a tool the search did not answer; the first answer's names."""
    async with Client(assern_env.serve(config), mode="legacy") as client:
        await client.call_tool("alpha_echo", {"text": "ready"})  # the backend is up
        found = names(await client.call_tool("search_tools", QUERY))
        for i in range(calls):
            if i % 2:
                await client.call_tool("alpha_big", {"n": 7})
            else:
                await client.call_tool("call_tool", {"name": "alpha_big", "arguments": {"n": 7}})
        await client.call_tool("alpha_add", {"a": 40, "b": 2})  # never answered by a search
    return found


async def test_calls_after_a_search_lift_the_tool_next_time(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(SEARCH + server_table("alpha"))
    use_file = assern_env.assern_home / "search-use.json"
    with trio.fail_after(60):
        first = await search_and_call(assern_env, config, calls=6)
        await stop_workstation(assern_env)
    assert first[:2] == ["alpha_echo", "alpha_big"]
    # Saved when assern stopped: names and counts, nothing of the arguments or answers.
    assert json.loads(use_file.read_text()) == {
        "format": "assern-search-use",
        "version": 1,
        "tools": {"alpha": {"big": 6}},
    }

    with trio.fail_after(60):
        again = await search_and_call(assern_env, config, calls=1)
        await stop_workstation(assern_env)
        explained = await ctl_json(
            assern_env, "search", "--config", str(config), "--fresh", "--explain", "return", "text"
        )
    assert again[:2] == ["alpha_big", "alpha_echo"]  # the counts survived the restart
    assert json.loads(use_file.read_text())["tools"] == {"alpha": {"big": 7}}
    assert explained["explain"]["alpha_big"]["learned"] == {"calls": 7, "boost": 0.21}
    assert explained["explain"]["alpha_echo"]["learned"] == {"calls": 0, "boost": 0.0}
    assert explained["explain"]["alpha_big"]["server"] == {"name": "alpha", "score": "not used"}


async def test_learning_off_neither_counts_nor_lifts(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    use_file = assern_env.assern_home / "search-use.json"
    counts = {"format": "assern-search-use", "version": 1, "tools": {"alpha": {"big": 50}}}
    use_file.write_text(json.dumps(counts))
    config = write_config(OFF + server_table("alpha"))
    with trio.fail_after(60):
        first = await search_and_call(assern_env, config, calls=2)
        explained = await ctl_json(
            assern_env, "search", "--config", str(config), "--fresh", "--explain", "return", "text"
        )
    assert first[:2] == ["alpha_echo", "alpha_big"]  # the counts in the file are not used
    assert json.loads(use_file.read_text()) == counts  # and nothing was added
    assert explained["explain"]["alpha_big"]["learned"] is None

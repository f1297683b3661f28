"""The server a connection called last comes first among like matches in that
connection's next search, through the real assern."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mcp_types as types
import pytest
import trio
from harness import AssernEnv, server_table
from mcp import Client

pytestmark = pytest.mark.e2e

SEARCH = '[settings]\nexposure = "search"\n\n[settings.search]\nlearn = "off"\n\n'
#: alpha and beta run the same test server: their echo tools match "return text" alike
QUERY = {"query": "return text"}


def names(result: types.CallToolResult) -> list[str]:
    assert result.structured_content is not None, result
    return [tool["name"] for tool in result.structured_content["tools"]]


async def test_a_search_lifts_the_tools_of_the_server_the_connection_called_last(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(SEARCH + server_table("alpha") + "\n" + server_table("beta"))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            for ready in ("alpha_add", "beta_add"):  # both backends listed before searching
                await client.call_tool("call_tool", {"name": ready, "arguments": {"a": 1, "b": 2}})
            await client.call_tool("call_tool", {"name": "alpha_add", "arguments": {"a": 1, "b": 2}})
            after_alpha = names(await client.call_tool("search_tools", QUERY))
            await client.call_tool("call_tool", {"name": "beta_add", "arguments": {"a": 1, "b": 2}})
            after_beta = names(await client.call_tool("search_tools", QUERY))
            named = names(await client.call_tool("search_tools", {**QUERY, "server": "alpha"}))
    # alpha's tools first, then beta's like ones; and the other way round
    assert after_alpha[:2] == ["alpha_echo", "alpha_big"]
    assert after_beta[:2] == ["beta_echo", "beta_big"]
    assert after_alpha.index("beta_echo") > 1
    assert after_beta.index("alpha_echo") > 1
    assert named[0] == "alpha_echo"  # a search of one server is not moved

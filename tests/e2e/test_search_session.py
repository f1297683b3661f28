"""The server a connection called last comes first among like matches in that
connection's next search, through the real assern, in both protocol eras; each
connection to one instance keeps its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mcp_types as types
import pytest
import trio
from harness import AssernEnv, clients_of_every_era, server_table
from mcp import Client

pytestmark = pytest.mark.e2e

SEARCH = '[settings]\nexposure = "search"\n\n[settings.search]\nlearn = "off"\n\n'
#: alpha and beta run the same test server: their echo tools match "return text" alike
QUERY = {"query": "return text"}


def names(result: types.CallToolResult) -> list[str]:
    assert result.structured_content is not None, result
    return [tool["name"] for tool in result.structured_content["tools"]]


async def add(client: Client, server: str) -> None:
    await client.call_tool("call_tool", {"name": f"{server}_add", "arguments": {"a": 1, "b": 2}})


async def test_a_search_lifts_the_tools_of_the_server_the_connection_called_last(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(SEARCH + server_table("alpha") + "\n" + server_table("beta"))
    with trio.fail_after(90):
        async with clients_of_every_era(assern_env, config) as clients:
            (_, first), (_, second) = clients
            for _era, client in clients:  # both backends listed before searching
                await add(client, "alpha")
                await add(client, "beta")
            # Each connection to the one instance keeps the server it called last.
            await add(first, "alpha")
            await add(second, "beta")
            after_alpha = names(await first.call_tool("search_tools", QUERY))
            after_beta = names(await second.call_tool("search_tools", QUERY))
            named = names(await second.call_tool("search_tools", {**QUERY, "server": "alpha"}))
            await add(first, "beta")
            moved = names(await first.call_tool("search_tools", QUERY))
    # alpha's tools first, then beta's like ones; and the other way round
    assert after_alpha[:2] == ["alpha_echo", "alpha_big"]
    assert after_alpha.index("beta_echo") > 1
    assert after_beta[:2] == ["beta_echo", "beta_big"]
    assert after_beta.index("alpha_echo") > 1
    assert named[0] == "alpha_echo"  # a search of one server is not moved
    assert moved[:2] == ["beta_echo", "beta_big"]

"""Search by meaning end to end (the `assern[semantic]` extra, installed with the tests):
a request that shares no word with the tool it needs finds it once the catalog's
vectors are computed, and the same request by words alone does not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mcp_types as types
import pytest
import trio
from harness import TIME_SERVER, AssernEnv, server_table
from instances import (
    ctl_json,
    events,
    reap,  # noqa: F401 - autouse fixture
    wait_until,
)
from mcp import Client

from assern.actors.search import semantic as sem

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sem.installed(), reason="the assern[semantic] extra is not installed"),
]

#: no word of it (nor a stem, nor a synonym) is in the time server's tools
QUERY = "what does the clock say right now in Osaka"


def names(result: types.CallToolResult) -> list[str]:
    assert result.structured_content is not None
    return [tool["name"] for tool in result.structured_content["tools"]]


@pytest.mark.parametrize("semantic", ["auto", "off"])
async def test_a_request_sharing_no_word_with_its_tool_is_found_by_meaning(
    assern_env: AssernEnv, write_config: Callable[[str], Path], semantic: str
) -> None:
    config = write_config(
        f'[settings]\nexposure = "search"\n\n[settings.search]\nsemantic = "{semantic}"\n\n'
        + server_table("alpha")
        + TIME_SERVER
    )
    with trio.fail_after(90):
        async with Client(assern_env.serve(config)) as client:
            await client.call_tool("time_get_current_time", {"timezone": "UTC"})
            await client.call_tool("alpha_echo", {"text": "ready"})
            found = await client.call_tool("search_tools", {"query": QUERY})
            # The vectors are computed in the background, a server's tools as they come,
            # and reach the router after the log says so: until they do, nothing matches.
            for _ in range(600 if semantic == "auto" else 0):
                if found.is_error or names(found):
                    break
                await trio.sleep(0.1)
                found = await client.call_tool("search_tools", {"query": QUERY})
    assert not found.is_error
    # The time server's tools answer it; by words no tool of the catalog matches.
    if semantic == "auto":
        assert names(found)[0].startswith("time_"), names(found)
    else:
        assert not any(name.startswith("time_") for name in names(found)), names(found)


async def test_without_search_exposure_the_model_loads_at_the_first_search(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    """An instance that serves no search loads no model; its first search (here
    `assernctl search`) starts it, and the searches after it rank by meaning too."""
    config = write_config(server_table("alpha") + TIME_SERVER)
    at = ("--config", str(config))
    with trio.fail_after(90):
        async with Client(assern_env.serve(config)) as client:
            await client.call_tool("time_get_current_time", {"timezone": "UTC"})
            await client.call_tool("alpha_echo", {"text": "ready"})
            assert not events(assern_env, "semantic_model_loaded")
            first = await ctl_json(assern_env, "search", *at, *QUERY.split())
            assert first["tools"] is not None
            await wait_until(lambda: events(assern_env, "tools_embedded"), limit=60)
            found = await ctl_json(assern_env, "search", *at, *QUERY.split())
    assert found["tools"][0]["name"].startswith("time_"), found["tools"]
    assert len(events(assern_env, "semantic_model_loaded")) == 1

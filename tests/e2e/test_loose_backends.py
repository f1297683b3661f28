"""A backend that advertises more than it serves still starts and serves what it has.

The SDK's low-level Server advertises `resources` as soon as a `resources/list` handler
is registered, and answers `resources/templates/list` with -32601 when none is: a legal
backend that assern used to restart in a loop ("could not start: Method not found").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mcp_types as types
import pytest
import trio
from harness import AssernEnv
from instances import events
from mcp import Client

pytestmark = pytest.mark.e2e

LOOSE_SERVER = Path(__file__).resolve().parents[1] / "servers" / "loose_server.py"


def loose(name: str, *flags: str) -> str:
    args = ", ".join(f'"{a}"' for a in (str(LOOSE_SERVER), *flags))
    return f'[servers.{name}]\ncommand = "${{ASSERN_PYTHON}}"\nargs = [{args}]\nmax_restarts = 0\n'


async def test_optional_listings_a_backend_refuses_are_empty_and_it_serves_the_rest(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(loose("plain") + loose("odd", "--broken-prompts", "--broken-completion"))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names == {"plain_echo", "odd_echo"}
            for name in names:
                result = await client.call_tool(name, {"text": name})
                assert result.content == [types.TextContent(type="text", text=name)]
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert uris == {"assern://plain/loose://only", "assern://odd/loose://only"}
            assert (await client.list_resource_templates()).resource_templates == []
            assert (await client.list_prompts()).prompts == []
            # Completions advertised but not served: nothing to suggest, not an error.
            ref = types.ResourceTemplateReference(type="ref/resource", uri="assern://odd/loose://only")
            completed = await client.complete(ref, {"name": "x", "value": "y"})
            assert completed.completion.values == []
    assert not events(assern_env, "backend_exited")
    assert not events(assern_env, "backend_failed")
    refused = {(e["server"], e["listing"]) for e in events(assern_env, "backend_listing_empty")}
    assert ("odd", "prompts") in refused  # an error that is not "not found": a warning
    warned = [e for e in events(assern_env, "backend_listing_empty") if e["level"] == "warning"]
    assert [(e["server"], e["listing"]) for e in warned] == [("odd", "prompts")]

"""Resource URIs, URI templates and completion refs as a client was shown them, in both
naming modes and both protocol eras, with the official client against real test servers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from content import text_in
from harness import AssernEnv, clients_of_every_era, server_table
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated

pytestmark = pytest.mark.e2e

README = "file:///tmp/assern-test/readme.txt"


async def subscribed(client: Client, server: str) -> str:
    """What `server` says it is subscribed to, one URI a line."""
    result = await client.call_tool(f"{server}_subscribed", {})
    return text_in(result.content[0]) if result.content else ""


def hybrid(*servers: str) -> str:
    return '[settings]\nnaming = "hybrid"\n\n' + "".join(server_table(s) for s in servers)


async def test_hybrid_naming_exposes_natural_uris_and_prefixes_only_the_clash(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(hybrid("alpha", "beta"))  # both serve the same URIs and template
    with trio.fail_after(60):
        async with clients_of_every_era(assern_env, config) as clients:
            for _mode, client in clients:
                uris = [str(r.uri) for r in (await client.list_resources()).resources]
                # alpha comes first in the configuration: it keeps the natural forms.
                assert uris == ["test://info", README, "assern://beta/test://info", f"assern://beta/{README}"]
                templates = [
                    t.uri_template for t in (await client.list_resource_templates()).resource_templates
                ]
                assert templates == ["test://items/{item}", "assern://beta/test://items/{item}"]

                read = await client.read_resource("test://info")
                assert text_in(read.contents[0]) == "info of alpha"
                assert str(read.contents[0].uri) == "test://info"
                read = await client.read_resource("assern://beta/test://info")
                assert text_in(read.contents[0]) == "info of beta"
                assert str(read.contents[0].uri) == "assern://beta/test://info"
                # The prefixed form reaches alpha too, in every mode.
                read = await client.read_resource("assern://alpha/test://info")
                assert text_in(read.contents[0]) == "info of alpha"

                # A URI no listing holds goes to the backend whose natural template matches.
                item = await client.read_resource("test://items/42")
                assert text_in(item.contents[0]) == "item 42"
                assert str(item.contents[0].uri) == "test://items/42"
                item = await client.read_resource("assern://beta/test://items/7")
                assert text_in(item.contents[0]) == "item 7"

                # Completion refs: the exposed template (either form) and the exposed prompt.
                done = await client.complete(
                    types.ResourceTemplateReference(uri="test://items/{item}"),
                    {"name": "item", "value": "ap"},
                )
                assert done.completion.values == ["apple", "apricot"]
                done = await client.complete(
                    types.ResourceTemplateReference(uri="assern://beta/test://items/{item}"),
                    {"name": "item", "value": "b"},
                )
                assert done.completion.values == ["banana"]
                prompts = [p.name for p in (await client.list_prompts()).prompts]
                assert "alpha_generate_code" in prompts  # both offer it: prefixed
                done = await client.complete(
                    types.PromptReference(name="alpha_generate_code"), {"name": "language", "value": "p"}
                )
                assert done.completion.values == ["python", "perl", "php"]


async def test_a_lone_backend_keeps_every_name_and_unknown_refs_get_suggestions(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(hybrid("fixture"))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            # As a conformance client does: no listing first, the URI the server documents.
            read = await client.read_resource("test://info")
            assert text_in(read.contents[0]) == "info of fixture"
            done = await client.complete(
                types.PromptReference(name="generate-code"), {"name": "language", "value": "r"}
            )
            assert done.completion.values == ["rust"]
            with pytest.raises(MCPError) as unknown:
                await client.complete(
                    types.PromptReference(name="generate-cod"), {"name": "language", "value": ""}
                )
            assert unknown.value.code == types.INVALID_PARAMS
            assert "Did you mean: generate-code" in unknown.value.message
            # A URI no template matches goes to the only backend offering resources.
            with pytest.raises(MCPError) as missing:
                await client.read_resource("test://nowhere")
            assert "Unknown resource: test://nowhere" in missing.value.message  # the backend's own answer


async def test_subscriptions_and_updates_keep_the_form_the_client_used(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(hybrid("alpha", "beta"))
    send, receive = trio.open_memory_channel[str](100)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            send.send_nowait(str(message.params.uri))

    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy", message_handler=on_message) as client:
            await client.list_resources()
            await client.subscribe_resource("test://info")
            await client.subscribe_resource("assern://beta/test://info")
            await client.call_tool("alpha_update_resource", {"uri": "test://info"})
            assert await receive.receive() == "test://info"
            await client.call_tool("beta_update_resource", {"uri": "test://info"})
            assert await receive.receive() == "assern://beta/test://info"
            await client.unsubscribe_resource("test://info")
            await client.call_tool("alpha_update_resource", {"uri": "test://info"})
            await client.call_tool("beta_update_resource", {"uri": "test://info"})
            assert await receive.receive() == "assern://beta/test://info"  # alpha's was not sent


async def test_prefix_naming_keeps_the_original_rule_and_completes_through_it(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("fixture"))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            with pytest.raises(MCPError) as natural:
                await client.read_resource("test://info")
            assert "assern://SERVER/ORIGINAL-URI" in natural.value.message
            read = await client.read_resource("assern://fixture/test://info")
            assert str(read.contents[0].uri) == "assern://fixture/test://info"
            done = await client.complete(
                types.PromptReference(name="fixture_generate_code"), {"name": "language", "value": "ph"}
            )
            assert done.completion.values == ["php"]
            done = await client.complete(
                types.ResourceTemplateReference(uri="assern://fixture/test://items/{item}"),
                {"name": "item", "value": "apr"},
            )
            assert done.completion.values == ["apricot"]


async def test_a_2026_client_follows_resources_through_its_listen_stream(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    """That revision has no resources/subscribe: the listen request names the URIs."""
    config = write_config(hybrid("alpha", "beta"))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="2026-07-28") as client:
            assert client.protocol_version == "2026-07-28"
            await client.list_resources()
            followed = ["test://info", "assern://beta/test://info", "test://nowhere-listed"]
            async with client.listen(resource_subscriptions=followed) as stream:
                assert await subscribed(client, "alpha") == "test://info"
                await client.call_tool("alpha_update_resource", {"uri": "test://info"})
                event = await stream.__anext__()
                assert isinstance(event, ResourceUpdated)
                assert event.uri == "test://info"
                await client.call_tool("beta_update_resource", {"uri": "test://info"})
                event = await stream.__anext__()
                assert isinstance(event, ResourceUpdated)
                assert event.uri == "assern://beta/test://info"
            # The stream is closed: the backends were told to stop sending updates.
            for server in ("alpha", "beta"):
                with trio.fail_after(10):
                    while await subscribed(client, server):  # noqa: ASYNC110 - another process, polled
                        await trio.sleep(0.05)


async def test_a_2026_backends_resource_updates_reach_subscribed_clients(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    """A backend on 2026-07-28 has no resources/subscribe: assern names the followed URIs
    in its own listen stream to that backend, and relays what arrives on it."""
    config = write_config(server_table("modern", "--modern-only") + 'protocol = "2026-07-28"\n')
    send, receive = trio.open_memory_channel[str](100)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            send.send_nowait(str(message.params.uri))

    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy", message_handler=on_message) as client:
            await client.list_resources()
            await client.subscribe_resource("assern://modern/test://info")
            await client.call_tool("modern_update_resource", {"uri": "test://info"})
            assert await receive.receive() == "assern://modern/test://info"
            await client.call_tool("modern_update_resource", {"uri": "file:///tmp/assern-test/readme.txt"})
            await client.unsubscribe_resource("assern://modern/test://info")
            await client.subscribe_resource(f"assern://modern/{README}")
            await client.call_tool("modern_update_resource", {"uri": "test://info"})
            await client.call_tool("modern_update_resource", {"uri": README})
            assert await receive.receive() == f"assern://modern/{README}"  # nothing else came before

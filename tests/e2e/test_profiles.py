"""Client profiles end to end: views chosen by clientInfo and by flag on one shared
instance, the automatic switch to search, a reload that changes a profile, and what
`assernctl` shows of them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mcp_types as types
import pytest
import trio
from harness import AssernEnv, clients_of_every_era, server_table
from instances import (
    Session,
    ctl,
    ctl_json,
    err,
    events,
    out,
    reap,  # noqa: F401 - autouse fixture
    text_of,
)
from mcp import Client
from mcp.shared.exceptions import MCPError
from test_config_reload import Notes

pytestmark = pytest.mark.e2e

PROFILES = """
[profiles.small]
match = ["small-*"]
servers = ["alpha"]
exclude_tools = ["alpha_*pid*"]

[profiles.searching]
exposure = "search"

[profiles.capped]
match = ["capped"]
max_tools = 3

"""


def info(name: str) -> types.Implementation:
    return types.Implementation(name=name, version="1.0")


async def names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def test_a_client_gets_the_profile_its_name_matches(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(PROFILES + server_table("alpha") + server_table("beta"))
    with trio.fail_after(60):
        async with clients_of_every_era(assern_env, config, client_info=info("small-model")) as clients:
            for _mode, client in clients:
                assert text_of(await client.call_tool("alpha_echo", {"text": "up"})) == "up"
                listed = await names(client)
                assert "alpha_add" in listed
                assert not any(name.startswith("beta_") for name in listed)
                assert "alpha_get_pid" not in listed
                with pytest.raises(MCPError, match="not in this client's profile 'small'"):
                    await client.call_tool("beta_echo", {"text": "no"})
                with pytest.raises(MCPError, match="not in this client's profile 'small'"):
                    await client.call_tool("alpha_get_pid", {})
    chosen = events(assern_env, "client_profile")
    assert [(e["profile"], e["given"]) for e in chosen] == [("small", False)] * 2  # one per era


async def test_profiles_by_name_flag_and_variable_share_one_instance(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(PROFILES + server_table("alpha") + server_table("beta"))
    at = ("--config", str(config))
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            everything = await nursery.start(
                Session(assern_env.serve(config), client_info=info("inspector")).run
            )
            assert text_of(await everything.call_tool("beta_echo", {"text": "up"})) == "up"
            # The next starts are proxies of the same primary; the flag and the variable
            # travel to it ahead of their clients' bytes.
            small = await nursery.start(
                Session(assern_env.serve(config), client_info=info("small-model")).run
            )
            flagged = await nursery.start(
                Session(assern_env.serve(config, "--profile", "searching"), client_info=info("small-x")).run
            )
            params = assern_env.serve(config)
            params = params.model_copy(update={"env": {**assern_env.env, "ASSERN_PROFILE": "searching"}})
            by_variable = await nursery.start(Session(params, client_info=info("other")).run)

            assert {"alpha_add", "beta_add"} <= await names(everything)
            assert not any(name.startswith("beta_") for name in await names(small))
            for searching in (flagged, by_variable):
                assert await names(searching) == {"search_tools", "describe_tools", "call_tool"}
                found = await searching.call_tool("search_tools", {"query": "add two numbers"})
                assert found.structured_content is not None
                assert found.structured_content["tools"][0]["name"] in {"alpha_add", "beta_add"}

            status = await ctl_json(assern_env, "status", *at)
            assert len({c["id"] for c in status["clients"]}) == 4
            by_name = {c["name"]: c for c in status["clients"]}
            assert by_name["inspector"]["profile"] is None
            assert by_name["small-model"]["profile"] == "small"
            assert by_name["small-x"]["profile"] == "searching"  # the flag wins over the name
            assert by_name["other"]["profile"] == "searching"
            assert by_name["other"]["exposure"] == "search"
            assert 0 < by_name["other"]["list_tokens"] < by_name["inspector"]["list_tokens"]
            readable = await ctl(assern_env, "status", *at)
            assert "small-model, profile small, all exposure, tools/list ~" in out(readable)
            nursery.cancel_scope.cancel()


async def test_past_max_tools_a_client_is_served_search_and_the_log_says_so_once(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(PROFILES + server_table("alpha"))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy", client_info=info("capped")) as client:
            await client.call_tool("alpha_echo", {"text": "up"})
            assert await names(client) == {"search_tools", "describe_tools", "call_tool"}
            called = await client.call_tool("call_tool", {"name": "alpha_add", "arguments": {"a": 2, "b": 2}})
            assert text_of(called) == "4"
            assert text_of(await client.call_tool("alpha_add", {"a": 1, "b": 2})) == "3"  # direct still works
    switched = events(assern_env, "view_switched_to_search", profile="capped")
    assert len(switched) == 1
    assert "> max_tools 3" in switched[0]["reason"]


async def test_a_reload_that_changes_a_profile_tells_its_client(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(PROFILES + server_table("alpha") + server_table("beta"))
    notes = Notes()
    with trio.fail_after(60):
        async with Client(
            assern_env.serve(config),
            mode="legacy",
            client_info=info("small-1"),
            message_handler=notes.on_message,
        ) as client:
            await client.call_tool("alpha_echo", {"text": "up"})
            assert "beta_add" not in await names(client)
            notes.drain()
            config.write_text(
                PROFILES.replace('servers = ["alpha"]', 'servers = ["beta"]')
                + server_table("alpha")
                + server_table("beta")
            )
            listed = await notes.until_listed(client, lambda names: "beta_add" in names)
            assert not any(name.startswith("alpha_") for name in listed)
            assert text_of(await client.call_tool("beta_echo", {"text": "now"})) == "now"


async def test_assernctl_shows_what_a_profile_sees_and_finds(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(PROFILES + server_table("alpha") + server_table("beta"))
    at = ("--config", str(config))
    with trio.fail_after(90):
        fresh = await ctl_json(assern_env, "list", *at, "--fresh", "--profile", "small")
        assert fresh["profile"] == "small"
        assert {t["server"] for t in fresh["tools"]} == {"alpha"}
        unknown = await ctl(assern_env, "list", *at, "--profile", "nope")
        assert unknown.returncode == 2
        assert "unknown profile 'nope' (profiles: small, searching, capped)" in err(unknown)
        async with trio.open_nursery() as nursery:
            client = await nursery.start(Session(assern_env.serve(config)).run)
            await client.call_tool("beta_echo", {"text": "up"})
            running = await ctl_json(assern_env, "list", *at, "--profile", "small")
            assert running["source"] == "running-instance"
            assert {t["server"] for t in running["tools"]} == {"alpha"}
            assert "alpha_get_pid" not in {t["name"] for t in running["tools"]}
            found = await ctl_json(assern_env, "search", *at, "--profile", "small", "add", "numbers")
            assert next(t["name"] for t in found["tools"]) == "alpha_add"
            assert all(t["server"] == "alpha" for t in found["tools"])
            everywhere = await ctl_json(assern_env, "search", *at, "add", "numbers")
            assert {t["server"] for t in everywhere["tools"]} >= {"alpha", "beta"}
            nursery.cancel_scope.cancel()


async def test_serve_refuses_an_unknown_profile(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(PROFILES + server_table("alpha"))
    params = assern_env.serve(config, "--profile", "nope")
    done = await trio.run_process(
        [params.command, *params.args],
        env=assern_env.env,
        cwd=assern_env.work,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown profile 'nope'" in done.stderr.decode()

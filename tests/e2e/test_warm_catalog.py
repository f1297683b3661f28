"""Warm catalogs and dormant backends, against the real process.

A client's first `tools/list` is answered from the listings saved by an earlier run while
the backends start (some clients treat a server whose list is pending as absent for their
first turn), and it hears no `list_changed` before that first list. A backend nobody
called for `idle_timeout` seconds goes dormant, stays listed, and the next call starts it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from harness import AssernEnv, Wire, assern_command, server_table
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.e2e


def events(env: AssernEnv, name: str, **match: Any) -> list[dict[str, Any]]:
    return [
        e for e in env.log_events() if e.get("event") == name and all(e.get(k) == v for k, v in match.items())
    ]


async def wait_for_event(env: AssernEnv, count: int, name: str, **match: Any) -> None:
    while len(events(env, name, **match)) < count:  # noqa: ASYNC110 - another process's log
        await trio.sleep(0.05)


def text_of(result: types.CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def serve_raw(env: AssernEnv, config: Path) -> trio.Process:
    return await trio.lowlevel.open_process(
        [assern_command(), "serve", "--config", str(config)],
        env={**env.env, "ASSERN_NO_INSTANCE_SHARING": "1"},  # this process's tree alone
        cwd=str(env.work),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


async def stop(process: trio.Process) -> None:
    assert process.stdin is not None
    await process.stdin.aclose()  # the client leaves: the instance stops
    with trio.fail_after(20):
        await process.wait()


async def test_a_later_start_lists_every_tool_at_once_while_a_backend_is_still_starting(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    gate = tmp_path / "beta-may-start"
    gate.touch()
    config = write_config(server_table("alpha") + server_table("beta", "--start-gate", str(gate)))
    with trio.fail_after(60):
        first = await serve_raw(assern_env, config)
        wire = Wire.of(first)
        await wire.handshake("first")
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        names = {t["name"] for t in (await wire.response(2))["result"]["tools"]}
        assert {"alpha_echo", "beta_echo"} <= names
        await stop(first)

        gate.unlink()  # beta now waits for the gate: it cannot list before we let it
        later = await serve_raw(assern_env, config)
        wire = Wire.of(later)
        await wire.handshake("later")
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = await wire.response(2)
        assert {t["name"] for t in listed["result"]["tools"]} == names
        assert len(events(assern_env, "backend_ready", server="beta")) == 1  # the first run's only
        # Nothing came between the initialize answer and the list: no list_changed.
        assert [m.get("id") for m in wire.received] == [1, 2]

        gate.touch()
        await wait_for_event(assern_env, 2, "backend_ready", server="beta")
        await wire.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        await wire.response(3)
        # beta listed what was saved: the client is told of no change.
        assert [m.get("id") for m in wire.received] == [1, 2, 3]
        await wire.send(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "beta_echo", "arguments": {"text": "warm"}},
            }
        )
        assert (await wire.response(4))["result"]["content"][0]["text"] == "warm"
        await stop(later)


async def test_an_idle_backend_goes_dormant_stays_listed_and_wakes_on_a_call(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(
        "[settings]\nidle_timeout = 1\n\n"
        + server_table("alpha")
        + server_table("browser")
        + "keep_alive = true\n"
    )
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            first = int(text_of(await client.call_tool("alpha_get_pid", {})))
            await wait_for_event(assern_env, 1, "backend_sleep", server="alpha")
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"alpha_echo", "browser_echo"} <= names  # the dormant one stays listed
            second = int(text_of(await client.call_tool("alpha_get_pid", {})))
            assert second != first  # started again for the call
            assert events(assern_env, "backend_lazy_start", server="alpha")
    assert not events(assern_env, "backend_sleep", server="browser")  # keep_alive
    assert not events(assern_env, "backend_idle", server="browser")


async def test_a_dormant_backend_that_crashes_as_a_call_wakes_it_answers_that_call_with_why(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    config = write_config(
        "[settings]\nidle_timeout = 1\n\n"
        + server_table("alpha", "--crash-on-start-if", str(broken))
        + "max_restarts = 0\n"
    )
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            assert text_of(await client.call_tool("alpha_echo", {"text": "up"})) == "up"
            await wait_for_event(assern_env, 1, "backend_sleep", server="alpha")
            broken.touch()  # its next start crashes
            try:
                answer = await client.call_tool("alpha_echo", {"text": "again"})
            except MCPError as exc:
                why = exc.message
            else:
                assert answer.is_error
                why = text_of(answer)
    assert "alpha" in why
    assert "exited with code 3" in why


async def test_a_lazy_backend_never_listed_before_is_in_a_daemon_sessions_first_list(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    # No saved listing: the daemon starts it once to learn its tools, and the first list
    # waits for that, as one configuration's own instance does.
    config = write_config(server_table("beta") + 'start = "lazy"\nidle_timeout = 1\n')
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "beta_echo" in names
            await wait_for_event(assern_env, 1, "backend_state", server="beta", state="lazy")
            assert text_of(await client.call_tool("beta_echo", {"text": "woken"})) == "woken"
            assert events(assern_env, "backend_lazy_start", server="beta")

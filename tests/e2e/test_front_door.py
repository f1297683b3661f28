"""The front door: `assern serve` answers `initialize` before its tree and backends are up.

The backend here waits for a file before it serves (`--start-gate`), so it cannot be
ready before the test opens the gate: every assertion is about order and content.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from harness import AssernEnv, Wire, assern_command, server_table
from mcp import Client

pytestmark = pytest.mark.e2e

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"roots": {"listChanged": True}},
        "clientInfo": {"name": "early-bird", "version": "1"},
    },
}


def events(env: AssernEnv, name: str) -> list[dict[str, Any]]:
    return [e for e in env.log_events() if e.get("event") == name]


def text_of(result: types.CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.parametrize("through", ["daemon", "instance"])
async def test_the_door_answers_initialize_and_the_session_then_works(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path, through: str
) -> None:
    """Through the workstation daemon (its session answers) and through an instance of
    the configuration's own (`ASSERN_NO_DAEMON=1`: the stdio front door answers)."""
    if through == "instance":
        assern_env.per_config()
    gate = tmp_path / "gate"
    config = write_config(server_table("alpha", "--start-gate", str(gate)))
    # The initialize is in the pipe before assern starts: the door reads it first thing.
    stdin_read, stdin_write = os.pipe()
    os.write(stdin_write, Wire.line(INITIALIZE))
    with trio.fail_after(60):
        process = await trio.lowlevel.open_process(
            [assern_command(), "serve", "--config", str(config)],
            stdin=stdin_read,
            stdout=subprocess.PIPE,
            env=assern_env.env,
            cwd=str(assern_env.work),
        )
        os.close(stdin_read)
        assert process.stdout is not None
        wire = Wire(trio.lowlevel.FdStream(stdin_write), process.stdout)
        try:
            answer = await wire.receive()
            assert answer == {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {
                    "capabilities": {
                        "prompts": {"listChanged": True},
                        "resources": {"listChanged": True, "subscribe": False},
                        "tools": {"listChanged": True},
                    },
                    "protocolVersion": "2025-06-18",
                    "serverInfo": {"name": "assern", "version": "0.1.0"},
                },
            }
            # It was answered while alpha could not be ready (its gate is shut).
            assert not events(assern_env, "backend_ready")
            if through == "instance":  # by the door, before the tree was up
                early = events(assern_env, "initialize_answered_early")
                assert [e["client_name"] for e in early] == ["early-bird"]

            await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            gate.touch()
            await wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            listed = await wire.response(2)
            assert "alpha_echo" in {tool["name"] for tool in listed["result"]["tools"]}
            await wire.send(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "tools/call",
                    "params": {"name": "alpha_echo", "arguments": {"text": "through the door"}},
                }
            )
            called = await wire.response(3)
            assert called["result"]["content"][0]["text"] == "through the door"
            await wire.send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
            await wire.response(4)
            # Everything the client got: one answer to the initialize (the door's; the SDK's
            # own went nowhere), and nothing before it.
            assert wire.received[0] is answer
            assert [m.get("id") for m in wire.received].count(1) == 1
        finally:
            await wire.stdin.aclose()
            with trio.move_on_after(15):
                await process.wait()
            if process.returncode is None:
                process.kill()
        assert process.returncode == 0


async def test_the_official_client_gets_the_remembered_capabilities_before_the_backend_is_up(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    config = write_config(server_table("alpha", "--start-gate", str(gate)))
    gate.touch()
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            await client.list_tools()  # alpha is ready: what it offers is remembered
        gate.unlink()  # the next run's alpha waits again
        async with Client(assern_env.serve(config), mode="legacy") as client:
            caps = client.server_capabilities
            assert caps.resources is not None
            assert caps.resources.subscribe is True  # remembered: alpha is not up yet
            assert caps.logging is not None
            assert len(events(assern_env, "backend_ready")) == 1  # only the first run's
            gate.touch()
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "alpha_echo" in names
            result = await client.call_tool("alpha_echo", {"text": "remembered"})
            assert text_of(result) == "remembered"

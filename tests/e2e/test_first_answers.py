"""A client whose `assern serve` has to start the daemon is answered from the session the
same start kept (app/first_answers.py) while the daemon comes up, against real processes.

Each test starts a first session (which starts the daemon and keeps its answers), stops
the daemon, and starts the same client again with no daemon running.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from harness import AssernEnv, Wire, assern_command, server_table, stop_daemon

pytestmark = pytest.mark.e2e


async def start(env: AssernEnv, config: Path) -> trio.Process:
    return await trio.lowlevel.open_process(
        [assern_command(), "serve", "--config", str(config)],
        env=env.env,
        cwd=str(env.work),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


async def leave(process: trio.Process) -> None:
    assert process.stdin is not None
    await process.stdin.aclose()
    with trio.fail_after(20):
        await process.wait()


async def ask(wire: Wire, ident: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
    if params is not None:
        message["params"] = params
    await wire.send(message)
    answer = await wire.response(ident)
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def tool_names(result: dict[str, Any]) -> list[str]:
    return sorted(tool["name"] for tool in result["tools"])


def joins(env: AssernEnv) -> list[dict[str, object]]:
    """The bridges' lines of a daemon they started and joined after answering early."""
    return [e for e in env.log_events() if e.get("event") == "daemon_joined" and "answered_early" in e]


async def first_session(env: AssernEnv, config: Path) -> tuple[dict[str, Any], list[str]]:
    """A client's session through a daemon it starts, and a second one once the daemon
    knows every backend's capabilities (an `initialize` answered before is not kept):
    the second's initialize answer and tools; then the daemon is stopped."""
    warming = await start(env, config)
    wire = Wire.of(warming)
    await wire.handshake("first-answers")
    await ask(wire, 2, "tools/list")
    await leave(warming)
    process = await start(env, config)
    wire = Wire.of(process)
    initialized = (await wire.handshake("first-answers"))["result"]
    names = tool_names(await ask(wire, 2, "tools/list"))
    await ask(wire, 3, "prompts/list")
    await leave(process)
    await trio.to_thread.run_sync(stop_daemon, env)
    return initialized, names


async def test_a_start_with_no_daemon_is_answered_from_the_kept_session_and_then_served(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(90):
        initialized, names = await first_session(assern_env, config)
        assert "alpha_echo" in names

        process = await start(assern_env, config)
        wire = Wire.of(process)
        assert (await wire.handshake("first-answers"))["result"] == initialized
        assert tool_names(await ask(wire, 2, "tools/list")) == names
        # a call waits for the daemon, then reaches the backend through it
        called = await ask(wire, 3, "tools/call", {"name": "alpha_echo", "arguments": {"text": "hi"}})
        assert called["content"][0]["text"] == "hi"
        await leave(process)
    [joined] = joins(assern_env)
    assert joined["answered_early"] == 2  # initialize and tools/list
    assert not any(m.get("method", "").endswith("list_changed") for m in wire.received)
    await trio.to_thread.run_sync(stop_daemon, assern_env)


async def test_a_kept_list_that_turned_out_different_is_followed_by_list_changed(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(90):
        _, names = await first_session(assern_env, config)
        # What a backend whose tools changed since the last session looks like: the kept
        # list names a tool the backend no longer has.
        [answers] = (assern_env.assern_home / "cache" / "first-answers").glob("*.answers.json")
        kept = json.loads(answers.read_text())
        [session] = kept["sessions"].values()
        session["tools/list"]["tools"].append({"name": "alpha_gone", "inputSchema": {"type": "object"}})
        answers.write_text(json.dumps(kept))

        process = await start(assern_env, config)
        wire = Wire.of(process)
        await wire.handshake("first-answers")
        assert "alpha_gone" in tool_names(await ask(wire, 2, "tools/list"))
        while not any(m.get("method") == "notifications/tools/list_changed" for m in wire.received):
            await wire.receive()
        assert tool_names(await ask(wire, 3, "tools/list")) == names
        await leave(process)
    await trio.to_thread.run_sync(stop_daemon, assern_env)


async def test_a_changed_configuration_is_not_answered_from_the_kept_session(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(90):
        await first_session(assern_env, config)
        config.write_text(server_table("alpha") + server_table("beta"))

        process = await start(assern_env, config)
        wire = Wire.of(process)
        await wire.handshake("first-answers")
        assert {"alpha_echo", "beta_echo"} <= set(tool_names(await ask(wire, 2, "tools/list")))
        await leave(process)
    assert not joins(assern_env)
    await trio.to_thread.run_sync(stop_daemon, assern_env)


async def test_another_client_is_not_answered_from_a_session_kept_for_a_different_one(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(90):
        _, names = await first_session(assern_env, config)
        process = await start(assern_env, config)
        wire = Wire.of(process)
        await wire.handshake("another-client")  # other `initialize` params: nothing kept
        assert tool_names(await ask(wire, 2, "tools/list")) == names
        await leave(process)
    [joined] = joins(assern_env)
    assert joined["answered_early"] == 0
    assert joined["held"] == 1  # its initialize waited for the daemon
    await trio.to_thread.run_sync(stop_daemon, assern_env)

"""A client's session carried across a daemon that died or hung, against real processes.

Each `assern serve` here starts the workstation daemon itself (as a client's first start
does); the test then kills that daemon with SIGKILL (or stops it with SIGSTOP) under a
call, and the same client goes on: the call in flight gets an error, the next call is
served by a new daemon, which the bridge gave the session again.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio
from harness import AssernEnv, Wire, assern_command, process_alive, server_table
from instances import ctl_json, events, in_flight, reap, serve_in, text_of, wait_until
from mcp import Client
from mcp.shared.exceptions import MCPError

from assern.app.session_record import LOST_MESSAGE

pytestmark = pytest.mark.e2e
__all__ = ["reap"]  # the fixture: kills what a failing test left running


class Heard:
    """The notifications a client received, by method."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    async def __call__(self, message: Any) -> None:
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if isinstance(method, str):
            self.methods.append(method)


async def daemon_pid(env: AssernEnv, folder: Path) -> int:
    doc = await ctl_json(env, "status", cwd=folder)
    pid = doc["workstation"]["daemon"]["pid"]
    assert isinstance(pid, int)
    return pid


async def call_held_then_killed(
    env: AssernEnv, client: Client, folder: Path, gate: Path, before_kill: Any = None
) -> tuple[int, str]:
    """Start a call that waits on `gate`, kill the daemon under it (SIGSTOP, then
    `before_kill()`, then SIGKILL); the old daemon's pid and the call's error."""
    pid = await daemon_pid(env, folder)
    failed: list[str] = []

    async def held() -> None:
        with pytest.raises(MCPError) as error:
            await client.call_tool("alpha_gate", {"path": str(gate)})
        failed.append(str(error.value))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(held)
        await in_flight(env, folder)
        os.kill(pid, signal.SIGSTOP)
        if before_kill is not None:
            before_kill()
        os.kill(pid, signal.SIGKILL)
    return pid, failed[0]


async def test_a_daemon_killed_under_a_call_fails_that_call_and_the_session_goes_on(
    assern_env: AssernEnv, tmp_path: Path
) -> None:
    folder = assern_env.work / "p"
    folder.mkdir()
    config = assern_env.assern_home / "config.toml"
    config.write_text(server_table("alpha"))
    heard = Heard()
    with trio.fail_after(120):
        async with Client(serve_in(assern_env, folder), mode="legacy", message_handler=heard) as client:
            assert "alpha_echo" in {t.name for t in (await client.list_tools()).tools}
            uri = next(r.uri for r in (await client.list_resources()).resources if r.uri.endswith("info"))
            await client.subscribe_resource(uri)
            backend = int(text_of(await client.call_tool("alpha_get_pid", {})))

            def add_a_server() -> None:  # while the daemon is stopped: only the new one reads it
                config.write_text(server_table("alpha") + "\n" + server_table("gamma"))

            gate = tmp_path / "gate"
            old, error = await call_held_then_killed(assern_env, client, folder, gate, add_a_server)
            assert LOST_MESSAGE in error
            # The session goes on, on a new daemon, without a new initialize from the client.
            assert text_of(await client.call_tool("alpha_echo", {"text": "after"})) == "after"
            assert await daemon_pid(assern_env, folder) != old
            await wait_until(lambda: "notifications/tools/list_changed" in heard.methods, limit=30)
            assert "gamma_echo" in {t.name for t in (await client.list_tools()).tools}
            # The subscription was given to the new daemon, which gave it to its backend.
            subscribed = text_of(await client.call_tool("alpha_subscribed", {}))
            assert "test://info" in subscribed.splitlines(), subscribed
            # The old daemon's backend was cleaned up (the pool's watchdog).
            await wait_until(lambda: not process_alive(backend), limit=30)
    resumed = events(assern_env, "session_resumed")
    assert len(resumed) == 1
    assert resumed[0]["requests_failed"] == 1
    assert resumed[0]["why"] == "stopped"


async def test_a_2026_client_goes_on_after_its_daemon_is_killed(
    assern_env: AssernEnv, tmp_path: Path
) -> None:
    folder = assern_env.work / "p"
    folder.mkdir()
    (assern_env.assern_home / "config.toml").write_text(server_table("alpha"))
    with trio.fail_after(120):
        async with Client(serve_in(assern_env, folder), mode="2026-07-28") as client:
            assert "alpha_echo" in {t.name for t in (await client.list_tools()).tools}
            _, error = await call_held_then_killed(assern_env, client, folder, tmp_path / "gate")
            assert LOST_MESSAGE in error
            assert text_of(await client.call_tool("alpha_echo", {"text": "after"})) == "after"
    assert [e["requests_failed"] for e in events(assern_env, "session_resumed")] == [1]


async def test_a_daemon_that_hangs_is_found_by_the_liveness_check(
    assern_env: AssernEnv, tmp_path: Path
) -> None:
    folder = assern_env.work / "p"
    folder.mkdir()
    (assern_env.assern_home / "config.toml").write_text(server_table("alpha"))
    assern_env.env["ASSERN_DAEMON_LIVENESS"] = "0.5"
    with trio.fail_after(120):
        async with Client(serve_in(assern_env, folder), mode="legacy") as client:
            await client.list_tools()
            pid = await daemon_pid(assern_env, folder)
            os.kill(pid, signal.SIGSTOP)  # hangs: accepts nothing, answers nothing, does not die
            with pytest.raises(MCPError, match=LOST_MESSAGE):
                await client.call_tool("alpha_echo", {"text": "lost"})
            os.kill(pid, signal.SIGKILL)  # what a user does about it; the bridge joins a new one
            assert text_of(await client.call_tool("alpha_echo", {"text": "after"})) == "after"
    resumed = events(assern_env, "session_resumed")
    assert [(e["why"], e["requests_failed"]) for e in resumed] == [("hung", 1)]


async def test_a_slow_call_is_not_taken_for_a_hung_daemon_in_either_era(assern_env: AssernEnv) -> None:
    folder = assern_env.work / "p"
    folder.mkdir()
    (assern_env.assern_home / "config.toml").write_text(server_table("alpha"))
    assern_env.env["ASSERN_DAEMON_LIVENESS"] = "0.3"  # pings well before the call ends
    with trio.fail_after(120):
        for era in ("legacy", "2026-07-28"):
            async with Client(serve_in(assern_env, folder), mode=era) as client:
                answer = await client.call_tool("alpha_slow", {"seconds": 1.5})
                assert not answer.is_error, era
    assert not events(assern_env, "session_resumed")


async def test_a_client_that_closes_stdin_while_its_session_resumes_ends_it_at_once(
    assern_env: AssernEnv,
) -> None:
    folder = assern_env.work / "p"
    folder.mkdir()
    (assern_env.assern_home / "config.toml").write_text(server_table("alpha"))
    assern_env.env["ASSERN_DAEMON_LIVENESS"] = "0.3"
    with trio.fail_after(120):
        process = await trio.lowlevel.open_process(
            [assern_command(), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=assern_env.env,
            cwd=str(folder),
        )
        wire = Wire.of(process)
        await wire.handshake("raw")
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert "result" in await wire.response(2)
        pid = await daemon_pid(assern_env, folder)
        os.kill(pid, signal.SIGSTOP)  # hangs: the resume then waits for a welcome it never sends
        call = {"name": "alpha_echo", "arguments": {"text": "lost"}}
        await wire.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
        assert (await wire.response(3))["error"]["message"] == LOST_MESSAGE  # the resume has begun
        await wire.stdin.aclose()
        # 0, as for any client that closes stdin: not 1, a resume that ran out its 30 s
        assert await process.wait() == 0
    assert process_alive(pid)  # the daemon goes on (stopped, as it was)
    assert [e["ended_by"] for e in events(assern_env, "proxy_stopped", slot="daemon")] == ["client"]
    assert not events(assern_env, "session_resumed")

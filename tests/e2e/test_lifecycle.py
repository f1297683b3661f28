"""Backend lifecycle against real processes: restarts, failure, hangs, lazy start, no orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from harness import TESTING_SERVER, AssernEnv, Wire, assern_command, find_pids, process_alive, server_table
from instances import pids_of
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.e2e

FAST_RESTART = "backoff_initial = 0.05\nbackoff_max = 0.2\n"


def text_of(result: types.CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def wait_gone(pid: int, limit: float = 10) -> None:
    with trio.fail_after(limit):
        while process_alive(pid):  # noqa: ASYNC110 - another process's life, nothing to wait on
            await trio.sleep(0.05)


def events(env: AssernEnv, name: str, **match: Any) -> list[dict[str, Any]]:
    return [
        e for e in env.log_events() if e.get("event") == name and all(e.get(k) == v for k, v in match.items())
    ]


async def test_a_crashing_backend_is_restarted_and_answers_again(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha") + FAST_RESTART)
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            first = int(text_of(await client.call_tool("alpha_get_pid", {})))
            with pytest.raises(MCPError) as crashed:
                await client.call_tool("alpha_crash", {"code": 7})
            assert "exited with code 7" in crashed.value.message
            # The next call waits for the restart instead of failing.
            second = int(text_of(await client.call_tool("alpha_get_pid", {})))
            assert second != first
            assert text_of(await client.call_tool("alpha_echo", {"text": "back"})) == "back"
    scheduled = events(assern_env, "backend_restart_scheduled", server="alpha")
    assert [e["restarts"] for e in scheduled] == [1]
    assert not process_alive(first)


async def test_a_backend_that_never_starts_fails_fast_and_alone(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(
        server_table("alpha", "--tools", "echo")
        + server_table("broken", "--crash-on-start", "--tools", "echo")
        + "max_restarts = 2\n"
        + FAST_RESTART
    )
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            await client.list_tools()
            while not events(assern_env, "backend_failed", server="broken"):  # noqa: ASYNC110
                await trio.sleep(0.05)
            with trio.fail_after(2):  # fails at once, with the reason
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("broken_echo", {"text": "x"})
            message = refused.value.message
            assert "broken" in message
            assert "failed after 2 restarts" in message
            assert "exited with code 3" in message
            assert text_of(await client.call_tool("alpha_echo", {"text": "fine"})) == "fine"
    starts = events(assern_env, "backend_starting", server="broken")
    assert len(starts) == 3  # the first start and two restarts


async def test_a_hanging_call_times_out_and_the_backend_is_restarted(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha") + "timeout = 1\n" + FAST_RESTART)
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            first = int(text_of(await client.call_tool("alpha_get_pid", {})))
            with pytest.raises(MCPError) as timed_out:
                await client.call_tool("alpha_slow", {"seconds": 30})
            assert "did not answer within 1 s" in timed_out.value.message
            second = int(text_of(await client.call_tool("alpha_get_pid", {})))
            assert second != first
            await wait_gone(first)
    assert events(assern_env, "backend_hung", server="alpha")


async def test_progress_resets_the_call_timeout(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    # 12 steps of ~0.25 s each outlast a 1 s timeout only because each step reports progress.
    config = write_config(server_table("alpha") + "timeout = 1\n")
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            result = await client.call_tool(
                "alpha_ticker", {"steps": 12, "interval": 0.25}, progress_callback=on_progress
            )
    assert text_of(result) == "ticked"
    assert len(seen) == 12


async def test_grandchildren_die_with_their_backend(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    assern_env.per_config()  # the lifetime of one client's own instance
    pidfile = tmp_path / "grandchild.pid"
    config = write_config(server_table("alpha", "--spawn-grandchild", str(pidfile)))
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            backend = int(text_of(await client.call_tool("alpha_get_pid", {})))
            grandchild = int(pidfile.read_text())
            assert process_alive(grandchild)
        # The client closed assern's stdin: assern stops every backend's process group.
        await wait_gone(backend)
        await wait_gone(grandchild)


async def spawn_assern(env: AssernEnv, config: Path, *, isolated: bool = False) -> trio.Process:
    """`assern serve`; `isolated`: without instance sharing, so the process runs the tree
    itself (a shared primary runs in a process of its own, detached from this one)."""
    return await trio.lowlevel.open_process(
        [assern_command(), "serve", "--config", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**env.env, "ASSERN_NO_INSTANCE_SHARING": "1"} if isolated else env.env,
        cwd=str(env.work),
    )


async def start_with_grandchild(
    env: AssernEnv, write_config: Callable[[str], Path], pidfile: Path, *, isolated: bool = False
) -> tuple[trio.Process, int, int]:
    """assern with one backend that starts a grandchild: (assern, backend pid, grandchild pid)."""
    config = write_config(server_table("alpha", "--spawn-grandchild", str(pidfile)))
    process = await spawn_assern(env, config, isolated=isolated)
    while not pidfile.exists():  # noqa: ASYNC110, ASYNC240 - the backend writes it at start
        await trio.sleep(0.05)
    grandchild = int(pidfile.read_text())  # noqa: ASYNC240 - a few bytes
    return process, os.getpgid(grandchild), grandchild  # the backend leads the group


async def test_sigterm_stops_assern_cleanly_with_no_process_left(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    assern_env.per_config()  # the lifetime of one client's own instance
    with trio.fail_after(60):
        process, backend, grandchild = await start_with_grandchild(
            assern_env, write_config, tmp_path / "grandchild.pid"
        )
        process.send_signal(signal.SIGTERM)
        assert await process.wait() == 0
        await wait_gone(backend)
        await wait_gone(grandchild)


def watchdogs(env: AssernEnv) -> list[int]:
    """The watchdog processes of this test's instances (they watch its pid registry)."""
    return find_pids(str(env.assern_home / "run" / "pids"))


async def test_kill_9_of_assern_leaves_no_process_of_its_tree_within_2_s(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    pidfile = tmp_path / "grandchild.pid"
    with trio.fail_after(60):
        process, backend, grandchild = await start_with_grandchild(
            assern_env, write_config, pidfile, isolated=True
        )
        [watchdog] = watchdogs(assern_env)
        process.kill()
        await process.wait()
        # The backend notices (parent-death signal, stdin EOF); its own child is killed
        # with its process group by the watchdog, which then exits too.
        for pid in (backend, grandchild, watchdog):
            await wait_gone(pid, limit=2)


async def test_a_shell_wrapper_that_starts_a_daemon_leaves_nothing_after_kill_9(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    """`sh -c 'daemon & exec server'`, as npx, uvx and shell wrappers do."""
    pidfile = tmp_path / "daemon.pid"
    script = f'sleep 1000 & echo $! > {pidfile}; exec "$ASSERN_PYTHON" {TESTING_SERVER} --name alpha'
    config = write_config(f'[servers.alpha]\ncommand = "sh"\nargs = ["-c", {json.dumps(script)}]\n')
    with trio.fail_after(60):
        process = await spawn_assern(assern_env, config, isolated=True)
        wire = Wire.of(process)
        await wire.handshake("client")
        while not pidfile.exists():  # noqa: ASYNC110 - the wrapper writes it at start
            await trio.sleep(0.05)
        daemon = int(pidfile.read_text())
        [server] = [pid for pid in pids_of(assern_env, str(TESTING_SERVER)) if pid != daemon]
        assert process_alive(daemon)
        process.kill()
        await process.wait()
        for pid in (server, daemon, *watchdogs(assern_env)):
            await wait_gone(pid, limit=2)


async def test_when_the_watchdog_died_too_the_next_start_sweeps(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    pidfile = tmp_path / "grandchild.pid"
    with trio.fail_after(60):
        process, backend, grandchild = await start_with_grandchild(
            assern_env, write_config, pidfile, isolated=True
        )
        [watchdog] = watchdogs(assern_env)
        os.kill(watchdog, signal.SIGKILL)
        process.kill()
        await process.wait()
        await wait_gone(backend, limit=5)
        assert process_alive(grandchild)  # nobody was left to kill it ...
        pidfile.unlink()
        async with Client(
            assern_env.serve(write_config(server_table("beta", "--tools", "echo"))), mode="legacy"
        ):
            await wait_gone(grandchild, limit=5)  # ... until the next start's sweep


async def test_lazy_backends_start_on_first_use_and_sleep_when_idle(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    # One configuration's own instance: which process logs which state line is then fixed
    # (the daemon's dormancy is tested in test_warm_catalog.py and test_daemon_status.py).
    assern_env.per_config()
    config = write_config(server_table("alpha") + 'start = "lazy"\nidle_timeout = 1\n')
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "alpha_echo" in names  # known from a first start that learned its tools
            while not events(assern_env, "backend_state", server="alpha", state="lazy"):  # noqa: ASYNC110
                await trio.sleep(0.05)
            pid = int(text_of(await client.call_tool("alpha_get_pid", {})))
            assert events(assern_env, "backend_lazy_start", server="alpha")
            await wait_gone(pid)  # idle for 1 s: put to sleep
            assert events(assern_env, "backend_state", server="alpha", state="dormant")
            again = int(text_of(await client.call_tool("alpha_get_pid", {})))
            assert again != pid


async def test_calls_queued_for_a_backend_that_then_fails_get_the_reason(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    poison = tmp_path / "poison"
    config = write_config(
        server_table("alpha", "--crash-on-start-if", str(poison))
        + "max_restarts = 2\nbackoff_initial = 0.3\nbackoff_max = 0.3\n"
    )
    with trio.fail_after(60):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            await client.list_tools()
            poison.touch()  # from now on every restart fails
            with pytest.raises(MCPError):
                await client.call_tool("alpha_crash", {"code": 1})
            errors: list[str] = []

            async def queued(i: int) -> None:
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("alpha_echo", {"text": str(i)})
                errors.append(refused.value.message)

            # Sent while the backend is restarting: they queue, then get the failure.
            async with trio.open_nursery() as nursery:
                for i in range(3):
                    nursery.start_soon(queued, i)
    assert len(errors) == 3
    assert all("failed after 2 restarts" in e and "exited with code 3" in e for e in errors)


async def test_a_client_that_closes_stdin_mid_call_is_told_and_assern_exits(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    config = write_config(server_table("alpha"))
    marker = tmp_path / "marker"
    with trio.fail_after(60):
        process = await spawn_assern(assern_env, config, isolated=True)
        wire = Wire.of(process)
        try:
            await wire.handshake("leaver")
            await wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            await wire.response(2)  # alpha is up: the call below is spliced straight to it
            call = {"name": "alpha_wait_cancel", "arguments": {"marker": str(marker)}}
            await wire.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
            await wire.stdin.aclose()  # the client leaves while the call runs
            answer = await wire.response(3)
            assert answer["error"] == {"code": types.CONNECTION_CLOSED, "message": "Connection closed"}
            assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
    assert marker.read_text() == "cancelled"  # the backend was told too
    finished = events(assern_env, "tool_call_finished", server="alpha")
    assert [(e["tool"], e["cancelled"]) for e in finished] == [("wait_cancel", True)]

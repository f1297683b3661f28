"""Hot reload end to end: edit the config under a connected client of the real `assern serve`."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from harness import AssernEnv, server_table
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.e2e

#: A value that must never reach the log file.
SECRET = "reload-secret-0123456789"


def text_of(result: types.CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def two_backends(
    *, alpha_flags: tuple[str, ...] = (), alpha_mark: str = "one", beta_mark: str = "one"
) -> str:
    return (
        server_table("alpha", *alpha_flags)
        + f'env = {{ MARK = "{alpha_mark}", TOKEN = "{SECRET}" }}\n'
        + server_table("beta")
        + f'env = {{ MARK = "{beta_mark}" }}\n'
    )


class Notes:
    """tools/list_changed notifications a client received."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[None](1000)

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._send.send_nowait(None)

    def drain(self) -> None:
        while True:
            try:
                self._receive.receive_nowait()
            except trio.WouldBlock:
                return

    async def until_listed(self, client: Client, done: Callable[[set[str]], bool]) -> set[str]:
        """Re-list after every list_changed until `done(names)`: never polls tools/list."""
        while True:
            await self._receive.receive()
            names = {tool.name for tool in (await client.list_tools()).tools}
            if done(names):
                return names


async def call(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> str:
    return text_of(await client.call_tool(tool, arguments or {}))


async def call_until(client: Client, tool: str, arguments: dict[str, Any], expected: str) -> None:
    """Call until the answer is `expected` (a backend may be restarting meanwhile)."""
    while True:
        try:
            if await call(client, tool, arguments) == expected:
                return
        except MCPError:
            pass  # the backend is restarting: its tool is briefly unknown or unavailable
        await trio.sleep(0.1)


async def wait_for_event(env: AssernEnv, event: str, count: int = 1) -> dict[str, object]:
    """Wait until the log holds `count` events named `event`; returns the last one."""
    while True:
        found = [e for e in env.log_events() if e.get("event") == event]
        if len(found) >= count:
            return found[-1]
        await trio.sleep(0.05)


async def test_an_edit_restarts_only_the_changed_backend_and_a_broken_edit_changes_nothing(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    config = write_config(two_backends())
    notes = Notes()
    gate = tmp_path / "gate"
    gated: list[str] = []
    gated_done = trio.Event()
    with trio.fail_after(30):
        async with (
            Client(assern_env.serve(config), mode="legacy", message_handler=notes.on_message) as client,
            trio.open_nursery() as nursery,
        ):
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"alpha_add", "alpha_echo", "beta_gate"} <= names
            alpha_pid = await call(client, "alpha_get_pid")
            beta_pid = await call(client, "beta_get_pid")

            async def gated_call() -> None:
                try:
                    gated.append(await call(client, "beta_gate", {"path": str(gate)}))
                except MCPError as exc:
                    gated.append(f"error: {exc.message}")
                gated_done.set()

            nursery.start_soon(gated_call)  # in flight on beta across the reloads
            notes.drain()

            # 1. Change alpha's args (fewer tools) and env: alpha restarts, beta does not.
            edited = two_backends(alpha_flags=("--tools", "echo,get_pid,get_env"), alpha_mark="two")
            config.write_text(edited)
            names = await notes.until_listed(
                client, lambda n: "alpha_add" not in n and {"alpha_echo", "alpha_get_pid"} <= n
            )
            assert "beta_add" in names
            assert await call(client, "alpha_get_pid") != alpha_pid
            assert await call(client, "alpha_get_env", {"name": "MARK"}) == "two"
            assert await call(client, "beta_get_pid") == beta_pid
            alpha_pid = await call(client, "alpha_get_pid")

            # 2. A broken file: logged, and everything keeps running and answering.
            config.write_text(edited + 'max_restarts = "five"\n')
            failed = await wait_for_event(assern_env, "config_reload_failed")
            assert "expected an integer, got 'five' @ servers.beta.max_restarts" in str(failed["error"])
            assert await call(client, "alpha_get_pid") == alpha_pid
            assert await call(client, "beta_get_pid") == beta_pid
            assert await call(client, "alpha_echo", {"text": "still"}) == "still"
            assert gated == []  # the in-flight call is still waiting, untouched

            # 3. The next good save applies: now beta changes and alpha stays.
            config.write_text(
                two_backends(
                    alpha_flags=("--tools", "echo,get_pid,get_env"), alpha_mark="two", beta_mark="four"
                )
            )
            await call_until(client, "beta_get_env", {"name": "MARK"}, "four")
            assert await call(client, "beta_get_pid") != beta_pid
            assert await call(client, "alpha_get_pid") == alpha_pid
            # beta's call in flight since the start ended, with a clear error, when its
            # old process was stopped for the restart
            await gated_done.wait()
            assert gated == ["error: server 'beta' is unavailable: it restarted"]

    events = [e["event"] for e in assern_env.log_events()]
    assert events.count("config_reloaded") == 2
    assert SECRET not in (assern_env.assern_home / "logs" / "assern.log").read_text()


async def test_the_in_flight_call_of_an_unchanged_backend_survives_a_reload(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    config = write_config(two_backends())
    notes = Notes()
    gate = tmp_path / "gate"
    done = trio.Event()
    gated: list[str] = []
    with trio.fail_after(20):
        async with (
            Client(assern_env.serve(config), mode="legacy", message_handler=notes.on_message) as client,
            trio.open_nursery() as nursery,
        ):
            await client.list_tools()
            beta_pid = await call(client, "beta_get_pid")

            async def gated_call() -> None:
                gated.append(await call(client, "beta_gate", {"path": str(gate)}))
                done.set()

            nursery.start_soon(gated_call)
            notes.drain()
            config.write_text(two_backends(alpha_flags=("--tools", "echo"), alpha_mark="two"))
            await notes.until_listed(client, lambda n: "alpha_add" not in n and "alpha_echo" in n)
            assert gated == []
            gate.touch()
            await done.wait()
            assert gated == ["opened"]
            assert await call(client, "beta_get_pid") == beta_pid


def parent_pid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


async def test_sighup_reloads(assern_env: AssernEnv, write_config: Callable[[str], Path]) -> None:
    """The file is rewritten with the same size and its mtime restored, so the watcher
    cannot see it: only SIGHUP makes assern read it again."""
    config = write_config(server_table("alpha") + 'env = { MARK = "aaaa" }\n')
    with trio.fail_after(20):
        async with Client(assern_env.serve(config), mode="legacy") as client:
            await client.list_tools()
            backend = int(await call(client, "alpha_get_pid"))
            assern = parent_pid(backend)
            before = os.stat(config)
            config.write_text(server_table("alpha") + 'env = { MARK = "bbbb" }\n')
            os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
            after = os.stat(config)
            assert (after.st_size, after.st_ino, after.st_mtime_ns) == (
                before.st_size,
                before.st_ino,
                before.st_mtime_ns,
            )
            os.kill(assern, signal.SIGHUP)
            reloaded = await wait_for_event(assern_env, "config_reloaded")
            assert reloaded["reason"] == "SIGHUP"
            await call_until(client, "alpha_get_env", {"name": "MARK"}, "bbbb")
            assert int(await call(client, "alpha_get_pid")) != backend


async def test_a_reload_that_changes_the_exposure_tells_the_client(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    notes = Notes()
    with trio.fail_after(60):
        async with Client(
            assern_env.serve(config), mode="legacy", message_handler=notes.on_message
        ) as client:
            assert await call(client, "alpha_echo", {"text": "up"}) == "up"
            assert "alpha_add" in {tool.name for tool in (await client.list_tools()).tools}
            notes.drain()
            config.write_text(
                '[settings]\nexposure = "search"\npinned = ["alpha_echo"]\n\n' + server_table("alpha")
            )
            names = await notes.until_listed(client, lambda names: "search_tools" in names)
            assert names == {"search_tools", "describe_tools", "call_tool", "alpha_echo"}
            found = await client.call_tool("search_tools", {"query": "add numbers"})
            assert found.structured_content is not None
            assert found.structured_content["tools"][0]["name"] == "alpha_add"
            assert await call(client, "alpha_add", {"a": 1, "b": 2}) == "3"  # the backend kept running
            config.write_text(server_table("alpha"))
            names = await notes.until_listed(client, lambda names: "search_tools" not in names)
            assert "alpha_add" in names

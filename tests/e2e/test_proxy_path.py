"""The proxy's path: a repeated `assern serve` reaches the primary through its hint and
stays a bare bridge; anything that changed what the start resolves takes the full way."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from harness import AssernEnv, assern_command, server_table
from instances import daemon, events, reap, wait_until  # noqa: F401 - reap: autouse fixture

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def per_config(assern_env: AssernEnv) -> None:
    """These tests are of one instance per configuration: the daemon is off."""
    assern_env.per_config()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


class Raw:
    """An `assern serve` process spoken to in raw JSON lines."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self._buffer = b""

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(json.dumps(message).encode() + b"\n")

    async def receive(self, request_id: int) -> dict[str, Any]:
        """The reply to `request_id` (notifications on the way are skipped)."""
        assert self.process.stdout is not None
        while True:
            while b"\n" not in self._buffer:
                chunk = await self.process.stdout.receive_some(65536)
                assert chunk, "assern serve closed its stdout"
                self._buffer += chunk
            line, self._buffer = self._buffer.split(b"\n", 1)
            found: dict[str, Any] = json.loads(line)
            if found.get("id") == request_id:
                return found

    async def handshake_and_call(self, text: str) -> str:
        await self.send(INITIALIZE)
        assert (await self.receive(1))["result"]["serverInfo"]["name"] == "assern"
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "alpha_echo", "arguments": {"text": text}}
        await self.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        answer = await self.receive(2)
        assert "result" in answer, answer
        return str(answer["result"]["content"][0]["text"])

    def cmdline(self) -> str:
        return Path(f"/proc/{self.process.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@asynccontextmanager
async def serve(env: AssernEnv, config: Path) -> AsyncIterator[Raw]:
    process = await trio.lowlevel.open_process(
        [assern_command(), "serve", "--config", str(config)],
        env=env.env,
        cwd=str(env.work),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        yield Raw(process)
    finally:
        if process.returncode is None:
            assert process.stdin is not None
            await process.stdin.aclose()
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


def proxied(env: AssernEnv, **match: Any) -> list[dict[str, Any]]:
    return events(env, "instance_proxy", **match)


async def test_a_repeated_start_proxies_through_its_hint_as_a_bare_bridge(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(60):
        async with daemon(assern_env, "--config", str(config)):
            async with serve(assern_env, config) as first:
                assert await first.handshake_and_call("one") == "one"
                assert "assern.app.bridge" in first.cmdline()  # the election's imports were shed
            assert len(proxied(assern_env)) == 1
            assert not proxied(assern_env, via="hint")

            async with serve(assern_env, config) as second:
                assert await second.handshake_and_call("two") == "two"
                assert "assern.app.bridge" in second.cmdline()
            assert len(proxied(assern_env, via="hint")) == 1
            await wait_until(lambda: len(events(assern_env, "proxy_stopped", ended_by="client")) == 2)

            # A changed config file: the hint no longer vouches for this start.
            config.write_text(config.read_text() + "\n# a comment changes no server\n")
            async with serve(assern_env, config) as third:
                assert await third.handshake_and_call("three") == "three"
            assert len(proxied(assern_env)) == 3
            assert len(proxied(assern_env, via="hint")) == 1

            async with serve(assern_env, config) as fourth:  # the full path wrote a fresh hint
                assert await fourth.handshake_and_call("four") == "four"
            assert len(proxied(assern_env, via="hint")) == 2


async def test_a_hint_whose_primary_answers_another_fingerprint_is_not_followed(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(60):
        async with daemon(assern_env, "--config", str(config)):
            async with serve(assern_env, config) as first:
                assert await first.handshake_and_call("one") == "one"
            (hint_path,) = (assern_env.assern_home / "run" / "hints").glob("*.json")
            hint = json.loads(hint_path.read_text())
            hint["fingerprint"] = "0" * 64  # as if the primary had reloaded another configuration
            hint_path.write_text(json.dumps(hint))
            async with serve(assern_env, config) as second:
                assert await second.handshake_and_call("two") == "two"
            assert len(proxied(assern_env)) == 2
            assert not proxied(assern_env, via="hint")


async def test_a_stop_signal_ends_a_proxy_with_its_status_and_log_line(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(60):
        async with daemon(assern_env, "--config", str(config)):
            async with serve(assern_env, config) as proxy:
                assert await proxy.handshake_and_call("one") == "one"
                proxy.process.send_signal(signal.SIGTERM)
                assert await proxy.process.wait() == 128 + signal.SIGTERM
            stopped = events(assern_env, "proxy_stopped", ended_by="signal")
            assert [e["signal"] for e in stopped] == [signal.SIGTERM]


async def test_the_primary_going_away_ends_a_proxy_with_status_1(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha"))
    with trio.fail_after(60):
        async with daemon(assern_env, "--config", str(config)) as primary:
            async with serve(assern_env, config) as proxy:
                assert await proxy.handshake_and_call("one") == "one"
                primary.kill()
                assert await proxy.process.wait() == 1
            assert events(assern_env, "proxy_stopped", ended_by="primary")

"""Bad input from a client gets a JSON-RPC error and the session goes on."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from harness import AssernEnv, Wire, assern_command, server_table

pytestmark = pytest.mark.e2e


async def test_malformed_lines_get_errors_and_the_session_goes_on(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha", "--tools", "echo"))
    with trio.fail_after(60):
        process = await trio.lowlevel.open_process(
            [assern_command(), "serve", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=assern_env.env,
            cwd=str(assern_env.work),
        )
        try:
            wire = Wire.of(process)
            assert (await wire.handshake("raw"))["result"]["protocolVersion"] == "2025-11-25"

            await wire.send_line("this is not json")
            parse_error = await wire.receive()
            assert parse_error["error"]["code"] == -32700
            assert parse_error["id"] is None

            await wire.send_line(b"\xff\xfe{broken")
            assert (await wire.receive())["error"]["code"] == -32700

            await wire.send({"jsonrpc": "2.0", "id": 2, "params": {}})  # no method
            invalid = await wire.response(2)
            assert invalid["error"]["code"] == -32600

            await wire.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 5}})
            assert (await wire.response(3))["error"]["code"] == -32602

            await wire.send({"jsonrpc": "2.0", "id": 4, "method": "no/such/method"})
            assert (await wire.response(4))["error"]["code"] == -32601

            await wire.send(
                {
                    "jsonrpc": "2.0",
                    "id": 5,
                    "method": "tools/call",
                    "params": {"name": "nope", "arguments": {}},
                }
            )
            assert "Unknown tool 'nope'" in (await wire.response(5))["error"]["message"]

            await wire.send(
                {
                    "jsonrpc": "2.0",
                    "id": 6,
                    "method": "tools/call",
                    "params": {"name": "alpha_echo", "arguments": {"text": "still here"}},
                }
            )
            answer = await wire.response(6)
            assert answer["result"]["content"][0]["text"] == "still here"
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            with trio.move_on_after(15):
                await process.wait()
            if process.returncode is None:
                process.kill()
        assert process.returncode == 0

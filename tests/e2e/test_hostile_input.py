"""Hostile lines on every front of a running primary: each is answered, nothing else moves.

A JSON line nested thousands deep used to raise RecursionError inside the listener, which
restarted and dropped every client's session; a few of them stopped the whole instance.
Now each such line gets its JSON-RPC error (with its id when one can be read), the sender
goes on, and every other session, calls in flight included, is untouched.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from harness import AssernEnv, Wire, assern_command, server_table
from instances import events, socket_dir, wait_until

pytestmark = pytest.mark.e2e

DEPTHS = (3_000, 100_000)
REPEAT = 10


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def nested_request(request_id: int, depth: int) -> bytes:
    """A request whose params nest `depth` deep, with its id after them."""
    head = b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"alpha_echo","arguments":{"x":'
    return head + nested(depth) + b'}},"id":' + str(request_id).encode() + b"}"


class Lines:
    """Newline-delimited JSON over a socket stream."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def send(self, line: bytes) -> None:
        await self.stream.send_all(line + b"\n")

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some(65536)
            assert chunk, "the connection ended"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message


async def refused_everywhere(send: Callable[[bytes], Any], receive: Callable[[], Any], ids: bool) -> None:
    """Send every hostile line and check its answer, one at a time."""

    async def answer_of() -> dict[str, Any]:
        while "id" not in (message := await receive()):
            pass  # a notification (list_changed, ...) in between
        answer: dict[str, Any] = message
        return answer

    number = 1000
    for depth in DEPTHS:
        for _ in range(REPEAT):
            await send(nested(depth))
            answer = await answer_of()
            assert answer["id"] is None
            assert "nested deeper than 512 levels" in json.dumps(answer), answer
            if ids:
                number += 1
                await send(nested_request(number, depth))
                answer = await answer_of()
                assert answer["id"] == number
                assert answer["error"]["code"] == -32600


async def test_deep_lines_on_every_front_leave_every_session_and_call_intact(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    assern_env.per_config()  # every front of one configuration's own instance
    config = write_config(server_table("alpha", "--tools", "echo,gate"))
    gate = tmp_path / "gate"
    with trio.fail_after(120):
        process = await trio.lowlevel.open_process(
            [assern_command(), "serve", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=assern_env.env,
            cwd=str(assern_env.work),
        )
        try:
            stdio = Wire.of(process)
            await stdio.handshake("stdio-client")
            run = socket_dir(assern_env)
            await wait_until(lambda: (run / "assern.sock").exists() and (run / "assern.ctl").exists())

            mcp_stream = await trio.open_unix_socket(str(run / "assern.sock"))
            socket_client = Wire(mcp_stream, mcp_stream)
            await socket_client.handshake("socket-client")
            # A call in flight on the socket client while everything else happens.
            await socket_client.send(
                {
                    "jsonrpc": "2.0",
                    "id": 50,
                    "method": "tools/call",
                    "params": {"name": "alpha_gate", "arguments": {"path": str(gate)}},
                }
            )

            await refused_everywhere(stdio.send_line, stdio.receive, ids=True)
            await refused_everywhere(socket_client.send_line, socket_client.receive, ids=True)
            control = Lines(await trio.open_unix_socket(str(run / "assern.ctl")))
            for depth in DEPTHS:
                for _ in range(REPEAT):
                    await control.send(nested(depth))
                    answer = await control.receive()
                    assert answer["ok"] is False
                    assert answer["error"]["code"] == "invalid_request"
                    assert "nested deeper than 512 levels" in answer["error"]["message"]

            # Every session is intact: the call in flight finishes, each client is served
            # without a new handshake, and the instance still runs.
            gate.touch()
            opened = await socket_client.response(50)
            assert opened["result"]["content"][0]["text"] == "opened"
            echo = {"name": "alpha_echo", "arguments": {"text": "still here"}}
            for client in (stdio, socket_client):
                await client.send({"jsonrpc": "2.0", "id": 60, "method": "tools/call", "params": echo})
                assert (await client.response(60))["result"]["content"][0]["text"] == "still here"
            await control.send(b'{"v": 1, "id": 1, "command": "status"}')
            status = await control.receive()
            assert status["ok"] is True
            assert {c["name"] for c in status["result"]["clients"]} == {"stdio-client", "socket-client"}
            assert process.returncode is None
            refused = events(assern_env, "client_message_refused")
            assert len(refused) >= 2 * 2 * len(DEPTHS) * REPEAT
            assert not events(assern_env, "client_connection_failed")
            await control.stream.aclose()
            await mcp_stream.aclose()
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            with trio.move_on_after(15):
                await process.wait()
            if process.returncode is None:
                process.kill()


HOSTILE_SERVER = Path(__file__).resolve().parents[1] / "servers" / "hostile_server.py"


async def test_a_backend_that_writes_hostile_lines_is_read_past_and_keeps_serving(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(f'[servers.bad]\ncommand = "${{ASSERN_PYTHON}}"\nargs = ["{HOSTILE_SERVER}"]\n')
    with trio.fail_after(60):
        process = await trio.lowlevel.open_process(
            [assern_command(), "serve", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**assern_env.env, "ASSERN_NO_INSTANCE_SHARING": "1"},
            cwd=str(assern_env.work),
        )
        try:
            wire = Wire.of(process)
            await wire.handshake("client")
            call = {"name": "bad_echo", "arguments": {"text": "fine"}}
            await wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
            assert (await wire.response(2))["result"]["content"][0]["text"] == "fine"
            # An answer nested too deep is dropped, and its call answered with why.
            call = {"name": "bad_echo", "arguments": {"text": "deep"}}
            await wire.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
            dropped = await wire.response(3)
            assert "the backend's answer was dropped" in dropped["error"]["message"]
            call = {"name": "bad_echo", "arguments": {"text": "again"}}
            await wire.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": call})
            assert (await wire.response(4))["result"]["content"][0]["text"] == "again"
            # The backend was never restarted for it.
            assert not events(assern_env, "backend_exited")
            assert [e["state"] for e in events(assern_env, "backend_state")] == ["ready"]
            assert len(events(assern_env, "backend_bad_message")) >= 6
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            with trio.move_on_after(15):
                await process.wait()
            if process.returncode is None:
                process.kill()

"""Hostile lines at the real fronts of running assern processes: stdio, the MCP socket and
the control socket. Every line gets what it is owed, the front goes on answering, and the
processes never exit."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from harness import AssernEnv, Wire, assern_command, make_env, server_table
from hostile import LINES, check_answers, owed_count
from hypothesis import given
from hypothesis import strategies as st
from instances import socket_dir

pytestmark = pytest.mark.e2e

PROBE = "__fuzz_probe_0001__"
#: What the control socket answers a line that is not a command it can run.
REFUSALS = ("parse_error", "invalid_request", "unsupported_version", "unknown_command")


@attrs.define
class Fronts:
    env: AssernEnv
    daemon: subprocess.Popen[bytes]
    serve: subprocess.Popen[bytes]
    mcp: Path
    control: Path


@pytest.fixture(scope="module")
def fronts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fronts]:
    env = make_env(tmp_path_factory.mktemp("fronts"))
    config = env.work / "config.toml"
    config.write_text(server_table("a", "--tools", "echo"))
    daemon = subprocess.Popen(
        [assern_command(), "daemon", "--config", str(config)],
        env=env.env,
        cwd=env.work,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    serve = subprocess.Popen(
        [assern_command(), "serve", "--config", str(config)],
        env={**env.env, "ASSERN_NO_INSTANCE_SHARING": "1"},
        cwd=env.work,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    # One stdio session for every example below: its handshake, once.
    assert serve.stdin is not None
    assert serve.stdout is not None
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "1"},
        },
    }
    serve.stdin.write(
        Wire.line(initialize) + Wire.line({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    serve.stdin.flush()
    assert json.loads(serve.stdout.readline())["id"] == 0
    run = socket_dir(env)
    deadline = time.monotonic() + 30
    while not ((run / "assern.sock").exists() and (run / "assern.ctl").exists()):
        assert time.monotonic() < deadline, "the daemon did not open its sockets"
        time.sleep(0.05)
    try:
        yield Fronts(env, daemon, serve, run / "assern.sock", run / "assern.ctl")
        # After every example: still running.
        assert daemon.poll() is None
        assert serve.poll() is None
    finally:
        for process in (serve, daemon):
            process.kill()
            process.wait()
        serve.stdin.close()
        serve.stdout.close()


async def _exchange(wire: Wire, lines: list[bytes]) -> list[dict[str, Any]]:
    for line in lines:
        await wire.send_line(line)
    await wire.send({"jsonrpc": "2.0", "id": PROBE, "method": "ping"})
    answers: list[dict[str, Any]] = []
    while len(answers) < owed_count(lines) + 1:
        message = await wire.receive()
        if "id" in message:
            answers.append(message)
    return answers


def _check(lines: list[bytes], answers: list[dict[str, Any]]) -> None:
    assert [a for a in answers if a.get("id") == PROBE] == [{"jsonrpc": "2.0", "id": PROBE, "result": {}}]
    check_answers(lines, [a for a in answers if a.get("id") != PROBE])


@given(lines=st.lists(LINES, min_size=1, max_size=6))
def test_the_mcp_socket_answers_every_line_as_owed(fronts: Fronts, lines: list[bytes]) -> None:
    async def main() -> list[dict[str, Any]]:
        with trio.fail_after(30):
            stream = await trio.open_unix_socket(str(fronts.mcp))
            async with stream:
                wire = Wire(stream, stream)
                await wire.handshake("fuzz")
                return await _exchange(wire, lines)

    _check(lines, trio.run(main))


@given(lines=st.lists(LINES, min_size=1, max_size=6))
def test_stdio_answers_every_line_as_owed_in_one_long_session(fronts: Fronts, lines: list[bytes]) -> None:
    assert fronts.serve.stdin is not None
    assert fronts.serve.stdout is not None

    async def main() -> list[dict[str, Any]]:
        assert fronts.serve.stdin is not None
        assert fronts.serve.stdout is not None
        send = trio.lowlevel.FdStream(os.dup(fronts.serve.stdin.fileno()))
        receive = trio.lowlevel.FdStream(os.dup(fronts.serve.stdout.fileno()))
        with trio.fail_after(30):
            async with send, receive:
                return await _exchange(Wire(send, receive), lines)

    _check(lines, trio.run(main))


@given(lines=st.lists(LINES, min_size=1, max_size=6))
def test_the_control_socket_answers_every_line_and_goes_on(fronts: Fronts, lines: list[bytes]) -> None:
    async def main() -> list[dict[str, Any]]:
        with trio.fail_after(30):
            stream = await trio.open_unix_socket(str(fronts.control))
            async with stream:
                buffer = b""
                replies: list[dict[str, Any]] = []
                sent = [line for line in lines if line.strip()]
                for line in [*sent, b'{"v": 1, "id": "last", "command": "hello"}']:
                    await stream.send_all(line + b"\n")
                while len(replies) < len(sent) + 1:
                    while b"\n" not in buffer:
                        chunk = await stream.receive_some(65536)
                        assert chunk, "the control socket closed"
                        buffer += chunk
                    reply, buffer = buffer.split(b"\n", 1)
                    replies.append(json.loads(reply))
                return replies

    replies = trio.run(main)
    *hostile, last = replies
    assert last["ok"] is True
    assert last["id"] == "last"
    for reply in hostile:  # one reply a line, in order; none of these is a command
        assert reply["ok"] is False
        assert reply["error"]["code"] in (
            "parse_error",
            "invalid_request",
            "unsupported_version",
            "unknown_command",
        )

"""What the aggregator process loads: the `mcp` SDK stays out of a common session.

assern speaks the handshake-era protocol itself, on both sides, for stdio backends and
for clients that start with `initialize`; the SDK package (whose import brings its
HTTP stack: starlette, uvicorn, httpx, cryptography) is loaded only for HTTP or SSE
backends, pinned protocols and 2026-07-28 clients. From outside the process that shows
in its memory map: the native part of cryptography is mapped once the SDK is imported.
How many megabytes that saves is a benchmark figure (ops/bench), not a test.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from harness import TIME_SERVER, AssernEnv, Wire, assern_command, server_table

pytestmark = pytest.mark.e2e

#: A shared object only the SDK's import chain maps into an aggregator.
SDK_MARKER = "cryptography"


def mapped_files(pid: int) -> set[str]:
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.split()[-1] for line in lines if len(line.split()) >= 6}


async def test_a_handshake_session_over_stdio_backends_never_loads_the_sdk(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    config = write_config(server_table("alpha") + TIME_SERVER)
    with trio.fail_after(60):
        process = await trio.lowlevel.open_process(
            [assern_command(), "serve", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # isolated: this process is the aggregator (a shared primary detaches)
            env={**assern_env.env, "ASSERN_NO_INSTANCE_SHARING": "1"},
            cwd=str(assern_env.work),
        )
        wire = Wire.of(process)
        try:
            answer = await wire.handshake(
                "memory-test", capabilities={"sampling": {}, "roots": {"listChanged": True}}
            )
            assert "result" in answer
            requests = [
                ("tools/list", {}),
                ("tools/call", {"name": "alpha_echo", "arguments": {"text": "hi"}}),
                ("tools/call", {"name": "time_get_current_time", "arguments": {"timezone": "UTC"}}),
                ("tools/call", {"name": "alpha_no_such_tool", "arguments": {}}),
                ("resources/list", {}),
                ("resources/templates/list", {}),
                ("prompts/list", {}),
                ("prompts/get", {"name": "alpha_greet", "arguments": {"who": "Ada"}}),
                ("ping", {}),
            ]
            answers = {}
            for number, (method, params) in enumerate(requests, start=2):
                await wire.send({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
                answers[method, number] = await wire.response(number)
            listed = {tool["name"] for tool in answers["tools/list", 2]["result"]["tools"]}
            assert {"alpha_echo", "time_get_current_time"} <= listed
            assert answers["tools/call", 3]["result"]["content"][0]["text"] == "hi"
            assert "UTC" in answers["tools/call", 4]["result"]["content"][0]["text"]
            assert "error" in answers["tools/call", 5]
            assert answers["resources/list", 6]["result"]["resources"]
            assert "Ada" in str(answers["prompts/get", 9]["result"])
            loaded = [path for path in mapped_files(process.pid) if SDK_MARKER in path]
            assert loaded == [], f"the aggregator loaded the SDK's HTTP stack: {loaded}"
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            await process.wait()

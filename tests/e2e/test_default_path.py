"""A plain call under the default settings takes the spliced lane and loads nothing it
does not use, in either protocol era of the client.

The official client in its default mode speaks 2026-07-28 to a server that offers it,
so both eras are a client's default path. The process's imports are read from outside,
from what Python itself reports with `PYTHONPROFILEIMPORTTIME` (one line per module the
process imported, on its stderr): a real started `assern serve`, no hook of ours.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from harness import MODERN_ENVELOPE, TIME_SERVER, AssernEnv, Wire, assern_command, notes_table, server_table
from mcp import Client
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.e2e

#: Modules of features a default configuration does not use: the HTTP front, /metrics,
#: the JSON Schema compiler (the time server's schemas are plain, and its calls valid),
#: the search index, its meta-tools and its stemmer, the asyncio bridge, the semantic
#: extra, the YAML layout, the context server (a process of its own, when configured),
#: the `mcp` SDK's server and client, the close-name matcher of error messages (difflib)
#: and `statistics` (status reports), and greenlet's extension and asyncio (which
#: structlog would load for nothing: app/loading.py; the failed import of `greenlet` it
#: is shown instead still has a line).
UNUSED = (
    "assern.context",
    "sqlite3",
    "tree_sitter",
    "pathspec",
    "watchfiles",
    "hypercorn",
    "prometheus_client",
    "starlette",
    "jsonschema_rs",
    "snowballstemmer",
    "assern.actors.search.index",
    "assern.actors.search.meta_tools",
    "assern.actors.search.explain",
    "assern.actors.listener.exposure",
    "difflib",
    "statistics",
    "trio_asyncio",
    "greenlet._greenlet",
    "asyncio",
    "concurrent.futures",
    "wordllama",
    "numpy",
    "yaml",
    "mcp.server",
    "mcp.client",
)

_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


def imported(stderr: str) -> set[str]:
    return {m.group(1) for line in stderr.splitlines() if (m := _IMPORTED.match(line))}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_plain_call_is_spliced_and_loads_no_unused_feature(
    assern_env: AssernEnv, write_config: Callable[[str], Path], tmp_path: Path, mode: str
) -> None:
    config = write_config(TIME_SERVER)
    params = assern_env.serve(config)
    assert params.env is not None
    params.env = {**params.env, "ASSERN_NO_INSTANCE_SHARING": "1", "PYTHONPROFILEIMPORTTIME": "1"}
    stderr = tmp_path / "stderr.txt"
    with trio.fail_after(60), stderr.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert "time_get_current_time" in listed
            for _ in range(3):
                result = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
                assert not result.is_error
                assert "UTC" in json.dumps(result.model_dump(mode="json"))
    modules = imported(stderr.read_text())
    assert "assern.actors.listener.session" in modules  # the report is the aggregator's
    loaded = sorted(m for m in modules if any(m == u or m.startswith(u + ".") for u in UNUSED))
    assert loaded == [], f"a default serve loaded modules of features it does not use: {loaded}"
    calls = [e for e in assern_env.log_events() if e.get("event") == "tool_call_finished"]
    assert [(e["tool"], e["lane"]) for e in calls] == [("get_current_time", "spliced")] * 3


async def test_plain_2026_answers_are_the_sdk_servers_answers(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    """Each request a 2026-07-28 client sends on its default path is asked twice on one
    connection: plain (answered without the SDK) and with one more `_meta` key (which
    makes it the SDK's server's); the results are the same JSON."""
    config = write_config(server_table("alpha") + notes_table() + TIME_SERVER)
    requests: list[tuple[str, dict[str, Any]]] = [
        ("server/discover", {}),
        ("tools/list", {}),
        ("tools/call", {"name": "alpha_echo", "arguments": {"text": "hi"}}),
        ("tools/call", {"name": "alpha_add", "arguments": {"a": 1, "b": 2}}),
        ("tools/call", {"name": "notes_list_notes", "arguments": {}}),
        ("tools/call", {"name": "alpha_echo", "arguments": {"text": 3}}),
    ]
    with trio.fail_after(60):
        process = await trio.lowlevel.open_process(
            [assern_command(), "serve", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**assern_env.env, "ASSERN_NO_INSTANCE_SHARING": "1"},
            cwd=str(assern_env.work),
        )
        wire = Wire.of(process)
        try:
            for number, (method, params) in enumerate(requests):
                answers: list[dict[str, Any]] = []
                for extra in ({}, {"x.test/asked-twice": True}):
                    request_id = number * 2 + len(answers) + 1
                    meta = {**MODERN_ENVELOPE, **extra}
                    await wire.send(
                        {
                            "jsonrpc": "2.0",
                            "id": request_id,
                            "method": method,
                            "params": {**params, "_meta": meta},
                        }
                    )
                    answer = await wire.response(request_id)
                    answers.append({k: v for k, v in answer.items() if k != "id"})
                assert answers[0] == answers[1], (method, params)
                assert "result" in answers[0] or method == "tools/call", answers[0]
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            await process.wait()

"""The context server through `assern serve`: a `builtin = "context"` backend over a small project.

The official client calls `code_semantic_search`, `code_get_file` and
`code_get_context_for_prompt` in both protocol eras (two clients sharing one instance,
so one index); a `.env` secret appears in no answer and in no log line; traversal is
refused; a restart finds the index it left and re-reads nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from harness import AssernEnv, clients_of_every_era
from instances import events, pids_of, reap, stop_workstation, wait_until  # noqa: F401 - reap: autouse fixture
from mcp import Client

pytestmark = pytest.mark.e2e

SECRET = "zq-context-secret-5e1f0a9c77"

PROJECT = {
    "src/retry.py": (
        '"""Retry policy."""\n\n\n'
        "class RetryPolicy:\n"
        '    """Decides how long to wait between attempts."""\n\n'
        "    def decide_backoff(self, attempt: int) -> float:\n"
        "        return min(2.0 ** attempt, 60.0)\n"
    ),
    "src/login.py": (
        "from src.retry import RetryPolicy\n\n\n"
        "def login(user, password):\n"
        "    return check_database(user, password, RetryPolicy().decide_backoff(0))\n\n\n"
        "def check_database(user, password, wait):\n"
        "    return True\n"
    ),
    "tests/test_retry.py": "def test_decide_backoff():\n    assert True\n",
    "README.md": "# Demo\n\nA project with a retry policy.\n",
    ".env": f"API_KEY={SECRET}\n",
    "node_modules/lib/index.js": "function decide_backoff() {}\n",
}


def _project(assern_env: AssernEnv) -> Path:
    root = assern_env.work
    for name, text in PROJECT.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (assern_env.work.parent / "outside.txt").write_text("outside\n")
    return root


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def _indexed(client: Client, files: int) -> dict[str, Any]:
    """Search until the first index is complete; the last answer."""
    with trio.fail_after(60):
        while True:
            result = await client.call_tool("code_semantic_search", {"query": "retry backoff"})
            assert result.is_error is False, _text(result)
            structured: dict[str, Any] | None = result.structured_content
            assert structured is not None
            if structured["index"] == {"files": files, "pending": 0}:
                return structured
            await trio.sleep(0.1)  # the index is built by another process: nothing to wait on


def _context_events(assern_env: AssernEnv, name: str) -> list[dict[str, Any]]:
    """The context process's own log lines (its stderr, kept by the instance)."""
    found = []
    for event in events(assern_env, "backend_stderr"):
        try:
            line = json.loads(str(event.get("line", "")))
        except json.JSONDecodeError:
            continue
        if isinstance(line, dict) and line.get("event") == name:
            found.append(line)
    return found


async def test_the_three_tools_in_both_eras_secrets_refused_and_the_index_kept(
    assern_env: AssernEnv, write_config: Callable[[str], Path]
) -> None:
    _project(assern_env)
    # no root: the current folder (no .assern/ above it) is the one indexed
    config = write_config('[servers.code]\nbuiltin = "context"\n')
    answers: list[str] = []
    async with clients_of_every_era(assern_env, config) as clients:
        tools = await clients[0][1].list_tools()
        named = {tool.name: tool for tool in tools.tools}
        assert set(named) == {"code_semantic_search", "code_get_file", "code_get_context_for_prompt"}
        assert all(tool.annotations and tool.annotations.read_only_hint for tool in named.values())
        assert named["code_semantic_search"].output_schema is not None
        structured = await _indexed(clients[0][1], files=4)
        for era, client in clients:
            result = await client.call_tool(
                "code_semantic_search", {"query": "where is the retry backoff decided?"}
            )
            answers.append(_text(result) + json.dumps(result.structured_content))
            assert result.structured_content is not None, era
            first = result.structured_content["results"][0]
            assert (first["path"], first["symbol"]) == ("src/retry.py", "RetryPolicy.decide_backoff"), era
            assert (first["start_line"], first["end_line"]) == (7, 8)
            paths = [r["path"] for r in result.structured_content["results"]]
            assert "node_modules/lib/index.js" not in paths

            result = await client.call_tool(
                "code_get_file", {"path": "src/login.py", "start_line": 4, "end_line": 5}
            )
            assert result.is_error is False
            assert (
                _text(result)
                == PROJECT["src/login.py"].splitlines()[3] + "\n" + PROJECT["src/login.py"].splitlines()[4]
            )

            result = await client.call_tool(
                "code_get_context_for_prompt",
                {"query": "how does login wait between attempts?", "max_tokens": 600},
            )
            assert result.is_error is False
            bundle = result.structured_content
            assert bundle is not None
            assert "src/login.py" in [f["path"] for f in bundle["files"]]
            assert 0 < bundle["tokens"] <= 600
            answers.append(_text(result) + json.dumps(bundle))

            for path, reason in (
                ("../outside.txt", "leads outside the project's root"),
                (str(assern_env.work.parent / "outside.txt"), "outside the project's root"),
                (".env", "is a secret file"),
            ):
                refused = await client.call_tool("code_get_file", {"path": path})
                assert refused.is_error is True, path
                assert reason in _text(refused)
                answers.append(_text(refused))
            for bad in (
                {"query": ""},
                {"query": "x", "top_k": 0},
                {"query": "x", "top_k": 500},
                {"query": "x", "z": 1},
            ):
                refused = await client.call_tool("code_semantic_search", bad)
                assert refused.is_error is True, bad
                assert "invalid arguments for semantic_search" in _text(refused)
            for query in ("API_KEY", "env api key secret"):
                result = await client.call_tool("code_semantic_search", {"query": query})
                answers.append(_text(result) + json.dumps(result.structured_content))
        assert structured["results"]
    assert not any(SECRET in answer for answer in answers)
    assert SECRET not in (assern_env.assern_home / "logs" / "assern.log").read_text()
    complete = _context_events(assern_env, "context index complete")
    assert [(e["files"], e["reindexed"]) for e in complete] == [(4, 4)]

    # a restart finds its database and re-reads nothing
    await stop_workstation(assern_env)
    await wait_until(lambda: not pids_of(assern_env, "assern.context"), limit=30)
    (assern_env.work / "src" / "login.py").write_text(
        PROJECT["src/login.py"] + "\n\ndef logout():\n    pass\n"
    )
    async with Client(assern_env.serve(config), mode="legacy") as client:
        await _indexed(client, files=4)
        result = await client.call_tool("code_semantic_search", {"query": "logout"})
        assert result.structured_content is not None
        assert result.structured_content["results"][0]["symbol"] == "logout"
    complete = _context_events(assern_env, "context index complete")
    assert [(e["files"], e["reindexed"]) for e in complete] == [(4, 4), (4, 1)]

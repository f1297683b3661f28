"""The audit log: one JSON line per call, with its outcome, never its argument values."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import mcp_types as types
import pytest
import trio
import trio.testing

from assern.actors.gate.middleware import Call
from assern.actors.gate.middlewares.audit import arguments_digest, factory

CALL = Call(
    server="db", tool="query", exposed="db_query", arguments={"sql": "select 1", "limit": 5}, client="ide"
)


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_each_call_is_one_line_with_its_outcome(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    path = tmp_path / "logs" / "audit.jsonl"
    audit = factory({"path": str(path)})

    async def slow_ok(call: Call) -> types.CallToolResult:
        await trio.sleep(0.25)
        return types.CallToolResult(content=[])

    async def tool_error(call: Call) -> types.CallToolResult:
        return types.CallToolResult(content=[], is_error=True)

    async def broken(call: Call) -> types.CallToolResult:
        raise RuntimeError("backend gone")

    async def forever(call: Call) -> types.CallToolResult:
        await trio.sleep_forever()
        raise AssertionError

    await audit(CALL, slow_ok)
    await audit(CALL, tool_error)
    with pytest.raises(RuntimeError):
        await audit(CALL, broken)
    with trio.move_on_after(1):
        await audit(CALL, forever)

    found = lines(path)
    assert [line["outcome"] for line in found] == ["ok", "tool_error", "error", "cancelled"]
    first = found[0]
    assert {k: first[k] for k in ("client", "server", "tool", "exposed", "duration_ms")} == {
        "client": "ide",
        "server": "db",
        "tool": "query",
        "exposed": "db_query",
        "duration_ms": 250.0,
    }
    assert first["arguments_sha256"] == arguments_digest({"limit": 5, "sql": "select 1"})
    assert found[2]["error"] == "backend gone"
    assert "select 1" not in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_an_audit_that_cannot_open_its_file_refuses_the_call(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    audit = factory({"path": str(blocker / "audit.jsonl")})
    called = []

    async def backend(call: Call) -> types.CallToolResult:
        called.append(call)
        return types.CallToolResult(content=[])

    with pytest.raises(OSError, match=r"File exists|Not a directory"):
        await audit(CALL, backend)
    assert called == []


def test_the_digest_ignores_key_order() -> None:
    assert arguments_digest({"a": 1, "b": [1, 2]}) == arguments_digest({"b": [1, 2], "a": 1})
    assert arguments_digest({"a": 1}) != arguments_digest({"a": 2})


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({}, "option 'path' is required"),
        ({"path": "audit.jsonl"}, "option 'path' must be absolute or start with ~"),
        ({"path": 3}, "option 'path' expects a string, got 3"),
    ],
)
def test_wrong_options_are_refused_with_a_reason(options: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        factory(options)

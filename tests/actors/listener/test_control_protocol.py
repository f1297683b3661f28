"""The control socket's wire format and the status document, as pure functions."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from assern.actors.backend.status import BackendState, BackendStatus
from assern.actors.config.spec import ResolvedConfig, Settings
from assern.actors.listener import control_protocol as proto
from assern.actors.listener.report import ClientView, InstanceInfo, instance_report
from assern.actors.listener.stats import CallStats


def failure(line: bytes) -> proto.ControlFailure:
    with pytest.raises(proto.ControlFailure) as caught:
        proto.parse_command(line)
    return caught.value


def test_a_good_request_parses_with_its_arguments_and_id() -> None:
    command = proto.parse_command(b'{"v": 1, "command": "restart", "server": "github", "id": 4}')
    assert command == proto.Command(name="restart", args={"server": "github"}, id=4)
    assert proto.string_arg(command, "server") == "github"
    assert proto.object_arg(command, "arguments") == {}


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"{oops", proto.PARSE_ERROR),
        (b'"status"', proto.INVALID_REQUEST),
        (b'{"command": "status"}', proto.INVALID_REQUEST),
        (b'{"v": "1", "command": "status"}', proto.UNSUPPORTED_VERSION),
        (b'{"v": true, "command": "status"}', proto.UNSUPPORTED_VERSION),
        (b'{"v": 1, "command": 3}', proto.INVALID_REQUEST),
        (b'{"v": 1, "command": "explode"}', proto.UNKNOWN_COMMAND),
    ],
)
def test_bad_requests_fail_with_a_stable_code(line: bytes, code: str) -> None:
    assert failure(line).code == code


def test_errors_carry_the_request_id_and_what_to_do() -> None:
    unknown = failure(b'{"v": 1, "command": "explode", "id": "a"}')
    assert unknown.request_id == "a"
    assert "status" in unknown.data["commands"]
    assert failure(b'{"v": 9, "command": "status"}').data == {"supported": [1]}
    command = proto.parse_command(b'{"v": 1, "command": "call", "arguments": [1]}')
    with pytest.raises(proto.ControlFailure, match='needs "tool"'):
        proto.string_arg(command, "tool")
    with pytest.raises(proto.ControlFailure, match="must be a JSON object"):
        proto.object_arg(command, "arguments")


def test_reply_lines_are_one_json_object_each() -> None:
    ok = json.loads(proto.ok_line(3, {"a": 1}))
    assert ok == {"v": 1, "id": 3, "ok": True, "result": {"a": 1}}
    error = json.loads(proto.error_line(None, proto.UNKNOWN_SERVER, "no such server"))
    assert error == {
        "v": 1,
        "id": None,
        "ok": False,
        "error": {"code": "unknown_server", "message": "no such server"},
    }
    assert proto.ok_line(1, {}).count(b"\n") == 1


def handle(name: str, status: BackendStatus) -> Any:
    return SimpleNamespace(name=name, status=status)


def test_the_status_document_has_every_documented_field() -> None:
    stats = CallStats()
    for ms in (1.0, 3.0, 2.0):
        stats.record("alpha", ms)
    alpha = BackendStatus(
        server="alpha",
        transport="stdio",
        state=BackendState.READY,
        pid=42,
        ready_since=990.0,
        tools=3,
        calls_total=3,
        idle_since=995.25,
        stderr_tail=tuple(f"line {i}" for i in range(15)),
    )
    beta = BackendStatus(
        server="beta",
        transport="streamable-http",
        state=BackendState.RESTARTING,
        restarts=2,
        next_restart_at=105.0,
        last_exit="exited with code 1",
        last_error="exited with code 1",
    )
    doc = instance_report(
        info=InstanceInfo(
            pid=7, slot="work", mcp_socket="/r/work.sock", control_socket="/r/work.ctl", started_at=900.0
        ),
        config=ResolvedConfig(settings=Settings(), servers={}, project="work", files=(Path("/c.toml"),)),
        fingerprint="f" * 64,
        directory={"alpha": handle("alpha", alpha), "beta": handle("beta", beta)},
        stats=stats,
        clients=[
            ClientView(
                id="stdio-1",
                kind="stdio",
                name="claude-code",
                connected_at=995.0,
                profile="agents",
                exposure="search",
                list_tokens=412,
                roots={"supported": True, "roots": ["file:///w"], "error": None, "warning": None},
            )
        ],
        reload_error=None,
        now=1000.0,
        clock=100.0,
    )
    assert doc["project"] == "work"
    assert doc["uptime_s"] == 100.0
    assert doc["config_files"] == ["/c.toml"]
    assert doc["clients"] == [
        {
            "id": "stdio-1",
            "kind": "stdio",
            "name": "claude-code",
            "connected_s": 5.0,
            "profile": "agents",
            "exposure": "search",
            "list_tokens": 412,
            "roots": {"supported": True, "roots": ["file:///w"], "error": None, "warning": None},
        }
    ]
    first, second = doc["backends"]
    assert first["uptime_s"] == 10.0
    assert first["latency_ms"] == {"median": 2.0, "samples": 3}
    assert len(first["stderr_tail"]) == 10
    assert second["state"] == "restarting"
    assert second["next_restart_in_s"] == 5.0
    assert second["uptime_s"] is None
    assert second["latency_ms"] == {"median": None, "samples": 0}
    assert first["state_since"] == round(alpha.state_since, 3)
    assert (first["idle_since"], first["dormant_since"]) == (995.25, None)
    assert (second["idle_since"], second["dormant_since"]) == (None, None)
    assert [(c["server"], c["duration_ms"]) for c in doc["recent_calls"]] == [
        ("alpha", 2.0),
        ("alpha", 3.0),
        ("alpha", 1.0),
    ]
    json.dumps(doc)  # all plain JSON

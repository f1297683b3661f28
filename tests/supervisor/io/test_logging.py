"""The log pipeline: JSON lines to a rotating file, secrets redacted, stdlib loggers included."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import structlog

from assern.supervisor.io.logs import LineFile, configure_logging, redact, redact_secrets


def test_redact_keeps_two_characters() -> None:
    assert redact("ghp_abcdefgh") == "gh…(redacted)"
    assert redact("abc") == "…(redacted)"


def test_secret_keys_are_masked_and_maps_keep_their_keys() -> None:
    event = {
        "event": "x",
        "env": {"GITHUB_TOKEN": "ghp_secret", "PATH": "/bin"},
        "headers": {"Authorization": "Bearer abc"},
        "token": "tok_123456",
        "github_token": "ghp_999999",
        "api_key": 42,
        "server": "github",
    }
    out = redact_secrets(None, "info", dict(event))
    assert out["env"] == ["GITHUB_TOKEN", "PATH"]
    assert out["headers"] == ["Authorization"]
    assert out["token"] == "to…(redacted)"
    assert out["github_token"] == "gh…(redacted)"
    assert out["api_key"] == "(redacted)"
    assert out["server"] == "github"
    assert "ghp_secret" not in json.dumps(out)


def test_events_and_stdlib_records_become_json_lines(tmp_path: Path) -> None:
    with configure_logging(tmp_path / "logs") as path:
        with structlog.contextvars.bound_contextvars(actor="backend", server="github"):
            structlog.get_logger().info(
                "tool_call_finished", tool="search", duration_ms=1.5, token="sekrit-value"
            )
        logging.getLogger("mcp.client").warning("stdlib %s", "record")
        structlog.get_logger().debug("hidden at info level")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["event"] for line in lines] == ["tool_call_finished", "stdlib record"]
    first = lines[0]
    assert {"ts", "level", "event", "actor", "server", "tool", "duration_ms"} <= set(first)
    assert first["token"] == "se…(redacted)"
    assert lines[1]["logger"] == "mcp.client"
    assert lines[1]["level"] == "warning"
    assert "sekrit-value" not in path.read_text()


@pytest.mark.parametrize(("level", "shown"), [("info", ["warned"]), ("debug", ["per request", "warned"])])
def test_quiet_loggers_log_their_info_only_at_debug(tmp_path: Path, level: str, shown: list[str]) -> None:
    chatty = logging.getLogger("chatty.http")
    with configure_logging(tmp_path / "logs", level=level, quiet=["chatty.http"]) as path:
        chatty.info("per request")
        chatty.warning("warned")
    assert [json.loads(line)["event"] for line in path.read_text().splitlines()] == shown
    assert chatty.level == logging.NOTSET  # as it was before the block


def test_line_file_rotates_by_size(tmp_path: Path) -> None:
    path = tmp_path / "assern.log"
    file = LineFile(path, max_bytes=100, backups=2)
    for i in range(12):
        file.write(f"line {i:02d} " + "x" * 20)
    file.close()
    assert path.exists()
    assert (tmp_path / "assern.log.1").exists()
    assert (tmp_path / "assern.log.2").exists()
    assert not (tmp_path / "assern.log.3").exists()
    assert path.read_text().splitlines()[-1].startswith("line 11")
    assert all(len(p.read_bytes()) <= 100 for p in tmp_path.glob("assern.log*"))


def test_a_writer_follows_a_rotation_done_by_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "assern.log"
    ours = LineFile(path, max_bytes=10_000, backups=2)
    ours.write("before")
    path.replace(tmp_path / "assern.log.1")  # what another writer's rotation does
    clock = [1000.0]
    monkeypatch.setattr("assern.supervisor.io.logs.time.monotonic", lambda: clock[0])
    ours._checked = 0.0
    ours.write("after")
    ours.close()
    assert path.read_text() == "after\n"
    assert (tmp_path / "assern.log.1").read_text() == "before\n"


def test_timestamps_are_iso_utc_with_microseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    from assern.supervisor.io.logs import IsoTimestamp

    stamp = IsoTimestamp()
    moments = iter([1_700_000_000.25, 1_700_000_000.5, 1_700_000_001.000001])
    monkeypatch.setattr("assern.supervisor.io.logs.time.time", lambda: next(moments))
    assert stamp(None, "info", {})["ts"] == "2023-11-14T22:13:20.250000Z"
    assert stamp(None, "info", {})["ts"] == "2023-11-14T22:13:20.500000Z"
    assert stamp(None, "info", {})["ts"] == "2023-11-14T22:13:21.000001Z"

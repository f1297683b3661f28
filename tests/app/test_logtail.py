"""`assernctl logs` pieces: filters, the readable form, and following across rotation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assern.app import logtail
from assern.app.logtail import (
    Follower,
    LogFilter,
    current_size,
    format_line,
    last_lines,
    log_files,
    tail_events,
)


def line(event: str, level: str = "info", **more: Any) -> str:
    return json.dumps({"event": event, "level": level, "ts": "2026-01-02T03:04:05.678901Z", **more})


def test_filters_by_server_level_and_text() -> None:
    warning = line("backend_failed", "warning", server="alpha", error="exited with code 3")
    info = line("backend_ready", server="beta")
    assert LogFilter().accepts(warning)
    assert LogFilter(server="alpha").accepts(warning)
    assert not LogFilter(server="alpha").accepts(info)
    assert LogFilter(level="warning").accepts(warning)
    assert LogFilter(level="WARNING").accepts(line("x", "error"))
    assert not LogFilter(level="warning").accepts(info)
    assert LogFilter(grep="CODE 3").accepts(warning)
    assert not LogFilter(grep="code 4").accepts(warning)
    assert not LogFilter(server="alpha").accepts("not json at all")
    assert LogFilter(grep="json").accepts("not json at all")
    with pytest.raises(ValueError, match="unknown level"):
        LogFilter(level="loud")


def test_the_readable_form_puts_time_level_event_and_server_first() -> None:
    event = line("tool_call_finished", server="alpha", tool="echo", duration_ms=1.5, actor="backend")
    head = "2026-01-02 03:04:05.678 INFO    tool_call_finished [alpha]"
    assert format_line(event) == head + "  tool=echo duration_ms=1.5 actor=backend"
    assert format_line(line("x", note="two words", items=[1, 2])) == (
        '2026-01-02 03:04:05.678 INFO    x  note="two words" items=[1,2]'
    )
    assert format_line("garbage") == "garbage"


def test_log_files_are_read_oldest_first(tmp_path: Path) -> None:
    log = tmp_path / "assern.log"
    (tmp_path / "assern.log.2").write_text(line("a") + "\n")
    (tmp_path / "assern.log.1").write_text(line("b") + "\n")
    log.write_text(line("c") + "\n" + line("d", "error") + "\n" + '{"partial": ')
    (tmp_path / "assern.log.old").write_text("ignored")
    assert [p.name for p in log_files(log)] == ["assern.log.2", "assern.log.1", "assern.log"]
    events = [json.loads(t)["event"] for t in last_lines(log, LogFilter(), None)]
    assert events == ["a", "b", "c", "d"]
    assert [json.loads(t)["event"] for t in last_lines(log, LogFilter(), 2)] == ["c", "d"]
    assert last_lines(log, LogFilter(), 0) == []
    assert [json.loads(t)["event"] for t in last_lines(log, LogFilter(level="error"), 5)] == ["d"]


def test_the_follower_reads_appended_lines_across_rotation_and_truncation(tmp_path: Path) -> None:
    log = tmp_path / "assern.log"
    log.write_text("old\n")
    offset = current_size(log)
    assert last_lines(log, LogFilter(), None, upto=offset) == ["old"]
    follower = Follower(log, offset=offset)
    assert follower.poll() == []
    with log.open("a") as handle:
        handle.write("one\ntw")
    assert follower.poll() == ["one"]  # a partial line waits for its end
    with log.open("a") as handle:
        handle.write("o\nthree\n")
    log.rename(tmp_path / "assern.log.1")  # rotated: the rest of the old file comes first
    assert follower.poll() == ["two", "three"]
    log.write_text("four\n")
    assert follower.poll() == ["four"]
    log.write_text("")  # truncated in place
    assert follower.poll() == []
    with log.open("a") as handle:
        handle.write("five\n")
    assert follower.poll() == ["five"]
    follower.close()


def test_a_follower_waits_for_a_log_that_does_not_exist_yet(tmp_path: Path) -> None:
    log = tmp_path / "assern.log"
    follower = Follower(log, offset=current_size(log))
    assert follower.poll() == []
    log.write_text("first\n")
    assert follower.poll() == ["first"]
    follower.close()


def test_tail_events_reads_the_end_of_the_log_at_a_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "assern.log"
    assert tail_events(path, "info", 5) == []  # no log yet
    lines = [line(f"e{n}", "warning" if n % 3 == 0 else "info") for n in range(40)]
    path.write_text(
        "\n".join([*lines, "not json", '{"event": "half'])
    )  # the last line is still being written
    assert [e["event"] for e in tail_events(path, "warning", 3)] == ["e33", "e36", "e39"]
    assert [e["event"] for e in tail_events(path, None, 2)] == ["e38", "e39"]
    monkeypatch.setattr(logtail, "TAIL_BYTES", len(lines[-1]) * 3)  # the first line read is cut: left out
    assert [e["event"] for e in tail_events(path, None, 10)] == ["e38", "e39"]

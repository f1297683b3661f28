"""The status page's HTML, from a status document and the log tail."""

from __future__ import annotations

import re
from typing import Any

from assern.actors.listener.page.render import PARTS, age, changed, document, finding, sections

NOW = 1_800_000_000.0


def status(**extra: Any) -> dict[str, Any]:
    """A status document shaped as `assernctl status --json` gives it."""
    return {
        "pid": 42,
        "slot": "assern",
        "project": "work",
        "version": "9.9.9",
        "daemon": True,
        "config_files": ["/home/me/.assern/config.toml"],
        "started_at": NOW - 3600,
        "uptime_s": 3600.0,
        "clients": [{"id": "socket-1", "kind": "socket", "name": "claude-code", "connected_s": 75.0}],
        "backends": [
            {
                "name": "alpha",
                "state": "ready",
                "state_since": NOW - 30,
                "pid": 1001,
                "restarts": 0,
                "tools": 4,
                "latency_ms": {"median": 0.8, "samples": 12},
                "transport": "stdio",
            },
            {
                "name": "ghost",
                "state": "failed",
                "state_since": NOW - 5,
                "restarts": 5,
                "tools": 0,
                "last_error": "command 'nope' <was> not found",
            },
            {
                "name": "flaky",
                "state": "restarting",
                "restarts": 4,  # three or more: a crash loop
                "next_restart_in_s": 1.5,
                "last_exit": "exited with code 3",
            },
            {
                "name": "code",
                "state": "ready",
                "tools": 3,
                "context": {"root": "/src/app", "files": 120, "pending": 7, "last_update": NOW - 10},
            },
        ],
        "recent_calls": [
            {
                "at": NOW - 1,
                "client": "claude-code",
                "server": "alpha",
                "tool": "echo",
                "duration_ms": 1.25,
                "outcome": "ok",
            },
            {
                "at": NOW - 2,
                "client": None,
                "server": "alpha",
                "tool": "add",
                "duration_ms": 3.0,
                "outcome": "error",
            },
        ],
        **extra,
    }


def row(html: str, name: str) -> str:
    found = re.search(rf'<tr id="backend-{name}".*?</tr>', html)
    assert found, f"no row for {name}"
    return found.group(0)


def test_every_backend_has_its_row_state_and_doctor_id() -> None:
    backends = sections(status(), [], NOW)["backends"]
    alpha = row(backends, "alpha")
    assert 'data-state="ready"' in alpha
    assert 'data-doctor=""' in alpha
    assert "30 s ago" in alpha
    assert "1001" in alpha
    assert "0.8 ms (of 12)" in alpha
    ghost = row(backends, "ghost")
    assert 'data-doctor="backend.failed"' in ghost
    assert '<code class="doctor-id">backend.failed</code>' in ghost
    flaky = row(backends, "flaky")
    assert 'data-doctor="backend.crash_loop"' in flaky
    assert "in 1.5 s" in flaky
    assert "exited with code 3" in flaky


def test_values_are_escaped() -> None:
    doc = status()
    doc["backends"][0]["name"] = '<script>"x"</script>'
    html = "".join(sections(doc, [{"event": "<b>", "level": "info"}], NOW).values())
    assert "<script>" not in html
    assert "&lt;was&gt;" in html
    assert "&lt;b&gt;" in html


def test_fields_status_adds_later_still_show() -> None:
    doc = status(
        shared_backends=[{"key": "npx github", "sessions": 3}],
        build="abc123",
    )
    doc["backends"][0]["idle_for_s"] = 12.5
    parts = sections(doc, [], NOW)
    assert "idle_for_s" in row(parts["backends"], "alpha")  # in the row's details
    assert "build" in parts["instance"]
    assert "abc123" in parts["instance"]
    assert "shared_backends" in parts["more"]
    assert "npx github" in parts["more"]


def test_instance_facts() -> None:
    instance = sections(status(), [], NOW)["instance"]
    for shown in ("9.9.9", "60 min", "/home/me/.assern/config.toml", "work"):
        assert shown in instance
    assert "UTC" in instance  # started_at as a date, not epoch seconds


def test_sessions_from_clients_or_sessions() -> None:
    html = sections(status(), [], NOW)["sessions"]
    assert "claude-code" in html
    assert "socket" in html
    assert "work" in html  # the instance's project
    assert "75 s ago" in html
    later = status(sessions=[{"client": "cursor", "project": "other", "since": "today", "view": "search"}])
    html = sections(later, [], NOW)["sessions"]
    assert "cursor" in html
    assert "other" in html
    assert "search" in html
    assert "claude-code" not in html


def test_recent_calls_newest_first_without_arguments() -> None:
    html = sections(status(), [], NOW)["calls"]
    assert html.index("echo") < html.index("add")
    assert "1.25 ms" in html
    assert "outcome-error" in html
    assert "arguments" not in html


def test_context_indexes() -> None:
    html = sections(status(), [], NOW)["context"]
    assert "/src/app" in html
    assert "<td>120</td>" in html
    assert "<td>7</td>" in html
    assert "updated 10 s ago" in html


def test_empty_parts_say_so() -> None:
    parts = sections({"backends": [], "clients": []}, [], NOW)
    assert "No backend is configured." in parts["backends"]
    assert "No client is connected." in parts["sessions"]
    assert "No call since the instance started." in parts["calls"]
    assert "No context server is configured." in parts["context"]
    assert "No line at this level." in parts["logs"]


def test_log_tail_newest_first() -> None:
    events: list[dict[str, Any]] = [
        {"ts": "2026-11-28T10:00:00.000Z", "level": "info", "event": "first", "pid": 1},
        {"ts": "2026-11-28T10:00:01.000Z", "level": "error", "event": "second", "server": "ghost"},
    ]
    html = sections(status(), events, NOW)["logs"]
    assert html.index("second") < html.index("first")
    assert 'class="level-error"' in html
    assert "10:00:01.000" in html
    assert "pid=1" in html


def test_the_document_holds_every_part_and_loads_nothing_inline() -> None:
    parts = sections(status(), [], NOW)
    page = document(parts, level="warning", now=NOW, title="assern")
    for key, heading in PARTS:
        assert f'<div id="{key}">' in page
        assert heading in page
    assert '<script src="/page.js" defer></script>' in page
    assert "<script>" not in page
    assert "style=" not in page
    assert '<option value="warning" selected>' in page


def test_changed_parts_only() -> None:
    before = {"a": "1", "b": "2"}
    assert changed(before, {"a": "1", "b": "3", "c": "4"}) == {"b": "3", "c": "4"}
    assert changed(before, before) == {}


def test_age() -> None:
    assert [age(s) for s in (0, 119, 120, 7199, 7200, 172800, -5)] == [
        "0 s",
        "119 s",
        "2 min",
        "119 min",
        "2 h",
        "2 d",
        "0 s",
    ]


def test_the_workstation_daemons_status_shows_as_well() -> None:
    doc = {
        "daemon": {"pid": 7, "version": "9.9.9", "started_at": NOW - 60, "started_by": "socket"},
        "views": [{"label": "work-3f9a", "project": "work", "sessions": 2, "servers": ["alpha"]}],
        "sessions": [
            {"id": "s1", "client": "cursor", "project": "work", "view": "work-3f9a", "connected_s": 8}
        ],
        "backends": [
            {"name": "alpha", "key": "k1", "state": "dormant", "views": {"work-3f9a": 1}, "tools": 2}
        ],
    }
    parts = sections(doc, [], NOW)
    assert "<dt>started_by</dt><dd>socket</dd>" in parts["instance"]  # the daemon's facts, nested
    assert "9.9.9" in parts["instance"]
    assert "work-3f9a" in parts["more"]  # the views: a table of their own
    assert "cursor" in parts["sessions"]
    assert "8 s ago" in parts["sessions"]
    alpha = row(parts["backends"], "alpha")
    assert 'data-state="dormant"' in alpha
    assert "k1" in alpha  # the shared backend's key, in its details


def test_the_doctors_ids_by_the_doctors_rule() -> None:
    assert finding({"state": "failed", "restarts": 5}) == "backend.failed"
    assert finding({"state": "restarting", "restarts": 3}) == "backend.crash_loop"
    assert finding({"state": "starting", "restarts": 2}) is None  # not yet a loop
    assert finding({"state": "ready", "tools": 0}) == "backend.no_tools"
    assert finding({"state": "ready"}) is None  # tools not said
    assert finding({"state": "dormant", "tools": 0}) is None

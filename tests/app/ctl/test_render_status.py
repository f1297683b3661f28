"""`assernctl status` lines carry the doctor id of each problem it shows."""

from __future__ import annotations

import time
from typing import Any

import pytest

from assern.app.ctl.render import activity, render_daemon, render_status


def status(*backends: dict[str, Any]) -> dict[str, Any]:
    return {
        "slot": "assern",
        "pid": 4242,
        "project": None,
        "uptime_s": 10.0,
        "sockets": {"mcp": "/run/assern.sock", "control": "/run/assern.ctl"},
        "config_files": [],
        "clients": [],
        "backends": list(backends),
    }


def backend(name: str, state: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "state": state, "restarts": 0, "tools": 2, **fields}


def test_a_status_with_no_server_says_so_with_its_doctor_id() -> None:
    lines = render_status(status())
    assert "  config   (no file)" in lines
    assert lines[-1] == "  no servers are configured (doctor: config.no_servers): see `assernctl doctor`"


def test_each_backend_with_a_problem_has_a_doctor_line() -> None:
    lines = render_status(
        status(
            backend("fine", "ready"),
            backend("gone", "failed", restarts=5, last_error="exited with code 1"),
            backend("loop", "restarting", restarts=3, next_restart_in_s=0.5),
            backend("empty", "ready", tools=0),
        )
    )
    doctor = [line for line in lines if "doctor:" in line]
    assert doctor == [
        "  gone: doctor: backend.failed, see `assernctl doctor --server gone`",
        "  loop: doctor: backend.crash_loop, see `assernctl doctor --server loop`",
        "  empty: doctor: backend.no_tools, see `assernctl doctor --server empty`",
    ]


def roots(*uris: str, warning: str | None = None, error: str | None = None) -> dict[str, Any]:
    listed = list(uris) if uris or error is None else None
    return {"supported": True, "roots": listed, "error": error, "warning": warning}


def test_a_clients_roots_and_their_disagreement_are_shown() -> None:
    warning = (
        "working folder /w is outside the client's roots /x: this session is served the configuration of /w"
    )
    clients = [
        {"id": "socket-1", "name": "code", "roots": roots("file:///x", warning=warning)},
        {"id": "socket-2", "name": "cli", "roots": {"supported": False, "roots": None}},
        {"id": "socket-3", "name": "slow", "roots": roots(error="no answer to roots/list within 5 s")},
    ]
    lines = render_status({**status(backend("fine", "ready")), "clients": clients})
    assert "    socket-1: code, no profile, all exposure, tools/list ~0 tokens, roots /x" in lines
    assert f"    ! socket-1: {warning}" in lines
    assert "    socket-2: cli, no profile, all exposure, tools/list ~0 tokens" in lines
    assert any(line.endswith("roots unknown (no answer to roots/list within 5 s)") for line in lines)


def test_the_daemons_sessions_show_their_roots() -> None:
    warning = (
        "project root /a is outside the client's roots /b: this session is served the configuration of /a"
    )
    doc = {
        "daemon": {"pid": 1, "version": "1", "uptime_s": 5, "sockets": {"mcp": "/run/daemon.sock"}},
        "sessions": [
            {"id": "session-1", "client": "code", "cwd": "/a", "roots": roots("file:///b", warning=warning)},
            {"id": "session-2", "client": "cli", "cwd": "/a", "roots": roots()},
        ],
    }
    lines = render_daemon(doc)
    assert "    session-1: roots /b" in lines
    assert f"    ! session-1: {warning}" in lines
    assert "    session-2: roots none" in lines


NOW = 1767323045.0


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"state": "ready", "idle_since": NOW - 242, "in_flight": 0}, "idle 4m02s"),
        ({"state": "ready", "idle_since": None, "in_flight": 2}, "busy"),
        ({"state": "starting", "idle_since": NOW - 10}, "-"),
        ({"state": "lazy"}, "-"),
    ],
)
def test_what_a_backend_did_last_is_said_in_words(fields: dict[str, Any], words: str) -> None:
    assert activity(fields, NOW) == words


def test_a_dormant_backend_says_since_when_by_the_clock() -> None:
    asleep = NOW - 600
    today = time.strftime("%H:%M", time.localtime(asleep))
    assert activity({"state": "dormant", "dormant_since": asleep, "idle_since": asleep - 600}, NOW) == (
        f"dormant since {today}"
    )
    long_ago = NOW - 3 * 86400
    dated = time.strftime("%Y-%m-%d %H:%M", time.localtime(long_ago))
    assert activity({"state": "dormant", "dormant_since": long_ago}, NOW) == f"dormant since {dated}"


def test_the_activity_is_a_column_of_both_backend_tables() -> None:
    idle = backend("fine", "ready", idle_since=time.time() - 5, in_flight=0)
    lines = render_status(status(idle))
    header = next(line for line in lines if line.strip().startswith("SERVER"))
    assert header.split()[:3] == ["SERVER", "STATE", "ACTIVITY"]
    row = next(line for line in lines if line.strip().startswith("fine"))
    assert row.split()[2] == "idle"
    doc = {
        "daemon": {"pid": 1, "version": "1", "uptime_s": 5, "sockets": {"mcp": "/run/daemon.sock"}},
        "backends": [
            {"name": "gh", "key": "3f9a0c1b", "state": "dormant", "dormant_since": time.time() - 60}
        ],
    }
    lines = render_daemon(doc)
    header = next(line for line in lines if line.strip().startswith("BACKEND"))
    assert header.split()[:4] == ["BACKEND", "KEY", "STATE", "ACTIVITY"]
    row = next(line for line in lines if line.strip().startswith("gh"))
    assert row.split()[3:5] == ["dormant", "since"]

"""`assernctl status` lines carry the doctor id of each problem it shows."""

from __future__ import annotations

from typing import Any

from assern.app.ctl.render import render_status


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

"""Replicas behind HAProxy lose one (ops/deploy/replica_drill.py): the drill runs when
haproxy is installed (.ci/run installs Debian's package; without it the drill is
skipped, or fails under CI: tests/support/needed_tools.py); its verdict rules are
tested either way."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from needed_tools import needs_haproxy
from ops_scripts import OPS, load_script

DRILL = OPS / "deploy" / "replica_drill.py"
HAPROXY_CFG = DRILL.parent / "haproxy" / "haproxy.cfg"


drill = load_script(DRILL, "replica_drill")


def finished(killed: str = "assern2") -> Any:
    run = drill.Drill("http://lb/mcp", "http://lb/stats", [])
    run.killed, run.killed_at, run.dropped_after = killed, time.monotonic(), 0.3
    run.sessions = [
        drill.Session(replica="assern1", calls=10),
        drill.Session(
            replica="assern2",
            calls=5,
            errors=["MCPError: x"],
            error_after_kill=True,
            fresh_session_worked=True,
        ),
    ]
    return run


def test_the_promises_hold_only_when_each_group_of_clients_fared_as_promised() -> None:
    run = finished()
    assert drill.verdict(run) == []
    run.sessions[0].errors.append("MCPError: y")
    assert drill.verdict(run) == ["a session on a surviving replica saw an error"]
    run = finished()
    run.sessions[1].fresh_session_worked = False
    assert drill.verdict(run) == ["a client of the killed replica could not work in a fresh session"]
    run = finished()
    run.stateless_errors.append("MCPError: Server returned an error response")
    assert drill.verdict(run) == ["a stateless client saw an error"]
    run = finished(killed="assern3")  # no session was there: the drill proved nothing
    assert "no session was on the killed replica" in drill.verdict(run)


def test_only_an_answer_cut_mid_write_at_the_kill_is_set_apart() -> None:
    run = finished()
    cut = "RemoteProtocolError: peer closed connection without sending complete message body (...)"
    assert drill.cut_by_the_kill(run, cut)
    assert not drill.cut_by_the_kill(run, "MCPError: Server returned an error response")
    run.killed_at = time.monotonic() - 5  # long after the kill it is an error like any other
    assert not drill.cut_by_the_kill(run, cut)


@needs_haproxy
def test_the_shipped_haproxy_configuration_is_valid() -> None:
    done = subprocess.run(
        ["haproxy", "-c", "-f", str(HAPROXY_CFG)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.e2e
@needs_haproxy
def test_three_replicas_lose_one_under_load_and_keep_their_promises(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(DRILL), "--seconds", "6", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["broken"] == []
    handshake, stateless = figures["handshake"], figures["stateless"]
    assert handshake["sessions"] == 16
    assert stateless["clients"] == 16
    assert handshake["sessions_on_killed"] >= 1
    assert handshake["fresh_sessions_working"] == handshake["sessions_on_killed"]
    assert handshake["errors_on_survivors"] == 0
    assert stateless["errors"] == 0
    assert stateless["calls"] > 100
    assert handshake["calls"] > 100
    assert figures["dropped_after_ms"] is not None

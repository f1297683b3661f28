"""The daemon's part of `assernctl status`: its build, a hint when this install is another
build, and whether its runtime file stands for it."""

from __future__ import annotations

from typing import Any

from assern.app.ctl.render import generation_lines, render_daemon

BUILD = "0.1.0+3f9a1c2b4d5e"


def workstation(**extra: Any) -> dict[str, Any]:
    daemon = {
        "pid": 4242,
        "version": "0.1.0",
        "build": BUILD,
        "protocol": 2,
        "uptime_s": 61.0,
        "started_by": "command",
        "sockets": {"mcp": "/run/daemon.sock", "control": "/run/daemon.ctl"},
    }
    return {"daemon": daemon, "sessions": [], "views": [], "backends": [], **extra}


VERIFIED = {"path": "/run/daemon.json", "verified": True, "pid": 4242, "build": BUILD}


def test_the_daemon_of_this_build_shows_its_build_and_runtime_file() -> None:
    lines = render_daemon(workstation(this_build=BUILD, runtime_file=VERIFIED))
    assert lines[:4] == [
        "assern daemon: pid 4242, version 0.1.0, up 1m01s, started by command",
        "  socket   /run/daemon.sock",
        f"  build    {BUILD} (protocol 2)",
        "  runtime  /run/daemon.json",
    ]
    assert not any(line.startswith("  !") for line in lines)


def test_a_daemon_of_another_build_is_said_with_both_builds() -> None:
    lines = render_daemon(workstation(this_build="0.1.0+000000000000", runtime_file=VERIFIED))
    assert (
        f"  ! the running daemon is build {BUILD}; this install is build 0.1.0+000000000000 "
        "(its clients run the daemon's code until it stops: `assernctl shutdown`)"
    ) in lines


def test_a_runtime_file_that_does_not_stand_for_the_daemon_is_said_with_why() -> None:
    reason = "/run/daemon.json is stale: the daemon at /run/daemon.ctl (pid 4242) did not write it (pid 7)"
    runtime = {"path": "/run/daemon.json", "verified": False, "found": True, "reason": reason}
    lines = render_daemon(workstation(this_build=BUILD, runtime_file=runtime))
    assert f"  ! runtime file: {reason}" in lines


def test_a_daemon_that_says_no_build_is_of_an_unknown_one() -> None:
    doc = workstation(this_build=BUILD)
    del doc["daemon"]["build"], doc["daemon"]["protocol"]
    lines = render_daemon(doc)
    assert "  build    unknown (protocol -)" in lines
    assert any(line.startswith("  ! the running daemon is build unknown;") for line in lines)


def test_a_first_generation_daemon_adds_no_generation_line() -> None:
    assert generation_lines({"generation": 1, "predecessor": None, "superseded": None}) == []


def test_a_successor_says_its_generation_and_the_one_still_draining() -> None:
    predecessor = {
        "pid": 41,
        "build": "0.1.0+aaaaaaaaaaaa",
        "generation": 1,
        "reason": "assernctl daemon restart (pid 7)",
        "draining": True,
        "calls_in_flight": 2,
    }
    (line,) = generation_lines({"generation": 2, "predecessor": predecessor})
    assert line == (
        "  generation 2; last restart: assernctl daemon restart (pid 7); generation 1 "
        "(pid 41, build 0.1.0+aaaaaaaaaaaa) draining: 2 call(s) still in flight"
    )
    gone = {**predecessor, "draining": False}
    assert generation_lines({"generation": 2, "predecessor": gone}) == [
        "  generation 2; last restart: assernctl daemon restart (pid 7)"
    ]


def test_a_daemon_being_superseded_says_by_what_and_its_calls() -> None:
    daemon = {
        "generation": 1,
        "calls_in_flight": 1,
        "superseded": {"build": "0.1.0+bbbbbbbbbbbb", "pid": 52, "deadline_s": 60.0},
    }
    assert generation_lines(daemon) == [
        "  superseded by build 0.1.0+bbbbbbbbbbbb (pid 52): draining, 1 call(s) in flight, at most 60.0 s"
    ]


def test_a_successor_says_what_it_warmed_and_what_was_not_warm() -> None:
    warmed = {
        "views": 2,
        "sessions": 3,
        "backends": 4,
        "not_warm": [{"view": "a@1234abcd", "server": "slow", "state": "starting", "why": "not ready"}],
        "skipped": 0,
        "bound_passed": True,
        "warm_s": 10.002,
    }
    assert generation_lines({"generation": 2, "predecessor": None, "warmed": warmed}) == [
        "  generation 2",
        "  warmed before the takeover: 3 session(s)' views (2), 4 backend(s) ready, in 10.002 s",
        "    not warm: slow of a@1234abcd (starting: not ready)",
    ]
    assert generation_lines({"generation": 2, "predecessor": None, "warmed": None}) == ["  generation 2"]

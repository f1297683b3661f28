"""The handover drill (ops/drill/handover.py), run short, one test per case: the daemon
killed with SIGKILL, and the daemon superseded by a client of another build, each under
two busy clients of both protocol eras; every figure it promises that is a fact (counts,
pids, builds), never a timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

DRILL = Path(__file__).resolve().parents[2] / "ops" / "drill" / "handover.py"


def run_drill(case: str, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    out = tmp_path / "drill.json"
    done = subprocess.run(
        [sys.executable, str(DRILL), "--case", case, "--seconds", "3", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert list(figures) == [case]
    return done.stdout, figures[case]


@pytest.mark.e2e
def test_a_short_drill_resumes_both_clients_with_no_hang_and_no_disconnect(tmp_path: Path) -> None:
    printed, figures = run_drill("kill", tmp_path)
    assert "session_resumed: stopped" in printed
    assert set(figures["clients"]) == {"legacy", "2026-07-28"}
    for era, counts in figures["clients"].items():
        assert counts["ok"] > 0, era
        assert counts["hung"] == 0, era
        assert counts["disconnects"] == 0, era
        assert counts["works_after"] is True, era
        assert counts["failed"] <= 1, era  # only a call in flight at the kill
    assert figures["new_pid"] not in (None, figures["killed_pid"])
    assert figures["old_tree_left"] == 0
    assert [r["why"] for r in figures["resumes"]] == ["stopped", "stopped"]
    failed = sum(c["failed"] for c in figures["clients"].values())
    assert sum(r["requests_failed"] for r in figures["resumes"]) == failed


@pytest.mark.e2e
def test_a_short_supersede_drill_moves_both_clients_to_the_other_build_losing_no_call(
    tmp_path: Path,
) -> None:
    printed, figures = run_drill("supersede", tmp_path)
    names = {"legacy", "2026-07-28", "other build"}
    assert set(figures["clients"]) == names
    for name, counts in figures["clients"].items():
        assert counts["ok"] > 0, name
        lost = (counts["failed"], counts["hung"], counts["disconnects"])
        assert lost == (0, 0, 0), (name, counts["errors"])
        assert counts["works_after"] is True, name
    old, new, took = figures["old"], figures["new"], figures["takeover"]
    # the client of the other build took over through the real path: its shim started a
    # daemon of its build, which superseded the running one and now serves every client
    assert new["build"].startswith("9.9.9+")
    assert new["build"] != old["build"]
    assert (new["is_new"], new["generation"], new["predecessor_pid"]) == (True, 2, old["pid"])
    assert sorted(new["clients"]) == sorted(names)
    assert (took["told"], took["by"], took["gone"]) == (True, new["build"], True)
    assert figures["old_tree_left"] == 0
    assert [(r["why"], r["by"], r["requests_failed"]) for r in figures["resumes"]] == [
        ("superseded", new["build"], 0),
        ("superseded", new["build"], 0),
    ]
    assert f"new daemon {new['pid']} ({new['build']}, generation 2)" in printed

"""The handover drill (ops/drill/handover.py), run short: the daemon killed with SIGKILL
under two busy clients of both protocol eras, and every figure it promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DRILL = Path(__file__).resolve().parents[2] / "ops" / "drill" / "handover.py"


@pytest.mark.e2e
def test_a_short_drill_resumes_both_clients_with_no_hang_and_no_disconnect(tmp_path: Path) -> None:
    out = tmp_path / "drill.json"
    done = subprocess.run(
        [sys.executable, str(DRILL), "--seconds", "3", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "session_resumed: stopped" in done.stdout
    figures = json.loads(out.read_text())
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

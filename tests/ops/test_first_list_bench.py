"""The first-list benchmark (ops/bench/first_list.py) measures two builds in turn: every
start of every kind gets its list, and each kind prints A's and B's figures and B ÷ A."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "ops" / "bench" / "first_list.py"
KINDS = ("cold", "warm", "daemon", "started")
#: the tools of the bundled default configuration: notes 3, calc 3, time 2
TOOLS = 8


@pytest.mark.e2e
def test_two_builds_in_turn_each_get_every_list_and_their_ratio_is_printed(tmp_path: Path) -> None:
    out = tmp_path / "first_list.json"
    builds = ["--a", "current", "--b", "current"]
    done = subprocess.run(
        [sys.executable, str(BENCH), *builds, "--daemon", "--starts", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert figures["builds"] == {"A": {"rev": "current"}, "B": {"rev": "current"}}
    assert figures["machine"]["loadavg_before"] != "unknown"
    assert list(figures["cases"]) == list(KINDS)
    for kind, case in figures["cases"].items():
        for label in ("A", "B"):
            build = case[label]
            assert build["starts"] == len(build["list_ms"]) == 1, (kind, label)
            assert build["list_ms"] == [build["median_ms"]], (kind, label)
            assert build["tools"] == [TOOLS], (kind, label)  # every start got its whole list
            assert build["list_changed_before"] == 0, (kind, label)
            assert 0 < build["median_ms"] <= build["p90_ms"] <= build["max_ms"], (kind, label)
            assert build["median_ms"] <= build["call_median_ms"], (kind, label)
        ratios = case["b_over_a"]
        assert ratios["median_ms"] == pytest.approx(case["B"]["median_ms"] / case["A"]["median_ms"], abs=1e-3)
        assert ratios["paired"] > 0
    printed = done.stdout.splitlines()
    assert printed[0] == "A = current, B = current"
    assert "load average" in printed[2]
    # per kind three rows: A's figures, B's, then B ÷ A; each build's ending in its tools
    rows = [row.split() for row in printed[5:]]
    assert len(rows) == 3 * len(KINDS)
    for kind, (a, b, ratio) in zip(KINDS, zip(rows[::3], rows[1::3], rows[2::3], strict=True), strict=True):
        case = figures["cases"][kind]
        assert a[:3] == [kind, "A", f"{case['A']['median_ms']:.1f}"]
        assert b[:2] == ["B", f"{case['B']['median_ms']:.1f}"]
        assert a[-2:] == b[-2:] == [str(TOOLS), "0"]
        assert ratio[:4] == ["B", "÷", "A", f"{case['b_over_a']['median_ms']:.3f}"]
        assert ratio[-1] == f"{case['b_over_a']['paired']:.3f}"


def test_one_build_alone_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--a", "current"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "--a and --b go together" in done.stderr

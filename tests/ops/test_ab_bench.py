"""The A/B benchmark's smoke mode (ops/bench/ab.py) measures two builds interleaved and
prints every figure it promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "ops" / "bench" / "ab.py"


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_smoke_run_prints_both_builds_and_their_ratio(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "ab.json"
    builds = ["--a", "current", "--b", "current", "--b-settings", 'validate = "off"']
    done = subprocess.run(
        [sys.executable, str(BENCH), "--smoke", *builds, "--mode", mode, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "B ÷ A: overhead" in done.stdout
    figures = json.loads(out.read_text())
    assert figures["mode"] == mode
    assert figures["direct"]["n"] > 0
    assert set(figures["builds"]) == {"A", "B"}
    assert figures["builds"]["B"]["settings"] == 'validate = "off"'
    for build in figures["builds"].values():
        assert build["n"] * 2 == figures["direct"]["n"]  # a direct block beside each build's
        assert build["median_ms"] > 0
        assert build["rss_mb"] > 0
        assert build["throughput_ratio"] > 0


@pytest.mark.e2e
def test_the_daemon_smoke_run_measures_each_build_through_its_own_daemon(tmp_path: Path) -> None:
    out = tmp_path / "ab.json"
    builds = ["--a", "current", "--b", "current", "--daemon"]
    done = subprocess.run(
        [sys.executable, str(BENCH), "--smoke", *builds, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "B ÷ A, the shim: CPU per call" in done.stdout
    assert "load average" in done.stdout
    figures = json.loads(out.read_text())
    assert figures["daemon"] is True
    assert figures["paired_median_ratio"] > 0
    for build in figures["builds"].values():
        assert build["median_ms"] > 0
        assert build["rss_mb"] > 0  # the daemon's
        # the `assern serve` between the client and the daemon, become the resuming bridge
        assert build["shim"]["program"] == "handover.py"
        assert 0 < build["shim"]["pss_mb"] <= build["shim"]["rss_mb"]


def test_the_daemon_and_the_page_are_not_measured_together() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--daemon", "--b-page"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "--daemon and --b-page" in done.stderr

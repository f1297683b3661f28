"""The HTTP benchmark's smoke mode (ops/bench/http/run.py) runs and prints its figures
next to a direct HTTP connection, on the paths with the most parts (assern with the
direct server as its HTTP backend, in both eras; the others differ by a config file)
and on the floor (floor.py: the same stdio backend behind a bare forwarder)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "ops" / "bench" / "http" / "run.py"
PATHS = {"assern -> http backend (legacy)", "assern -> http backend (2026-07-28)", "floor (2026-07-28)"}


@pytest.mark.e2e
def test_the_smoke_run_measures_a_path_against_direct(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    only = ["--only", "assern -> http backend", "--only", "floor (2026"]
    done = subprocess.run(
        [sys.executable, str(BENCH), "--smoke", "--no-peers", *only, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert set(figures) == PATHS
    for name, row in figures.items():
        assert name in done.stdout
        assert row["direct"]["median_ms"] > 0
        assert row["through"]["median_ms"] > 0
        assert row["throughput"]["through"]["calls_per_s"] > 0
        assert row["aggregator_cpu_per_call_us"] > 0  # its process's CPU over the calls through it
    assert "its CPU per call" in done.stdout

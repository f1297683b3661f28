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


@pytest.mark.e2e
def test_the_interleaved_mode_prints_the_floor_and_assern_over_direct(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--interleaved", "40", "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())["interleaved"]
    assert figures["rounds"] == 40
    for name in ("direct", "floor (2026-07-28)", "assern (2026-07-28)"):
        assert figures[name]["median_ms"] > 0, name
        assert figures[name]["cpu_per_call_ms"] > 0, name
        assert f"{name} " in done.stdout
    assert figures["assern (2026-07-28)"]["over_direct_ms"] != 0
    assert figures["assern_over_floor"]["median_ms"] != 0
    assert "over direct" in done.stdout
    assert "assern over the floor" in done.stdout


@pytest.mark.e2e
def test_the_back_to_back_mode_prints_each_process_s_cpu_per_call(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    only = ["--only", "assern (2026", "--only", "assern -> pinned http backend"]
    done = subprocess.run(
        [sys.executable, str(BENCH), "--cpu-calls", "40", "--no-peers", *only, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert set(figures) == {"assern (2026-07-28)", "assern -> pinned http backend (legacy)"}
    for name, row in figures.items():
        assert row["calls"] == 40
        assert row["through_ms"] > 0
        assert row["direct_ms"] > 0
        assert row["front_cpu_ticks"] > 0, name
        assert row["backend_cpu_ms"] > 0, name
        assert row["direct_server_cpu_ms"] > 0, name
        assert f"{name} " in done.stdout
    assert "ticks in all" in done.stdout

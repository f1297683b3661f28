"""The small benchmark scripts that print README's figures run, in a tiny
configuration, and print every figure they promise, none of them zero:
ops/bench/spawn.py, startup.py and memory.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "ops" / "bench"


def run(tmp_path: Path, script: str, *argv: str) -> tuple[dict[str, Any], str]:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *argv, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures: dict[str, Any] = json.loads(out.read_text())
    return figures, done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="setpriv --pdeathsig is Linux's")
def test_the_spawn_bench_prints_both_ways_of_starting_a_backend(tmp_path: Path) -> None:
    figures, printed = run(tmp_path, "spawn.py", "--starts", "3")
    assert figures["starts"] == 3
    assert figures["rss_mb"] > 0
    for way in ("setpriv (vfork)", "preexec hook (fork)"):
        assert 0 < figures[way]["min_ms"] <= figures[way]["median_ms"], way
        assert f"{way} " in printed


@pytest.mark.e2e
def test_the_startup_bench_prints_each_collector_setting_s_cpu_and_peak(tmp_path: Path) -> None:
    figures, printed = run(tmp_path, "startup.py", "--starts", "1")
    assert set(figures) == {"deferred", "untouched", "off"}
    for kind, row in figures.items():
        assert row["starts"] == 1
        assert row["cpu_s_median"] > 0, kind
        assert row["peak_rss_mb_median"] > 0, kind
        assert f"collector {kind}" in printed


@pytest.mark.e2e
def test_the_memory_bench_prints_assern_s_rss_by_tool_count_and_its_floor(tmp_path: Path) -> None:
    figures, printed = run(tmp_path, "memory.py", "--size", "1x2", "--size", "2x3")
    assert figures["floor_mb"] > 0
    rows = {(row["tools"], row["client"]): row for row in figures["assern"]}
    assert set(rows) == {(2, "legacy"), (6, "legacy"), (6, "2026-07-28")}
    for key, row in rows.items():
        assert row["rss_mb"] > 0, key
        assert row["peak_rss_mb"] >= row["rss_mb"], key
        # one instance: assern and its watchdog, each with its RSS and PSS, the backends apart
        roles = [process["role"] for process in row["processes"]]
        assert roles == ["assern", "watchdog"], key
        assert all(process["pss_mb"] > 0 for process in row["processes"]), key
        pss = sum(process["pss_mb"] for process in row["processes"])
        assert abs(row["instance_pss_mb"] - pss) <= 0.2, key
        assert row["backend_processes"] >= row["backends"], key
        assert row["backends_pss_mb"] > 0, key
    assert "a bare interpreter with trio, ssl and mcp_types" in printed
    assert "6 tools (2 backends), a 2026-07-28 client" in printed
    assert "one instance, backends apart: PSS" in printed
    assert printed.startswith("load average (1, 5, 15 min) before: ")

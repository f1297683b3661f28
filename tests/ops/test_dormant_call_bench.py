"""The dormant-call benchmark (ops/bench/dormant_call.py) runs a round and prints its
figures: a dormant backend's first call next to that backend's own start. The daemon
mode only (the instance mode differs by one environment variable), to keep it quick."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "ops" / "bench" / "dormant_call.py"


@pytest.mark.e2e
def test_one_round_prints_the_first_call_next_to_the_backends_own_start(tmp_path: Path) -> None:
    mode = "daemon"
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--mode", mode, "--rounds", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert (figures["mode"], figures["rounds"]) == (mode, 1)
    for key in ("own_start", "own_start_and_call", "dormant_first_call", "warm_call", "assern_start"):
        assert figures[key]["median_ms"] > 0, key
    assert "median_ms" in figures["dormant_first_call_minus_own_start"]
    assert "dormant first call - own start: median" in done.stdout
    assert "load average" in done.stdout

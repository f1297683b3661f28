"""The tool-surface benchmark's smoke mode (ops/bench/gate/run.py) runs and prints every
figure it promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "ops" / "bench" / "gate" / "run.py"


@pytest.mark.e2e
def test_the_smoke_run_prints_tokens_validation_and_overhead(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "grouped_toon" in done.stdout
    assert "checking a valid 10-field call" in done.stdout
    assert "middleware chain around a call" in done.stdout
    figures = json.loads(out.read_text())
    tokens = figures["tokens"]
    assert tokens["search"]["tokens"] < tokens["grouped"]["tokens"] < tokens["all"]["tokens"]
    assert tokens["grouped_toon"]["tokens"] <= tokens["grouped"]["tokens"]
    assert figures["validation"]["check_10_fields_us"]["median"] > 0
    assert set(figures["end_to_end"]) == {"direct", "off", "strict", "chain"}
    chains = figures["middleware"]
    assert {"none", "rate_limit", "redact", "audit", "1 asyncio pass-through"} <= set(chains)
    assert all(row["median_us"] > 0 for row in chains.values())

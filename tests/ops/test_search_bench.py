"""The search benchmark's data and smoke mode (ops/bench/search/): every label names a
real tool of the fixtures, and the smoke run prints its figures."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "ops" / "bench" / "search"


def test_the_fixtures_are_real_servers_with_their_source_and_licence() -> None:
    servers = tomllib.loads((BENCH / "servers.toml").read_text())["servers"]
    fixtures = {path.stem: json.loads(path.read_text()) for path in (BENCH / "fixtures").glob("*.json")}
    assert set(fixtures) == set(servers)
    assert len(fixtures) >= 30
    assert sum(len(f["tools"]) for f in fixtures.values()) >= 300
    for name, fixture in fixtures.items():
        assert fixture["package"] == servers[name]["package"]
        assert fixture["licence"]
        assert fixture["source"].startswith("https://")
        assert fixture["tools"], name


def test_every_label_names_a_tool_of_the_fixtures() -> None:
    tools = {
        f"{fixture['server']}/{tool['name']}"
        for path in (BENCH / "fixtures").glob("*.json")
        for fixture in [json.loads(path.read_text())]
        for tool in fixture["tools"]
    }
    queries = tomllib.loads((BENCH / "queries.toml").read_text())["query"]
    assert len(queries) >= 150
    for query in queries:
        assert query["text"].strip()
        assert query["tools"], query["text"]
        assert set(query["tools"]) <= tools, query["text"]


def test_the_smoke_run_prints_recall_size_and_scale() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--smoke"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "lexical    all" in done.stdout
    assert "full_list_tokens=" in done.stdout
    assert "index_build_s=" in done.stdout
    validator_kb = float(done.stdout.split("validator_kb=", 1)[1].split(",", 1)[0])
    assert validator_kb > 0  # one compiled argument validator's memory


def test_the_fusion_s_depth_is_compared_when_asked(tmp_path: Path) -> None:
    out = tmp_path / "search.json"
    argv = [sys.executable, str(BENCH / "run.py"), "--smoke", "--candidates", "20", "--candidates", "50"]
    done = subprocess.run([*argv, "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    recall = json.loads(out.read_text())["recall"]
    assert recall["fused@20"] == recall["fused"]  # assern's own depth is 20
    assert recall["fused@50"]["all"]["recall@5"] > 0
    assert "fused@50   all" in done.stdout

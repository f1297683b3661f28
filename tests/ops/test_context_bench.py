"""The context benchmark's smoke mode (ops/bench/context/run.py --smoke): it fetches one
small project of the pinned corpus (pip, once: the cache is kept), runs the baselines
and prints their figures; the engine's column says n/a while `assern.context` is not
importable. A stand-in engine with the real tools' shapes
(tests/servers/context_double_server.py) drives the engine's whole path: MCP over stdio,
the wait for the first index, the ranking mode in the environment, the bundle, the
operations table."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "ops" / "bench" / "context"
DOUBLE = Path(__file__).resolve().parents[1] / "servers" / "context_double_server.py"


def smoke(*flags: str) -> tuple[str, dict[str, object]]:
    out = Path(flags[flags.index("--json") + 1])
    done = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--smoke", *flags],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(out.read_text())
    return done.stdout, report


def engine_installed() -> bool:
    try:
        return importlib.util.find_spec("assern.context") is not None
    except ModuleNotFoundError:
        return False


def test_the_smoke_run_prints_both_baselines_and_the_engine_or_why_not(tmp_path: Path) -> None:
    stdout, report = smoke("--json", str(tmp_path / "out.json"))
    quality = report["quality"]
    assert isinstance(quality, dict)
    assert quality["queries"] == 8
    for name in ("bm25", "ripgrep"):
        row = quality[name]
        assert 0.0 < row["all"]["ndcg@10"] <= 1.0, name
        assert 0.0 < row["all"]["recall@5"] <= 1.0, name
        assert len(row["answers"]) == 8
        assert f"\n{name:<22} {row['all']['ndcg@10']:>8.3f}" in stdout
    assert "ripgrep baseline: " in stdout
    if engine_installed():
        assert 0.0 <= quality["engine reranked"]["all"]["ndcg@10"] <= 1.0
        assert "engine operations (default ranking)" in stdout
    else:
        assert quality["engine reranked"] == {"n/a": "engine not installed"}
        assert "engine reranked        n/a (engine not installed)" in stdout
        assert report["operations"] == "n/a (engine not installed)"


def test_the_engine_path_through_mcp_with_a_stand_in_engine(tmp_path: Path) -> None:
    work = tmp_path / "work"
    stdout, report = smoke(
        "--engine", f"{sys.executable} {DOUBLE}", "--mode", "lexical", "--ablate", "path",
        "--keep", str(work), "--json", str(tmp_path / "out.json"),
    )  # fmt: skip
    quality = report["quality"]
    assert isinstance(quality, dict)
    row = quality["engine lexical"]
    assert len(row["answers"]) == 8
    assert any(answer["files"] for answer in row["answers"])
    assert 0.0 < row["all"]["ndcg@10"] <= 1.0
    assert 0.0 < row["bundle_hit_rate"] <= 1.0
    assert row["index"]["click"]["files"] > 50
    assert row["index"]["click"]["rss_mb"] > 10
    assert f"\n{'engine lexical':<22} {row['all']['ndcg@10']:>8.3f}" in stdout
    # the mode reached the engine through its environment; the operations run has none
    [quality_state] = (work).glob("home-lexical-*/cache/context/double.json")
    assert json.loads(quality_state.read_text())["ranking"] == "lexical"
    assert json.loads(quality_state.read_text())["disabled"] is None
    [ops_state] = (work).glob("home-ops-*/cache/context/double.json")
    assert json.loads(ops_state.read_text())["ranking"] is None
    # an ablation is the re-ranked mode less one signal, reported as a row of its own
    [ablated_state] = (work).glob("home-reranked-*/cache/context/double.json")
    assert json.loads(ablated_state.read_text())["ranking"] == "reranked"
    assert json.loads(ablated_state.read_text())["disabled"] == "path"
    assert len(quality["engine -path"]["answers"]) == 8
    assert "\nengine -path " in stdout
    operations = report["operations"]
    assert isinstance(operations, dict)
    ops = operations["click"]
    assert ops["files"] > 50
    assert len(ops["searchable_after_ms"]) == 3
    assert ops["warm_restart_s"] > 0
    assert ops["db_bytes"] > 0
    # the edits were made in the bench's copy, never in the cached corpus
    assert (work / "trees" / "click" / "fresh").is_dir()
    assert not list(BENCH.glob(".cache/src/click-*/fresh"))
    assert "engine operations (default ranking)" in stdout

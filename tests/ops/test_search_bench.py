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


def test_the_tasks_of_the_readmes_are_labelled_by_step_with_real_tools() -> None:
    tools = {
        f"{fixture['server']}/{tool['name']}"
        for path in (BENCH / "fixtures").glob("*.json")
        for fixture in [json.loads(path.read_text())]
        for tool in fixture["tools"]
    }
    tasks = tomllib.loads((BENCH / "tasks.toml").read_text())["task"]
    ids = [task["id"] for task in tasks]
    assert len(ids) == len(set(ids))
    queries = 0
    for task in tasks:
        assert task["text"].strip(), task["id"]
        assert task["source"].strip(), task["id"]
        steps = task.get("step", [])
        assert steps or task["tools"], task["id"]
        assert not (steps and "tools" in task), task["id"]  # labels by step, or one need
        for labelled in steps or [task]:
            assert labelled["tools"], task["id"]
            assert set(labelled["tools"]) <= tools, task["id"]
        queries += 1 + len(steps)
    assert queries >= 150
    # at least 20 servers the own set never names, each needed by some task
    own = {
        label.split("/")[0]
        for q in tomllib.loads((BENCH / "queries.toml").read_text())["query"]
        for label in q["tools"]
    }
    needed = {label.split("/")[0] for task in tasks for s in task.get("step", [task]) for label in s["tools"]}
    assert len(needed - own) >= 20


def test_the_split_holds_out_a_third_of_each_set_and_covers_every_unit() -> None:
    split = tomllib.loads((BENCH / "split.toml").read_text())
    assert isinstance(split["seed"], int)
    heldout, tuning = set(split["heldout"]), set(split["tuning"])
    assert not heldout & tuning
    own = {
        f"own-task:{q['task']}" if "task" in q else f"own:{q['text']}"
        for q in tomllib.loads((BENCH / "queries.toml").read_text())["query"]
    }
    readme = {f"readme:{task['id']}" for task in tomllib.loads((BENCH / "tasks.toml").read_text())["task"]}
    assert own | readme == heldout | tuning
    for units in (own, readme):
        assert len(units & heldout) >= len(units) / 3


def test_the_smoke_run_prints_recall_size_and_scale(tmp_path: Path) -> None:
    out = tmp_path / "search.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "lexical    all both both" in done.stdout
    assert "lexical    steps own heldout" in done.stdout
    assert "full_list_tokens=" in done.stdout
    assert "index_build_s=" in done.stdout
    validator_kb = float(done.stdout.split("validator_kb=", 1)[1].split(",", 1)[0])
    assert validator_kb > 0  # one compiled argument validator's memory
    assert "held-out steps                 lexical    n=" in done.stdout
    report = json.loads(out.read_text())
    # The target parts' figures agree with the recall table: the held-out steps are the
    # own and readme sets' held-out steps together, and a step is found or not, so the
    # queries found more and less often than plain make up the difference to plain.
    table = report["recall"]["lexical"]
    own, readme = table["steps own heldout"], table["steps readme heldout"]
    steps = report["spread"]["held-out steps"]
    lexical, plain = steps["lexical"], steps["plain"]
    assert lexical["queries"] == own["queries"] + readme["queries"]
    pooled = (own["recall@5"] * own["queries"] + readme["recall@5"] * readme["queries"]) / lexical["queries"]
    assert abs(lexical["recall@5"] - pooled) < 0.002
    assert lexical["low"] < lexical["recall@5"] < lexical["high"]
    versus = lexical["against plain"]
    difference = (versus["gained"] - versus["lost"]) / lexical["queries"]
    assert abs(lexical["recall@5"] - plain["recall@5"] - difference) < 0.002
    assert 0 < versus["p"] <= 1
    tasks = report["spread"]["held-out whole tasks (readme)"]["lexical"]
    assert tasks["recall@5"] == report["recall"]["lexical"]["tasks readme heldout"]["recall@5"]


def test_the_blend_s_depth_is_compared_when_asked(tmp_path: Path) -> None:
    out = tmp_path / "search.json"
    argv = [sys.executable, str(BENCH / "run.py"), "--smoke", "--candidates", "20", "--candidates", "50"]
    done = subprocess.run([*argv, "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    recall = json.loads(out.read_text())["recall"]
    assert recall["blended@20"] == recall["blended"]  # assern's own depth is 20
    assert recall["blended@50"]["all both both"]["recall@5"] > 0
    assert "blended@50 all both both" in done.stdout


def test_the_simulated_use_is_built_from_the_tuning_part_and_scored_held_out() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "learning.py")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "tuning part -> held-out part: use log of " in done.stdout
    calls = int(done.stdout.split("use log of ", 1)[1].split(" ", 1)[0])
    assert calls > 100
    rows = [line.split() for line in done.stdout.splitlines()]
    for learning in (["none"], ["prior", "0.3/3.0"], ["terms", "0.3/3.0"]):
        row = next(row for row in rows if row[: len(learning) + 1] == [*learning, "steps"])
        assert 0 < float(row[len(learning) + 3]) <= 1  # Recall@5 of the held-out steps


def test_the_candidates_are_figured_on_two_folds_of_the_tuning_part() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "candidates.py"), "--only", "as it is"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("as it is"))
    # fold A, fold B and both: steps Recall@5 and MRR, whole tasks Recall@5 and MRR
    assert [part.split()[0] for part in row[len("as it is") :].split("|")] == ["A", "B", "both"]
    figures = [float(word) for word in row.split() if word[0].isdigit()]
    assert len(figures) == 12
    assert all(0 < figure <= 1 for figure in figures)
    assert "heldout" not in done.stdout

"""The context benchmark's pure parts (ops/bench/context/scoring.py and the baselines'
helpers in run.py): the textbook BM25, the metrics every ranking is scored by, and the
grep baseline's two implementations agreeing."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from ops_scripts import OPS, load_script

BENCH = OPS / "bench" / "context"


scoring = load_script(BENCH / "scoring.py", "context_bench_scoring")
bench = load_script(BENCH / "run.py", "context_bench_run")


def test_the_tokeniser_knows_nothing_of_code() -> None:
    assert scoring.tokenize("parseArgs parse_args Foo.bar(x=1)") == [
        "parseargs",
        "parse_args",
        "foo",
        "bar",
        "x",
        "1",
    ]


def test_bm25_scores_as_the_textbook_formula() -> None:
    index = scoring.BM25.build({"a": "apple apple banana", "b": "banana cherry", "c": "cherry"})
    # N = 3 documents of lengths 3, 2, 1 (mean 2); "apple" is in one, twice in "a".
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    expected = idf * 2 * (1.2 + 1) / (2 + 1.2 * (1 - 0.75 + 0.75 * 3 / 2))
    [(name, score)] = index.search("apple")
    assert name == "a"
    assert score == pytest.approx(expected)
    # "banana" is in two of three documents; the shorter one ranks first
    assert [n for n, _ in index.search("banana")] == ["b", "a"]
    assert index.search("durian") == []
    # a query word asked twice counts twice
    assert index.search("apple apple")[0][1] == pytest.approx(2 * expected)


def test_ndcg_gives_relevance_one_to_each_labelled_file() -> None:
    ranked = ["x", "r1", "y", "r2"]
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert scoring.ndcg(ranked, ["r1", "r2"]) == pytest.approx(expected)
    assert scoring.ndcg(["r1", "r2"], ["r2", "r1"]) == pytest.approx(1.0)
    assert scoring.ndcg([*"abcdefghij", "r"], ["r"]) == 0.0  # the 11th place is past @10
    with pytest.raises(ValueError, match="at least one relevant file"):
        scoring.ndcg(["a"], [])


def test_recall_is_the_share_of_labelled_files_in_the_first_k() -> None:
    ranked = ["a", "b", "c", "d", "e", "r"]
    assert scoring.recall(ranked, ["r", "s"], 5) == 0.0
    assert scoring.recall(ranked, ["r", "s"], 6) == 0.5
    assert scoring.recall(ranked, ["a"], 5) == 1.0


def test_results_become_distinct_files_at_their_first_rank() -> None:
    assert scoring.files_in_order(["a.py", "b.py", "a.py", "c.py", "b.py"]) == ["a.py", "b.py", "c.py"]


def test_the_grep_baseline_ranks_by_match_count_and_drops_stop_words() -> None:
    assert scoring.grep_words("How does the Parser parse a parser option?") == ["parser", "parse", "option"]
    assert scoring.rank_by_counts({"b": 3, "a": 3, "c": 0, "d": 5}) == ["d", "a", "b"]


def test_percentile_interpolates_between_ranks() -> None:
    assert scoring.percentile(list(range(1, 21)), 0.95) == pytest.approx(19.05)
    assert scoring.percentile([4.0], 0.95) == 4.0


def test_binary_and_oversized_files_are_left_out(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("def a(): pass\n")
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\0\0data")
    (tmp_path / "big.txt").write_text("x" * 100)
    assert scoring.read_text_files(tmp_path, max_bytes=50) == {"pkg/a.py": "def a(): pass\n"}


def test_ripgrep_and_the_python_fallback_count_the_same_matches(tmp_path: Path) -> None:
    rg = bench.find_rg()
    if rg is None:
        pytest.skip("no rg: the `ripgrep` wheel of the test extra installs it")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "parser.py").write_text("class Parser:\n    def parse(self): return PARSE\n")
    (tmp_path / "README.md").write_text("The parser.\nNothing else.\n")
    (tmp_path / ".hidden.txt").write_text("parse parse\n")
    (tmp_path / "blob.bin").write_bytes(b"parse\0parse")
    words = ["parse", "else"]
    counts = bench.rg_counts(rg, tmp_path, words)
    assert counts == {"src/parser.py": 3, "README.md": 2, ".hidden.txt": 2}
    assert bench.python_counts(scoring.read_text_files(tmp_path), words) == counts


def test_the_synthetic_tree_copies_files_until_the_count_each_text_file_distinct(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("A = 1\n")
    (root / "b.md").write_text("# b\n")
    (root / "c.bin").write_bytes(b"\0\1")
    made = bench.synthetic_tree([root], tmp_path / "tree", 7)
    files = sorted(
        p.relative_to(tmp_path / "tree").as_posix() for p in (tmp_path / "tree").rglob("*") if p.is_file()
    )
    assert made == 7
    assert len(files) == 7
    assert files[:3] == ["c1/proj/b.md", "c1/proj/c.bin", "c1/proj/pkg/a.py"]
    assert files[6] == "c3/proj/b.md"  # the seventh file: the first of the third copy
    texts = {(tmp_path / "tree" / f).read_bytes() for f in files if f.endswith("b.md")}
    assert len(texts) == 3  # three copies of b.md, none alike
    assert {(tmp_path / "tree" / f).read_bytes() for f in files if f.endswith(".bin")} == {b"\0\1"}


def _row(ndcg: float, recall: float, bundle: float | None = None) -> dict[str, Any]:
    return {"all": {"ndcg@10": ndcg, "recall@5": recall}, "bundle_hit_rate": bundle}


def test_each_step_is_worth_the_difference_of_two_rows_of_the_run() -> None:
    quality = {
        "engine lexical": _row(0.70, 0.80, 0.75),
        "engine reranked": _row(0.86, 0.95, 0.96),
        "engine fused": _row(0.87, 0.94, 0.96),
        "engine fused-norerank": _row(0.72, 0.85, 0.80),
        "engine meaning": {"n/a": "semantic extra not installed"},
        "engine -symbol": _row(0.88, 0.96, 0.96),
        "engine -role": _row(0.80, 0.90, None),
    }
    found = bench.contributions(quality)
    assert found["re-ranking, on the words alone"] == pytest.approx(
        {"ndcg@10": 0.16, "recall@5": 0.15, "bundle": 0.21}
    )
    assert found["re-ranking, on words and meaning fused"]["ndcg@10"] == pytest.approx(0.15)
    assert found["meaning fused in, without re-ranking"]["ndcg@10"] == pytest.approx(0.02)
    assert found["meaning fused in, with re-ranking"]["recall@5"] == pytest.approx(-0.01)
    assert found["signal symbol (re-ranked less it)"]["ndcg@10"] == pytest.approx(-0.02)
    assert found["signal role (re-ranked less it)"] == pytest.approx(
        {"ndcg@10": 0.06, "recall@5": 0.05, "bundle": None}
    )
    # a row not measured (n/a) gives no step
    assert "meaning alone against the words alone" not in found

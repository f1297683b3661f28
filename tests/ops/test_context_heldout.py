"""The context benchmark's held-out part (ops/bench/context/run.py): the projects that
corpus.toml marks `heldout = true` are asked only heldout.toml's questions, never mixed
into the tuned set's figures, and printed apart; a question filed in the wrong part
stops the run. No download: the parts are chosen and printed from plain values."""

from __future__ import annotations

from typing import Any

import pytest
from ops_scripts import OPS, load_script

BENCH = OPS / "bench" / "context"


bench = load_script(BENCH / "run.py", "context_bench_run")
corpus = load_script(BENCH / "corpus.py", "context_bench_corpus")


def project(name: str, heldout: bool = False) -> Any:
    return bench.corpus.Project(
        name=name, version="1.0", archive=f"{name}-1.0.tar.gz", sha256="0" * 64, root=f"{name}-1.0",
        heldout=heldout,
    )  # fmt: skip


PROJECTS = [project("attrs"), project("click"), project("structlog", heldout=True), project("ujson", True)]


def test_the_pinned_corpus_marks_its_held_out_projects() -> None:
    held = {p.name for p in corpus.projects() if p.heldout}
    assert held == {"structlog", "ujson"}
    assert {p.name for p in corpus.projects() if not p.heldout} >= {"attrs", "click", "trio"}


def test_a_run_splits_the_named_projects_into_the_two_parts_never_one_in_both() -> None:
    names = ["attrs", "structlog", "click", "ujson"]
    assert bench.split_parts(PROJECTS, names, bench.PARTS) == (["attrs", "click"], ["structlog", "ujson"])
    assert bench.split_parts(PROJECTS, names, ["tuned"]) == (["attrs", "click"], [])
    assert bench.split_parts(PROJECTS, names, ["heldout"]) == ([], ["structlog", "ujson"])
    assert bench.split_parts(PROJECTS, ["click"], ["heldout"]) == ([], [])


def query(name: str, text: str) -> Any:
    return bench.Query(project=name, kind="how", text=text, files=["a.py"])


def test_a_question_filed_in_the_wrong_part_is_named() -> None:
    tuned = [query("click", "fine"), query("ujson", "held-out project in the tuned set")]
    held = [query("structlog", "fine too"), query("attrs", "tuned project in the held-out set")]
    held.append(query("nowhere", "unknown project"))
    assert bench.misplaced(PROJECTS, tuned, held) == [
        "queries.toml asks 'held-out project in the tuned set' of ujson, which is held out",
        "heldout.toml asks 'tuned project in the held-out set' of attrs, which is not held out",
        "nowhere (asked 'unknown project') is not in corpus.toml",
    ]
    assert bench.misplaced(PROJECTS, tuned[:1], held[:1]) == []


def test_the_real_sets_are_each_in_their_own_part() -> None:
    held = bench.load_queries(bench.HELDOUT_QUERIES)
    assert bench.misplaced(corpus.projects(), bench.load_queries(), held) == []


def quality_of(queries: list[Any], answers: list[tuple[str, ...]]) -> dict[str, Any]:
    rows = [bench.Answer(files, 1.0) for files in answers]
    return {
        "queries": len(queries),
        "projects": {q.project: {} for q in queries},
        "bm25": bench.scored(queries, rows),
        "ripgrep": {**bench.scored(queries, rows), "tool": "rg 14.1.0"},
        "engine reranked": {"n/a": "engine not installed"},
    }


def test_the_held_out_figures_are_printed_below_the_tuned_ones_apart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tuned = [query("click", "one"), query("click", "two")]
    held = [query("ujson", "three"), query("structlog", "four")]
    report = {
        "quality": quality_of(tuned, [("a.py",), ("a.py",)]),
        "contributions": {},
        "heldout": {"quality": quality_of(held, [("b.py", "a.py"), ("b.py",)]), "contributions": {}},
    }
    bench.print_report(report)
    out = capsys.readouterr().out
    top, _, below = out.partition("held-out projects")
    assert below, out
    assert "2 queries over click" in top
    assert f"\n{'bm25':<22} {1.0:>8.3f}" in top
    assert "2 queries over ujson, structlog" in below
    assert "click" not in below
    # the labelled file second for one query, missing for the other: (1/log2(3) + 0) / 2
    assert f"\n{'bm25':<22} {0.316:>8.3f}" in below


def test_asking_the_held_out_part_of_a_tuned_project_alone_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--part", "heldout", "--project", "click", "--no-engine"])
    assert "no project of the part(s) heldout among click" in capsys.readouterr().err

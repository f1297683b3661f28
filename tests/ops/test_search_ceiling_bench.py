"""The ceilings of the search benchmark (ops/bench/search/ceiling.py): what the search
could reach at best, from the words' first 20, from any ranking by words, and from the
first five of the words or of a meaning ranking."""

from __future__ import annotations

from typing import Any

import pytest
from ops_scripts import OPS, load_script

bench: Any = load_script(OPS / "bench" / "search" / "ceiling.py", "search_ceiling_bench")


def query(text: str, *needs: set[str]) -> Any:
    return bench.Query(text, tuple(frozenset(need) for need in needs), "task", "readme", text)


def test_the_words_figures_are_the_search_s_and_bound_each_other() -> None:
    _catalog, index, asked = bench.run.fixture_catalog()
    _seed, heldout, tuning = bench.labels.read_split()
    steps = [q for q in asked if q.kind == "step" and bench.labels.part(q, heldout, tuning) == "tuning"]
    figures = bench.ceilings(index, steps)
    words = bench.run.recall(lambda q: [h.doc.name for h in index.find(q, limit=10).hits], steps)
    assert figures["words R@5"] == pytest.approx(words["recall@5"], abs=0.001)
    assert figures["words R@10"] == pytest.approx(words["recall@10"], abs=0.001)
    # a tool ranked by words shares a word with the query: the first 20 reach no further
    assert (
        figures["words R@5"] <= figures["words R@10"] <= figures["words R@20"] <= figures["a word shared"] < 1
    )
    assert figures["queries"] == len(steps)
    assert "meaning R@5" not in figures


def test_a_need_no_word_reaches_is_found_only_by_the_meaning() -> None:
    _catalog, index, _asked = bench.run.fixture_catalog()
    # the right tool of the first need says "orientation"; the query never does
    asked = [query("rotate the phone sideways", {"mobile_mobile_set_orientation"}, {"time_get_current_time"})]
    assert bench.shares_a_word(index, asked[0]) == [False, False]
    words_only = bench.ceilings(index, asked)
    assert words_only["a word shared"] == 0.0
    assert words_only["words R@20"] == 0.0

    def meaning(_text: str) -> list[str]:
        return ["something_else", "mobile_mobile_set_orientation"]

    figures = bench.ceilings(index, asked, meaning)
    assert figures["meaning R@5"] == 0.5  # one need of two
    assert figures["either R@5"] == 0.5
    assert figures["either R@20"] == 0.5


def test_either_list_counts_a_need_found_by_one_of_them_once() -> None:
    _catalog, index, _asked = bench.run.fixture_catalog()
    asked = [query("get the current time", {"time_get_current_time"})]
    assert bench.ceilings(index, asked)["words R@5"] == 1.0
    figures = bench.ceilings(index, asked, lambda _text: ["time_get_current_time"])
    assert figures["either R@5"] == figures["meaning R@5"] == figures["words R@5"] == 1.0


def test_both_kinds_are_printed(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["tuning steps", "tuning whole tasks, by needs"]

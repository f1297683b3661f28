"""The ranking candidates of ops/bench/search/candidates.py are what they say: at no
weight a re-ranking candidate ranks as the search does, and a capped index counts a
term at most once in the fields it caps."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "ops" / "bench" / "search"
sys.path.insert(0, str(BENCH))
# The benchmark's folder is no package (and not type-checked): its modules by name.
candidates: Any = importlib.import_module("candidates")
run: Any = importlib.import_module("run")
assert Path(run.__file__).parent == BENCH, "another module named run came first"


def test_a_re_ranking_at_no_weight_ranks_as_the_search_does() -> None:
    _catalog, index, asked = run.fixture_catalog()
    texts = [query.text for query in asked[::4]]
    as_it_is = [[hit.doc.name for hit in index.find(text, limit=10).hits] for text in texts]
    for rank in (
        candidates.proximity(index, "tp", 0.0),
        candidates.proximity(index, "span", 0.0),
        candidates.verb_object(index, 0.0, 0.0, "groups"),
        candidates.query_in_name(index, 0.0),
        candidates.ranker(candidates.capped(index, ()), {}),
        candidates.server_named(index, 0.0, "first", 10),
        candidates.server_scored(index, 0.0),
    ):
        assert [rank(text) for text in texts] == as_it_is


def test_a_capped_index_counts_a_term_once_in_the_capped_fields_only() -> None:
    _catalog, index, _asked = run.fixture_catalog()
    capped = candidates.capped(index, (1,))
    repeated = 0
    for server, segment in index.segments.items():
        for term, entries in segment.postings.items():
            for (doc, counts), (same, kept) in zip(
                entries, capped.segments[server].postings[term], strict=True
            ):
                assert same is doc
                assert kept[1] == min(counts[1], 1)
                assert kept[:1] + kept[2:] == counts[:1] + counts[2:]
                repeated += counts[1] > 1
    assert repeated  # the catalog has descriptions that repeat a word


def test_held_out_figures_compare_each_candidate_with_the_search_query_by_query(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert candidates.main(["--heldout", "--only", "as it is", "--only", "before: no name bonus"]) == 0
    lines = capsys.readouterr().out.splitlines()
    same = next(line for line in lines if line.startswith("as it is "))
    assert same.endswith("vs as it is: +0 -0 p=1.0")
    before = next(line for line in lines if line.startswith("before: no name bonus"))
    counts = before.split("vs as it is: ", 1)[1]
    gained, lost = (int(part[1:]) for part in counts.split()[:2])
    steps = [float(line.split("heldout steps ", 1)[1].split()[0]) for line in (same, before)]
    _catalog, _index, asked = run.fixture_catalog()
    _seed, heldout, tuning = candidates.labels.read_split()
    held = sum(
        1 for q in asked if q.kind == "step" and candidates.labels.part(q, heldout, tuning) == "heldout"
    )
    assert gained + lost > 0
    assert abs((steps[1] - steps[0]) - (gained - lost) / held) < 0.002


def test_a_query_names_a_server_by_the_first_word_of_its_name_or_all_of_them() -> None:
    _catalog, index, _asked = run.fixture_catalog()
    assert candidates.named_servers(index, "my Todoist tasks due this week", "first") == {"todoist"}
    assert candidates.named_servers(index, "add it to Google", "first") == {"google_calendar", "google_maps"}
    assert candidates.named_servers(index, "add it to Google", "all") == set()
    assert candidates.named_servers(index, "open it in Google Maps", "all") == {"google_maps"}
    # at a weight, a named server's tools come first, its own best added to the pool
    first = candidates.server_named(index, 100.0, "first", 10)("my Todoist tasks due this week")
    assert first[0].startswith("todoist_")


def test_the_server_score_lifts_the_tools_of_the_server_whose_text_answers_the_query() -> None:
    _catalog, index, _asked = run.fixture_catalog()
    query = "the version of the Redis server"
    words = [hit.doc.name for hit in index.find(query, limit=10).hits]
    assert [name.split("_")[0] for name in words[1:5]] != ["redis"] * 4  # other servers' versions
    lifted = candidates.server_scored(index, 1.0)(query)
    assert [name.split("_")[0] for name in lifted[:5]] == ["redis"] * 5  # Redis's text answers it best


def test_a_task_of_several_clauses_brings_each_clause_s_best() -> None:
    _catalog, index, _asked = run.fixture_catalog()
    split = candidates.split_task(index, 0.3)
    one = "get the current time in Tokyo"
    assert split(one) == [hit.doc.name for hit in index.find(one, limit=10).hits]  # one clause
    task = "get the current time in Tokyo, then post it to the team's Slack channel"
    clause = [hit.doc.name for hit in index.find("post it to the team's Slack channel", limit=10).hits]
    assert clause[0] in split(task)
    assert [p.strip() for p in candidates.CLAUSE.split(task) if p and p.strip()] == [
        "get the current time in Tokyo",
        "post it to the team's Slack channel",
    ]


def test_word_vectors_bring_in_a_word_the_query_does_not_say() -> None:
    pytest.importorskip("wordllama")
    _catalog, index, _asked = run.fixture_catalog()
    query = "how far is the station"
    assert candidates.vector_expanded(index, 3, 0.5, 0.0)(query) == [
        hit.doc.name for hit in index.find(query, limit=10).hits
    ]
    words = [hit.doc.name for hit in index.find(query, limit=10).hits]
    expanded = candidates.vector_expanded(index, 3, 0.5, 0.4)(query)
    # "far" is near "distance" in WordLlama's vectors: the distance tools come in
    assert "mapbox_distance_tool" not in words
    assert "mapbox_distance_tool" in expanded
    assert expanded[: len(words)] == words  # at a low weight, after what the words found

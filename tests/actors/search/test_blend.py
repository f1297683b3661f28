"""The meaning weighed into the words' ranking, with a stand-in model whose vectors are
chosen by the test: what the meaning's weight does, whatever a real model would say."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types as types
import pytest

from assern.actors.router.catalog import BackendListing, build_catalog, search_sources
from assern.actors.search import semantic as sem
from assern.actors.search.index import SearchIndex

np = pytest.importorskip("numpy")

if TYPE_CHECKING:
    from assern.actors.router.catalog import Catalog


def tool(name: str, description: str) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema={"type": "object"})


LISTINGS = [
    BackendListing(
        server="github",
        tools=(tool("create_issue", "Create a new issue."), tool("list_issues", "List the issues.")),
    ),
    BackendListing(server="weather", tools=(tool("get_forecast", "The forecast for a city."),)),
]
#: one axis of meaning per tool: the query's vector says which tool it means
AXES = {"github_create_issue": 0, "github_list_issues": 1, "weather_get_forecast": 2}


class ChosenMeaning(sem.Embedder):
    """Embeds every query as the vector it is given (tools are embedded by the test)."""

    def __init__(self, query: Sequence[float]) -> None:
        self.query = query

    def embed(self, texts: Sequence[str]) -> Any:
        return np.asarray([self.query] * len(texts), dtype=np.float32)


def catalog() -> Catalog:
    built = build_catalog(LISTINGS, exposure="search")
    return attrs.evolve(built, search=SearchIndex().updated(search_sources(LISTINGS, built)))


def answer(means: str, query: str) -> list[tuple[str, float, float]]:
    """The blended answer to `query` (name, score, coverage) when its meaning is exactly
    that of the tool `means` (a similarity of 1 to it, 0 to the others)."""
    found = catalog()
    assert found.search is not None
    routes = list(found.tools.items())
    keys = [sem.tool_key(route.server, route.original, route.tool) for _, route in routes]
    matrix = np.eye(len(AXES), dtype=np.float32)[[AXES[name] for name, _ in routes]]
    wanted = np.eye(len(AXES), dtype=np.float32)[AXES[means]]
    semantic = sem.Semantic(ChosenMeaning(wanted), sem.Vectors.empty(len(AXES)).extended(keys, matrix))
    hits = sem.blended_find(found.search, semantic, query).hits
    return [(hit.doc.name, hit.score, hit.coverage) for hit in hits]


def words(query: str) -> dict[str, float]:
    found = catalog()
    assert found.search is not None
    return {hit.doc.name: hit.score for hit in found.search.find(query).hits}


def test_the_words_alone_rank_the_named_tool_first() -> None:
    assert list(words("create issue")) == ["github_create_issue", "github_list_issues"]
    assert list(words("create issue list")) == ["github_list_issues", "github_create_issue"]


def test_the_meaning_multiplies_the_words_score_and_reorders_near_scores() -> None:
    by_words = words("create issue list")  # the two score within a few percent
    blended = answer("github_create_issue", "create issue list")
    assert [name for name, _, _ in blended] == ["github_create_issue", "github_list_issues"]
    lifted = 1 + sem.MEANING_WEIGHT
    assert blended[0][1] == pytest.approx(by_words["github_create_issue"] * lifted)
    assert blended[1][1] == pytest.approx(by_words["github_list_issues"])


def test_a_tool_the_words_rank_far_below_stays_below() -> None:
    # list_issues scores under a third of create_issue by words: x1.5 does not lift it
    by_words = words("create issue")
    assert by_words["github_list_issues"] * (1 + sem.MEANING_WEIGHT) < by_words["github_create_issue"]
    blended = answer("github_list_issues", "create issue")
    assert [name for name, _, _ in blended] == ["github_create_issue", "github_list_issues"]


def test_a_tool_found_by_meaning_alone_follows_those_the_words_found() -> None:
    blended = answer("weather_get_forecast", "create issue")
    assert [name for name, _, _ in blended] == [
        "github_create_issue",
        "github_list_issues",
        "weather_get_forecast",
    ]
    last_by_words, by_meaning = blended[1], blended[2]
    assert by_meaning[1] < last_by_words[1]
    assert by_meaning[2] == 0.0  # it matches no word of the query


def test_the_meaning_alone_answers_a_query_no_word_of_which_the_catalog_knows() -> None:
    blended = answer("weather_get_forecast", "will it rain in Paris")
    assert [name for name, _, _ in blended] == ["weather_get_forecast"]


def test_a_tool_named_exactly_stays_first_whatever_its_meaning() -> None:
    blended = answer("github_create_issue", "github_list_issues")
    assert blended[0][0] == "github_list_issues"

"""The fusion of the word and meaning rankings, with a stand-in model whose vectors are
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


def ranked(means: str, query: str = "create issue") -> list[str]:
    """The fused answer to `query` when its meaning is exactly that of the tool `means`."""
    found = catalog()
    assert found.search is not None
    routes = list(found.tools.items())
    keys = [sem.tool_key(route.server, route.original, route.tool) for _, route in routes]
    matrix = np.eye(len(AXES), dtype=np.float32)[[AXES[name] for name, _ in routes]]
    wanted = np.eye(len(AXES), dtype=np.float32)[AXES[means]]
    semantic = sem.Semantic(ChosenMeaning(wanted), sem.Vectors.empty(len(AXES)).extended(keys, matrix))
    return [hit.doc.name for hit in sem.fused_find(found.search, semantic, query).hits]


def test_the_words_alone_rank_the_named_tool_first() -> None:
    found = catalog()
    assert found.search is not None
    words = [hit.doc.name for hit in found.search.find("create issue").hits]
    assert words == ["github_create_issue", "github_list_issues"]


def test_the_meaning_lifts_the_second_by_words_above_the_first() -> None:
    # second by words, first (and alone) by meaning: 1/62 + w/61 against 1/61, so any
    # weight of the meaning over 0.02 puts it first
    assert ranked("github_list_issues") == ["github_list_issues", "github_create_issue"]


def test_a_tool_found_by_meaning_alone_comes_after_those_the_words_rank() -> None:
    # first by meaning, not ranked by words: w/61 against the second by words' 1/62, so
    # the words' ranking stays ahead of it while the meaning weighs under 0.98
    assert ranked("weather_get_forecast") == [
        "github_create_issue",
        "github_list_issues",
        "weather_get_forecast",
    ]


def test_the_meaning_alone_answers_a_query_no_word_of_which_the_catalog_knows() -> None:
    assert ranked("weather_get_forecast", query="will it rain in Paris")[0] == "weather_get_forecast"

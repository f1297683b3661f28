"""`assernctl search --explain`: why each tool of an answer ranks where it does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import mcp_types as types
import pytest

from assern.actors.listener import exposure
from assern.actors.router.catalog import BackendListing, Catalog, build_catalog, search_sources
from assern.actors.search import semantic as sem
from assern.actors.search.explain import explain_search, explanation_lines
from assern.actors.search.index import SearchIndex
from assern.actors.search.learned import Learned


def tool(name: str, description: str, **params: str) -> types.Tool:
    properties = {key: {"type": "string", "description": text} for key, text in params.items()}
    return types.Tool(
        name=name, description=description, input_schema={"type": "object", "properties": properties}
    )


LISTINGS = [
    BackendListing(
        server="github",
        tools=(
            tool("create_issue", "Create a new issue in a GitHub repository.", repo="Repository name"),
            tool("list_issues", "List issues in a GitHub repository.", state="open or closed"),
        ),
    ),
    BackendListing(
        server="slack",
        tools=(
            tool("post_message", "Post a new message to a channel.", channel_id="The channel"),
            tool("list_channels", "List public channels in the workspace."),
        ),
    ),
]


def catalog() -> Catalog:
    built = build_catalog(LISTINGS, exposure="search")
    return attrs.evolve(built, search=SearchIndex().updated(search_sources(LISTINGS, built)))


def index() -> SearchIndex:
    found = catalog().search
    assert found is not None
    return found


class ChosenMeaning(sem.Embedder):
    """Embeds every query as the vector it is given."""

    def __init__(self, query: Sequence[float]) -> None:
        self.query = query

    def embed(self, texts: Sequence[str]) -> Any:
        np = pytest.importorskip("numpy")
        return np.asarray([self.query] * len(texts), dtype=np.float32)


def test_the_words_a_tool_matches_add_up_to_its_score() -> None:
    idx = index()
    query = "open a new issue in my repository"
    for hit in idx.find(query).hits:
        explained = idx.explain(query, hit.doc)
        # the words' score, times the bonus of the tool's name the query asks for
        named = 1 + explained["name"]["bonus"]
        assert explained["words_score"] * named == pytest.approx(hit.score, abs=0.01)
        assert explained["coverage"] == pytest.approx(hit.coverage, abs=0.001)
        assert not explained["exact_name"]
    best = idx.explain(query, idx.find(query).hits[0].doc)
    first = best["terms"][0]
    assert first == {
        "term": "issu",
        "synonym_of": None,
        "idf": pytest.approx(idx.idf("issu"), abs=0.001),
        "fields": {"name": 1, "description": 1},
        "adds": pytest.approx(first["adds"]),
    }
    # "new" also finds "create" (a synonym), at the synonym weight
    through = next(term for term in best["terms"] if term["term"] == "creat")
    assert through["synonym_of"] == "new"
    adds = [term["adds"] for term in best["terms"]]
    assert adds == sorted(adds, reverse=True)


def test_the_bonus_of_a_name_the_query_asks_for_is_explained() -> None:
    idx = index()
    query = "post a message"
    hit = idx.find(query).hits[0]
    explained = idx.explain(query, hit.doc)
    assert explained["name"] == {"terms": ["post", "messag"], "share": 1.0, "bonus": 0.25}
    assert "  name: 100% of its words ['post', 'messag'] asked for, score x1.25" in explanation_lines(
        hit.doc.name, explained
    )
    # a tool none of whose name the query asks for gets no line
    other = next(doc for doc in idx.docs() if doc.tool == "list_channels")
    assert not any(
        line.startswith("  name:") for line in explanation_lines(other.name, idx.explain(query, other))
    )


def test_a_tool_named_exactly_says_so() -> None:
    idx = index()
    doc = idx.exact("slack_list_channels", None)[0]
    explained = idx.explain("slack_list_channels", doc)
    assert explained["exact_name"]
    assert explanation_lines("slack_list_channels", explained)[1] == "  named exactly by the query: first"


def test_the_explanation_of_an_answer_in_tool_order_and_as_text() -> None:
    found = catalog()
    arguments = {"query": "post a message to the channel"}
    explained = explain_search(found, {}, arguments, ["slack_post_message", "nothing_of_that_name"])
    assert list(explained) == ["slack_post_message"]
    lines = explanation_lines("slack_post_message", explained["slack_post_message"])
    assert lines[0].startswith("slack_post_message: words ")
    assert any(line.startswith("  'messag': idf ") and "name x1" in line for line in lines)
    assert explain_search(found, {}, {"query": 3}, ["slack_post_message"]) == {}  # bad arguments


def test_the_server_and_the_learned_boost_are_explained() -> None:
    found = catalog()
    arguments = {"query": "post a message to the channel"}
    learned = Learned({("slack", "post_message"): 3})
    entry = explain_search(found, {}, arguments, ["slack_post_message"], learned=learned)[
        "slack_post_message"
    ]
    assert entry["server"] == {"name": "slack", "score": "not used"}
    assert entry["learned"] == {"calls": 3, "boost": 0.15}
    lines = explanation_lines("slack_post_message", entry)
    assert "  learned: called 3 times after a search, adds 15% of the best score" in lines
    assert "  server 'slack': server score not used (its name is a field above)" in lines
    assert "  meaning: not ranked (ranking by words only)" in lines
    off = explain_search(found, {}, arguments, ["slack_post_message"])["slack_post_message"]
    assert off["learned"] is None
    assert '  learned: off ([settings.search] learn = "off")' in explanation_lines("slack_post_message", off)


def test_with_the_meaning_the_ranks_the_similarity_and_the_factor() -> None:
    np = pytest.importorskip("numpy")
    axes = {name: axis for axis, name in enumerate(sorted(catalog().tools))}
    found = catalog()
    routes = list(found.tools.items())
    keys = [sem.tool_key(route.server, route.original, route.tool) for _, route in routes]
    matrix = np.eye(len(axes), dtype=np.float32)[[axes[name] for name, _ in routes]]
    wanted = np.eye(len(axes), dtype=np.float32)[axes["slack_list_channels"]]
    semantic = sem.Semantic(ChosenMeaning(wanted), sem.Vectors.empty(len(axes)).extended(keys, matrix))
    arguments = {"query": "create issue"}
    answer = exposure.search(found, arguments, [], semantic=semantic).structured_content
    assert answer is not None
    names = [tool["name"] for tool in answer["tools"]]
    # the words find github's two; the meaning alone, slack's list_channels, after them
    assert names == ["github_create_issue", "github_list_issues", "slack_list_channels"]
    explained = explain_search(found, {}, arguments, names, semantic)
    assert explained["github_create_issue"]["meaning"] == {
        "words_rank": 1,
        "meaning_rank": None,
        "similarity": 0.0,
        "factor": 1.0,
    }
    assert explained["slack_list_channels"]["meaning"] == {
        "words_rank": None,
        "meaning_rank": 1,
        "similarity": 1.0,
        "factor": None,
    }
    for tool in answer["tools"][:2]:  # by words: words x name bonus x the meaning's factor
        entry = explained[tool["name"]]
        factor = (1 + entry["name"]["bonus"]) * entry["meaning"]["factor"]
        assert entry["words_score"] * factor == pytest.approx(tool["score"], abs=0.01)
    lines = explanation_lines("github_create_issue", explained["github_create_issue"])
    assert "  meaning: similarity 0.0, score x1.00 (rank by words 1, by meaning None)" in lines
    alone = explanation_lines("slack_list_channels", explained["slack_list_channels"])
    assert (
        "  meaning: similarity 1.0, found by meaning alone: after the tools the words found"
        " (rank by words None, by meaning 1)"
    ) in alone
    # a tool without a vector yet says so
    partial = sem.Semantic(ChosenMeaning(wanted), sem.Vectors.empty(len(axes)).extended(keys[:1], matrix[:1]))
    missing = next(name for name, _ in routes[1:] if name in names[:2])
    entry = explain_search(found, {}, arguments, [missing], partial)[missing]
    assert entry["meaning"]["similarity"] is None
    assert any("no vector yet" in line for line in explanation_lines(missing, entry))


def test_a_search_after_a_call_says_which_tools_are_lifted_and_why_not() -> None:
    found = catalog()
    arguments = {"query": "list the channels and issues"}
    names = ["slack_list_channels", "github_list_issues", "github_create_issue"]
    explained = explain_search(found, {}, arguments, names, after="github")
    assert explained["github_list_issues"]["session"] == {"after": "github", "lifted": True, "factor": 2.0}
    assert explained["slack_list_channels"]["session"] == {
        "after": "github",
        "lifted": False,
        "factor": 1.0,
        "why": "another server",
    }
    assert explained["github_create_issue"]["session"]["lifted"] is True  # it shares "issues"
    # the score the search answers after a call of github: words x name bonus x lift
    answer = exposure.search(found, arguments, [], recent="github").structured_content
    assert answer is not None
    for tool in answer["tools"]:
        entry = explain_search(found, {}, arguments, [tool["name"]], after="github")[tool["name"]]
        factor = (1 + entry["name"]["bonus"]) * entry["session"]["factor"]
        assert entry["words_score"] * factor == pytest.approx(tool["score"], abs=0.01)
    lines = explanation_lines("github_list_issues", explained["github_list_issues"])
    assert "  called last: 'github', its tool: score x2.00" in lines
    other = explanation_lines("slack_list_channels", explained["slack_list_channels"])
    assert "  called last: 'github', not lifted (another server)" in other
    unmatched = explain_search(found, {}, {"query": "channels"}, ["github_create_issue"], after="github")
    assert unmatched["github_create_issue"]["session"]["why"] == "it shares no word with the query"
    one_server = explain_search(
        found, {}, {"query": "issues", "server": "github"}, ["github_list_issues"], after="github"
    )
    assert one_server["github_list_issues"]["session"]["why"] == "the search is of one server"
    # without a server called last, no word of it
    plain = explain_search(found, {}, arguments, names)["github_list_issues"]
    assert "session" not in plain
    assert not any(
        line.startswith("  called last") for line in explanation_lines("github_list_issues", plain)
    )

"""The server a connection called last lifts its tools in its next search
(actors/search/session.py), and exposure.search applies it only where it should."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mcp_types as types
import pytest

from assern.actors.listener import exposure
from assern.actors.router.catalog import BackendListing, build_catalog, search_sources
from assern.actors.search import session
from assern.actors.search.index import SearchIndex, SegmentInput


def tool(name: str, text: str) -> types.Tool:
    return types.Tool(name=name, description=text, input_schema={"type": "object"})


def index_of(servers: dict[str, list[tuple[str, str]]]) -> SearchIndex:
    return SearchIndex().updated(
        [
            SegmentInput(server=server, tools=tuple((f"{server}_{n}", n, tool(n, t)) for n, t in tools))
            for server, tools in servers.items()
        ]
    )


MERGE = {
    "github": [("merge_pull_request", "Merge a pull request"), ("create_issue", "Create an issue")],
    # named for less of the query: by words below github's tool
    "bitbucket": [("merge_pr", "Merge a pull request"), ("add_comment", "Comment on a pull request")],
}


def names(found: object) -> list[str]:
    return [hit.doc.name for hit in found.hits]  # type: ignore[attr-defined]


def test_of_two_tools_that_match_alike_the_one_of_the_server_called_last_comes_first() -> None:
    index = index_of(MERGE)
    found = index.find("merge the pull request", limit=20)
    assert names(found)[:2] == ["github_merge_pull_request", "bitbucket_merge_pr"]
    assert found.hits[0].score > found.hits[1].score
    moved = session.lifted(found, "bitbucket", limit=2)
    assert names(moved) == ["bitbucket_merge_pr", "github_merge_pull_request"]
    lifted = {hit.doc.name: hit.score for hit in moved.hits}
    by_words = {hit.doc.name: hit.score for hit in found.hits}
    assert lifted["bitbucket_merge_pr"] == by_words["bitbucket_merge_pr"] * (1 + session.SESSION_BONUS)
    assert lifted["github_merge_pull_request"] == by_words["github_merge_pull_request"]
    assert moved.good  # judged by the best coverage, not by the first hit's


def test_a_much_better_match_of_another_server_stays_first() -> None:
    index = index_of(
        {
            "github": [("merge_pull_request", "Merge a pull request into its base branch")],
            "slack": [("post_message", "Post a message to a channel about a merge")],
        }
    )
    query = "merge the pull request after a message"
    found = index.find(query, limit=20)
    assert names(found) == ["github_merge_pull_request", "slack_post_message"]
    assert found.hits[0].score > 2 * found.hits[1].score  # more than twice as good
    moved = session.lifted(found, "slack", limit=5)
    assert names(moved) == ["github_merge_pull_request", "slack_post_message"]
    assert moved.hits[1].score == 2 * found.hits[1].score


def test_a_tool_of_that_server_beyond_the_candidates_is_not_brought_in() -> None:
    index = index_of(MERGE)
    found = index.find("merge the pull request", limit=1)  # the best of all: github's only
    assert names(found) == ["github_merge_pull_request"]
    assert names(session.lifted(found, "bitbucket", limit=1)) == ["github_merge_pull_request"]


def test_a_tool_named_exactly_stays_first_and_a_server_with_no_match_changes_nothing() -> None:
    index = index_of(MERGE)
    query = "github_merge_pull_request"
    found = index.find(query, limit=20)
    moved = session.lifted(found, "bitbucket", limit=3, exact=index.exact(query, None))
    assert names(moved)[0] == "github_merge_pull_request"
    found = index.find("create an issue", limit=20)
    same = session.lifted(found, "nowhere", limit=1)
    assert names(same) == names(found)[:1]
    assert same.hits[0].score == found.hits[0].score


def listing(server: str, tools: list[tuple[str, str]]) -> BackendListing:
    return BackendListing(server=server, tools=tuple(tool(n, t) for n, t in tools))


def searched(recent: str | None, **arguments: object) -> list[str]:
    listings = [listing(s, t) for s, t in MERGE.items()]
    catalog = build_catalog(listings, exposure="search")
    index = SearchIndex().updated(search_sources(listings, catalog))
    arguments = {"query": "merge the pull request", **arguments}
    result = exposure.search(catalog, arguments, [], index, recent=recent)
    assert result.structured_content is not None, result
    return [found["name"] for found in result.structured_content["tools"]]


def test_search_tools_lifts_the_server_called_last_unless_the_search_names_a_server() -> None:
    assert searched(None)[0] == "github_merge_pull_request"
    assert searched("bitbucket")[0] == "bitbucket_merge_pr"
    assert searched("bitbucket", limit=1) == ["bitbucket_merge_pr"]
    assert searched("bitbucket", server="github") == ["github_merge_pull_request"]
    assert searched("gone")[0] == "github_merge_pull_request"  # a server no longer listed


def test_by_meaning_a_server_s_tools_the_answer_lacks_are_not_brought_in() -> None:
    np = pytest.importorskip("numpy")
    from assern.actors.search import semantic as sem

    listings = [listing(s, t) for s, t in MERGE.items()]
    listings.append(listing("time", [("get_current_time", "The current time in a time zone")]))
    catalog = build_catalog(listings, exposure="search")
    index = SearchIndex().updated(search_sources(listings, catalog))
    routes = list(catalog.tools.values())
    keys = [sem.tool_key(route.server, route.original, route.tool) for route in routes]
    matrix = np.eye(len(keys), dtype=np.float32)
    # by meaning the query is time's tool alone (a cosine of 1 to it, 0 to the others)
    query = matrix[[route.server for route in routes].index("time")]

    class Flat(sem.Embedder):
        def embed(self, texts: Sequence[str]) -> Any:
            return np.asarray([query] * len(texts), dtype=np.float32)

    semantic = sem.Semantic(Flat(), sem.Vectors.empty(len(keys)).extended(keys, matrix))

    def best(recent: str | None) -> list[str]:
        arguments = {"query": "merge the pull request", "limit": 2}
        result = exposure.search(catalog, arguments, [], index, semantic, recent=recent)
        assert result.structured_content is not None, result
        return [str(found["name"]) for found in result.structured_content["tools"]]

    assert best(None) == ["github_merge_pull_request", "bitbucket_merge_pr"]
    # no tool here is near the query in meaning: the lift acts as on the words alone
    assert (
        best("bitbucket")
        == searched("bitbucket", limit=2)
        == ["bitbucket_merge_pr", "github_merge_pull_request"]
    )
    # time's tool matches no word of the query, only its meaning (it would follow the
    # tools the words found): the last call of time does not lift it among the first
    assert best("time") == ["github_merge_pull_request", "bitbucket_merge_pr"]

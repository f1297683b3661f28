"""The meta-tools' arguments and answers, and search exposure in the catalog."""

from __future__ import annotations

import mcp_types as types
import pytest

from assern.actors.router.catalog import BackendListing, build_catalog, search_sources
from assern.actors.search import meta_tools
from assern.actors.search.index import SearchIndex
from assern.actors.search.meta_tools import BadArguments, SearchRequest


def tool(name: str, description: str = "") -> types.Tool:
    return types.Tool(name=name, description=description, input_schema={"type": "object"})


LISTINGS = [
    BackendListing(
        server="github", tools=(tool("create_issue", "Create an issue."), tool("call_tool", "Theirs."))
    ),
    BackendListing(server="time", tools=(tool("get_current_time", "The current time."),)),
]


def test_search_exposure_lists_the_meta_tools_and_the_pinned_ones() -> None:
    catalog = build_catalog(LISTINGS, mode="hybrid", exposure="search", pinned=["get_*"])
    assert [t.name for t in catalog.listed] == [
        "search_tools",
        "describe_tools",
        "call_tool",
        "get_current_time",
    ]
    # A backend's tool named like a meta-tool keeps its server's prefix; every tool is callable.
    assert set(catalog.tools) == {"create_issue", "github_call_tool", "get_current_time"}
    assert b'"search_tools"' in catalog.tools_json
    everything = build_catalog(LISTINGS, mode="hybrid")
    assert [t.name for t in everything.listed] == ["create_issue", "call_tool", "get_current_time"]


def test_the_index_takes_the_exposed_names_and_the_backends_own_tools() -> None:
    catalog = build_catalog(LISTINGS, mode="hybrid", exposure="search")
    sources = search_sources(LISTINGS, catalog)
    assert [(s.server, [name for name, _, _ in s.tools]) for s in sources] == [
        ("github", ["create_issue", "github_call_tool"]),
        ("time", ["get_current_time"]),
    ]
    assert sources[0].tools[0][2] is LISTINGS[0].tools[0]  # the listing's own object
    index = SearchIndex().updated(sources)
    assert index.find("what is the time now").hits[0].doc.name == "get_current_time"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (None, "needs `query`"),
        ({"query": 3}, "needs `query`"),
        ({"query": "x", "limit": True}, "`limit` must be an integer"),
        ({"query": "x", "limit": 51}, "from 1 to 50, got 51"),
        ({"query": "x", "server": 1}, "`server` must be"),
        ({"query": "x", "server": "jira"}, "There is no server 'jira'. Servers: github, time."),
        ({"query": "x", "q": "y"}, "search_tools takes `query`, `limit`, `server`; not `q`."),
    ],
)
def test_search_arguments_are_checked(arguments: dict[str, object] | None, message: str) -> None:
    with pytest.raises(BadArguments, match=message.replace("(", r"\(").replace(")", r"\)")):
        meta_tools.search_request(arguments, ["github", "time"])


def test_good_search_arguments() -> None:
    assert meta_tools.search_request({"query": " issues "}, []) == SearchRequest("issues", 8, None)
    assert meta_tools.search_request({"query": "x", "limit": 50, "server": "a"}, ["a"]) == SearchRequest(
        "x", 50, "a"
    )
    assert meta_tools.describe_request({"names": ["a", "b", "a"]}) == ["a", "b"]
    assert meta_tools.describe_request({"names": "a"}) == ["a"]
    with pytest.raises(BadArguments, match="at most 50"):
        meta_tools.describe_request({"names": [str(i) for i in range(51)]})
    call = meta_tools.call_request({"name": "a", "arguments": {"x": 1}})
    assert (call.name, call.arguments) == ("a", {"x": 1})


def test_a_search_answer_in_structure_and_text() -> None:
    catalog = build_catalog(LISTINGS, mode="hybrid", exposure="search")
    index = SearchIndex().updated(search_sources(LISTINGS, catalog))
    request = SearchRequest("create an issue")
    found = index.find(request.query)
    result = meta_tools.search_result(
        request,
        found,
        {"create_issue": "Create an issue.\nMore lines."},
        servers=["github", "time"],
        not_ready=["x (starting)"],
    )
    assert result.structured_content is not None
    assert result.structured_content["tools"][0] == {
        "name": "create_issue",
        "server": "github",
        "tool": "create_issue",
        "description": "Create an issue.",
        "score": round(found.hits[0].score, 3),
    }
    assert result.structured_content["total"] == 3
    assert result.structured_content["not_ready"] == ["x (starting)"]
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.splitlines()[:2] == [
        '1 tool for "create an issue" (of 3 searched):',
        "- create_issue (github): Create an issue.",
    ]


def test_describe_names_the_unknown_and_fails_only_when_nothing_is_known() -> None:
    some = meta_tools.describe_result([tool("a")], {"b": ("a",)})
    assert not some.is_error
    assert "Unknown tool 'b'. Did you mean: a?" in some.content[-1].text  # type: ignore[union-attr]
    none = meta_tools.describe_result([], {"b": ()})
    assert none.is_error


def test_a_tool_whose_name_clients_reject_is_found_under_a_name_they_accept() -> None:
    listings = [
        BackendListing(
            server="db",
            tools=(
                tool("sql.query", "Run a SQL query."),
                tool("tables/list all", "List the tables."),
                tool("get-schema", "The schema of a table."),
            ),
        )
    ]
    catalog = build_catalog(listings, exposure="search")
    index = SearchIndex().updated(search_sources(listings, catalog))
    # dots, slashes and spaces become `_`; letters, digits, `_` and `-` are kept
    assert set(catalog.tools) == {"db_sql_query", "db_tables_list_all", "db_get-schema"}
    assert index.find("run a sql query").hits[0].doc.name == "db_sql_query"
    assert index.find("list the tables").hits[0].doc.name == "db_tables_list_all"
    # the backend's own name still finds its tool
    assert index.find("sql.query").hits[0].doc.name == "db_sql_query"
